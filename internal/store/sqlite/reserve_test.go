package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/simlock/simlock/internal/store"
)

// holdLock opens a second connection to path, as another process would,
// and takes the database's write lock with BEGIN EXCLUSIVE and a write;
// release commits it.
func holdLock(t *testing.T, path string) (release func()) {
	t.Helper()
	other, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	other.SetMaxOpenConns(1)
	conn, err := other.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{"BEGIN EXCLUSIVE", "INSERT INTO events (id, timestamp, event) VALUES ('evt_outside', 1, 'outside.write')"} {
		if _, err := conn.ExecContext(context.Background(), q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	done := false
	release = func() {
		if done {
			return
		}
		done = true
		if _, err := conn.ExecContext(context.Background(), "COMMIT"); err != nil {
			t.Errorf("COMMIT: %v", err)
		}
		conn.Close()
		other.Close()
	}
	t.Cleanup(release)
	return release
}

// While another process holds the write lock, a reservation waits for it
// at most busy_timeout and fails with ErrBusy, having changed nothing; once
// the lock is free, a reservation is taken and a decision committed under
// it reads back whole, with statements it had to run unprepared prepared
// for the next commit.
func TestAReservationMeetsAnOutsideLockBeforeTheDecision(t *testing.T) {
	path := filepath.Join(t.TempDir(), "simlock.db")
	db, err := OpenWith(context.Background(), path, Options{BusyTimeout: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	d, l := device("d1", 100), lease("l1", "d1", 100)
	commit(t, db, store.Change{Devices: []store.Device{d}, Leases: []store.Lease{l}})

	release := holdLock(t, path)
	start := time.Now()
	if _, err := db.Reserve(context.Background()); !errors.Is(err, store.ErrBusy) {
		t.Fatalf("Reserve while another connection holds the lock: %v, want ErrBusy", err)
	}
	if waited := time.Since(start); waited > 5*time.Second {
		t.Errorf("Reserve waited %s, far past busy_timeout", waited)
	}
	release()

	r, err := db.Reserve(context.Background())
	if err != nil {
		t.Fatalf("Reserve once the lock is free: %v", err)
	}
	// A renewal: an update of columns no commit has updated before, so
	// its statement is not prepared yet, and 3 events in one insert.
	l2 := l
	l2.LastRenewedAt, l2.TTLDeadline = 900, 60_900
	evs, err := r.Commit(context.Background(), store.Change{Leases: []store.Lease{l2}, Before: store.Before{Leases: map[string]store.Lease{l.ID: l}},
		Events: []store.NewEvent{event("evt_a", 5), event("evt_b", 5), event("evt_c", 5)}})
	if err != nil {
		t.Fatalf("Commit under the reservation: %v", err)
	}
	if len(evs) != 3 || evs[2].Seq != evs[0].Seq+2 {
		t.Errorf("events committed: %+v", evs)
	}
	r.Release() // after Commit: nothing
	if s := load(t, db); !reflect.DeepEqual(s.Leases, []store.Lease{l2}) {
		t.Errorf("leases after the reserved commit = %+v, want %+v", s.Leases, l2)
	}
	db.bg.Wait()
	if db.narrowLease.peek(changedMask(leaseValues(l), leaseValues(l2))) == nil || db.events.peek(3) == nil {
		t.Errorf("the statements the reserved commit ran unprepared were not prepared after it")
	}

	// A reservation given back unused writes nothing and frees the lock.
	r, err = db.Reserve(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	r.Release()
	commit(t, db, store.Change{Events: []store.NewEvent{event("evt_d", 6)}})
	if n := count(t, db, "events"); n != 5 {
		t.Errorf("%d events, want the outside one and four", n)
	}
}

// A reserved commit whose context has ended by the time it writes commits
// nothing and says so, though its statements do not watch the context (so
// that they start no goroutine each): the reservation is given back, and
// the next one commits.
func TestAReservedCommitWhoseContextEndedWritesNothing(t *testing.T) {
	db, _ := openTemp(t)
	d, l := device("d1", 100), lease("l1", "d1", 100)
	r, err := db.Reserve(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := r.Commit(ctx, store.Change{Devices: []store.Device{d}, Leases: []store.Lease{l}, Events: []store.NewEvent{event("evt_a", 5)}}); !errors.Is(err, context.Canceled) {
		t.Fatalf("Commit with an ended context: %v, want context.Canceled", err)
	}
	if n := count(t, db, "devices") + count(t, db, "leases") + count(t, db, "events"); n != 0 {
		t.Errorf("%d rows written by a commit whose context had ended, want none", n)
	}
	r, err = db.Reserve(context.Background())
	if err != nil {
		t.Fatalf("Reserve after the refused commit: %v", err)
	}
	if _, err := r.Commit(context.Background(), store.Change{Devices: []store.Device{d}}); err != nil {
		t.Fatalf("the next reserved commit: %v", err)
	}
	if n := count(t, db, "devices"); n != 1 {
		t.Errorf("%d devices after the next commit, want 1", n)
	}
}
