package gateway

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/queue"
)

// recordingStore is memQueueStore keeping the request records too.
type recordingStore struct {
	memQueueStore
	mu      sync.Mutex
	records map[string]contract.LeaseRequestRecord
}

func (r *recordingStore) Commit(ctx context.Context, w queue.Writes) ([]contract.Event, error) {
	r.mu.Lock()
	for _, rec := range w.Requests {
		r.records[rec.ID] = rec
	}
	r.mu.Unlock()
	return r.memQueueStore.Commit(ctx, w)
}

func (r *recordingStore) Request(_ context.Context, id string) (contract.LeaseRequestRecord, bool, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	rec, ok := r.records[id]
	return rec, ok, nil
}

// A request bounced off a worker is skipped for it until the view
// changes; once the request ends in line (here, its timeout), the next
// view change forgets its skips: what a long-running gateway keeps is
// bounded by what waits, not by what ever bounced.
func TestABouncedRequestThatEndsInLineLeavesNoSkipBehind(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := New(Options{Store: newMemStore(), InstanceID: "ins_gw"})
		f.put(*view("w1", 0, 2)) // connected, but no client yet: a dispatch bounces
		l := NewLeasing(f, LeasingOptions{Store: &recordingStore{records: map[string]contract.LeaseRequestRecord{}}, DefaultTTL: time.Minute, MaxTTL: time.Hour})
		st, err := l.Submit(context.Background(), queue.Caller{Principal: "agent"},
			contract.LeaseRequestInput{Platform: contract.PlatformIOS, TimeoutMs: 2000})
		if err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		l.q.View(func() {
			if len(l.skip) != 1 {
				t.Fatalf("after the bounce the gateway skips for %d requests, want 1 (the bounced one)", len(l.skip))
			}
		})
		time.Sleep(3 * time.Second) // past the request's timeoutMs, on the bubble's clock
		synctest.Wait()
		got, err := l.RequestStatus(context.Background(), queue.Caller{Admin: true}, contract.LeaseRequestGetInput{RequestID: st.Request.ID})
		if err != nil || got.Request.State != contract.RequestFailed || got.Request.Error == nil || got.Request.Error.Code != contract.CodeQueueTimeout {
			t.Fatalf("the bounced request is %s %+v (%v), want failed with QUEUE_TIMEOUT", got.Request.State, got.Request.Error, err)
		}
		l.viewChanged("w1", nil, true) // the worker's next refresh
		l.q.View(func() {
			if len(l.skip) != 0 {
				t.Errorf("after the request timed out the gateway still keeps skips for %d requests", len(l.skip))
			}
		})
	})
}
