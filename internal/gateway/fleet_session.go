package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/simlock/simlock/internal/client"
	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/store"
)

// serve runs the session with the worker and returns why it ended.
func (f *Fleet) serve(ctx context.Context, a Attachment, w *worker, gen int) string {
	hctx, cancel := context.WithTimeout(ctx, callTimeout)
	c, err := client.New(hctx, a.Conn, contract.HelloInput{Principal: contract.GatewayPrincipalPrefix + f.opts.InstanceID,
		Protocol: contract.VersionRange{Min: contract.ProtocolMin, Max: contract.ProtocolMax}})
	cancel()
	if err != nil {
		var ce *contract.Error
		if errors.As(err, &ce) && ce.Code == contract.CodeProtocolVersionUnsupported {
			f.incompatible(w, gen, ce)
			return "protocol ranges do not overlap"
		}
		return callFailed(nil, "hello", err)
	}
	defer c.Close()
	f.mu.Lock()
	if w.gen == gen {
		w.client = c
	}
	f.mu.Unlock()
	defer func() {
		f.mu.Lock()
		if w.client == c {
			w.client = nil
		}
		f.mu.Unlock()
	}()
	if c.Hello().Role != contract.RoleAdmin {
		return "the worker did not grant the gateway the admin role"
	}
	events, lastSeq, err := c.Subscribe(ctx)
	if err != nil {
		return callFailed(c, "events.subscribe", err)
	}
	if reason := f.readAll(ctx, c, w, gen); reason != "" {
		return reason
	}
	if err := f.markConnected(ctx, w, gen, c.Hello().Protocol); err != nil {
		return err.Error()
	}
	if reason := f.catchUp(ctx, c, w, lastSeq); reason != "" {
		return reason
	}
	return f.follow(ctx, c, w, gen, events)
}

