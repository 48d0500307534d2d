package gateway

import (
	"testing"

	"github.com/simlock/simlock/internal/contract"
)

func workerLease(id, requester, owner string) contract.LeaseRecord {
	return contract.LeaseRecord{ID: id, RequesterID: requester, OwnerID: owner, DeviceID: "dev_1"}
}

func TestAGatewayLeaseIDNamesItsWorkerAndSplitsBack(t *testing.T) {
	for _, w := range []string{"ins_0123", "mac.lan", "a:b-c_d"} {
		id := gatewayLeaseID(w, "lse_9")
		if gotW, gotL, ok := splitLeaseID(id); !ok || gotW != w || gotL != "lse_9" {
			t.Errorf("split(%q) = %q %q %v, want %q lse_9", id, gotW, gotL, ok, w)
		}
	}
	for _, bad := range []string{"", "lse_9", ".lse_9", "ins_1."} {
		if _, _, ok := splitLeaseID(bad); ok {
			t.Errorf("split(%q) took it", bad)
		}
	}
}

func TestTheLeaseIndexRebuildsTheGatewaysOwnLeasesFromAWorkersList(t *testing.T) {
	x := newLeaseIndex("ins_gw")
	x.reconcile("w1", []contract.LeaseRecord{
		workerLease("lse_a", "gw:ins_gw:agent-1", "tok_alice"),
		workerLease("lse_b", "local-agent", "local-agent"),      // the worker's own
		workerLease("lse_c", "gw:ins_other:agent-2", "tok_bob"), // another gateway's
	})
	e, ok := x.get("w1.lse_a")
	if !ok || e.requester != "agent-1" || e.owner != "tok_alice" || e.workerLeaseID != "lse_a" {
		t.Fatalf("index entry = %+v %v, want agent-1's lease owned by tok_alice", e, ok)
	}
	if _, ok := x.get("w1.lse_b"); ok {
		t.Error("the worker's own lease was taken into the gateway's index")
	}
	if _, ok := x.get("w1.lse_c"); ok {
		t.Error("another gateway's lease was taken into this one's index")
	}
	if e, ok := x.ofRequester("agent-1"); !ok || e.id != "w1.lse_a" {
		t.Errorf("agent-1's lease = %+v %v", e, ok)
	}
}

func TestAnEntryIsForgottenOnlyAtItsSecondMissFromItsOwnWorker(t *testing.T) {
	x := newLeaseIndex("ins_gw")
	x.add("w1", "lse_a", "agent-1", "tok_alice")
	x.add("w2", "lse_b", "agent-2", "tok_bob")
	// Churn on w2's view never counts against w1's lease.
	for range 3 {
		x.reconcile("w2", []contract.LeaseRecord{workerLease("lse_b", "gw:ins_gw:agent-2", "tok_bob")})
	}
	if _, ok := x.get("w1.lse_a"); !ok {
		t.Fatal("w2's snapshots made the index forget w1's lease")
	}
	x.reconcile("w1", nil) // one miss: grace
	if _, ok := x.get("w1.lse_a"); !ok {
		t.Fatal("one missing snapshot forgot the lease; a grant racing the read is missing once")
	}
	x.reconcile("w1", []contract.LeaseRecord{workerLease("lse_a", "gw:ins_gw:agent-1", "tok_alice")})
	x.reconcile("w1", nil) // a miss again, but not in a row
	if _, ok := x.get("w1.lse_a"); !ok {
		t.Fatal("two misses that were not in a row forgot the lease")
	}
	x.reconcile("w1", nil)
	if _, ok := x.get("w1.lse_a"); ok {
		t.Fatal("two misses in a row kept the lease: the requester could never lease again")
	}
	if _, ok := x.ofRequester("agent-1"); ok {
		t.Error("the forgotten lease still holds its requester's one lease")
	}
}

func TestRemovingALeaseFreesItsRequesterButNotAnewerLease(t *testing.T) {
	x := newLeaseIndex("ins_gw")
	x.add("w1", "lse_a", "agent-1", "o")
	x.add("w2", "lse_b", "agent-1", "o") // the requester's next lease, elsewhere
	x.remove("w1.lse_a")
	if e, ok := x.ofRequester("agent-1"); !ok || e.id != "w2.lse_b" {
		t.Errorf("after removing the old lease, agent-1's is %+v %v, want w2.lse_b", e, ok)
	}
}
