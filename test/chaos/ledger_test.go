package chaos

import (
	"fmt"
	"strings"
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
	told              bool  // its holder was told it was lost (lease-lost)
}

// The named checks a violation is reported under; a run's summary counts
// violations by them.
const (
	checkAnswer       = "honest-answers"       // every answer is one the contract allows here
	checkReachable    = "daemon-reachable"     // an agent reaches the daemon within unreachableBound
	checkLeaseLost    = "no-lease-lost"        // no acknowledged lease lost without its holder being told
	checkDeviceTwice  = "one-lease-per-device" // no device in two leases (a daemon's or a worker's own state)
	checkGatewayTwice = "one-gateway-lease-per-device"
	checkDeadline     = "waiter-deadline" // an answer comes by the request's timeoutMs plus a small bound
	checkUnion        = "gateway-view-is-workers-union"
	checkRequestRate  = "worker-request-rate"
	checkWorkerIDs    = "no-worker-ids-to-agents"
	checkWorkersBack  = "workers-back-after-gateway-restart"
	checkProgress     = "progress"
	checkRecords      = "daemon-records" // the daemon's own records and event log agree with what it answered
)

// named is a violation under its check's name.
func named(check, format string, args ...any) string {
	return "[" + check + "] " + fmt.Sprintf(format, args...)
}

// checkOf is the name of the check a violation was reported under.
func checkOf(v string) string {
	if i := strings.Index(v, "["); i >= 0 {
		if j := strings.Index(v[i:], "]"); j > 0 {
			return v[i+1 : i+j]
		}
	}
	return "unnamed"
}

func newLedger() *ledger { return &ledger{leases: map[string]*held{}, tick: make(chan struct{}, 1)} }

func (l *ledger) violate(check, format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.violations = append(l.violations, named(check, format, args...))
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
			l.violations = append(l.violations, named(checkAnswer, "lease %s was granted to %s and to %s", id, h.agent, agent))
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

// told records that the holder of a lease heard it was lost (a lease-lost
// notice): the lease may be gone without a violation.
func (l *ledger) told(id string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if h := l.leases[id]; h != nil {
		h.told = true
	}
}

// vanished is told that the daemon no longer knows a lease its agent holds
// and never asked to release: a violation unless its deadline passed or its
// holder was told it was lost.
func (l *ledger) vanished(id, how string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	h := l.leases[id]
	if h == nil || h.releasing || h.told || h.deadline < time.Now().UnixMilli() {
		return
	}
	l.violations = append(l.violations, named(checkLeaseLost, "acknowledged lease %s of %s is gone (%s) before its deadline, and its holder was not told", id, h.agent, how))
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
