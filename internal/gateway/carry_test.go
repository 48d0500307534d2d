package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/simlock/simlock/internal/client"
	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/queue"
	"github.com/simlock/simlock/internal/store"
)

// savedCommit is what one commit that wrote something saved.
type savedCommit struct {
	states []contract.RequestState
	events []string
	grants int
}

// notingStore notes every commit that writes something.
type notingStore struct {
	*memQueueStore
	mu      sync.Mutex
	commits []savedCommit
}

func (s *notingStore) Commit(ctx context.Context, w queue.Writes, grants []store.Grant, ended []string) ([]contract.Event, error) {
	if len(w.Requests)+len(w.Events)+len(grants)+len(ended) > 0 {
		c := savedCommit{grants: len(grants)}
		for _, r := range w.Requests {
			c.states = append(c.states, r.State)
		}
		for _, ev := range w.Events {
			c.events = append(c.events, ev.Event)
		}
		s.mu.Lock()
		s.commits = append(s.commits, c)
		s.mu.Unlock()
	}
	return s.memQueueStore.Commit(ctx, w, grants, ended)
}

func (s *notingStore) saved() []savedCommit {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.commits)
}

// A request placed on a worker as it is made is recorded with its grant,
// in one commit: the request's record (granted), lease.requested before
// grant.recorded, and the grant record.
func TestARequestPlacedAtOnceIsRecordedWithItsGrantInOneCommit(t *testing.T) {
	f, _ := grantingFleet(t)
	l, st := notingLeasing(t, f)
	g, err := l.Acquire(context.Background(), queue.Caller{Principal: "agent"}, contract.LeaseRequestInput{Platform: contract.PlatformIOS}, nil)
	if err != nil {
		t.Fatal(err)
	}
	saved := st.saved()
	if len(saved) != 1 {
		t.Fatalf("the grant took %d commits %+v, want 1", len(saved), saved)
	}
	c := saved[0]
	if !slices.Equal(c.states, []contract.RequestState{contract.RequestGranted}) || c.grants != 1 {
		t.Errorf("the commit saved the request as %v and %d grant records, want granted and 1", c.states, c.grants)
	}
	if i, j := slices.Index(c.events, contract.EvLeaseRequested), slices.Index(c.events, contract.EvGrantRecorded); i < 0 || j < i {
		t.Errorf("the commit's events are %v, want lease.requested before grant.recorded", c.events)
	}
	rec, ok, err := st.Request(context.Background(), g.RequestID)
	if err != nil || !ok || rec.State != contract.RequestGranted {
		t.Errorf("the stored request %s is %+v (found %v, %v), want granted", g.RequestID, rec.State, ok, err)
	}
}

// Until the grant's decision records it, a request placed at once is
// shown to nobody: the lists leave it out, and a second request of its
// requester is refused only by a decision that commits it first.
func TestARequestNotYetRecordedIsShownToNobody(t *testing.T) {
	f := New(Options{Store: newMemStore(), InstanceID: "ins_gw"})
	f.put(*view("w1", 0, 2))
	w := &grantingWorker{requests: make(chan contract.LeaseRequestInput, 1)}
	release := make(chan struct{})
	var once sync.Once
	defer once.Do(func() { close(release) })
	f.mu.Lock()
	f.workers["w1"].client = scriptedSession(t, func(req contract.Request) any {
		a := w.answer(req)
		<-release // the worker holds its answer until the test lets it go
		return a
	})
	f.mu.Unlock()
	l, st := notingLeasing(t, f)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	agent := queue.Caller{Principal: "agent"}
	answered := make(chan error, 1)
	go func() {
		_, err := l.Acquire(ctx, agent, contract.LeaseRequestInput{Platform: contract.PlatformIOS}, nil)
		answered <- err
	}()
	select {
	case <-w.requests:
	case <-ctx.Done():
		t.Fatal("the worker was never asked")
	}
	if n := len(st.saved()); n != 0 {
		t.Fatalf("%d commits while the worker holds its answer, want none yet", n)
	}
	if ws, _ := l.Waiting(queue.Caller{Admin: true}); len(ws) != 0 {
		t.Errorf("the waiting list shows %+v before the request is recorded, want nothing", ws)
	}
	_, err := l.Acquire(ctx, agent, contract.LeaseRequestInput{Platform: contract.PlatformIOS}, nil)
	var ce *contract.Error
	if !errors.As(err, &ce) || ce.Code != contract.CodeRequesterAlreadyLeased {
		t.Fatalf("a second request of the requester: %v, want REQUESTER_ALREADY_LEASED", err)
	}
	saved := st.saved()
	if len(saved) != 1 || !slices.Contains(saved[0].events, contract.EvLeaseRequested) {
		t.Fatalf("the refusal naming the first request came after commits %+v, want one saving the first request", saved)
	}
	if ws, _ := l.Waiting(queue.Caller{Admin: true}); len(ws) != 1 {
		t.Errorf("the waiting list shows %d requests once the request is recorded, want 1", len(ws))
	}
	// The worker answers: the request is granted.
	once.Do(func() { close(release) })
	if err := <-answered; err != nil {
		t.Fatalf("the first request: %v, want granted", err)
	}
}

