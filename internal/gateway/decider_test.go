package gateway

import (
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/simlock/simlock/internal/queue"
)

// Decisions made while one waits for the store's write lock share the
// next one: 1 + 100 parts take 3 reservations (1, then 64 and 36), run in
// the order told, and none of their callers returns before its part's
// decision committed.
func TestPartsToldWhileADecisionWaitsShareTheNext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := &gatedStore{memQueueStore: newQueueStore(), gate: make(chan struct{})}
		f := New(Options{Store: newMemStore(), InstanceID: "ins_gw"})
		l := NewLeasing(f, LeasingOptions{Store: st, DefaultTTL: time.Minute, MaxTTL: time.Hour})
		var mu sync.Mutex
		var order []int
		part := func(i int) func(*queue.Txn) {
			return func(*queue.Txn) {
				mu.Lock()
				order = append(order, i)
				mu.Unlock()
			}
		}
		var returned atomic.Int64
		go func() {
			_ = l.dec.do(part(0))
			returned.Add(1)
		}()
		synctest.Wait()
		var wg sync.WaitGroup
		for i := 1; i <= 100; i++ {
			wg.Go(func() {
				_ = l.dec.do(part(i))
				returned.Add(1)
			})
			synctest.Wait() // told in this order
		}
		if n := returned.Load(); n != 0 {
			t.Fatalf("%d callers returned before the store's lock was had, want none", n)
		}
		close(st.gate)
		wg.Wait()
		synctest.Wait()
		if n := returned.Load(); n != 101 {
			t.Errorf("%d of 101 callers returned, want all", n)
		}
		if n := st.reserved.Load(); n != 3 {
			t.Errorf("101 parts took %d reservations of the store, want 3 (1, then 64 and 36 shared)", n)
		}
		for i, got := range order {
			if got != i {
				t.Fatalf("part %d ran as the %dth, want in the order told", got, i)
			}
		}
		if len(order) != 101 {
			t.Errorf("%d parts ran, want 101", len(order))
		}
		l.dec.mu.Lock()
		left, leading := len(l.dec.pending), l.dec.leading
		l.dec.mu.Unlock()
		if left != 0 || leading {
			t.Errorf("after the parts %d are left (leading %v), want none", left, leading)
		}
		l.Close()
	})
}
