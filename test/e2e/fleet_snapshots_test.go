package e2e

import (
	"testing"
	"time"

	"github.com/simlock/simlock/internal/contract"
)

// readsAfter has the gateway read the worker's status n more times (each
// asked for by a capacity.changed event) and waits until it has.
func (s *scripted) readsAfter(n int) {
	s.t.Helper()
	for range n {
		s.mu.Lock()
		before := s.reads
		s.mu.Unlock()
		s.openSlots(0)
		deadline := time.Now().Add(waitBound)
		for {
			s.mu.Lock()
			done := s.reads > before
			s.mu.Unlock()
			if done {
				break
			}
			if time.Now().After(deadline) {
				s.t.Fatalf("within %s the gateway did not read the worker's status after its capacity.changed", waitBound)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// The gateway orders a worker's snapshots by the event seq they carry:
// snapshots read before the worker's grant (below the grant's seq), read
// by the gateway after it, leave the lease out, and the lease stays the
// holder's; the first snapshot at the grant's seq or past it that leaves
// it out ends it.
func TestSnapshotsReadBeforeAWorkersGrantNeverEndItsLease(t *testing.T) {
	t.Parallel()
	f := newFleet(t)
	w := f.fakeJoined("fake-seq", "ios", 2, 2)
	_, agent := f.gw.token("agent", "seq-agent")
	w.mu.Lock()
	w.eventSeq, w.grantSeq, w.staleLeases = 10, 20, []contract.LeaseRecord{}
	w.mu.Unlock()
	r := f.api.do("POST", "/v1/lease-requests", agent, `{"platform":"ios"}`)
	if r.status != 201 {
		t.Fatalf("create: %d %s", r.status, r.raw)
	}
	w.grant(w.serveUntil("lease.request"), "")
	lease := f.api.awaitState(agent, requestOf(t, r)["id"].(string), "granted")["lease"].(map[string]any)
	id := lease["id"].(string)

	w.readsAfter(3) // each at seq 10, without the lease
	if got := f.api.do("GET", "/v1/leases/"+id, agent, ""); got.status != 200 {
		t.Fatalf("after three snapshots read before the grant (seq 10, grant at 20), reading the lease answered %d %s, want 200: the holder lost a lease it has", got.status, got.raw)
	}

	w.mu.Lock()
	w.eventSeq = 20 // read at the grant's seq, still without the lease: it ended
	w.mu.Unlock()
	w.readsAfter(1)
	if got := f.api.do("GET", "/v1/leases/"+id, agent, ""); got.status != 404 {
		t.Errorf("after a snapshot read at the grant's seq that leaves the lease out, reading it answered %d %s, want 404 UNKNOWN_LEASE", got.status, got.raw)
	}
}