// incompatible lists the worker as incompatible, with both ranges.
func (f *Fleet) incompatible(w *worker, gen int, ce *contract.Error) {
	var worker contract.VersionRange
	if b, err := json.Marshal(ce.Details["daemon"]); err == nil {
		_ = json.Unmarshal(b, &worker)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if w.gen != gen {
		return
	}
	w.view.Connection = contract.WorkerIncompatible
	w.view.WorkerProtocol = &worker
	w.view.GatewayProtocol = &contract.VersionRange{Min: contract.ProtocolMin, Max: contract.ProtocolMax}
	w.view.LastSeenAt = time.Now().UnixMilli()
	f.reindex(w)
}

// readAll reads the worker's status, catalog and config, checks them and
// makes them its view. It returns why it could not, or "".
func (f *Fleet) readAll(ctx context.Context, c *client.Client, w *worker, gen int) string {
	if reason := f.readStatus(ctx, c, w, gen); reason != "" {
		return reason
	}
	cctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	cat, err := c.Catalog(cctx, "")
	if err != nil {
		return callFailed(c, "catalog.get", err)
	}
	if err := checkCatalog(cat); err != nil {
		return "sent an invalid catalog: " + err.Error()
	}
	cfg, err := c.Config(cctx, "lease.maxTtlMs")
	if err != nil {
		return callFailed(c, "config.get", err)
	}
	maxTTL, ok := cfg["value"].(float64)
	if !ok || maxTTL < 0 || maxTTL > float64(contract.MaxTTLMs) {
		return fmt.Sprintf("sent an invalid lease.maxTtlMs: %v", cfg["value"])
	}
	cfg, err = c.Config(cctx, "downloads.policy")
	if err != nil {
		return callFailed(c, "config.get", err)
	}
	policy, _ := cfg["value"].(string)
	if !slices.Contains(downloadPolicies, policy) {
		return fmt.Sprintf("sent an invalid downloads.policy: %v", cfg["value"])
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if w.gen == gen {
		w.view.Catalog, w.view.MaxTTLMs, w.view.DownloadPolicy = cat.Platforms, int64(maxTTL), policy
		f.reindex(w)
	}
	return ""
}

// readStatus reads the worker's status into its view.
func (f *Fleet) readStatus(ctx context.Context, c *client.Client, w *worker, gen int) string {
	f.mu.Lock()
	if w.gen == gen {
		w.reading = true
	}
	f.mu.Unlock()
	cctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	s, err := c.Status(cctx)
	reason := ""
	switch {
	case err != nil:
		reason = callFailed(c, "status.get", err)
	case checkStatus(s) != nil:
		reason = "sent an invalid status: " + checkStatus(s).Error()
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if reason != "" {
		if w.gen == gen {
			w.reading, w.folds = false, nil
		}
		return reason
	}
	f.applyStatusLocked(w, gen, s)
	return ""
}

// applyStatusLocked makes a checked status read over link gen w's view,
// with the events folded since that are newer than the read folded again
// on top. f.mu must be held.
func (f *Fleet) applyStatusLocked(w *worker, gen int, s contract.Status) {
	if w.gen != gen {
		return
	}
	if s.EventSeq > 0 && s.EventSeq < w.statusSeq {
		// Read before one applied already: it says nothing newer, and
		// would undo what that one showed.
		return
	}
	w.statusSeq = s.EventSeq
	w.read = statusRead{gen: w.viewGen + 1, seq: s.EventSeq, link: gen}
	if s.Daemon.Health == "starting" {
		// It lists nothing while it starts: that is not its leases.
		w.read.gen = 0
	}
	v := &w.view
	v.Version, v.Health, v.Host, v.Capacity, v.QueueDepth = s.Daemon.Version, s.Daemon.Health, &s.Host, s.Capacity, s.QueueDepth
	v.Devices, v.Leases, v.Waiting, v.Installs = tag(s.Devices, w.view.ID), tagLeases(s.Leases, w.view.ID), tagWaiting(s.Waiting, w.view.ID), s.Installs
	if s.EventSeq > 0 {
		// What was folded while it was read, and is newer than the
		// read, stays; the next read is asked for after it, so it shows
		// that too: nothing need be kept for it.
		if _, again := refold(v, w.folds, s.EventSeq); again {
			f.readAgainLocked(w)
		}
	}
	w.folds, w.reading = nil, false
	w.counts = countView(v.Devices, v.Leases)
	v.LastSeenAt = time.Now().UnixMilli()
	w.viewGen++
	f.reindex(w)
	if v.Connection == contract.WorkerConnected && w.read.gen > 0 {
		r := w.read
		r.leases = s.Leases // as of its seq, not with the folds on top
		f.notifyLater(w, r)
	}
}

// markConnected lists the worker as connected and records it.
func (f *Fleet) markConnected(ctx context.Context, w *worker, gen, protocol int) error {
	f.mu.Lock()
	if w.gen != gen {
		f.mu.Unlock()
		return errors.New("replaced by a new uplink from the same worker")
	}
	v := &w.view
	v.Connection, v.Reason, v.ReasonCode, v.Protocol = contract.WorkerConnected, "", "", protocol
	v.WorkerProtocol, v.GatewayProtocol = nil, nil
	v.ConnectedAt = time.Now().UnixMilli()
	f.reindex(w)
	if w.owner == "" {
		w.owner = w.tokenID
	}
	rec := store.Worker{ID: v.ID, Label: v.Label, Drained: v.Drained, LastSeq: w.lastSeq, LastSeenAt: v.LastSeenAt, TokenID: w.owner}
	view, read := *v, w.read
	read.leases = v.Leases
	f.mu.Unlock()
	if err := f.opts.Store.PutWorker(ctx, rec); err != nil {
		return fmt.Errorf("could not record the worker: %w", err)
	}
	f.emit(contract.EvWorkerConnected, map[string]any{"workerId": view.ID, "label": view.Label, "version": view.Version, "protocol": protocol})
	f.notify(view.ID, read, true)
	return nil
}

// catchUp relays the events the worker committed since the last one
// relayed, up to lastSeq, the seq its subscription starts after: nothing
// it commits is missed while the uplink is down, or the gateway.
func (f *Fleet) catchUp(ctx context.Context, c *client.Client, w *worker, lastSeq int64) string {
	f.mu.Lock()
	after := w.lastSeq
	id := w.view.ID
	f.mu.Unlock()
	switch {
	case after == lastSeq:
		return ""
	case after == 0:
		// A worker seen for the first time starts from now: its history
		// before it joined is its own.
		reason, _ := f.relay(ctx, w, id, nil, lastSeq)
		return reason
	case after > lastSeq:
		// Its log is behind what was relayed from it: it starts over (its
		// database was replaced). Follow it from where it is now.
		f.log.Warn("a worker's event log starts over; relaying from its current seq", "worker", id, "relayed", after, "now", lastSeq)
		reason, _ := f.relay(ctx, w, id, nil, lastSeq)
		return reason
	}
	for after < lastSeq {
		cctx, cancel := context.WithTimeout(ctx, callTimeout)
		evs, err := c.Replay(cctx, contract.EventsReplayInput{AfterSeq: after, Limit: 1000})
		cancel()
		if err != nil {
			return callFailed(c, "events.replay", err)
		}
		var batch []contract.Event
		for _, ev := range evs {
			if ev.Seq > lastSeq {
				break // the subscription brings it
			}
			batch = append(batch, ev)
		}
		if err := checkEvents(after, batch); err != nil {
			return "sent an invalid event: " + err.Error()
		}
		after = lastSeq // when none: pruned on the worker, nothing more to read
		if len(batch) > 0 {
			after = batch[len(batch)-1].Seq
		}
		if reason, _ := f.relay(ctx, w, id, batch, after); reason != "" {
			return reason
		}
	}
	return ""
}

// refreshOn names the events after which the worker's status is read
// again: what they change is in it.
func refreshOn(name string) bool {
	for _, p := range []string{"lease.", "device.", "component.", "capacity.", "warm-pool.", "daemon."} {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}

// catalogChanged reports whether a worker's batch of events says its
// catalog changed (catalog.changed): the catalog is then read again at
// once, not on the next tick, so routing stops sending what the worker
// can no longer serve (a runtime removed) and starts sending what it now
// can. A worker that says so often gets a read at a time, the rest
// coalesced, within its relay rate.
func catalogChanged(batch []contract.Event) bool {
	return slices.ContainsFunc(batch, func(ev contract.Event) bool { return ev.Event == contract.EvCatalogChanged })
}

// follow relays the worker's events as they come, and has its status read
// again after those that change it and everything on the refresh tick,
// until the uplink ends. The reads run in a goroutine of their own (reads),
// at most one at a time and the rest coalesced, so the relay never waits
// for a call over the uplink: the answer to that call may be queued on the
// uplink behind the very events the relay is to drain, and a worker's
// burst of events must not stall its uplink.
func (f *Fleet) follow(ctx context.Context, c *client.Client, w *worker, gen int, events <-chan contract.Event) string {
	now := make(chan struct{}, 1)
	catalog := make(chan struct{}, 1)
	f.mu.Lock()
	id := w.view.ID
	if w.gen == gen {
		w.refreshNow, w.recatalog = now, catalog
	}
	f.mu.Unlock()
	rctx, stop := context.WithCancel(ctx)
	failed := make(chan string, 1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if reason := f.reads(rctx, c, w, gen, now, catalog); reason != "" && rctx.Err() == nil {
			failed <- reason
		}
	}()
	defer func() {
		stop()
		<-done
	}()
	for {
		select {
		case reason := <-failed:
			return reason
		case <-ctx.Done():
			return "the gateway is stopping"
		case <-c.Done():
			return endReason(c)
		case ev, ok := <-events:
			if !ok {
				// The client closes its subscriptions as the uplink ends:
				// why it ended is the reason.
				select {
				case <-c.Done():
					return endReason(c)
				case <-time.After(time.Second):
					return "the worker ended the event subscription"
				}
			}
			// Take what else is waiting too: one commit for a burst.
			batch := []contract.Event{ev}
			for more := true; more && len(batch) < 256; {
				select {
				case ev, ok := <-events:
					if !ok {
						more = false
						break
					}
					batch = append(batch, ev)
				default:
					more = false
				}
			}
			f.mu.Lock()
			after := w.lastSeq
			f.mu.Unlock()
			if err := checkEvents(after, batch); err != nil {
				return "sent an invalid event: " + err.Error()
			}
			reason, dirty := f.relay(ctx, w, id, batch, batch[len(batch)-1].Seq)
			if reason != "" {
				return reason
			}
			if dirty {
				select {
				case now <- struct{}{}:
				default:
				}
			}
			if catalogChanged(batch) {
				select {
				case catalog <- struct{}{}:
				default:
				}
			}
		}
	}
}

// reads reads the worker's status each time now is told (coalesced), and
// everything each time catalog is told (coalesced) and on the refresh
// tick, until ctx ends; it returns why a read failed, which ends the
// uplink.
func (f *Fleet) reads(ctx context.Context, c *client.Client, w *worker, gen int, now, catalog <-chan struct{}) string {
	tick := time.NewTicker(f.opts.Refresh)
	defer tick.Stop()
	for {
		var reason string
		select {
		case <-ctx.Done():
			return ""
		case <-now:
			reason = f.readStatus(ctx, c, w, gen)
		case <-catalog:
			reason = f.readAll(ctx, c, w, gen)
		case <-tick.C:
			reason = f.readAll(ctx, c, w, gen)
		}
		if reason != "" {
			return reason
		}
	}
}
