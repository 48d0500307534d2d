package storetest

import (
	"context"
	"reflect"
	"testing"

	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/store"
)

// Keeper is what a backend a daemon runs on adds to Backend: keeping its
// history bounded, reading the event log's extent, storing the clock
// reading outside a decision, and a gateway's relay of its workers'
// events. The cases that need it skip a backend without it (the in-memory
// one keeps no history to prune).
type Keeper interface {
	PruneRequests(ctx context.Context, settledBefore int64, keepMax int) (int64, error)
	PruneEvents(ctx context.Context, olderThan int64, keepMax int) (int64, error)
	PruneLeases(ctx context.Context, endedBefore int64) (int64, error)
	EventLogSpan(ctx context.Context) (store.EventLogSpan, error)
	PutClock(ctx context.Context, c store.Clock) error
	RelayEvents(ctx context.Context, workerID string, evs []contract.Event, lastSeq int64) ([]contract.Event, error)
	RelayBatches(ctx context.Context, bs []store.RelayBatch) ([][]contract.Event, error)
}

func keeper(t *testing.T, b Backend) Keeper {
	t.Helper()
	k, ok := b.(Keeper)
	if !ok {
		t.Skip("the backend keeps no history")
	}
	return k
}

func mustSpan(t *testing.T, k Keeper) store.EventLogSpan {
	t.Helper()
	s, err := k.EventLogSpan(context.Background())
	if err != nil {
		t.Fatalf("EventLogSpan: %v", err)
	}
	return s
}

func pruneEvents(t *testing.T, b Backend) {
	ctx := context.Background()
	k := keeper(t, b)
	if s := mustSpan(t, k); s != (store.EventLogSpan{}) {
		t.Errorf("an empty log's span = %+v, want zero", s)
	}
	var es []store.NewEvent
	for i, id := range []string{"e1", "e2", "e3", "e4", "e5"} {
		es = append(es, event(id, int64(10*(i+1))))
	}
	evs := mustCommit(t, b, store.Change{Events: es})
	if s := mustSpan(t, k); s != (store.EventLogSpan{OldestSeq: evs[0].Seq, OldestTs: 10, LastSeq: evs[4].Seq, Events: 5}) {
		t.Errorf("span after five events = %+v", s)
	}
	// By age: e1 and e2 are older than 25.
	if n, err := k.PruneEvents(ctx, 25, 0); err != nil || n != 2 {
		t.Errorf("PruneEvents(older than 25) = %d, %v; want 2", n, err)
	}
	if s := mustSpan(t, k); s != (store.EventLogSpan{OldestSeq: evs[2].Seq, OldestTs: 30, LastSeq: evs[4].Seq, Events: 3}) {
		t.Errorf("span after pruning by age = %+v", s)
	}
	// By count: the newest one stays.
	if n, err := k.PruneEvents(ctx, 0, 1); err != nil || n != 2 {
		t.Errorf("PruneEvents(keep 1) = %d, %v; want 2", n, err)
	}
	got, err := b.Events(ctx, store.EventQuery{})
	if err != nil || len(got) != 1 || got[0].ID != "e5" {
		t.Errorf("events after pruning = %+v, %v; want e5 alone", got, err)
	}
	// A pruned seq is never given again.
	next := mustCommit(t, b, store.Change{Events: []store.NewEvent{event("e6", 60)}})
	if next[0].Seq != evs[4].Seq+1 {
		t.Errorf("the event after a prune has seq %d, want %d", next[0].Seq, evs[4].Seq+1)
	}
	if n, err := k.PruneEvents(ctx, 0, 0); err != nil || n != 0 {
		t.Errorf("PruneEvents with no bound = %d, %v; want nothing deleted", n, err)
	}
}

