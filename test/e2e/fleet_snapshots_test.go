package e2e

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/simlock/simlock/internal/contract"
)

// staleRead has the gateway read the worker's status once more (asked for
// by a capacity.changed event), at event seq seq, listing only a lease the
// gateway never granted (lie, under prefix, the gateway's requester
// prefix), and waits until the gateway has reconciled it: its finding is
// the lie's, the n-th against the worker.
func (s *scripted) staleRead(f *fleet, id, prefix string, seq int64, n int64) {
	s.t.Helper()
	lie := contract.LeaseRecord{ID: fmt.Sprintf("lse_lie%d", n), DeviceID: "dev_lie", RequesterID: prefix + "nobody", OwnerID: "nobody"}
	s.mu.Lock()
	s.eventSeq, s.staleLeases = seq, []contract.LeaseRecord{lie}
	s.mu.Unlock()
	s.openSlots(0)
	deadline := time.Now().Add(waitBound)
	for {
		r := f.gw.run("worker", "show", id)
		var v contract.WorkerView
		if r.code == 0 && json.Unmarshal([]byte(r.stdout), &v) == nil && v.Findings != nil && v.Findings.UngrantedLeases >= n {
			return
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("within %s the gateway did not reconcile the worker's snapshot at seq %d (no finding %d)\n%s", waitBound, seq, n, r)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// The gateway orders a worker's snapshots by the event seq they carry:
// snapshots read before the worker's grant (below the grant's seq), which
// the gateway reconciles after it, leave the lease out, and the lease stays
// the holder's; the first snapshot at the grant's seq that leaves it out
// ends it.
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
	c := w.serveUntil("lease.request")
	in := requestIn(t, c)
	prefix := in.RequesterID[:strings.LastIndex(in.RequesterID, ":")+1]
	w.grant(c, "")
	lease := f.api.awaitState(agent, requestOf(t, r)["id"].(string), "granted")["lease"].(map[string]any)
	id := lease["id"].(string)

	for n := int64(1); n <= 3; n++ {
		w.staleRead(f, "fake-seq", prefix, 10+n, n) // read before the grant at seq 20, without the lease
	}
	if got := f.api.do("GET", "/v1/leases/"+id, agent, ""); got.status != 200 {
		t.Fatalf("after three snapshots read before the grant (seqs 11-13, grant at 20), reading the lease answered %d %s, want 200: the holder lost a lease it has", got.status, got.raw)
	}
	w.staleRead(f, "fake-seq", prefix, 20, 4) // read at the grant's seq, without the lease: it ended
	if got := f.api.do("GET", "/v1/leases/"+id, agent, ""); got.status != 404 {
		t.Errorf("after a snapshot read at the grant's seq that leaves the lease out, reading it answered %d %s, want 404 UNKNOWN_LEASE", got.status, got.raw)
	}
}
