// Package gateway is a gateway daemon's fleet: the workers that joined it
// over their uplinks, what each one has (read over the daemon protocol, the
// gateway being the client, and checked before any of it is used), the
// events they relay, and the reads that sum the fleet.
//
// A worker's answer is a claim, never a fact: every status, catalog and
// event is checked against the bounds in validate.go, and a worker that
// sends something out of bounds is disconnected with the reason, while the
// gateway goes on serving every other one. What a worker reports of leases
// counts only as far as the gateway's own grant records bear it out
// (leaseindex.go); the events it relays are limited to the names a worker
// records, to a payload size and to a rate, and keep its clock only within
// bounds of the gateway's (relaylimits.go, validate.go); and what any peer
// can make the gateway keep is bounded: one worker id per join token,
// MaxWorkers workers, views dropped with their token or past their
// retention, and refused uplinks coalesced by address (rejections.go). A
// claim the gateway refuses is a finding, logged and counted on the
// worker's view (findings.go).
package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/simlock/simlock/internal/client"
	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/store"
)

// Store keeps what the gateway must not forget across restarts: which
// workers it knows, which are drained, and how far each one's events were
// relayed.
type Store interface {
	Workers(ctx context.Context) ([]store.Worker, error)
	PutWorker(ctx context.Context, r store.Worker) error
	DeleteWorker(ctx context.Context, id string) error
}

// Options configure a Fleet.
type Options struct {
	Store Store
	// InstanceID is the gateway's instance id; it names the gateway in its
	// hello to each worker.
	InstanceID string
	Version    string
	// Emit commits one of the gateway's own events (worker.connected, …)
	// and publishes it.
	Emit func(ctx context.Context, event string, payload map[string]any) error
	// Relay appends a worker's events to the gateway's log, each once (one
	// whose id the log holds is skipped), moves the worker's relay cursor
	// to lastSeq in the same transaction, and publishes what it appended:
	// one step, so the log's order is the order subscribers hear.
	Relay func(ctx context.Context, workerID string, evs []contract.Event, lastSeq int64) error
	// Refresh is how often every view is read again whole (30 s when 0).
	Refresh time.Duration
	// Retention is how long a disconnected worker that is not drained
	// stays listed (24 h when 0).
	Retention time.Duration
	// PruneEvery is how often Maintain forgets the workers past their
	// retention (1 min when 0).
	PruneEvery time.Duration
	// RelayRate and RelayBurst bound the events relayed from one worker:
	// a token bucket of RelayBurst, refilled at RelayRate a second
	// (relayRate and relayBurst when 0).
	RelayRate, RelayBurst float64
	// MaxWorkers caps the workers the gateway knows, connected or not
	// (gateway.maxWorkers; DefaultMaxWorkers when 0): an uplink from a
	// worker id it does not know yet is refused past it.
	MaxWorkers int
	Logger     *slog.Logger
}

// DefaultMaxWorkers is gateway.maxWorkers's default.
const DefaultMaxWorkers = 1000

// callTimeout bounds each read of a worker: a worker that does not answer
// within it is dropped.
const callTimeout = 30 * time.Second

// Fleet is the gateway's workers.
type Fleet struct {
	opts Options
	log  *slog.Logger

	mu sync.Mutex
	// mu guards the fields below.
	workers  map[string]*worker
	rejected rejections
	// revoked are the join tokens revoked while the gateway runs: an
	// uplink authenticated a moment before its token was revoked is
	// refused when it attaches (CloseToken found no link of it to close).
	// One id per revocation, which only an operator makes.
	revoked map[string]struct{}
	closed  bool
	// changed is told, outside the lock, after a worker's view changed:
	// with a status read (its gen 0: no read, the view changed
	// otherwise), or that the worker disconnected.
	changed func(workerID string, r statusRead, connected bool)
	// onEvent is told each event relayed from a worker, after its commit.
	onEvent func(workerID string, ev contract.Event)
	// removed is told, outside the lock, that the gateway forgot a worker.
	removed func(workerID string)
}

