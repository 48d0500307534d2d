package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/simlock/simlock/internal/contract"
)

// The fleet's invariants, read from the daemons' own state: the workers'
// lease lists and event logs, the gateway's lease and worker lists.

// workerLeases is the worker's own lease list, read as admin on its socket.
func workerLeases(ctx context.Context, w *home) ([]contract.LeaseRecord, error) {
	c, err := w.dial(ctx, "chaos-checker", true)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	return c.Leases(ctx)
}

// gatewayKeys are the keys, <workerId>.<lse_…>, of the leases the workers
// hold for the gateway's requesters (gw:<gatewayId>:…), by worker; a
// worker that could not be read is left out and said in bad.
func (fl *fleet) gatewayKeys(ctx context.Context) (keys map[string]string, bad []string) {
	keys = map[string]string{}
	prefix := "gw:" + fl.gwID + ":"
	for i, w := range fl.workers {
		recs, err := workerLeases(ctx, w)
		if err != nil {
			bad = append(bad, named("checker", "worker %s: lease.list: %v", fl.ids[i], err))
			continue
		}
		byDevice := map[string]string{}
		for _, r := range recs {
			if other, ok := byDevice[r.DeviceID]; ok {
				bad = append(bad, named(checkDeviceTwice, "worker %s: device %s is in two of its leases, %s and %s", fl.ids[i], r.DeviceID, other, r.UniqueKey()))
			}
			byDevice[r.DeviceID] = r.UniqueKey()
			if strings.HasPrefix(r.RequesterID, prefix) {
				keys[fl.ids[i]+"."+r.UniqueKey()] = r.DeviceID
			}
		}
	}
	return keys, bad
}

// check holds the fleet's state against what was acknowledged: no device in
// two leases on any worker; no two gateway leases on one device; no
// acknowledged lease missing from the gateway's list while its worker is
// connected, nor released and still listed by the gateway or held by its
// worker. It runs while the agents go on, so what they were told after it
// read the ledger is not asked of the fleet.
func (fl *fleet) check(ctx context.Context, l *ledger, final bool) []string {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var bad []string
	fail := func(check, format string, args ...any) { bad = append(bad, named(check, format, args...)) }

	before := l.snapshot()
	onWorkers, found := fl.gatewayKeys(ctx)
	bad = append(bad, found...)
	ws1, err := fl.workerList(ctx)
	if err != nil {
		return append(bad, named("checker", "gateway: worker.list: %v", err))
	}
	c, err := fl.gw.dial(ctx, "chaos-checker", true)
	if err != nil {
		return append(bad, named("checker", "gateway: dial: %v", err))
	}
	defer c.Close()
	listed, err := c.Leases(ctx)
	if err != nil {
		return append(bad, named("checker", "gateway: lease.list: %v", err))
	}
	ws2, err := fl.workerList(ctx)
	if err != nil {
		return append(bad, named("checker", "gateway: worker.list: %v", err))
	}
	// A worker connected before and after the list was read was in it.
	up := map[string]bool{}
	for _, w := range ws1 {
		up[w.ID] = w.Connection == contract.WorkerConnected
	}
	for _, w := range ws2 {
		up[w.ID] = up[w.ID] && w.Connection == contract.WorkerConnected
	}

	byID := map[string]contract.LeaseRecord{}
	byDevice := map[string]string{}
	for _, rec := range listed {
		byID[rec.UniqueKey()] = rec
		dev := rec.WorkerID + "/" + rec.DeviceID
		if other, ok := byDevice[dev]; ok {
			fail(checkGatewayTwice, "device %s of worker %s is in two of the gateway's leases, %s and %s", rec.DeviceID, rec.WorkerID, other, rec.UniqueKey())
		}
		byDevice[dev] = rec.UniqueKey()
	}
	now := time.Now().UnixMilli()
	for _, id := range sorted(before) {
		hd := before[id]
		worker, _, _ := strings.Cut(id, ".")
		_, active := byID[id]
		switch {
		case hd.released && active:
			fail(checkLeaseLost, "lease %s of %s was released (acknowledged) and the gateway lists it again; %s", id, hd.agent, fl.trails(id))
		case hd.released && onWorkers[id] != "":
			fail(checkLeaseLost, "lease %s of %s was released (acknowledged) and its worker still holds it; %s", id, hd.agent, fl.trails(id))
		case !hd.releasing && !hd.told && !active && up[worker] && hd.deadline > now+5000:
			if cur := l.current(id); !cur.releasing && !cur.told {
				fail(checkLeaseLost, "acknowledged lease %s of %s (device %s) is missing from the gateway's lease list while its worker is connected; %s",
					id, hd.agent, hd.device, fl.trails(id))
			}
		}
	}
	return bad
}

