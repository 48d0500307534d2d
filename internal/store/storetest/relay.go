package storetest

import (
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/store"
	"github.com/simlock/simlock/internal/usage"
)

// relayed is a worker's event as its gateway relays it, with no payload.
func relayed(worker string, seq int64) contract.Event {
	return contract.Event{ID: worker + "-" + string(rune('a'+seq)), Seq: seq, Timestamp: seq * 10, Event: eventName}
}

func eventIDs(evs []contract.Event) []string {
	ids := []string{}
	for _, e := range evs {
		ids = append(ids, e.ID)
	}
	return ids
}

func cursors(t *testing.T, b Backend) map[string]int64 {
	t.Helper()
	ws, err := b.Workers(context.Background())
	if err != nil {
		t.Fatalf("Workers: %v", err)
	}
	out := map[string]int64{}
	for _, w := range ws {
		out[w.ID] = w.LastSeq
	}
	return out
}

// Several workers' relays in one call are appended batch after batch,
// each batch's new events with the next of the gateway's seqs, each
// worker's cursor moved by its own batch; a second batch of one worker in
// the same call skips what the first appended, as a later call would.
func relayBatches(t *testing.T, b Backend) {
	ctx := context.Background()
	k := keeper(t, b)
	for _, id := range []string{"w1", "w2"} {
		if err := b.PutWorker(ctx, store.Worker{ID: id, Label: id}); err != nil {
			t.Fatal(err)
		}
	}
	mustCommit(t, b, store.Change{Events: []store.NewEvent{event("own", 1)}})
	out, err := k.RelayBatches(ctx, []store.RelayBatch{
		{WorkerID: "w1", Events: []contract.Event{relayed("w1", 1), relayed("w1", 2)}, LastSeq: 2},
		{WorkerID: "w2", Events: []contract.Event{relayed("w2", 1)}, LastSeq: 1},
		{WorkerID: "w1", Events: []contract.Event{relayed("w1", 2), relayed("w1", 3)}, LastSeq: 3},
		{WorkerID: "w2", LastSeq: 5},
	})
	if err != nil {
		t.Fatalf("RelayBatches: %v", err)
	}
	want := [][]string{{"w1-b", "w1-c"}, {"w2-b"}, {"w1-d"}, {}}
	if len(out) != len(want) {
		t.Fatalf("RelayBatches returned %d batches, want %d", len(out), len(want))
	}
	var seqs []int64
	for i := range out {
		if got := eventIDs(out[i]); !reflect.DeepEqual(got, want[i]) {
			t.Errorf("batch %d appended %v, want %v", i, got, want[i])
		}
		for _, e := range out[i] {
			seqs = append(seqs, e.Seq)
		}
	}
	if !reflect.DeepEqual(seqs, []int64{2, 3, 4, 5}) {
		t.Errorf("the appended events' seqs = %v, want the gateway's 2, 3, 4, 5 in batch order", seqs)
	}
	if got := cursors(t, b); !reflect.DeepEqual(got, map[string]int64{"w1": 3, "w2": 5}) {
		t.Errorf("the cursors after the batches = %v, want w1 at 3 and w2 at 5", got)
	}
	logged, err := b.Events(ctx, store.EventQuery{AfterSeq: 1})
	if got := eventIDs(logged); err != nil || !reflect.DeepEqual(got, []string{"w1-b", "w1-c", "w2-b", "w1-d"}) {
		t.Errorf("the log after the batches = %v, %v; want w1-b, w1-c, w2-b, w1-d", got, err)
	}
	// A batch below its worker's cursor appends nothing and sets the
	// cursor to its own last seq, as RelayEvents does.
	again, err := k.RelayBatches(ctx, []store.RelayBatch{{WorkerID: "w1", Events: []contract.Event{relayed("w1", 3)}, LastSeq: 3}})
	if err != nil || len(again) != 1 || len(again[0]) != 0 {
		t.Errorf("RelayBatches of a batch relayed already = %+v, %v; want one empty batch", again, err)
	}
	if seq, _ := b.LastSeq(ctx); seq != 5 {
		t.Errorf("LastSeq after a batch relayed already = %d, want 5", seq)
	}
}

