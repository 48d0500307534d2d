package gateway

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/queue"
	"github.com/simlock/simlock/internal/store"
)

// memQueueStore is the leasing's store in memory: commits are kept only
// as far as the seqs they hand out and the grant records they write.
type memQueueStore struct {
	mu     sync.Mutex
	seq    int64
	grants map[string]store.Grant
	events []contract.Event
}

func (m *memQueueStore) Commit(_ context.Context, w queue.Writes, grants []store.Grant, ended []string) ([]contract.Event, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.grants == nil {
		m.grants = map[string]store.Grant{}
	}
	for _, g := range grants {
		m.grants[g.Key] = g
	}
	for _, k := range ended {
		delete(m.grants, k)
	}
	out := make([]contract.Event, len(w.Events))
	for i, ev := range w.Events {
		m.seq++
		ev.Seq = m.seq
		out[i] = ev
	}
	m.events = append(m.events, out...)
	return out, nil
}

func (m *memQueueStore) RequestByKey(context.Context, string, string) (contract.LeaseRequestRecord, bool, error) {
	return contract.LeaseRequestRecord{}, false, nil
}

func (m *memQueueStore) Request(context.Context, string) (contract.LeaseRequestRecord, bool, error) {
	return contract.LeaseRequestRecord{}, false, nil
}

func (m *memQueueStore) Grants(context.Context) ([]store.Grant, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]store.Grant, 0, len(m.grants))
	for _, g := range m.grants {
		out = append(out, g)
	}
	slices.SortFunc(out, func(a, b store.Grant) int { return strings.Compare(a.Key, b.Key) })
	return out, nil
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