func pruneRequests(t *testing.T, b Backend) {
	ctx := context.Background()
	k := keeper(t, b)
	settled := func(id string, state contract.RequestState, at int64) contract.LeaseRequestRecord {
		r := request(id, "agent", "", at-1, state)
		r.SettledAt = at
		return r
	}
	mustCommit(t, b, store.Change{Requests: []contract.LeaseRequestRecord{
		settled("r1", contract.RequestGranted, 10),
		settled("r2", contract.RequestCancelled, 20),
		request("r3", "agent", "", 1, contract.RequestQueued),
		settled("r4", contract.RequestFailed, 30),
	}})
	if n, err := k.PruneRequests(ctx, 15, 0); err != nil || n != 1 {
		t.Errorf("PruneRequests(settled before 15) = %d, %v; want 1", n, err)
	}
	// Two of three may stay: the longest settled goes, the open one never.
	if n, err := k.PruneRequests(ctx, 0, 2); err != nil || n != 1 {
		t.Errorf("PruneRequests(keep 2) = %d, %v; want 1", n, err)
	}
	if n, err := k.PruneRequests(ctx, 0, 1); err != nil || n != 1 {
		t.Errorf("PruneRequests(keep 1) = %d, %v; want 1 (the open request stays)", n, err)
	}
	for id, want := range map[string]bool{"r1": false, "r2": false, "r3": true, "r4": false} {
		if _, found, err := b.Request(ctx, id); err != nil || found != want {
			t.Errorf("Request(%s) found = %v, %v; want %v", id, found, err, want)
		}
	}
}

func pruneLeases(t *testing.T, b Backend) {
	ctx := context.Background()
	k := keeper(t, b)
	ended := lease("l1", "dev1", 1)
	ended.EndedAt, ended.EndReason = 10, "released"
	mustCommit(t, b, store.Change{Devices: []store.Device{device("dev1", 1, contract.DeviceReady)},
		Leases: []store.Lease{ended, lease("l2", "dev1", 2)}})
	if n, err := k.PruneLeases(ctx, 5); err != nil || n != 0 {
		t.Errorf("PruneLeases(ended before 5) = %d, %v; want 0", n, err)
	}
	if n, err := k.PruneLeases(ctx, 20); err != nil || n != 1 {
		t.Errorf("PruneLeases(ended before 20) = %d, %v; want 1 (the active lease stays)", n, err)
	}
	if s := mustLoad(t, b); len(s.Leases) != 1 || s.Leases[0].ID != "l2" {
		t.Errorf("leases after pruning = %+v, want l2", s.Leases)
	}
}

func putClock(t *testing.T, b Backend) {
	k := keeper(t, b)
	want := store.Clock{WallMs: 5, BootNs: 6, BootID: "b"}
	for _, c := range []store.Clock{{WallMs: 1, BootNs: 2, BootID: "a"}, want} {
		if err := k.PutClock(context.Background(), c); err != nil {
			t.Fatal(err)
		}
	}
	if got, ok, err := b.Clock(context.Background()); err != nil || !ok || got != want {
		t.Errorf("Clock after PutClock = %+v, %v, %v; want %+v", got, ok, err, want)
	}
}

func relayEvents(t *testing.T, b Backend) {
	ctx := context.Background()
	k := keeper(t, b)
	if err := b.PutWorker(ctx, store.Worker{ID: "w1", Label: "one"}); err != nil {
		t.Fatal(err)
	}
	mustCommit(t, b, store.Change{Events: []store.NewEvent{event("own", 1)}})
	wev := func(id string, seq int64) contract.Event {
		return contract.Event{ID: id, Seq: seq, Timestamp: seq * 10, Event: eventName}
	}
	first, err := k.RelayEvents(ctx, "w1", []contract.Event{wev("w-a", 1), wev("w-b", 2)}, 2)
	if err != nil || len(first) != 2 || first[0].ID != "w-a" || first[0].Seq != 2 || first[1].Seq != 3 {
		t.Fatalf("RelayEvents = %+v, %v; want w-a and w-b with the gateway's seqs 2 and 3", first, err)
	}
	// A batch sent again after a reconnect appends only what is new.
	again, err := k.RelayEvents(ctx, "w1", []contract.Event{wev("w-b", 2), wev("w-c", 3)}, 3)
	if err != nil || len(again) != 1 || again[0].ID != "w-c" || again[0].Seq != 4 {
		t.Errorf("RelayEvents of a repeated batch = %+v, %v; want w-c alone with seq 4", again, err)
	}
	if ws, err := b.Workers(ctx); err != nil || len(ws) != 1 || ws[0].LastSeq != 3 || ws[0].LastSeenAt == 0 {
		t.Errorf("Workers after the relay = %+v, %v; want w1's cursor at 3 and a last-seen time", ws, err)
	}
	got, err := b.Events(ctx, store.EventQuery{AfterSeq: 1})
	var ids []string
	for _, e := range got {
		ids = append(ids, e.ID)
	}
	if err != nil || !reflect.DeepEqual(ids, []string{"w-a", "w-b", "w-c"}) {
		t.Errorf("the log after the relays = %v, %v; want w-a, w-b, w-c", ids, err)
	}
}
