package queue

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/simlock/simlock/internal/contract"
)

// lockedStore is a memStore whose write lock another process may hold:
// while locked, Reserve fails as SQLite's would past busy_timeout.
type lockedStore struct {
	*memStore
	mu       sync.Mutex
	locked   bool
	reserves int
	released int
}

var errLocked = errors.New("the database is locked by another process")

func (s *lockedStore) Reserve(context.Context) (Reservation, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reserves++
	if s.locked {
		return nil, errLocked
	}
	return &lockedReservation{s: s}, nil
}

func (s *lockedStore) setLocked(v bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.locked = v
}

type lockedReservation struct {
	s    *lockedStore
	done bool
}

func (r *lockedReservation) Commit(ctx context.Context, w Writes) ([]contract.Event, error) {
	r.done = true
	return r.s.memStore.Commit(ctx, w)
}

func (r *lockedReservation) Release() {
	if !r.done {
		r.done = true
		r.s.mu.Lock()
		r.s.released++
		r.s.mu.Unlock()
	}
}

// With the store locked by another process, a caller's decision (Try)
// fails with INTERNAL without running, and the queue goes on; a decision
// that must happen (Do) waits, trying again, and is made once the lock is
// free; Close ends a Do still waiting, without running it.
func TestALockedStoreFailsTryAndDelaysDo(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := &lockedStore{memStore: newMemStore()}
		q := New(Options{Store: s, Placer: newSlots(), LeaseOf: func(string) (string, string, bool) { return "", "", false }})
		s.setLocked(true)

		ran := false
		err := q.Try(func(tx *Txn) error {
			ran = true
			tx.Event("test.tried", nil)
			return nil
		})
		if err == nil || contract.AsError(err).Code != contract.CodeInternal || ran {
			t.Fatalf("Try on a locked store: %v (ran %v), want INTERNAL without running", err, ran)
		}
		if q.Err() != nil {
			t.Fatalf("the queue stopped deciding after a refused Try: %v", q.Err())
		}

		done := make(chan error, 1)
		go func() {
			done <- q.Do(func(tx *Txn) error {
				tx.Event("test.done", nil)
				return nil
			})
		}()
		time.Sleep(5 * time.Second) // virtual: the Do tries again meanwhile
		synctest.Wait()
		select {
		case err := <-done:
			t.Fatalf("Do returned while the store was locked: %v", err)
		default:
		}
		s.mu.Lock()
		tries := s.reserves
		s.mu.Unlock()
		if tries < 3 {
			t.Errorf("Do tried for the lock %d times in 5s, want it to keep trying", tries)
		}
		s.setLocked(false)
		time.Sleep(3 * time.Second)
		synctest.Wait()
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("Do once the lock is free: %v", err)
			}
		default:
			t.Fatal("Do did not run once the lock was free")
		}
		if evs := s.memStore.storedEvents(); len(evs) != 1 || evs[0].Event != "test.done" {
			t.Errorf("events stored: %+v, want test.done alone", evs)
		}

		s.setLocked(true)
		go func() { done <- q.Do(func(*Txn) error { t.Error("a Do ran after Close"); return nil }) }()
		synctest.Wait()
		q.Close()
		synctest.Wait()
		if err := <-done; err == nil || contract.AsError(err).Code != contract.CodeDaemonStopping {
			t.Errorf("Do waiting at Close: %v, want DAEMON_STOPPING", err)
		}
	})
}
