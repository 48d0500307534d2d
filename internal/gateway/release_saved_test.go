package gateway

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/queue"
	"github.com/simlock/simlock/internal/store"
)

// endsRefused is the leasing's store, refusing (once armed) every commit
// that ends a grant record, as a store refuses a deposed leader's.
type endsRefused struct {
	*memQueueStore
	armed atomic.Bool
}

var errRefused = errors.New("store: commit refused")

func (s *endsRefused) Commit(ctx context.Context, w queue.Writes, grants []store.Grant, ended []string) ([]contract.Event, error) {
	if s.armed.Load() && len(ended) > 0 {
		return nil, errRefused
	}
	return s.memQueueStore.Commit(ctx, w, grants, ended)
}

// A release is acknowledged only once its end is saved: when the store
// refuses the commit that deletes the grant record (a replica deposed
// under the release), the release answers an error, and the grant record
// is still there for the next leader to reconcile with the worker.
func TestAReleaseWhoseEndCannotBeSavedIsNotAcknowledged(t *testing.T) {
	st := &endsRefused{memQueueStore: newQueueStore()}
	f := New(Options{Store: newMemStore(), InstanceID: "ins_gw"})
	f.put(*view("w1", 1, 2))
	l := NewLeasing(f, LeasingOptions{Store: st, DefaultTTL: time.Minute, MaxTTL: time.Hour})
	defer l.Close()
	g := grantOf("w1", "lse_a", "agent-a", "tok_alice", "")
	if err := l.q.Do(func(*queue.Txn) error {
		mustAdd(t, l.idx, g)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	c := scriptedSession(t, func(req contract.Request) any {
		if req.Op == contract.OpLeaseRelease {
			return contract.ReleaseResult{LeaseID: "lse_a"}
		}
		return nil
	})
	f.mu.Lock()
	f.workers["w1"].client = c
	f.mu.Unlock()

	st.armed.Store(true)
	if _, err := l.Release(queue.Caller{Principal: "tok_alice"}, contract.LeaseIDInput{LeaseID: g.Key}); err == nil {
		t.Fatalf("the release of %s was acknowledged although its end could not be saved", g.Key)
	}
	if _, ok := st.grant(g.Key); !ok {
		t.Fatalf("the grant record of %s is gone although its end was refused", g.Key)
	}
}