// worker is one worker: its view, and its link while connected.
type worker struct {
	view    contract.WorkerView
	lastSeq int64
	// link is the uplink being served, nil when there is none; gen tells
	// one link from the next, so a replaced link's end changes nothing.
	link    *link
	gen     int
	tokenID string
	// owner is the join token the worker id belongs to: the one it first
	// joined with, until that token is revoked or the worker removed.
	owner string
	// client is the session over the link once hello is done, for the
	// reads made on demand and the calls forwarded to the worker.
	client *client.Client
	// viewGen counts the view's changes: a request that bounced off the
	// worker is sent to it again once it moved.
	viewGen uint64
	// refreshNow asks the link to read the worker's status again at once
	// (a stale view found by a bounced request).
	refreshNow chan struct{}
	// recatalog asks the link to read the worker's catalog (and all else)
	// again at once (catalog.changed, or a request refused for what its
	// catalog listed).
	recatalog chan struct{}
	// pending is the newest status read the leasing has not been told of
	// yet, and telling whether a goroutine is telling it (notifyLater):
	// one at a time, in the order they were read.
	pending *statusRead
	telling bool
	// statusSeq is the event seq of the newest status read applied on
	// the current link (contract.Status.EventSeq; 0 when the worker does
	// not say): an older one is not applied.
	statusSeq int64
	// read is the newest status read of the current link, for the
	// leasing, but its leases, which are the view's (its gen 0 when it
	// lists nothing to reconcile: read while the worker was starting).
	read statusRead
	// logged is when each kind of the worker's findings was last logged.
	logged map[findingKind]*findingLog
	// relayed is the rate limit of the events relayed from the worker,
	// kept across its uplinks (a reconnect does not refill it).
	relayed *tokenBucket
}

type link struct {
	conn   net.Conn
	reason string // why the gateway closed it, if it did
	// revoked: its join token was revoked, and the view goes with it.
	revoked bool
}

// New makes a Fleet; Start loads what the store remembers.
func New(opts Options) *Fleet {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Refresh <= 0 {
		opts.Refresh = 30 * time.Second
	}
	if opts.Retention <= 0 {
		opts.Retention = 24 * time.Hour
	}
	if opts.MaxWorkers <= 0 {
		opts.MaxWorkers = DefaultMaxWorkers
	}
	if opts.PruneEvery <= 0 {
		opts.PruneEvery = time.Minute
	}
	if opts.RelayRate <= 0 {
		opts.RelayRate = relayRate
	}
	if opts.RelayBurst <= 0 {
		opts.RelayBurst = relayBurst
	}
	return &Fleet{opts: opts, log: opts.Logger, workers: map[string]*worker{}, revoked: map[string]struct{}{}}
}

