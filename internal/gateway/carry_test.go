package gateway

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

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
	f := New(Options{Store: newMemStore(), InstanceID: "ins_gw"})
	f.put(*view("w1", 0, 2))
	w := &grantingWorker{requests: make(chan contract.LeaseRequestInput, 4)}
	f.mu.Lock()
	f.workers["w1"].client = scriptedSession(t, w.answer)
	f.mu.Unlock()
	st := &notingStore{memQueueStore: newQueueStore()}
	l := NewLeasing(f, LeasingOptions{Store: st, DefaultTTL: time.Minute, MaxTTL: time.Hour})
	defer l.Close()
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
	st := &notingStore{memQueueStore: newQueueStore()}
	l := NewLeasing(f, LeasingOptions{Store: st, DefaultTTL: time.Minute, MaxTTL: time.Hour})
	defer l.Close()
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