// grantOn is a worker's grant of its device dev_1 for in, under lease id.
func grantOn(in contract.LeaseRequestInput, id string) contract.LeaseGrant {
	return grantOnDev1(in, id, "req_"+id, 0)
}

// A request placed at once, not yet recorded, that its worker refuses
// with NO_CAPACITY goes back in line (the decision that does so records
// it) and is granted by another worker.
func TestARequestNotYetRecordedThatBouncesIsGrantedByAnotherWorker(t *testing.T) {
	f := New(Options{Store: newMemStore(), InstanceID: "ins_gw"})
	f.put(*view("w1", 0, 2)) // the most free: routed first
	f.put(*view("w2", 1, 2))
	f.mu.Lock()
	f.workers["w1"].client = scriptedSession(t, func(req contract.Request) any {
		if req.Op != contract.OpLeaseRequest {
			return nil
		}
		return contract.Errorf(contract.CodeNoCapacity, "every device is leased")
	})
	f.workers["w2"].client = scriptedSession(t, func(req contract.Request) any {
		if req.Op != contract.OpLeaseRequest {
			return nil
		}
		var in contract.LeaseRequestInput
		_ = json.Unmarshal(req.Input, &in)
		return grantOn(in, "lse_2")
	})
	f.mu.Unlock()
	l, st := notingLeasing(t, f)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	g, err := l.Acquire(ctx, queue.Caller{Principal: "agent"}, contract.LeaseRequestInput{Platform: contract.PlatformIOS}, nil)
	if err != nil {
		t.Fatalf("the request: %v, want granted by w2", err)
	}
	if g.Lease.WorkerID != "w2" {
		t.Errorf("granted on %s, want w2", g.Lease.WorkerID)
	}
	saved := st.saved()
	if len(saved) != 2 || !slices.Contains(saved[0].events, contract.EvLeaseRequested) || saved[0].grants != 0 ||
		!slices.Equal(saved[1].states, []contract.RequestState{contract.RequestGranted}) || saved[1].grants != 1 {
		t.Fatalf("commits %+v, want two: the bounce's, recording the request with lease.requested (sent on to w2), then w2's grant", saved)
	}
	var requested int
	for _, c := range saved {
		for _, ev := range c.events {
			if ev == contract.EvLeaseRequested {
				requested++
			}
		}
	}
	if requested != 1 {
		t.Errorf("lease.requested was recorded %d times, want once", requested)
	}
}

