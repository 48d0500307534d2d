package gateway

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/queue"
	"github.com/simlock/simlock/internal/store"
)

// heldCommitStore holds the commit that first saves a request as
// starting (placed, its forward on its way) until release is closed, and
// notes the state of every request each commit saves, in order.
type heldCommitStore struct {
	*memQueueStore
	holding chan struct{} // closed once the held commit waits
	release chan struct{}
	once    sync.Once

	mu     sync.Mutex
	states []contract.RequestState
}

func (s *heldCommitStore) Commit(ctx context.Context, w queue.Writes, grants []store.Grant, ended []string) ([]contract.Event, error) {
	for _, r := range w.Requests {
		s.mu.Lock()
		s.states = append(s.states, r.State)
		s.mu.Unlock()
		if r.State == contract.RequestStarting {
			s.once.Do(func() {
				close(s.holding)
				<-s.release
			})
		}
	}
	return s.memQueueStore.Commit(ctx, w, grants, ended)
}

// A request placed at once on a worker is forwarded to it while the
// decision that placed it commits, not after: the commit and the uplink's
// round trip overlap. Its requester hears of the grant only after both the
// request's record and the grant's have been committed, in that order.
func TestAForwardLeavesWhileTheDecisionThatPlacedItCommits(t *testing.T) {
	f := New(Options{Store: newMemStore(), InstanceID: "ins_gw"})
	f.put(*view("w1", 0, 2))
	w := &grantingWorker{requests: make(chan contract.LeaseRequestInput, 4)}
	f.mu.Lock()
	f.workers["w1"].client = scriptedSession(t, w.answer)
	f.mu.Unlock()
	st := &heldCommitStore{memQueueStore: newQueueStore(), holding: make(chan struct{}), release: make(chan struct{})}
	l := NewLeasing(f, LeasingOptions{Store: st, DefaultTTL: time.Minute, MaxTTL: time.Hour})
	defer l.Close()

	var let atomic.Bool // the held commit is let go
	defer func() {
		if !let.Load() {
			close(st.release) // a failed test stops its gateway too
		}
	}()
	var heardEarly bool
	type answer struct {
		g   contract.LeaseGrant
		err error
	}
	answered := make(chan answer, 1)
	go func() {
		g, err := l.Acquire(context.Background(), queue.Caller{Principal: "agent"}, contract.LeaseRequestInput{Platform: contract.PlatformIOS}, nil)
		heardEarly = !let.Load()
		answered <- answer{g, err}
	}()
	select {
	case <-st.holding:
	case <-time.After(5 * time.Second):
		t.Fatal("the request was never saved as starting")
	}
	select {
	case in := <-w.requests:
		if in.RequesterID != l.idx.prefix+"agent" {
			t.Errorf("the worker was asked for requester %q, want %q", in.RequesterID, l.idx.prefix+"agent")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the worker was not asked while the decision that placed the request committed: the forward waited for the commit")
	}
	let.Store(true)
	close(st.release)
	a := <-answered
	if a.err != nil || a.g.Lease.WorkerID != "w1" {
		t.Fatalf("the request was answered %+v, %v; want a lease on w1", a.g.Lease, a.err)
	}
	if heardEarly {
		t.Error("the requester heard of its grant before the request's record was committed")
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	if i, j := slices.Index(st.states, contract.RequestStarting), slices.Index(st.states, contract.RequestGranted); i < 0 || j < i {
		t.Errorf("the commits saved the request as %v, want starting before granted", st.states)
	}
}
