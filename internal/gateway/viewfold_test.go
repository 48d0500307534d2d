package gateway

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/queue"
	"github.com/simlock/simlock/internal/store"
)

// gatedStore is a leasing store that reserves its write lock (as the
// gateway's SQLite store does) only once gate is closed, counting the
// reservations.
type gatedStore struct {
	*memQueueStore
	gate     chan struct{}
	reserved atomic.Int64
}

func (g *gatedStore) Reserve(ctx context.Context) (LeasingReservation, error) {
	g.reserved.Add(1)
	select {
	case <-g.gate:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return gatedReservation{g}, nil
}

type gatedReservation struct{ g *gatedStore }

func (r gatedReservation) Commit(ctx context.Context, w queue.Writes, grants []store.Grant, ended []string) ([]contract.Event, error) {
	return r.g.memQueueStore.Commit(ctx, w, grants, ended)
}

func (gatedReservation) Release() {}

// A reconnect storm: while one view change waits for the store's write
// lock, the views of 100 other workers change. None of them waits its
// turn for the lock and the decision lock; the one waiting folds them all,
// 64 to a decision, once it has the lock: three reservations for 101
// changes, and none is left unfolded.
func TestViewChangesToldWhileOneWaitsAreFoldedIntoFewDecisions(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := &gatedStore{memQueueStore: newQueueStore(), gate: make(chan struct{})}
		f := New(Options{Store: newMemStore(), InstanceID: "ins_gw"})
		l := NewLeasing(f, LeasingOptions{Store: st, DefaultTTL: time.Minute, MaxTTL: time.Hour})
		go l.viewChanged("w000", statusRead{}, true)
		synctest.Wait()
		var returned atomic.Int64
		var wg sync.WaitGroup
		for i := 1; i <= 100; i++ {
			wg.Go(func() {
				l.viewChanged(fmt.Sprintf("w%03d", i), statusRead{}, false)
				returned.Add(1)
			})
		}
		synctest.Wait()
		if n := returned.Load(); n != 100 {
			t.Errorf("%d of 100 view changes told while one waits for the store returned, want all: each waits its turn for the store's lock", n)
		}
		close(st.gate)
		wg.Wait()
		synctest.Wait()
		if n := st.reserved.Load(); n != 3 {
			t.Errorf("101 view changes took %d reservations of the store, want 3 (1, then 64 and 36 folded)", n)
		}
		l.folds.mu.Lock()
		left, folding := len(l.folds.pending), l.folds.folding
		l.folds.mu.Unlock()
		if left != 0 || folding {
			t.Errorf("after the storm %d view changes are left unfolded (folding %v), want none", left, folding)
		}
		l.Close()
	})
}