// Start lists the workers the store remembers, disconnected until they
// dial in again.
func (f *Fleet) Start(ctx context.Context) error {
	recs, err := f.opts.Store.Workers(ctx)
	if err != nil {
		return fmt.Errorf("load workers: %w", err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	shared := map[string][]string{}
	for _, r := range recs {
		f.workers[r.ID] = &worker{lastSeq: r.LastSeq, owner: r.TokenID, view: contract.WorkerView{ID: r.ID, Label: r.Label,
			Connection: contract.WorkerDisconnected, Drained: r.Drained, LastSeenAt: r.LastSeenAt,
			Reason: "not connected since the gateway started"}}
		if r.TokenID != "" {
			shared[r.TokenID] = append(shared[r.TokenID], r.ID)
		}
	}
	for tok, ids := range shared {
		if len(ids) > 1 {
			f.log.Warn("workers share a join token: they keep joining with it, but no other worker can; make one token per worker and rotate them",
				"tokenId", tok, "workerIds", ids)
		}
	}
	return nil
}

// Close ends every uplink.
func (f *Fleet) Close() {
	f.mu.Lock()
	f.closed = true
	var conns []net.Conn
	for _, w := range f.workers {
		if w.link != nil {
			conns = append(conns, w.link.conn)
		}
	}
	f.mu.Unlock()
	for _, c := range conns {
		c.Close()
	}
}

// Attachment is an uplink the HTTP layer accepted: its token checked, the
// worker's id and label read from its headers and checked.
type Attachment struct {
	ID, Label string
	// TokenID is the join token's id: revoking it closes the uplink.
	TokenID string
	Conn    net.Conn
}

// Claim says whether an uplink with join token tokenID may speak for
// worker id. A join token is one worker's: a worker id belongs to the
// token it first joined with (a worker's id is a header, which any holder
// of a join token could copy), and a token to the one worker id it joined
// as, until that token is revoked or the worker removed; an id the gateway
// does not know is refused once it knows MaxWorkers. A token revoked
// since it was authenticated is refused.
func (f *Fleet) Claim(id, tokenID string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.claimLocked(id, tokenID)
}

func (f *Fleet) claimLocked(id, tokenID string) error {
	if _, ok := f.revoked[tokenID]; ok {
		return contract.Errorf(contract.CodeUnauthenticated, "the join token was revoked").With("workerId", id)
	}
	w, known := f.workers[id]
	if known && w.owner == tokenID {
		// Its own token. (Workers that shared one token before a token
		// was one worker's keep joining with it; no new id does.)
		return nil
	}
	if known && w.owner != "" {
		return contract.Errorf(contract.CodeForbidden,
			"worker %s joined with another join token; revoke that token, or run simlock worker remove %s on the gateway, to let this one take the id", id, id).
			With("workerId", id)
	}
	for other, ow := range f.workers {
		if other != id && ow.owner == tokenID {
			return contract.Errorf(contract.CodeForbidden,
				"this join token already joined worker %s, and a join token is one worker's: make one for this worker (simlock token create --role worker on the gateway), or run simlock worker remove %s there to move the token",
				other, other).With("workerId", id)
		}
	}
	if !known && len(f.workers) >= f.opts.MaxWorkers {
		return contract.Errorf(contract.CodeTooManyWorkers,
			"this gateway knows %d workers, its gateway.maxWorkers: remove one it no longer needs (simlock worker remove <id>), or raise the limit", len(f.workers)).
			With("maxWorkers", f.opts.MaxWorkers)
	}
	return nil
}

// Attach serves one worker's uplink until it ends. A second uplink with
// the same worker id (and its token) replaces the first.
func (f *Fleet) Attach(ctx context.Context, a Attachment) {
	l := &link{conn: a.Conn}
	f.mu.Lock()
	if f.closed {
		f.mu.Unlock()
		a.Conn.Close()
		return
	}
	if f.claimLocked(a.ID, a.TokenID) != nil {
		// Claimed by another token between the HTTP check and here.
		f.mu.Unlock()
		a.Conn.Close()
		return
	}
	w, ok := f.workers[a.ID]
	if !ok {
		w = &worker{view: contract.WorkerView{ID: a.ID}}
		f.workers[a.ID] = w
	}
	if w.owner == "" {
		// The id is the token's, and the token the id's, from the
		// uplink on: a second id dialing with it at the same time is
		// refused by claimLocked.
		w.owner = a.TokenID
	}
	var old *link
	if w.link != nil {
		old = w.link
		old.reason = "replaced by a new uplink from the same worker"
	}
	w.gen++
	gen := w.gen
	w.statusSeq, w.read = 0, statusRead{} // a new link's worker may have a new event log
	w.link, w.tokenID = l, a.TokenID
	w.view.Label = a.Label
	f.mu.Unlock()
	if old != nil {
		old.conn.Close()
	}
	reason := f.serve(ctx, a, w, gen)
	a.Conn.Close()
	f.mu.Lock()
	if l.reason != "" {
		reason = l.reason
	}
	current := w.gen == gen
	wasConnected := w.view.Connection == contract.WorkerConnected
	if current {
		w.link = nil
		if w.view.Connection != contract.WorkerIncompatible {
			w.view.Connection = contract.WorkerDisconnected
		}
		if l.revoked {
			w.view = dropped(w.view)
		}
		w.view.Reason, w.view.ReasonCode = reason, reasonCode(reason)
		w.viewGen++
	}
	label := w.view.Label
	f.mu.Unlock()
	if current && wasConnected {
		f.emit("worker.disconnected", map[string]any{"workerId": a.ID, "label": label, "reason": reason})
		f.notify(a.ID, statusRead{}, false)
	}
}

// dropped is a view with what the worker reported forgotten: its devices,
// leases, requests, installs, catalog, capacity and host. What is left is
// its line: id, label, connection, drain, when it was last seen, and the
// findings against it.
func dropped(v contract.WorkerView) contract.WorkerView {
	return contract.WorkerView{ID: v.ID, Label: v.Label, Connection: v.Connection, Drained: v.Drained, Reason: v.Reason, ReasonCode: v.ReasonCode,
		LastSeenAt: v.LastSeenAt, Version: v.Version, Findings: v.Findings}
}

// Maintain forgets the workers disconnected past their retention, every
// PruneEvery, until ctx ends: also while no worker connects or
// disconnects.
func (f *Fleet) Maintain(ctx context.Context) {
	t := time.NewTicker(f.opts.PruneEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			pctx, cancel := context.WithTimeout(ctx, time.Minute)
			f.Prune(pctx, now)
			cancel()
		}
	}
}

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
	}
	return ""
}

