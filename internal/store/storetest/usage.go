package storetest

import (
	"context"
	"encoding/json"
	"maps"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/store"
	"github.com/simlock/simlock/internal/usage"
)

// Rollups is what a backend that keeps the usage rollups adds to Keeper:
// every transaction that appends events (a commit, a relayed batch) folds
// them in by package usage's rule, pruning keeps them to the kept history,
// and UsageRows hands a query a window's rows. The cases that need it skip
// a backend without it.
type Rollups interface {
	Keeper
	UsageRows(ctx context.Context, from, to int64, sink usage.Sink) error
}

func rollups(t *testing.T, b Backend) Rollups {
	t.Helper()
	r, ok := b.(Rollups)
	if !ok {
		t.Skip("the backend keeps no usage rollups")
	}
	return r
}

// u0 is a whole hour.
const u0 int64 = 1_800_000_000_000

type obj = map[string]any

func leaseEvent(id string, ts int64, name string, p obj) store.NewEvent {
	b, _ := json.Marshal(p)
	return store.NewEvent{ID: id, Timestamp: ts, Event: name, Payload: b}
}

// workerEvent is one of a worker's events as its gateway relays it: the
// worker's seq, and its id in the payload.
func workerEvent(worker string, seq, ts int64, name string, p obj) contract.Event {
	p["workerId"] = worker
	e := leaseEvent(worker+"-"+string(rune('a'+seq)), ts, name, p)
	return contract.Event{ID: e.ID, Seq: seq, Timestamp: ts, Event: name, Payload: e.Payload}
}

func requestedP(id, platform string) obj {
	return obj{"requestId": id, "requester": "agent", "requestSpec": obj{"platform": platform}}
}
func forwardedP(id, platform string) obj {
	p := requestedP(id, platform)
	p["requester"] = contract.GatewayRequesterPrefix + "ins_gw:agent"
	return p
}
func grantedP(req, lease, source string) obj {
	return obj{"requestId": req, "leaseId": lease, "deviceId": "dev_" + lease, "source": source}
}
func rejectedP(req, platform, reason string) obj {
	return obj{"requestId": req, "requestSpec": obj{"platform": platform}, "reason": reason}
}
func endedP(lease string) obj { return obj{"leaseId": lease, "deviceId": "dev_" + lease} }
func recordedP(gwReq, worker, lease, source, platform string, waitMs, grantedAt int64) obj {
	return obj{"requestId": gwReq, "leaseId": worker + "." + lease, "workerId": worker, "workerLeaseId": lease, "source": source,
		"platform": platform, "waitMs": waitMs, "grantedAt": grantedAt}
}

// refRollups is the rollups kept in memory by package usage's fold: what
// every backend's rows must add up to for the same appended events.
type refRollups struct {
	cells map[usage.Cell][]byte
	open  map[usage.OpenKey]usage.Open
}

func (r *refRollups) fold(evs []contract.Event) {
	b := usage.NewBatch(evs)
	known := map[usage.OpenKey]usage.Open{}
	for _, k := range b.Needs() {
		if o, ok := r.open[k]; ok {
			known[k] = o
		}
	}
	ch := b.Fold(known)
	for _, a := range ch.Appends {
		r.cells[a.Cell] = append(r.cells[a.Cell], a.Records...)
	}
	for _, w := range ch.Opens {
		if w.Closed {
			delete(r.open, w.Key)
		} else {
			r.open[w.Key] = w.Open
		}
	}
}

// prune keeps the reference to the history from covers, as PruneEvents
// keeps a backend's.
func (r *refRollups) prune(covers int64) {
	maps.DeleteFunc(r.cells, func(c usage.Cell, _ []byte) bool { return c.Minute < covers })
	maps.DeleteFunc(r.open, func(_ usage.OpenKey, o usage.Open) bool { return o.At < covers })
}

func (r *refRollups) result(t *testing.T, w usage.Window) contract.UsageResult {
	t.Helper()
	q := usage.NewQuery(w)
	for _, c := range slices.SortedFunc(maps.Keys(r.cells), func(a, b usage.Cell) int { return int(a.Minute - b.Minute) }) {
		if err := q.AddMinute(c.Minute, c.Worker, c.Platform, r.cells[c]); err != nil {
			t.Fatal(err)
		}
	}
	return q.Result()
}

