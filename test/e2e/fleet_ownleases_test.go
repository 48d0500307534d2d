package e2e

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// A lease made on a worker directly is in the gateway's list, and the
// gateway says of it what it lists: a release through the gateway is
// refused naming whose lease it is and where to release it, and release
// --all reports it skipped, with why, and leaves it on its worker.
func TestAGatewayRefusesToReleaseAWorkersOwnLeaseSayingWhoseItIsAndReleaseAllReportsIt(t *testing.T) {
	t.Parallel()
	f := newFleet(t)
	b := f.worker("worker-b", 2)
	idB := instanceID(t, b)
	f.await("worker B connected", 5*time.Second, connected(idB))
	own := b.leaseDetached("local", "ios")
	deadline := time.Now().Add(5 * time.Second)
	for f.gw.leases()[own.Lease.ID].WorkerID != idB {
		if time.Now().After(deadline) {
			t.Fatalf("the gateway never listed B's own lease %s: %+v", own.Lease.ID, f.gw.leases())
		}
		time.Sleep(50 * time.Millisecond)
	}

	r := f.gw.run("release", own.Lease.ID)
	e := expectFailure(t, r, 1, "FORBIDDEN")
	if msg := message(e); e["reason"] != "worker-own-lease" || e["workerId"] != idB ||
		!strings.Contains(msg, "worker-b") || !strings.Contains(msg, "simlock release "+own.Lease.ID+" there") {
		t.Errorf("release of B's own lease through the gateway: %v, want the refusal naming worker-b and where to release it", e)
	}

	r = f.gw.run("release", "--all", "--yes")
	var all struct {
		Released []string `json:"released"`
		Skipped  []struct {
			LeaseID  string `json:"leaseId"`
			WorkerID string `json:"workerId"`
			Reason   string `json:"reason"`
			Message  string `json:"message"`
		} `json:"skipped"`
	}
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &all) != nil {
		t.Fatalf("release --all on the gateway\n%s", r)
	}
	if len(all.Skipped) != 1 || all.Skipped[0].LeaseID != own.Lease.ID || all.Skipped[0].WorkerID != idB ||
		all.Skipped[0].Reason != "worker-own-lease" || !strings.Contains(all.Skipped[0].Message, "worker-b") {
		t.Errorf("release --all skipped %+v, want B's own lease %s with why", all.Skipped, own.Lease.ID)
	}
	if ls := b.leases(); ls[own.Lease.ID].ID != own.Lease.ID {
		t.Errorf("B's own lease is gone after the gateway's release --all: %+v", ls)
	}
	if r := b.run("release", own.Lease.ID); r.code != 0 {
		t.Errorf("release on worker B itself\n%s", r)
	}
}
