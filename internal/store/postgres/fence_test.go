package postgres

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/leader"
	"github.com/simlock/simlock/internal/store"
	"github.com/simlock/simlock/internal/store/pgtest"
	"github.com/simlock/simlock/internal/store/storetest"
)

const (
	fenceGroup   = "gateway"
	fenceTimeout = 2 * time.Second
)

// elected runs an elector on url until the test ends (or stop) and
// returns the term it won.
func elected(t *testing.T, url string) (term int64, stop func()) {
	t.Helper()
	won := make(chan int64, 8)
	e, err := leader.New(leader.Options{URL: url, Group: fenceGroup, AdvertiseURL: "http://a.example:7420", Timeout: fenceTimeout,
		OnElected: func(term int64) { won <- term }})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = e.Run(ctx)
	}()
	var once sync.Once
	stop = func() { once.Do(func() { cancel(); <-done }) }
	t.Cleanup(stop)
	select {
	case term = <-won:
	case <-time.After(10 * time.Second):
		t.Fatal("the elector was not elected within 10s")
	}
	return term, stop
}

// openFenced opens url as a fenced store.
func openFenced(t *testing.T, url string) *DB {
	t.Helper()
	db, err := Open(context.Background(), url, Options{Group: fenceGroup, LeaderTimeout: fenceTimeout})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// A fenced store that holds a live elector's term gives the answers every
// backend gives: the fence changes nothing for the leader.
func TestConformanceFenced(t *testing.T) {
	c := pgtest.Start(t)
	storetest.Run(t, func(t *testing.T) storetest.Backend {
		url := c.Database(t)
		term, _ := elected(t, url)
		db := openFenced(t, url)
		if err := db.Lead(context.Background(), term); err != nil {
			t.Fatal(err)
		}
		return db
	})
}

// fenceWrites are every write a gateway makes, each a fresh one.
func fenceWrites() []struct {
	name  string
	write func(ctx context.Context, db *DB) error
} {
	ev := store.NewEvent{ID: "evt_f1", Timestamp: 1, Event: contract.EvDaemonStarted, Payload: []byte(`{}`)}
	return []struct {
		name  string
		write func(ctx context.Context, db *DB) error
	}{
		{"Commit", func(ctx context.Context, db *DB) error {
			_, err := db.Commit(ctx, store.Change{Events: []store.NewEvent{ev}})
			return err
		}},
		{"Reserve+Commit", func(ctx context.Context, db *DB) error {
			r, err := db.Reserve(ctx)
			if err != nil {
				return err
			}
			_, err = r.Commit(ctx, store.Change{Events: []store.NewEvent{ev}})
			return err
		}},
		{"RelayEvents", func(ctx context.Context, db *DB) error {
			_, err := db.RelayEvents(ctx, "w1", []contract.Event{{ID: "evt_r1", Seq: 1, Timestamp: 1, Event: contract.EvDaemonStarted}}, 1)
			return err
		}},
		{"RelayBatches", func(ctx context.Context, db *DB) error {
			_, err := db.RelayBatches(ctx, []store.RelayBatch{
				{WorkerID: "w1", Events: []contract.Event{{ID: "evt_r1", Seq: 1, Timestamp: 1, Event: contract.EvDaemonStarted}}, LastSeq: 1},
				{WorkerID: "w2", Events: []contract.Event{{ID: "evt_r2", Seq: 1, Timestamp: 1, Event: contract.EvDaemonStarted}}, LastSeq: 1},
			})
			return err
		}},
		{"PutWorker", func(ctx context.Context, db *DB) error { return db.PutWorker(ctx, store.Worker{ID: "w2"}) }},
		{"DeleteWorker", func(ctx context.Context, db *DB) error { return db.DeleteWorker(ctx, "w1") }},
		{"PutToken", func(ctx context.Context, db *DB) error {
			return db.PutToken(ctx, store.Token{TokenRecord: contract.TokenRecord{ID: "tok_2", Role: contract.TokenAgent}, Hash: "h2"})
		}},
		{"DeleteToken", func(ctx context.Context, db *DB) error { _, err := db.DeleteToken(ctx, "tok_1"); return err }},
		{"PutJob", func(ctx context.Context, db *DB) error {
			return db.PutJob(ctx, contract.Job{ID: "job_2", State: "running"})
		}},
		{"DeleteJobsBefore", func(ctx context.Context, db *DB) error { _, err := db.DeleteJobsBefore(ctx, 1<<62); return err }},
		{"PutClock", func(ctx context.Context, db *DB) error {
			return db.PutClock(ctx, store.Clock{WallMs: 9, BootNs: 9, BootID: "b"})
		}},
		{"PruneEvents", func(ctx context.Context, db *DB) error { _, err := db.PruneEvents(ctx, 1<<62, 0); return err }},
		{"PruneRequests", func(ctx context.Context, db *DB) error { _, err := db.PruneRequests(ctx, 1<<62, 0); return err }},
		{"PruneLeases", func(ctx context.Context, db *DB) error { _, err := db.PruneLeases(ctx, 1<<62); return err }},
		{"FleetID", func(ctx context.Context, db *DB) error { _, err := db.FleetID(ctx, "fleet"); return err }},
	}
}

// seedFenced writes one of each row the writes above change or delete,
// through a store that leads term.
func seedFenced(t *testing.T, db *DB) {
	t.Helper()
	ctx := context.Background()
	if _, err := db.Commit(ctx, store.Change{Events: []store.NewEvent{{ID: "evt_s1", Timestamp: 1, Event: contract.EvDaemonStarted}}}); err != nil {
		t.Fatal(err)
	}
	if err := db.PutWorker(ctx, store.Worker{ID: "w1"}); err != nil {
		t.Fatal(err)
	}
	if err := db.PutToken(ctx, store.Token{TokenRecord: contract.TokenRecord{ID: "tok_1", Role: contract.TokenAgent}, Hash: "h1"}); err != nil {
		t.Fatal(err)
	}
	if err := db.PutJob(ctx, contract.Job{ID: "job_1", State: "done", EndedAt: 1}); err != nil {
		t.Fatal(err)
	}
}

// dump is what the writes above could change.
type dump struct {
	lastSeq int64
	workers []store.Worker
	tokens  []store.Token
	jobs    []contract.Job
	clock   store.Clock
}

func read(t *testing.T, db *DB) dump {
	t.Helper()
	ctx := context.Background()
	var d dump
	var err error
	if d.lastSeq, err = db.LastSeq(ctx); err != nil {
		t.Fatal(err)
	}
	if d.workers, err = db.Workers(ctx); err != nil {
		t.Fatal(err)
	}
	if d.tokens, err = db.Tokens(ctx); err != nil {
		t.Fatal(err)
	}
	if d.jobs, err = db.Jobs(ctx, "", 100); err != nil {
		t.Fatal(err)
	}
	if d.clock, _, err = db.Clock(ctx); err != nil {
		t.Fatal(err)
	}
	return d
}

func sameDump(a, b dump) bool {
	if a.lastSeq != b.lastSeq || a.clock != b.clock || len(a.workers) != len(b.workers) || len(a.tokens) != len(b.tokens) || len(a.jobs) != len(b.jobs) {
		return false
	}
	return true
}

// Every write of a fenced store is refused with ErrDeposed and changes
// nothing, both before the store was given a term and after a takeover
// made its term stale; the new leader's store writes.
func TestAFencedStoreCommitsNothingWithoutTheLeadingTerm(t *testing.T) {
	c := pgtest.Start(t)
	url := c.Database(t)
	term, stop := elected(t, url)
	old := openFenced(t, url)
	if err := old.Lead(context.Background(), term); err != nil {
		t.Fatal(err)
	}
	seedFenced(t, old)

	fresh := openFenced(t, url) // opened, given no term
	check := func(db *DB, when string) {
		t.Helper()
		for _, w := range fenceWrites() {
			before := read(t, db)
			err := w.write(context.Background(), db)
			if !errors.Is(err, leader.ErrDeposed) {
				t.Errorf("%s: %s = %v; want an error wrapping leader.ErrDeposed", when, w.name, err)
			}
			if after := read(t, db); !sameDump(before, after) {
				t.Errorf("%s: %s refused, yet changed the database: %+v -> %+v", when, w.name, before, after)
			}
		}
	}
	check(fresh, "before Lead")

	// A takeover: the old leader's session ends, another elector wins.
	stop()
	next, _ := elected(t, url)
	if next <= term {
		t.Fatalf("the takeover's term %d is not after %d", next, term)
	}
	check(old, "after a takeover, with the old term")

	if err := fresh.Lead(context.Background(), next); err != nil {
		t.Fatal(err)
	}
	for _, w := range fenceWrites() {
		if err := w.write(context.Background(), fresh); err != nil {
			t.Errorf("the new leader's %s: %v", w.name, err)
		}
	}
}

// A fenced store's pool ends a transaction left idle past half the leader
// timeout, so a paused writer cannot hold back a takeover.
func TestAFencedStoresSessionsEndIdleTransactions(t *testing.T) {
	c := pgtest.Start(t)
	db := openFenced(t, c.Database(t))
	var got string
	if err := db.pool.QueryRow(context.Background(), `SHOW idle_in_transaction_session_timeout`).Scan(&got); err != nil {
		t.Fatal(err)
	}
	if got != "1s" {
		t.Errorf("idle_in_transaction_session_timeout = %s; want 1s (half the leader timeout)", got)
	}
}