// usageOf reads the rollups of w as the daemon's usage.get does.
func usageOf(t *testing.T, r Rollups, w usage.Window) contract.UsageResult {
	t.Helper()
	q := usage.NewQuery(w)
	if err := r.UsageRows(context.Background(), max(w.From, w.CoversFrom), w.To, q); err != nil {
		t.Fatalf("UsageRows: %v", err)
	}
	return q.Result()
}

// usageRollups runs a gateway's two hours (its own fleet queue, its
// workers' relayed events, a batch sent twice, a grant it never recorded),
// and checks that the backend's rows add up to the figures of the same
// events folded in memory, as they come in, once the pruning pass has
// gathered the closed hour, and once the first hour is pruned away.
func usageRollups(t *testing.T, b Backend) {
	ctx := context.Background()
	r := rollups(t, b)
	ref := &refRollups{cells: map[usage.Cell][]byte{}, open: map[usage.OpenKey]usage.Open{}}
	commit := func(c store.Change) {
		t.Helper()
		ref.fold(mustCommit(t, b, c))
	}
	relay := func(worker string, evs []contract.Event, last int64) {
		t.Helper()
		out, err := r.RelayEvents(ctx, worker, evs, last)
		if err != nil {
			t.Fatalf("RelayEvents: %v", err)
		}
		ref.fold(out)
	}
	for _, id := range []string{"w1", "w2"} {
		if err := b.PutWorker(ctx, store.Worker{ID: id, Label: id}); err != nil {
			t.Fatal(err)
		}
	}
	commit(store.Change{Events: []store.NewEvent{
		leaseEvent("e1", u0, contract.EvLeaseRequested, requestedP("g1", "ios")),
		leaseEvent("e2", u0, "capacity.changed", obj{}),
		leaseEvent("e3", u0, contract.EvLeaseRequested, requestedP("g2", "ios")),
		leaseEvent("e4", u0, contract.EvLeaseRequested, requestedP("g3", "android")),
	}})
	commit(store.Change{Events: []store.NewEvent{
		leaseEvent("e5", u0+10, contract.EvLeaseRejected, rejectedP("g1", "ios", "no-wait")),
		leaseEvent("e6", u0+50, contract.EvRequestDispatched, obj{"requestId": "g2", "workerId": "w1"}),
		leaseEvent("e7", u0+60, contract.EvRequestDispatched, obj{"requestId": "g3", "workerId": "w2"}),
	}})
	relay("w1", []contract.Event{
		workerEvent("w1", 1, u0+100, contract.EvLeaseRequested, forwardedP("r1", "ios")),
		workerEvent("w1", 2, u0+2100, contract.EvLeaseGranted, grantedP("r1", "l1", "booted")),
	}, 2)
	commit(store.Change{Events: []store.NewEvent{leaseEvent("e8", u0+2110, contract.EvGrantRecorded, recordedP("g2", "w1", "l1", "booted", "ios", 2000, u0+2100))}})
	relay("w2", []contract.Event{workerEvent("w2", 1, u0+200, contract.EvLeaseRequested, forwardedP("r1", "android"))}, 1)
	relay("w1", []contract.Event{
		workerEvent("w1", 2, u0+2100, contract.EvLeaseGranted, grantedP("r1", "l1", "booted")),
		workerEvent("w1", 3, u0+5100, contract.EvLeaseReleased, endedP("l1")),
	}, 3)
	relay("w2", []contract.Event{workerEvent("w2", 2, u0+700, contract.EvLeaseGranted, grantedP("r1", "l1", "warm"))}, 2)
	commit(store.Change{Events: []store.NewEvent{leaseEvent("e9", u0+710, contract.EvGrantRecorded, recordedP("g3", "w2", "l1", "warm", "android", 500, u0+700))}})
	relay("w2", []contract.Event{workerEvent("w2", 3, u0+800, contract.EvLeaseGranted, grantedP("r1", "l_fake", "warm"))}, 3)
	// The second hour: the gateway's own lease, requested and granted in
	// it, released in its last minute.
	h1 := u0 + usage.HourMs
	commit(store.Change{Events: []store.NewEvent{leaseEvent("e10", h1+1000, contract.EvLeaseRequested, requestedP("g4", "ios"))}})
	commit(store.Change{Events: []store.NewEvent{leaseEvent("e11", h1+4000, contract.EvLeaseGranted, grantedP("g4", "l4", "warm"))}})
	commit(store.Change{Events: []store.NewEvent{leaseEvent("e12", h1+59*60_000, contract.EvLeaseReleased, endedP("l4"))}})

	w := usage.Window{From: u0, To: u0 + 2*usage.HourMs, Bucket: "1h", Step: time.Hour, CoversFrom: u0, Gateway: true}
	want := ref.result(t, w)
	// The reference is the fold's own word; these figures, worked out by
	// hand, show it is not empty: w1's batch sent again is folded once,
	// w2's unrecorded grant not at all.
	if wt := (contract.UsageTotals{Requests: 4, Granted: map[string]int{"booted": 1, "warm": 2}, Rejected: map[string]int{"no-wait": 1}}); !reflect.DeepEqual(want.Totals, wt) {
		t.Fatalf("the reference's totals = %+v, want %+v", want.Totals, wt)
	}
	if got := usageOf(t, r, w); !reflect.DeepEqual(got, want) {
		t.Errorf("the figures of the backend's rows:\n%+v\nwant those of the same events folded in memory:\n%+v", got, want)
	}

	// The pruning pass with nothing to prune gathers the first hour's
	// minutes into hour rows; they add up to the same figures.
	if _, err := r.PruneEvents(ctx, 0, 0); err != nil {
		t.Fatal(err)
	}
	if got := usageOf(t, r, w); !reflect.DeepEqual(got, want) {
		t.Errorf("the figures once the first hour is gathered:\n%+v\nwant as before:\n%+v", got, want)
	}

	// A late event into the gathered hour (a worker's relayed after a
	// reconnect) is counted, and gathered onto its hour's row.
	relay("w1", []contract.Event{workerEvent("w1", 4, u0+30*60_000, contract.EvLeaseRequested, forwardedP("r2", "ios"))}, 4)
	commit(store.Change{Events: []store.NewEvent{leaseEvent("e13", u0+40*60_000, contract.EvLeaseRequested, requestedP("g5", "android"))}})
	if _, err := r.PruneEvents(ctx, 0, 0); err != nil {
		t.Fatal(err)
	}
	want = ref.result(t, w)
	if got := usageOf(t, r, w); !reflect.DeepEqual(got, want) {
		t.Errorf("the figures with a late request gathered:\n%+v\nwant:\n%+v", got, want)
	}

	// Pruned to the last minute (the late events' seqs follow the second
	// hour's): nothing before the history's start is counted, and the end
	// of w2's lease, granted before it, measures no hold; l4's, ended in
	// the kept minute, was measured when it ended.
	commit(store.Change{Events: []store.NewEvent{leaseEvent("e14", h1+59*60_000+1000, contract.EvLeaseRequested, requestedP("g6", "ios"))}})
	if _, err := r.PruneEvents(ctx, h1, 0); err != nil {
		t.Fatal(err)
	}
	span := mustSpan(t, r)
	covers := contract.UsageMinute(span.OldestTs)
	ref.prune(covers)
	relay("w2", []contract.Event{workerEvent("w2", 4, h1+59*60_000+2000, contract.EvLeaseReleased, endedP("l1"))}, 4)
	kept := w
	kept.CoversFrom = covers
	want = ref.result(t, kept)
	if want.Totals.Requests != 1 || want.Percentiles.Hold.Count != 1 || !want.Partial {
		t.Fatalf("the reference after pruning: %+v, want g6's request alone and l4's hold (ended in the kept minute), not l1's, partial", want)
	}
	if got := usageOf(t, r, kept); !reflect.DeepEqual(got, want) {
		t.Errorf("the figures of the kept history:\n%+v\nwant:\n%+v", got, want)
	}
}

// A commit that fails folds nothing into the rollups.
func usageOfARefusedCommit(t *testing.T, b Backend) {
	r := rollups(t, b)
	was := device("ghost", 1, contract.DeviceReady)
	ghost := was
	ghost.State = contract.DeviceLeased
	_, err := b.Commit(context.Background(), store.Change{Devices: []store.Device{ghost},
		Before: store.Before{Devices: map[string]store.Device{"ghost": was}},
		Events: []store.NewEvent{leaseEvent("e1", u0, contract.EvLeaseRequested, requestedP("g1", "ios"))}})
	if err == nil {
		t.Fatal("a Change naming an unstored device as stored committed")
	}
	w := usage.Window{From: u0, To: u0 + usage.HourMs, Bucket: "1h", Step: time.Hour, CoversFrom: u0}
	if got := usageOf(t, r, w); got.Totals.Requests != 0 {
		t.Errorf("a refused commit's request is counted: totals %+v", got.Totals)
	}
}