// A batch refused partway through a call fails the call, and none of the
// call's batches is written: not their events, not their cursors.
func relayBatchesAllOrNothing(t *testing.T, b Backend) {
	ctx := context.Background()
	k := keeper(t, b)
	for _, id := range []string{"w1", "w2"} {
		if err := b.PutWorker(ctx, store.Worker{ID: id, Label: id}); err != nil {
			t.Fatal(err)
		}
	}
	_, err := k.RelayBatches(ctx, []store.RelayBatch{
		{WorkerID: "w1", Events: []contract.Event{relayed("w1", 1), relayed("w1", 2)}, LastSeq: 2},
		{WorkerID: "w2", Events: []contract.Event{relayed("w2", 1)}, LastSeq: 1},
		{Events: []contract.Event{relayed("w3", 1)}, LastSeq: 1},
	})
	if err == nil {
		t.Fatal("RelayBatches with a batch of no worker succeeded, want an error")
	}
	if seq, _ := b.LastSeq(ctx); seq != 0 {
		t.Errorf("a refused call moved LastSeq to %d, want 0", seq)
	}
	if got := cursors(t, b); !reflect.DeepEqual(got, map[string]int64{"w1": 0, "w2": 0}) {
		t.Errorf("the cursors after a refused call = %v, want both at 0", got)
	}
	// What the refused call held is relayed in full by the next.
	out, err := k.RelayBatches(ctx, []store.RelayBatch{
		{WorkerID: "w1", Events: []contract.Event{relayed("w1", 1), relayed("w1", 2)}, LastSeq: 2},
	})
	if err != nil || len(out) != 1 || !reflect.DeepEqual(eventIDs(out[0]), []string{"w1-b", "w1-c"}) {
		t.Errorf("RelayBatches after the refused call = %+v, %v; want w1-b and w1-c", out, err)
	}
}

// Relays committed together add up to the usage figures of the same
// relays one by one: two workers' ends of leases the gateway recorded,
// and an end of one of them again in a later batch of the same call.
func usageOfRelayBatches(t *testing.T, b Backend) {
	ctx := context.Background()
	r := rollups(t, b)
	ref := &refRollups{cells: map[usage.Cell][]byte{}, open: map[usage.OpenKey]usage.Open{}}
	for _, id := range []string{"w1", "w2"} {
		if err := b.PutWorker(ctx, store.Worker{ID: id, Label: id}); err != nil {
			t.Fatal(err)
		}
	}
	// The grants the gateway recorded open the leases the relays end.
	ref.fold(mustCommit(t, b, store.Change{Events: []store.NewEvent{
		leaseEvent("e1", u0+2110, contract.EvGrantRecorded, recordedP("g1", "w1", "l1", "booted", "ios", 2000, u0+2100)),
		leaseEvent("e2", u0+710, contract.EvGrantRecorded, recordedP("g2", "w2", "l1", "warm", "android", 500, u0+700)),
	}}))
	out, err := r.RelayBatches(ctx, []store.RelayBatch{
		{WorkerID: "w1", Events: []contract.Event{
			workerEvent("w1", 1, u0+100, contract.EvLeaseRequested, forwardedP("r1", "ios")),
			workerEvent("w1", 2, u0+2100, contract.EvLeaseGranted, grantedP("r1", "l1", "booted")),
			workerEvent("w1", 3, u0+5100, contract.EvLeaseReleased, endedP("l1")),
		}, LastSeq: 3},
		{WorkerID: "w2", Events: []contract.Event{
			workerEvent("w2", 1, u0+200, contract.EvLeaseRequested, forwardedP("r1", "android")),
			workerEvent("w2", 2, u0+700, contract.EvLeaseGranted, grantedP("r1", "l1", "warm")),
			workerEvent("w2", 3, u0+3*60_000, contract.EvLeaseReleased, endedP("l1")),
		}, LastSeq: 3},
		{WorkerID: "w1", Events: []contract.Event{
			workerEvent("w1", 4, u0+9100, contract.EvLeaseReleased, endedP("l1")),
		}, LastSeq: 4},
	})
	if err != nil {
		t.Fatalf("RelayBatches: %v", err)
	}
	for _, batch := range out {
		ref.fold(batch)
	}
	w := usage.Window{From: u0, To: u0 + usage.HourMs, Bucket: "1h", Step: time.Hour, CoversFrom: u0, Gateway: true}
	want := ref.result(t, w)
	// The reference is the fold's own word; the relayed ends are in it.
	if reflect.DeepEqual(want, func() contract.UsageResult {
		bare := &refRollups{cells: map[usage.Cell][]byte{}, open: map[usage.OpenKey]usage.Open{}}
		bare.fold(mustEvents(t, b, 0, 2))
		return bare.result(t, w)
	}()) {
		t.Fatalf("the reference's figures %+v count none of the relayed ends", want)
	}
	if got := usageOf(t, r, w); !reflect.DeepEqual(got, want) {
		t.Errorf("the figures of relays committed together:\n%+v\nwant those of the same relays one by one:\n%+v", got, want)
	}
}

// mustEvents reads the log's events after seq, at most limit.
func mustEvents(t *testing.T, b Backend, after int64, limit int) []contract.Event {
	t.Helper()
	evs, err := b.Events(context.Background(), store.EventQuery{AfterSeq: after, Limit: limit})
	if err != nil {
		t.Fatalf("Events: %v", err)
	}
	return evs
}
