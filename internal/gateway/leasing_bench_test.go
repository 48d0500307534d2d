package gateway

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/queue"
	"github.com/simlock/simlock/internal/store"
	"github.com/simlock/simlock/internal/store/memstore"
)

// memQueueStore is the leasing's store on the shared in-memory store
// (memstore): the fleet queue's writes and the grant records of a
// decision commit together, as the gateway's SQLite store commits them.
type memQueueStore struct{ *memstore.Store }

func newQueueStore() *memQueueStore { return &memQueueStore{memstore.New()} }

func (m *memQueueStore) Commit(ctx context.Context, w queue.Writes, grants []store.Grant, ended []string) ([]contract.Event, error) {
	c := store.Change{Requests: w.Requests, Events: make([]store.NewEvent, len(w.Events)), Grants: grants, EndedGrants: ended}
	for i, ev := range w.Events {
		c.Events[i] = store.NewEvent{ID: ev.ID, Timestamp: ev.Timestamp, Event: ev.Event, Payload: ev.Payload}
	}
	return m.Store.Commit(ctx, c)
}

// putGrant writes a grant record, as one a gateway's earlier run made.
func (m *memQueueStore) putGrant(g store.Grant) {
	if _, err := m.Store.Commit(context.Background(), store.Change{Grants: []store.Grant{g}}); err != nil {
		panic(err)
	}
}

// grant is the stored grant record with key key, if any.
func (m *memQueueStore) grant(key string) (store.Grant, bool) {
	gs, err := m.Grants(context.Background())
	if err != nil {
		panic(err)
	}
	for _, g := range gs {
		if g.Key == key {
			return g, true
		}
	}
	return store.Grant{}, false
}

// storedEvents is every event committed, oldest first.
func (m *memQueueStore) storedEvents() []contract.Event {
	evs, err := m.Events(context.Background(), store.EventQuery{Limit: 1 << 30})
	if err != nil {
		panic(err)
	}
	return evs
}

// recordlessStore keeps a commit only as far as the seqs it hands out and
// the grant records it writes, so that what the benchmarks count per
// waiting request is the leasing's memory, not the store's copy of its
// record.
type recordlessStore struct{ *memQueueStore }

func (r recordlessStore) Commit(ctx context.Context, w queue.Writes, grants []store.Grant, ended []string) ([]contract.Event, error) {
	w.Requests = nil
	return r.memQueueStore.Commit(ctx, w, grants, ended)
}

// fullFleet is leasing over one connected worker whose every slot is taken,
// with n requests waiting in the fleet queue.
func fullFleet(b *testing.B, n int) *Leasing {
	b.Helper()
	f := New(Options{Store: newMemStore(), InstanceID: "ins_gw"})
	f.put(*view("w1", 4, 4))
	l := NewLeasing(f, LeasingOptions{Store: recordlessStore{newQueueStore()}, DefaultTTL: time.Minute, MaxTTL: time.Hour})
	for i := range n {
		c := queue.Caller{Principal: fmt.Sprintf("r%05d", i)}
		if _, err := l.Submit(context.Background(), c, contract.LeaseRequestInput{Platform: contract.PlatformIOS}); err != nil {
			b.Fatal(err)
		}
	}
	return l
}

// One dispatch pass over a full fleet with 1,000 and 10,000 requests
// waiting: the head is placed (and holds back its class of need), whatever the
// length of the line. The memory each waiting request holds is reported
// beside it.
func BenchmarkDispatchPass(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		b.Run(fmt.Sprintf("queued=%d", n), func(b *testing.B) {
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			l := fullFleet(b, n)
			runtime.GC()
			runtime.ReadMemStats(&after)
			perQueued := float64(after.HeapAlloc-before.HeapAlloc) / float64(n)
			b.ResetTimer()
			for b.Loop() {
				_ = l.q.Do(func(tx *queue.Txn) error {
					tx.Kick()
					return nil
				})
			}
			b.StopTimer()
			b.ReportMetric(perQueued, "B/queued")
			runtime.KeepAlive(l)
		})
	}
}