// readStatus reads the worker's status into its view.
func (f *Fleet) readStatus(ctx context.Context, c *client.Client, w *worker, gen int) string {
	cctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	s, err := c.Status(cctx)
	if err != nil {
		return callFailed(c, "status.get", err)
	}
	if err := checkStatus(s); err != nil {
		return "sent an invalid status: " + err.Error()
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if w.gen != gen {
		return ""
	}
	if s.EventSeq > 0 && s.EventSeq < w.statusSeq {
		// Read before one applied already: it says nothing newer, and
		// would undo what that one showed.
		return ""
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
	v.LastSeenAt = time.Now().UnixMilli()
	w.viewGen++
	if v.Connection == contract.WorkerConnected && w.read.gen > 0 {
		r := w.read
		r.leases = s.Leases
		f.notifyLater(w, r)
	}
	return ""
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
	f.emit("worker.connected", map[string]any{"workerId": view.ID, "label": view.Label, "version": view.Version, "protocol": protocol})
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
	return slices.ContainsFunc(batch, func(ev contract.Event) bool { return ev.Event == "catalog.changed" })
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

// setChanged and setOnEvent install the leasing's hooks; set before any
// uplink is served.
func (f *Fleet) setChanged(fn func(workerID string, r statusRead, connected bool)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.changed = fn
}

func (f *Fleet) setOnEvent(fn func(workerID string, ev contract.Event)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.onEvent = fn
}

func (f *Fleet) setRemoved(fn func(workerID string)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.removed = fn
}

// forgotten tells the leasing the gateway forgot a worker.
func (f *Fleet) forgotten(id string) {
	f.mu.Lock()
	fn := f.removed
	f.mu.Unlock()
	if fn != nil {
		fn(id)
	}
}

// notify tells the leasing a view changed.
func (f *Fleet) notify(id string, r statusRead, connected bool) {
	f.mu.Lock()
	fn := f.changed
	f.mu.Unlock()
	if fn != nil {
		fn(id, r, connected)
	}
}

// statusRead is a worker's leases as a status read at view generation gen
// reported them: read on the worker's link number link (Fleet's worker.gen,
// which counts its uplinks), reflecting its event log up to seq (0: the
// worker does not say).
type statusRead struct {
	leases []contract.LeaseRecord
	gen    uint64
	seq    int64
	link   int
}

// notifyLater tells the leasing of a status read of connected worker w,
// from under the fleet's lock (the leasing takes its own lock first, then
// the fleet's): in a goroutine, one per worker at a time, which tells the
// reads in order and, of those made while it was telling one, only the
// newest. A leasing slow to decide (its store locked by another process)
// then holds one pending read per worker, however often the worker is
// read; and a newer read says all an older one would have.
func (f *Fleet) notifyLater(w *worker, r statusRead) {
	if f.changed == nil {
		return
	}
	w.pending = &r
	if w.telling {
		return
	}
	w.telling = true
	fn, id := f.changed, w.view.ID
	go func() {
		for {
			f.mu.Lock()
			r := w.pending
			w.pending = nil
			if r == nil {
				w.telling = false
				f.mu.Unlock()
				return
			}
			f.mu.Unlock()
			fn(id, *r, true)
		}
	}()
}

// views copies the views of every worker, for routing.
func (f *Fleet) views() []*contract.WorkerView {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]*contract.WorkerView, 0, len(f.workers))
	for _, w := range f.workers {
		v := w.view
		out = append(out, &v)
	}
	return out
}

// session is clientOf with the number of the link it runs over (which
// counts the worker's uplinks): what a call over it answers was decided
// before any status read over a later link.
func (f *Fleet) session(id string) (*client.Client, int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if w, ok := f.workers[id]; ok && w.view.Connection == contract.WorkerConnected {
		return w.client, w.gen
	}
	return nil, 0
}

// generation is how many times a worker's view has changed.
func (f *Fleet) generation(id string) uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	if w, ok := f.workers[id]; ok {
		return w.viewGen
	}
	return 0
}

// clientOf is the session to a connected worker, or nil.
func (f *Fleet) clientOf(id string) *client.Client {
	f.mu.Lock()
	defer f.mu.Unlock()
	if w, ok := f.workers[id]; ok && w.view.Connection == contract.WorkerConnected {
		return w.client
	}
	return nil
}

// refresh asks the link of a worker to read its status again now.
func (f *Fleet) refresh(id string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if w, ok := f.workers[id]; ok && w.refreshNow != nil {
		select {
		case w.refreshNow <- struct{}{}:
		default:
		}
	}
}

