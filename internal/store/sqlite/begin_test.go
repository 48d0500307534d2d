package sqlite

import (
	"context"
	"errors"
	"path/filepath"
	"runtime/metrics"
	"testing"
	"time"

	"github.com/simlock/simlock/internal/store"
)

// goroutinesCreated is the runtime's count of goroutines started so far.
func goroutinesCreated() uint64 {
	s := []metrics.Sample{{Name: "/sched/goroutines-created:goroutines"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// A commit, reserved or not, starts at most one goroutine (database/sql's
// watch of the transaction, which it starts for every transaction): none
// of the driver's per statement, BEGIN and COMMIT included, which wake a
// thread of an idle daemon for every decision. Commit is called on a
// context that can end, as the engine's is.
func TestACommitStartsNoGoroutineOfTheDriver(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	db, err := Open(ctx, filepath.Join(t.TempDir(), "simlock.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.CommitFloor(ctx); err != nil { // seeds, prepares
		t.Fatal(err)
	}
	const n = 50
	for _, c := range []struct {
		name   string
		commit func() error
	}{
		{"Commit", func() error { return db.CommitFloor(ctx) }},
		{"Reserve and Commit", func() error {
			res, err := db.Reserve(ctx)
			if err != nil {
				return err
			}
			defer res.Release()
			_, err = res.Commit(ctx, store.Change{Events: []store.NewEvent{{ID: floorEventID(), Timestamp: 1, Event: FloorEvent}}})
			return err
		}},
	} {
		if err := c.commit(); err != nil { // prepares what it runs
			t.Fatal(err)
		}
		before := goroutinesCreated()
		for range n {
			if err := c.commit(); err != nil {
				t.Fatal(err)
			}
		}
		if per := float64(goroutinesCreated()-before) / n; per > 1.1 {
			t.Errorf("%s started %.1f goroutines a commit, want at most 1", c.name, per)
		}
	}
}

// A write transaction that meets another process's lock waits for it in
// begin, for a context that ends first no longer than the context, and
// takes the lock once it is free within the wait.
func TestBeginWaitsForAnOutsideLockAsLongAsItsContext(t *testing.T) {
	path := filepath.Join(t.TempDir(), "simlock.db")
	db, err := OpenWith(context.Background(), path, Options{BusyTimeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	release := holdLock(t, path)

	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := db.Reserve(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Reserve with a context that ends while another process holds the lock: %v, want the context's error", err)
	}

	const held = 20 * time.Millisecond
	time.AfterFunc(held, release)
	began := time.Now()
	res, err := db.Reserve(context.Background())
	if err != nil {
		t.Fatalf("Reserve once the lock is freed: %v", err)
	}
	if waited := time.Since(began); waited < held {
		t.Errorf("Reserve had the lock after %s, while another process held it for %s", waited, held)
	}
	res.Release()
}
