package gateway

import (
	"testing"
	"time"

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
	}, time.Unix(0, 0))
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
	x.add("w1", "lse_a", false, "agent-1", "tok_alice", "req_a")
	x.add("w2", "lse_b", false, "agent-2", "tok_bob", "req_b")
	// Churn on w2's view never counts against w1's lease.
	for range 3 {
		x.reconcile("w2", []contract.LeaseRecord{workerLease("lse_b", "gw:ins_gw:agent-2", "tok_bob")}, time.Unix(0, 0))
	}
	if _, ok := x.get("w1.lse_a"); !ok {
		t.Fatal("w2's snapshots made the index forget w1's lease")
	}
	x.reconcile("w1", nil, time.Unix(0, 0)) // one miss: grace
	if _, ok := x.get("w1.lse_a"); !ok {
		t.Fatal("one missing snapshot forgot the lease; a grant racing the read is missing once")
	}
	x.reconcile("w1", []contract.LeaseRecord{workerLease("lse_a", "gw:ins_gw:agent-1", "tok_alice")}, time.Unix(0, 0))
	x.reconcile("w1", nil, time.Unix(0, 0)) // a miss again, but not in a row
	if _, ok := x.get("w1.lse_a"); !ok {
		t.Fatal("two misses that were not in a row forgot the lease")
	}
	x.reconcile("w1", nil, time.Unix(0, 0))
	if _, ok := x.get("w1.lse_a"); ok {
		t.Fatal("two misses in a row kept the lease: the requester could never lease again")
	}
	if _, ok := x.ofRequester("agent-1"); ok {
		t.Error("the forgotten lease still holds its requester's one lease")
	}
}

func TestRemovingALeaseFreesItsRequesterButNotAnewerLease(t *testing.T) {
	x := newLeaseIndex("ins_gw")
	x.add("w1", "lse_a", false, "agent-1", "o", "")
	x.add("w2", "lse_b", false, "agent-1", "o", "") // the requester's next lease, elsewhere
	x.remove("w1.lse_a")
	if e, ok := x.ofRequester("agent-1"); !ok || e.id != "w2.lse_b" {
		t.Errorf("after removing the old lease, agent-1's is %+v %v, want w2.lse_b", e, ok)
	}
}

// A lease a worker grants for a request the gateway withdrew (it gave up
// waiting) is nobody's: reconcile gives it back instead of indexing it, so
// the requester is not locked out by a lease it never got; a later lease of
// the requester, or one on another worker, is indexed as usual.
func TestALeaseGrantedForAWithdrawnRequestIsGivenBackNotIndexed(t *testing.T) {
	x := newLeaseIndex("ins_gw")
	now := time.Unix(1000, 0)
	x.withdraw("w1", "agent-1", now)
	back := x.reconcile("w2", []contract.LeaseRecord{workerLease("lse_other", "gw:ins_gw:agent-1", "tok_alice")}, now)
	if len(back) != 0 {
		t.Errorf("a lease of the requester on another worker was given back: %v", back)
	}
	x.remove("w2.lse_other")
	back = x.reconcile("w1", []contract.LeaseRecord{workerLease("lse_late", "gw:ins_gw:agent-1", "tok_alice")}, now)
	if len(back) != 1 || back[0] != "lse_late" {
		t.Fatalf("reconcile gave back %v, want the late grant lse_late", back)
	}
	if _, ok := x.ofRequester("agent-1"); ok {
		t.Error("the late grant of a withdrawn request was indexed: its requester is locked out")
	}
	// Given back once: the requester's next lease there is its own.
	if back = x.reconcile("w1", []contract.LeaseRecord{workerLease("lse_next", "gw:ins_gw:agent-1", "tok_alice")}, now); len(back) != 0 {
		t.Errorf("the requester's next lease was given back too: %v", back)
	}
	if e, ok := x.ofRequester("agent-1"); !ok || e.workerLeaseID != "lse_next" {
		t.Errorf("the requester's next lease is not indexed: %+v", e)
	}
	// A withdrawal is forgotten after withdrawnFor.
	x.withdraw("w1", "agent-2", now)
	if back = x.reconcile("w1", []contract.LeaseRecord{workerLease("lse_next", "gw:ins_gw:agent-1", "tok_alice"),
		workerLease("lse_much_later", "gw:ins_gw:agent-2", "tok_bob")}, now.Add(withdrawnFor+time.Minute)); len(back) != 0 {
		t.Errorf("a withdrawal older than %s still gave back %v", withdrawnFor, back)
	}
}
