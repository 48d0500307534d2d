package queue

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/store"
	"github.com/simlock/simlock/internal/store/memstore"
)

// memStore is the shared in-memory store (memstore) behind the queue's
// Store: it keeps every record as last written and every event in order,
// and counts commits; failNext makes the next Commit fail (with failWith,
// or errDiskFull).
type memStore struct {
	*memstore.Store
	mu       sync.Mutex
	commits  int
	failNext bool
	failWith error
	// beforeCommit, when set, runs as each Commit begins.
	beforeCommit func()
}

func newMemStore() *memStore { return &memStore{Store: memstore.New()} }

var errDiskFull = errors.New("disk full")

func (m *memStore) Commit(ctx context.Context, w Writes) ([]contract.Event, error) {
	if m.beforeCommit != nil {
		m.beforeCommit()
	}
	m.mu.Lock()
	if m.failNext {
		m.failNext = false
		err := m.failWith
		if err == nil {
			err = errDiskFull
		}
		m.mu.Unlock()
		return nil, err
	}
	if len(w.Requests)+len(w.Events) == 0 {
		m.mu.Unlock()
		return nil, nil
	}
	m.commits++
	m.mu.Unlock()
	c := store.Change{Requests: w.Requests, Events: make([]store.NewEvent, len(w.Events))}
	for i, e := range w.Events {
		c.Events[i] = store.NewEvent{ID: e.ID, Timestamp: e.Timestamp, Event: e.Event, Payload: e.Payload}
	}
	return m.Store.Commit(ctx, c)
}

// all is every stored request record.
func (m *memStore) all() []contract.LeaseRequestRecord {
	rs, err := m.Requests(context.Background(), 1<<30)
	if err != nil {
		panic(err)
	}
	return rs
}

func (m *memStore) record(id string) contract.LeaseRequestRecord {
	r, _, err := m.Request(context.Background(), id)
	if err != nil {
		panic(err)
	}
	return r
}

// stateOf is the stored state of requester's request ("" for none).
func (m *memStore) stateOf(requester string) contract.RequestState {
	for _, r := range m.all() {
		if r.RequesterID == requester {
			return r.State
		}
	}
	return ""
}

// storedEvents is every stored event, oldest first.
func (m *memStore) storedEvents() []contract.Event {
	evs, err := m.Events(context.Background(), store.EventQuery{Limit: 1 << 30})
	if err != nil {
		panic(err)
	}
	return evs
}

func (m *memStore) names() []string {
	var out []string
	for _, e := range m.storedEvents() {
		out = append(out, e.Event)
	}
	return out
}

// need is a test waiter's need: just its platform.
type need contract.Platform

func (n need) Platform() contract.Platform { return contract.Platform(n) }

// slots is a fake Placer: a number of free slots per platform. A waiter
// that finds a slot is granted at once (instant) or started (a Start that
// waits for the test to finish it); one that finds none waits with the
// platform's scope.
type slots struct {
	q       *Queue
	free    map[contract.Platform]int
	scope   map[contract.Platform]Scope
	stage   *contract.LeaseProgress // told to a blocked head instead of its place
	instant bool
	quiet   bool                       // Starts are Quiet
	early   bool                       // Starts are Early
	carry   bool                       // Starts carry (Start.Carry)
	refuse  map[string]*contract.Error // Admit refuses these request ids
	leases  map[string]string          // requester -> lease id
	owners  map[string]string          // requester -> its lease's owner
	started chan *Waiter               // Starts begun
	placed  []string                   // request ids in the order they were placed
	asked   int                        // Place calls
}

func newSlots() *slots {
	return &slots{
		free: map[contract.Platform]int{}, scope: map[contract.Platform]Scope{}, refuse: map[string]*contract.Error{},
		leases: map[string]string{}, owners: map[string]string{}, started: make(chan *Waiter, 64),
	}
}

func (s *slots) Admit(w *Waiter) (*contract.Error, contract.RejectReason) {
	if cerr := s.refuse[w.Spec().Model]; cerr != nil {
		return cerr, "unresolvable-spec"
	}
	return nil, ""
}

func (s *slots) Place(tx *Txn, w *Waiter) (Start, Block) {
	s.asked++
	p := w.Platform()
	if s.free[p] == 0 {
		sc := s.scope[p]
		if sc == ScopeNone {
			sc = ScopePlatform
		}
		return Start{}, Block{Scope: sc, Stage: s.stage}
	}
	s.free[p]--
	s.placed = append(s.placed, w.ID())
	if s.instant {
		s.grantLocked(tx, w)
		return Start{}, NoBlock
	}
	return Start{
		Progress: contract.LeaseProgress{Stage: contract.StageBooting, EtaMs: 100},
		Quiet:    s.quiet,
		Early:    s.early,
		Carry:    s.carry,
		DeviceID: "dev_" + w.ID(),
		Run:      func() { s.started <- w },
	}, NoBlock
}

