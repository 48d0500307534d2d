package gateway

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/queue"
)

// memQueueStore is the fleet queue's store in memory: commits are kept
// only as a count, which is all a benchmark needs.
type memQueueStore struct {
	mu  sync.Mutex
	seq int64
}

func (m *memQueueStore) Commit(_ context.Context, w queue.Writes) ([]contract.Event, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]contract.Event, len(w.Events))
	for i, ev := range w.Events {
		m.seq++
		ev.Seq = m.seq
		out[i] = ev
	}
	return out, nil
}

func (m *memQueueStore) RequestByKey(context.Context, string, string) (contract.LeaseRequestRecord, bool, error) {
	return contract.LeaseRequestRecord{}, false, nil
}

func (m *memQueueStore) Request(context.Context, string) (contract.LeaseRequestRecord, bool, error) {
	return contract.LeaseRequestRecord{}, false, nil
}

// fullFleet is leasing over one connected worker whose every slot is taken,
// with n requests waiting in the fleet queue.
func fullFleet(b *testing.B, n int) *Leasing {
	b.Helper()
	f := New(Options{Store: newMemStore(), InstanceID: "ins_gw"})
	f.put(*view("w1", 4, 4))
	l := NewLeasing(f, LeasingOptions{Store: &memQueueStore{}, DefaultTTL: time.Minute, MaxTTL: time.Hour})
	for i := range n {
		c := queue.Caller{Principal: fmt.Sprintf("r%05d", i)}
		if _, err := l.Submit(context.Background(), c, contract.LeaseRequestInput{Platform: contract.PlatformIOS}); err != nil {
			b.Fatal(err)
		}
	}
	return l
}

// One dispatch pass over a full fleet with 1,000 and 10,000 requests
// waiting: the head is placed (and blocks its platform), whatever the
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