// settle waits for every worker to be back, then for the gateway's lease
// list to equal the union of the leases the workers hold for it: a
// violation if they still differ after settleBound.
func (fl *fleet) settle(l *ledger) []string {
	const settleBound = 15 * time.Second
	if bad := fl.awaitWorkers(time.Minute); len(bad) > 0 {
		return bad
	}
	deadline := time.Now().Add(settleBound)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		onWorkers, bad := fl.gatewayKeys(ctx)
		var listed []contract.LeaseRecord
		c, err := fl.gw.dial(ctx, "chaos-checker", true)
		if err == nil {
			listed, err = c.Leases(ctx)
			c.Close()
		}
		cancel()
		if err != nil {
			bad = append(bad, named("checker", "gateway: lease.list: %v", err))
		}
		// The gateway's own leases are named <workerId>.<lse_…>; it lists
		// a worker's other leases (made there, or held for the gateway's
		// requesters without its grant) under the worker's own ids.
		granted := map[string]bool{}
		for _, rec := range listed {
			if strings.HasPrefix(rec.UniqueKey(), rec.WorkerID+".") {
				granted[rec.UniqueKey()] = true
			}
		}
		var onlyGW, onlyW []string
		for _, k := range sorted(granted) {
			if _, ok := onWorkers[k]; !ok {
				onlyGW = append(onlyGW, k)
			}
		}
		for _, k := range sorted(onWorkers) {
			if !granted[k] {
				onlyW = append(onlyW, k)
			}
		}
		if len(bad) == 0 && len(onlyGW) == 0 && len(onlyW) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			for _, k := range append(onlyGW, onlyW...) {
				bad = append(bad, named(checkUnion, "what the logs say of %s: %s", k, fl.trails(k)))
			}
			if len(onlyGW)+len(onlyW) > 0 {
				bad = append(bad, named(checkUnion, "%v after the agents stopped, the gateway lists %d leases as its own that no worker holds %v, and the workers hold %d leases for the gateway's requesters that it does not hold as its own %v",
					settleBound, len(onlyGW), onlyGW, len(onlyW), onlyW))
			}
			return bad
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// workerCall is one lease.request a worker got from the gateway, as its
// event log tells it.
type workerCall struct {
	id, requester string
	at            int64 // lease.requested's timestamp, epoch ms
	rejected      bool
	code, why     string // lease.rejected's code and reason
}

// refused reports whether the worker refused the call: it ended without a
// lease, and not because its requester went away (CANCELLED).
func (c *workerCall) refused() bool {
	return c.rejected && c.code != string(contract.CodeCancelled)
}

// gatewayCalls are the lease.request calls in a worker's event log whose
// requester has prefix (the gateway's), in the order they came.
func gatewayCalls(evs []contract.Event, prefix string) []*workerCall {
	byID := map[string]*workerCall{}
	var calls []*workerCall
	for _, ev := range evs {
		var p struct {
			RequestID string `json:"requestId"`
			Requester string `json:"requester"`
			Code      string `json:"code"`
			Reason    string `json:"reason"`
		}
		_ = json.Unmarshal(ev.Payload, &p)
		switch ev.Event {
		case contract.EvLeaseRequested:
			if strings.HasPrefix(p.Requester, prefix) {
				c := &workerCall{id: p.RequestID, at: ev.Timestamp, requester: p.Requester}
				byID[p.RequestID] = c
				calls = append(calls, c)
			}
		case contract.EvLeaseRejected:
			if c := byID[p.RequestID]; c != nil {
				c.rejected, c.code, c.why = true, p.Code, p.Reason
			}
		}
	}
	return calls
}

// requestRates reads each worker's event log: the lease.request calls it
// got from the gateway that it did not grant (lease.requested, then
// lease.rejected) are at most maxBouncesPerSecond in any one second. A
// worker that refuses a request before progress had a stale view; the
// gateway may try it again, but not in a loop. Calls it granted are not
// counted: a busy worker honestly serves many a second; nor are calls
// whose requester went away (CANCELLED): the worker refused nothing.
func (fl *fleet) requestRates() []string {
	var bad []string
	prefix := "gw:" + fl.gwID + ":"
	var figures []string
	for i, w := range fl.workers {
		evs, err := allEvents(w)
		if err != nil {
			bad = append(bad, named("checker", "worker %s: %v", fl.ids[i], err))
			continue
		}
		calls := gatewayCalls(evs, prefix)
		var all, bounced []int64
		for _, c := range calls {
			all = append(all, c.at)
			if c.refused() {
				bounced = append(bounced, c.at)
			}
		}
		peakAll, _ := peak(all)
		peakBounced, at := peak(bounced)
		figures = append(figures, fmt.Sprintf("%s: %d lease.request calls (at most %d in a second), %d refused (at most %d in a second)",
			fl.ids[i], len(all), peakAll, len(bounced), peakBounced))
		if peakBounced > maxBouncesPerSecond {
			var what []string
			for _, c := range calls {
				if c.refused() && c.at >= at && c.at < at+1000 {
					what = append(what, fmt.Sprintf("%s %s/%s for %s", c.id, c.code, c.why, c.requester))
				}
			}
			bad = append(bad, named(checkRequestRate, "worker %s refused %d lease.request calls from the gateway in the second from %s, want at most %d: %s",
				fl.ids[i], peakBounced, time.UnixMilli(at).UTC().Format("15:04:05.000"), maxBouncesPerSecond, strings.Join(what, "; ")))
		}
	}
	fl.t.Logf("lease.request calls on the workers: %s", strings.Join(figures, "; "))
	return bad
}

// peak is the most of ts (epoch ms) within any one second, and when that
// second began.
func peak(ts []int64) (n int, at int64) {
	ts = slices.Clone(ts)
	slices.Sort(ts)
	lo := 0
	for hi := range ts {
		for ts[hi]-ts[lo] >= 1000 {
			lo++
		}
		if hi-lo+1 > n {
			n, at = hi-lo+1, ts[lo]
		}
	}
	return n, at
}

// allEvents is the whole event log of h's daemon.
func allEvents(h *home) ([]contract.Event, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := h.dial(ctx, "chaos-checker", true)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	var all []contract.Event
	in := contract.EventsReplayInput{SinceTs: 1, Limit: 10000}
	for {
		evs, err := c.Replay(ctx, in)
		if err != nil {
			return nil, fmt.Errorf("events.replay: %w", err)
		}
		all = append(all, evs...)
		if len(evs) < in.Limit {
			return all, nil
		}
		in = contract.EventsReplayInput{AfterSeq: evs[len(evs)-1].Seq, Limit: 10000}
	}
}

// trail is what h's event log says of id (a lease key, a worker's lease
// id): its last events naming it, for a violation's message.
func trail(h *home, id string) string {
	if id == "" {
		return ""
	}
	evs, err := allEvents(h)
	if err != nil {
		return err.Error()
	}
	var lines []string
	for _, ev := range evs {
		if strings.Contains(string(ev.Payload), id) {
			lines = append(lines, fmt.Sprintf("%s %s %s", time.UnixMilli(ev.Timestamp).UTC().Format("15:04:05.000"), ev.Event, ev.Payload))
		}
	}
	if len(lines) > 8 {
		lines = lines[len(lines)-8:]
	}
	if len(lines) == 0 {
		return "no event names it"
	}
	return strings.Join(lines, " | ")
}

// trails is what the gateway's and the lease's worker's event logs say of
// the lease key.
func (fl *fleet) trails(key string) string {
	worker, lease, _ := strings.Cut(key, ".")
	out := "gateway: " + trail(fl.gw, key)
	if i := slices.Index(fl.ids, worker); i >= 0 {
		out += "; worker: " + trail(fl.workers[i], lease)
	}
	return out
}
