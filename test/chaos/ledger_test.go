package chaos

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// ledger is what the daemon acknowledged to the agents: every lease granted,
// its latest deadline, and whether a release of it was sent and confirmed.
// The invariants are checked against it.
type ledger struct {
	ops  atomic.Int64  // acknowledged operations
	tick chan struct{} // wakes waitOps

	mu         sync.Mutex
	leases     map[string]*held
	violations []string
}

type held struct {
	id, device, agent string
	deadline          int64 // ms since the epoch, as last acknowledged
	releasing         bool  // a release was sent
	released          bool  // a release was acknowledged
}

func newLedger() *ledger { return &ledger{leases: map[string]*held{}, tick: make(chan struct{}, 1)} }

func (l *ledger) violate(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.violations = append(l.violations, fmt.Sprintf(format, args...))
}

func (l *ledger) acked() {
	l.ops.Add(1)
	select {
	case l.tick <- struct{}{}:
	default:
	}
}

// waitOps waits until n operations have been acknowledged in all; false if
// bound passed first.
func (l *ledger) waitOps(n int64, bound time.Duration) bool {
	timeout := time.After(bound)
	for l.ops.Load() < n {
		select {
		case <-l.tick:
		case <-timeout:
			return l.ops.Load() >= n
		}
	}
	return true
}

func (l *ledger) granted(agent, id, device string, deadline int64) {
	l.acked()
	l.mu.Lock()
	defer l.mu.Unlock()
	if h, ok := l.leases[id]; ok {
		if h.agent != agent {
			l.violations = append(l.violations, fmt.Sprintf("lease %s was granted to %s and to %s", id, h.agent, agent))
		}
		return // a repeat by idempotency key answered the same grant
	}
	l.leases[id] = &held{id: id, device: device, agent: agent, deadline: deadline}
}

func (l *ledger) renewed(id string, deadline int64) {
	l.acked()
	l.mu.Lock()
	defer l.mu.Unlock()
	if h := l.leases[id]; h != nil && deadline > h.deadline {
		h.deadline = deadline
	}
}

func (l *ledger) releasing(id string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if h := l.leases[id]; h != nil {
		h.releasing = true
	}
}

func (l *ledger) released(id string) {
	l.acked()
	l.mu.Lock()
	defer l.mu.Unlock()
	if h := l.leases[id]; h != nil {
		h.releasing, h.released = true, true
	}
}

// vanished is told that the daemon no longer knows a lease its agent holds
// and never asked to release: a violation unless its deadline passed.
func (l *ledger) vanished(id, how string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	h := l.leases[id]
	if h == nil || h.releasing || h.deadline < time.Now().UnixMilli() {
		return
	}
	l.violations = append(l.violations, fmt.Sprintf("acknowledged lease %s of %s is gone (%s) before its deadline", id, h.agent, how))
}

// snapshot copies the ledger's leases.
func (l *ledger) snapshot() map[string]held {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make(map[string]held, len(l.leases))
	for id, h := range l.leases {
		out[id] = *h
	}
	return out
}

func (l *ledger) current(id string) held {
	l.mu.Lock()
	defer l.mu.Unlock()
	if h := l.leases[id]; h != nil {
		return *h
	}
	return held{}
}

func (l *ledger) found() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.violations...)
}
