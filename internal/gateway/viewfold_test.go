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
// lock, the views of 100 other workers change. Each is a part of a shared
// decision, so once the lock is had they take the next decisions together,
// 64 to a decision: three reservations for 101 changes, not one each.
func TestViewChangesToldWhileOneWaitsShareFewDecisions(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := &gatedStore{memQueueStore: newQueueStore(), gate: make(chan struct{})}
		f := New(Options{Store: newMemStore(), InstanceID: "ins_gw"})
		l := NewLeasing(f, LeasingOptions{Store: st, DefaultTTL: time.Minute, MaxTTL: time.Hour})
		go l.viewChanged("w000", statusRead{}, true)
		synctest.Wait()
		var wg sync.WaitGroup
		for i := 1; i <= 100; i++ {
			wg.Go(func() { l.viewChanged(fmt.Sprintf("w%03d", i), statusRead{}, false) })
		}
		synctest.Wait()
		close(st.gate)
		wg.Wait()
		synctest.Wait()
		if n := st.reserved.Load(); n != 3 {
			t.Errorf("101 view changes took %d reservations of the store, want 3 (1, then 64 and 36 shared)", n)
		}
		l.Close()
	})
}