func (s *slots) grantLocked(tx *Txn, w *Waiter) {
	id := "lse_" + w.ID()
	s.leases[w.Requester()], s.owners[w.Requester()] = id, w.Owner()
	tx.Grant(w, contract.LeaseGrant{RequestID: w.ID(), Lease: contract.LeaseRecord{ID: id, RequesterID: w.Requester()}})
	tx.Event("lease.granted", map[string]any{"requestId": w.ID(), "leaseId": id})
}

// finish ends a Start: granted, or, when the requester went away, the slot
// back and the request settled.
func (s *slots) finish(w *Waiter) {
	_ = s.q.Do(func(tx *Txn) error {
		if tx.Abandoned(w) {
			s.free[w.Platform()]++
			tx.Settle(w, contract.Errorf(contract.CodeCancelled, "the requester went away"), "cancelled")
			return nil
		}
		s.grantLocked(tx, w)
		return nil
	})
}

// release frees a slot of p, as a lease ending would.
func (s *slots) release(p contract.Platform, requester string) {
	_ = s.q.Do(func(tx *Txn) error {
		delete(s.leases, requester)
		s.free[p]++
		tx.Kick()
		return nil
	})
}

// rig is a queue over a memStore and slots.
type rig struct {
	t      *testing.T
	st     *memStore
	pl     *slots
	q      *Queue
	fatal  chan error
	events []contract.Event
	mu     sync.Mutex
}

func newRig(t *testing.T, with ...func(*Options)) *rig {
	r := &rig{t: t, st: newMemStore(), pl: newSlots(), fatal: make(chan error, 1)}
	opts := Options{
		Store: r.st, Placer: r.pl,
		LeaseOf: func(req string) (string, string, bool) { id, ok := r.pl.leases[req]; return id, r.pl.owners[req], ok },
		Publish: func(evs ...contract.Event) {
			r.mu.Lock()
			defer r.mu.Unlock()
			r.events = append(r.events, evs...)
		},
		Fatal: func(err error) { r.fatal <- err },
	}
	for _, f := range with {
		f(&opts)
	}
	r.q = New(opts)
	r.pl.q = r.q
	return r
}

// call is one requester's Submit and its wait.
type call struct {
	t        *Ticket
	err      error
	mu       sync.Mutex
	progress []contract.LeaseProgress
}

func (c *call) steps() []contract.LeaseProgress {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]contract.LeaseProgress(nil), c.progress...)
}

func (c *call) last() contract.LeaseProgress {
	s := c.steps()
	if len(s) == 0 {
		return contract.LeaseProgress{}
	}
	return s[len(s)-1]
}

func (r *rig) submit(requester string, in contract.LeaseRequestInput) *call {
	r.t.Helper()
	in.RequesterID = requester
	return r.submitAs(Caller{Principal: requester}, in)
}

// submitAs submits in as caller who, its requesterId as given.
func (r *rig) submitAs(who Caller, in contract.LeaseRequestInput) *call {
	r.t.Helper()
	c := &call{}
	if in.Platform == "" {
		in.Platform = contract.PlatformIOS
	}
	c.t, c.err = r.q.Submit(context.Background(), Ask{Caller: who, Input: in, TTLMs: 60_000,
		Progress: func(p contract.LeaseProgress) {
			c.mu.Lock()
			defer c.mu.Unlock()
			c.progress = append(c.progress, p)
		}},
		func(context.Context) Resolution { return Resolution{Need: need(in.Platform)} })
	return c
}

func (r *rig) mustSubmit(requester string, in contract.LeaseRequestInput) *call {
	r.t.Helper()
	c := r.submit(requester, in)
	if c.err != nil {
		r.t.Fatalf("submit %s: %v", requester, c.err)
	}
	return c
}

// answered reports whether c's request has been answered.
func answered(c *call) bool {
	select {
	case <-c.t.Done():
		return true
	default:
		return false
	}
}

func expectCode(t *testing.T, what string, err error, code contract.Code) *contract.Error {
	t.Helper()
	if err == nil {
		t.Fatalf("%s: no error, want %s", what, code)
	}
	ce := contract.AsError(err)
	if ce.Code != code {
		t.Fatalf("%s: %s (%s), want %s", what, ce.Code, ce.Message, code)
	}
	return ce
}