// refreshCatalog asks the link of a worker to read its catalog, and the
// rest of its view, again now.
func (f *Fleet) refreshCatalog(id string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if w, ok := f.workers[id]; ok && w.recatalog != nil {
		select {
		case w.recatalog <- struct{}{}:
		default:
		}
	}
}

// relay commits batch to the gateway's log and publishes it: the events
// a worker may relay, within the worker's rate (limit), each at the worker's
// time as the gateway takes it (workerTime). The cursor moves to
// lastSeq whatever was dropped: a dropped event is not asked for again.
// It returns why the uplink must end, or "", and whether an event it kept
// changes the worker's status (refreshOn): dropped events ask for no read.
func (f *Fleet) relay(ctx context.Context, w *worker, id string, batch []contract.Event, lastSeq int64) (reason string, refresh bool) {
	kept, refused, dropped := f.limit(w, batch)
	out := make([]contract.Event, 0, len(kept))
	now := time.Now()
	for _, ev := range kept {
		p, err := withWorkerID(ev.Payload, id)
		if err != nil {
			return "sent an invalid event: " + err.Error(), false
		}
		ev.Payload = p
		ev.Timestamp = workerTime(ev.Timestamp, now)
		out = append(out, ev)
		refresh = refresh || refreshOn(ev.Event)
	}
	if err := f.opts.Relay(ctx, id, out, lastSeq); err != nil {
		return "could not record its events: " + err.Error(), false
	}
	f.mu.Lock()
	w.lastSeq = lastSeq
	w.view.LastSeenAt = time.Now().UnixMilli()
	on := f.onEvent
	f.mu.Unlock()
	if refused > 0 {
		f.found(id, findingEventRefused, refused, fmt.Sprintf("%d relayed events of names a worker does not record or with payloads over %d bytes, the last %q: dropped",
			refused, maxRelayedPayload, clip(lastRefused(batch))))
	}
	if dropped > 0 {
		f.found(id, findingEventDropped, dropped, fmt.Sprintf("%d relayed events over %g a second (bursts of %g): dropped", dropped, f.opts.RelayRate, f.opts.RelayBurst))
	}
	if on != nil {
		for _, ev := range kept {
			on(id, ev)
		}
	}
	return "", refresh
}

// limit keeps, of a batch a worker relays, the events it may relay
// (relayable) within its rate, and counts the others.
func (f *Fleet) limit(w *worker, batch []contract.Event) (kept []contract.Event, refused, dropped int64) {
	now := time.Now()
	f.mu.Lock()
	defer f.mu.Unlock()
	if w.relayed == nil {
		w.relayed = newTokenBucket(f.opts.RelayRate, f.opts.RelayBurst, now)
	}
	kept = make([]contract.Event, 0, len(batch))
	for _, ev := range batch {
		switch {
		case !relayable(ev):
			refused++
		case !w.relayed.take(now):
			dropped++
		default:
			kept = append(kept, ev)
		}
	}
	return kept, refused, dropped
}

// lastRefused is the name of the last event of batch a worker may not
// relay.
func lastRefused(batch []contract.Event) string {
	for i := len(batch) - 1; i >= 0; i-- {
		if !relayable(batch[i]) {
			return batch[i].Event
		}
	}
	return ""
}

// withWorkerID sets "workerId" in a payload object; the gateway's value
// wins over any the worker put there.
func withWorkerID(payload json.RawMessage, id string) (json.RawMessage, error) {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(payload, &obj); err != nil || obj == nil {
		return nil, errors.New("event.payload is not a JSON object")
	}
	obj["workerId"], _ = json.Marshal(id)
	return json.Marshal(obj)
}

func tag(ds []contract.Device, id string) []contract.Device {
	out := slices.Clone(ds)
	for i := range out {
		out[i].WorkerID = id
	}
	return out
}

func tagLeases(ls []contract.LeaseRecord, id string) []contract.LeaseRecord {
	out := slices.Clone(ls)
	for i := range out {
		out[i].WorkerID = id
	}
	return out
}

func tagWaiting(ws []contract.WaitingRequest, id string) []contract.WaitingRequest {
	out := slices.Clone(ws)
	for i := range out {
		out[i].WorkerID = id
	}
	return out
}

func (f *Fleet) emit(event string, payload map[string]any) {
	if f.opts.Emit == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := f.opts.Emit(ctx, event, payload); err != nil {
		f.log.Warn("could not record a fleet event", "event", event, "err", err)
	}
}
