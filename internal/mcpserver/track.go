package mcpserver

import (
	"context"
	"sync"
	"time"

	"github.com/simlock/simlock/internal/contract"
)

// tracked is a lease request this session follows until it settles. One
// follower per request reads the daemon's changes; tool calls waiting on
// the request watch the snapshot it keeps.
type tracked struct {
	id string
	// keyed: made with a client key, the request is its principal's, not
	// the session's: when the session ends and its leases outlive it, the
	// request keeps its place for a repeated call to join.
	keyed bool

	mu      sync.Mutex
	st      contract.LeaseRequestStatus
	err     *contract.Error // why following stopped, when not by settling
	changed chan struct{}   // closed and replaced on each change
	// unwanted marks a request whose caller gave up after its device work
	// began: its grant is released, not kept.
	unwanted bool
}

func (t *tracked) snapshot() (contract.LeaseRequestStatus, *contract.Error, <-chan struct{}) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.st, t.err, t.changed
}

func (t *tracked) settled() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.st.Request.State.Terminal() || t.err != nil
}

// keptAtEnd reports whether the request outlives the end of a session
// whose leases outlive it.
func (t *tracked) keptAtEnd(leasesOutlive bool) bool { return leasesOutlive && t.keyed }

func (t *tracked) update(st contract.LeaseRequestStatus, err *contract.Error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.st, t.err = st, err
	close(t.changed)
	t.changed = make(chan struct{})
}

// follow starts following a request (once) from the status st. A request
// already granted (served at once from a ready device) is adopted before
// anyone can see it, as a grant that arrives later is in run: every grant
// this session hands an agent is kept alive, watched and released at exit.
func (s *server) follow(st contract.LeaseRequestStatus) *tracked {
	s.mu.Lock()
	t, ok := s.requests[st.Request.ID]
	s.mu.Unlock()
	if ok {
		return t
	}
	s.arrived(st, false)
	s.mu.Lock()
	defer s.mu.Unlock()
	if t, ok := s.requests[st.Request.ID]; ok {
		return t
	}
	t = &tracked{id: st.Request.ID, keyed: st.Request.IdempotencyKey != "", st: st, changed: make(chan struct{})}
	s.requests[t.id] = t
	if !st.Request.State.Terminal() {
		go s.run(t)
	}
	return t
}

// arrived takes what a status of a followed request brings: a grant is
// adopted (renewed, watched, released at exit), or given back when the
// caller no longer wants it. Adopting twice is a no-op.
func (s *server) arrived(st contract.LeaseRequestStatus, unwanted bool) {
	if st.Request.State != contract.RequestGranted || st.Request.Grant == nil {
		return
	}
	if !unwanted {
		s.adopt(s.life, *st.Request.Grant)
		return
	}
	c, err := s.daemon(s.life, false)
	if err == nil {
		_, err = c.Release(s.life, st.Request.LeaseID)
	}
	if err != nil {
		s.log.Warn("could not release an unwanted grant", "leaseId", st.Request.LeaseID, "err", err)
	}
}

// run reads the request's changes from the daemon until it settles. A
// grant is adopted before waiters see it, so a lease handed to the agent is
// always kept alive.
func (s *server) run(t *tracked) {
	st, _, _ := t.snapshot()
	for !st.Request.State.Terminal() {
		c, err := s.daemon(s.life, false)
		if err == nil {
			var next contract.LeaseRequestStatus
			in := contract.LeaseRequestGetInput{RequestID: t.id, AfterRev: st.Rev, WaitMs: 30_000}
			err = c.Call(s.life, contract.OpLeaseRequestGet, in, &next)
			if err == nil {
				st = next
				t.mu.Lock()
				unwanted := t.unwanted
				t.mu.Unlock()
				s.arrived(st, unwanted)
				t.update(st, nil)
				continue
			}
		}
		if s.life.Err() != nil {
			return
		}
		cerr := contract.AsError(err)
		if cerr.Code == contract.CodeUnknownLeaseRequest {
			t.update(st, cerr)
			return
		}
		// The daemon went away or restarted: try again shortly.
		select {
		case <-s.life.Done():
			return
		case <-time.After(time.Second):
		}
	}
}

// withdraw cancels a waiting request, for a client that cancelled its call.
func (s *server) withdraw(id string) {
	ctx, cancel := context.WithTimeout(s.life, 5*time.Second)
	defer cancel()
	c, err := s.daemon(ctx, false)
	if err != nil {
		return
	}
	res, err := c.Cancel(ctx, contract.LeaseCancelInput{RequestID: id})
	if err != nil {
		s.log.Warn("could not withdraw a request", "requestId", id, "err", err)
		return
	}
	if res.Outcome == contract.CancelNotCancellable {
		// Its device is already being readied: give the grant back when
		// it comes.
		s.mu.Lock()
		t := s.requests[id]
		s.mu.Unlock()
		if t != nil {
			t.mu.Lock()
			t.unwanted = true
			t.mu.Unlock()
		}
		if res.LeaseID != "" {
			if _, err := s.release(ctx, res.LeaseID); err != nil {
				s.log.Warn("could not release an unwanted grant", "leaseId", res.LeaseID, "err", err)
			}
		}
	}
}