// A request placed at once, not yet recorded, whose worker's uplink is
// lost before it answers fails with WORKER_UNREACHABLE, recorded as
// failed with its lease.requested and lease.rejected in one commit.
func TestARequestNotYetRecordedWhoseWorkerIsLostFailsRecorded(t *testing.T) {
	f := New(Options{Store: newMemStore(), InstanceID: "ins_gw"})
	f.put(*view("w1", 0, 2))
	var c *client.Client
	c = scriptedSession(t, func(req contract.Request) any {
		if req.Op == contract.OpLeaseRequest {
			go c.Close() // the uplink is lost; nothing is answered
		}
		return nil
	})
	f.mu.Lock()
	f.workers["w1"].client = c
	f.mu.Unlock()
	l, st := notingLeasing(t, f)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := l.Acquire(ctx, queue.Caller{Principal: "agent"}, contract.LeaseRequestInput{Platform: contract.PlatformIOS}, nil)
	var ce *contract.Error
	if !errors.As(err, &ce) || ce.Code != contract.CodeWorkerUnreachable {
		t.Fatalf("the request: %v, want WORKER_UNREACHABLE", err)
	}
	saved := st.saved()
	if len(saved) != 1 || !slices.Equal(saved[0].states, []contract.RequestState{contract.RequestFailed}) ||
		!slices.Equal(saved[0].events, []string{contract.EvLeaseRequested, contract.EvLeaseRejected}) {
		t.Errorf("commits %+v, want one recording the request failed, with lease.requested then lease.rejected", saved)
	}
}

// A request placed at once, not yet recorded, whose caller goes away
// before its worker answers: the worker's lease is given back, and the
// request is recorded as cancelled.
func TestARequestNotYetRecordedWhoseCallerLeftHasItsLeaseGivenBack(t *testing.T) {
	f := New(Options{Store: newMemStore(), InstanceID: "ins_gw"})
	f.put(*view("w1", 0, 2))
	asked := make(chan struct{})
	release := make(chan struct{})
	released := make(chan string, 1)
	f.mu.Lock()
	f.workers["w1"].client = scriptedSession(t, func(req contract.Request) any {
		var in contract.LeaseRequestInput
		_ = json.Unmarshal(req.Input, &in)
		switch req.Op {
		case contract.OpLeaseRequest:
			close(asked)
			<-release
			return grantOn(in, "lse_1")
		case contract.OpLeaseRelease:
			var id contract.LeaseIDInput
			_ = json.Unmarshal(req.Input, &id)
			released <- id.LeaseID
			return contract.ReleaseResult{}
		}
		return nil
	})
	f.mu.Unlock()
	l, st := notingLeasing(t, f)
	ctx, cancel := context.WithCancel(context.Background())
	answered := make(chan error, 1)
	go func() {
		_, err := l.Acquire(ctx, queue.Caller{Principal: "agent"}, contract.LeaseRequestInput{Platform: contract.PlatformIOS}, nil)
		answered <- err
	}()
	<-asked
	cancel() // the caller goes away while the worker grants
	deadline := time.After(10 * time.Second)
	for len(st.saved()) == 0 {
		select {
		case <-deadline:
			t.Fatal("the caller's leaving recorded nothing")
		case <-time.After(time.Millisecond):
		}
	}
	close(release)
	select {
	case id := <-released:
		if id != "lse_1" {
			t.Errorf("the worker was asked to give back %s, want lse_1", id)
		}
	case <-deadline:
		t.Fatal("the lease granted for a caller that left was not given back")
	}
	select {
	case err := <-answered:
		if code(err) != contract.CodeCancelled {
			t.Errorf("the caller that left was answered %v, want CANCELLED", err)
		}
	case <-deadline:
		t.Fatal("the caller that left was never answered")
	}
	recs, err := st.Requests(context.Background(), 10)
	if err != nil || len(recs) != 1 || recs[0].State != contract.RequestCancelled {
		t.Errorf("the requests stored are %+v (%v), want one, cancelled", recs, err)
	}
}

// notingLeasing is a leasing over f whose store notes each commit; it
// closes with the test.
func notingLeasing(t *testing.T, f *Fleet) (*Leasing, *notingStore) {
	t.Helper()
	st := &notingStore{memQueueStore: newQueueStore()}
	l := NewLeasing(f, LeasingOptions{Store: st, DefaultTTL: time.Minute, MaxTTL: time.Hour})
	t.Cleanup(l.Close)
	return l, st
}
