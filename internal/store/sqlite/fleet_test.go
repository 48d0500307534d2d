package sqlite

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/store"
)

func workerEvent(seq int64) contract.Event {
	return contract.Event{Seq: seq, ID: fmt.Sprintf("evt_w%d", seq), Timestamp: seq, Event: "lease.renewed", Payload: json.RawMessage(`{}`)}
}

func relayed(t *testing.T, db *DB, evs []contract.Event, lastSeq int64) []int64 {
	t.Helper()
	out, err := db.RelayEvents(context.Background(), "w1", evs, lastSeq)
	if err != nil {
		t.Fatalf("RelayEvents: %v", err)
	}
	var ids []int64
	for _, ev := range out {
		var n int64
		fmt.Sscanf(ev.ID, "evt_w%d", &n)
		ids = append(ids, n)
	}
	return ids
}

func TestARelayedBatchSentAgainIsAppendedOnceAndACursorSetLowerFollowsANewLog(t *testing.T) {
	db, _ := openTemp(t)
	if err := db.PutWorker(context.Background(), store.Worker{ID: "w1", Label: "w1"}); err != nil {
		t.Fatal(err)
	}
	batch := []contract.Event{workerEvent(1), workerEvent(2), workerEvent(3)}
	if got := relayed(t, db, batch, 3); fmt.Sprint(got) != "[1 2 3]" {
		t.Fatalf("first relay appended worker seqs %v, want [1 2 3]", got)
	}
	// After a reconnect the worker replays from before the cursor: only
	// what is past it is new.
	again := append(batch, workerEvent(4))
	if got := relayed(t, db, again, 4); fmt.Sprint(got) != "[4]" {
		t.Errorf("relaying again appended worker seqs %v, want only [4]", got)
	}
	if n := count(t, db, "events"); n != 4 {
		t.Errorf("events holds %d rows, want 4", n)
	}
	// The worker's log started over: the cursor is set to its seq now, and
	// its events from there on are appended.
	relayed(t, db, nil, 1)
	if got := relayed(t, db, []contract.Event{workerEvent(2)}, 2); fmt.Sprint(got) != "[2]" {
		t.Errorf("after the cursor was set back to 1, relaying seq 2 appended %v, want [2]", got)
	}
	ws, err := db.Workers(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(ws) != 1 || ws[0].LastSeq != 2 {
		t.Errorf("workers = %+v, want w1 at last seq 2", ws)
	}
}

// TestMigrationNineKeepsEverySeqAndTheHighWaterMark builds a database at
// schema 8, with an event log pruned below its high-water mark, and opens
// it: the rebuilt table keeps its rows and seqs, hands out the next seq
// after the highest ever given, and has lost the index on id.
func TestMigrationNineKeepsEverySeqAndTheHighWaterMark(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "simlock.db")
	raw := rawAtSchema(t, path, 8)
	for i := 1; i <= 5; i++ {
		if _, err := raw.Exec(`INSERT INTO events (id, timestamp, event, payload) VALUES (?, ?, 'lease.renewed', '{}')`, fmt.Sprintf("evt_%d", i), i); err != nil {
			t.Fatal(err)
		}
	}
	// Pruned: seqs 1-3 gone, and the high-water mark above what is left.
	for _, q := range []string{`DELETE FROM events WHERE seq <= 3`, `UPDATE sqlite_sequence SET seq = 9 WHERE name = 'events'`, `PRAGMA user_version = 8`} {
		if _, err := raw.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	raw.Close()

	db := openAt(t, path)
	evs, err := db.Events(ctx, store.EventQuery{})
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 2 || evs[0].Seq != 4 || evs[1].Seq != 5 || evs[0].ID != "evt_4" {
		t.Fatalf("events after the migration = %+v, want evt_4 and evt_5 at seqs 4 and 5", evs)
	}
	got := commit(t, db, store.Change{Events: []store.NewEvent{event("evt_new", 6)}})
	if got[0].Seq != 10 {
		t.Errorf("the next event got seq %d, want 10 (after the high-water mark 9)", got[0].Seq)
	}
	var n int
	if err := db.r.QueryRow(`SELECT count(*) FROM sqlite_master WHERE type = 'index' AND tbl_name = 'events' AND name LIKE 'sqlite_autoindex%'`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Errorf("events still has %d automatic (unique) indexes", n)
	}
	// The same id twice is stored twice: nothing but seq identifies a row.
	commit(t, db, store.Change{Events: []store.NewEvent{event("evt_new", 7)}})
	if c := count(t, db, "events"); c != 4 {
		t.Errorf("events holds %d rows, want 4", c)
	}
}

// A gateway's grant records are written and ended with the decisions that
// make and end them, and read back whole after a reopen; a commit that
// fails writes none of them.
func TestGrantRecordsCommitWithTheirDecisionAndSurviveAReopen(t *testing.T) {
	db, path := openTemp(t)
	ctx := context.Background()
	a := store.Grant{Key: "w1.lse_a", WorkerID: "w1", WorkerLeaseID: "lse_a", DeviceID: "dev_1", OwnerID: "tok_alice",
		RequesterID: "agent-1", ChosenID: "build-42", RequestID: "req_1", GrantedAt: 10}
	b := store.Grant{Key: "w2.lse_b", WorkerID: "w2", WorkerLeaseID: "lse_b", DeviceID: "dev_9", OwnerID: "tok_bob",
		RequesterID: "agent-2", ChosenID: "build-42", RequestID: "req_2", GrantedAt: 20}
	if _, err := db.Commit(ctx, store.Change{Grants: []store.Grant{a, b},
		Events: []store.NewEvent{{ID: "evt_g1", Timestamp: 10, Event: "grant.recorded", Payload: json.RawMessage(`{}`)}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Commit(ctx, store.Change{EndedGrants: []string{"w1.lse_a"}}); err != nil {
		t.Fatal(err)
	}
	bad := store.Grant{Key: "w3.lse_c", WorkerID: "w3", WorkerLeaseID: "lse_c"}
	if _, err := db.Commit(ctx, store.Change{Grants: []store.Grant{bad}, Events: []store.NewEvent{{ID: ""}}}); err == nil {
		t.Fatal("a commit with an event without an id succeeded")
	}
	db.Close()
	gs, err := openAt(t, path).Grants(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(gs) != 1 || gs[0] != b {
		t.Errorf("grants after a reopen = %+v, want only %+v (the other ended, the failed commit's never written)", gs, b)
	}
}
