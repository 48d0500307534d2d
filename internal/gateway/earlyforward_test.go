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

// A request placed as its decision is made is forwarded to its worker
// while that decision commits, not after: the commit and the uplink's
// round trip overlap. A request made as a resource (lease-request.create)
// is answered once its record is committed, so its decision commits on
// its own; its grant's record is committed after, in a decision of its own.
func TestAForwardLeavesWhileTheDecisionThatPlacedItCommits(t *testing.T) {
	f, w := grantingFleet(t)
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
		st  contract.LeaseRequestStatus
		err error
	}
	answered := make(chan answer, 1)
	caller := queue.Caller{Principal: "agent"}
	go func() {
		st, err := l.Submit(context.Background(), caller, contract.LeaseRequestInput{Platform: contract.PlatformIOS})
		heardEarly = !let.Load()
		answered <- answer{st, err}
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
	if a.err != nil {
		t.Fatal(a.err)
	}
	if heardEarly {
		t.Error("the request's maker heard of it before its record was committed")
	}
	rs, err := l.RequestStatus(context.Background(), caller, contract.LeaseRequestGetInput{RequestID: a.st.Request.ID, AfterRev: a.st.Rev, WaitMs: 5000})
	for err == nil && rs.Request.State == contract.RequestStarting {
		rs, err = l.RequestStatus(context.Background(), caller, contract.LeaseRequestGetInput{RequestID: a.st.Request.ID, AfterRev: rs.Rev, WaitMs: 5000})
	}
	if err != nil || rs.Request.State != contract.RequestGranted {
		t.Fatalf("the request is %s (%v), want granted", rs.Request.State, err)
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	if i, j := slices.Index(st.states, contract.RequestStarting), slices.Index(st.states, contract.RequestGranted); i < 0 || j < i {
		t.Errorf("the commits saved the request as %v, want starting before granted", st.states)
	}
}
