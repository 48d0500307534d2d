package gateway

import (
	"testing"
	"time"

	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/queue"
)

// snap is a snapshot of w1's leases read over link 1 at event seq seq (and
// a view generation that moves with it).
func snap(seq int64, leases ...contract.LeaseRecord) statusRead {
	return statusRead{leases: leases, gen: uint64(seq), seq: seq, link: 1}
}

// A snapshot read before the worker granted a lease, however late it is
// reconciled and however many of them, never ends the lease: its seq is
// below the grant's. The first read after the grant that leaves it out
// ends it.
func TestASnapshotReadBeforeAGrantNeverEndsIt(t *testing.T) {
	x := newLeaseIndex("ins_gw")
	now := time.Unix(0, 0)
	e := mustAdd(t, x, grantOf("w1", "lse_new", "agent-1", "tok_alice", ""))
	// Granted over link 1 at seq 20; the view stood at generation 3.
	e.grantSeq, e.grantLink, e.grantGen = 20, 1, 3
	for _, seq := range []int64{15, 16, 17, 19} {
		x.reconcile("w1", snap(seq), now)
		if _, ok := x.ofKey(e.key); !ok {
			t.Fatalf("a snapshot read at seq %d, before the grant at seq 20, ended the new lease: its holder's renew would get UNKNOWN_LEASE", seq)
		}
	}
	x.reconcile("w1", snap(21), now)
	if _, ok := x.ofKey(e.key); ok {
		t.Errorf("a snapshot read after the grant (seq 21) that leaves the lease out did not end it")
	}
}

// A snapshot older than one reconciled already is not applied: read after
// a newer one confirmed a lease, it does not count against it, nor against
// one granted between the two.
func TestAnOlderSnapshotAfterANewerOneChangesNothing(t *testing.T) {
	x := newLeaseIndex("ins_gw")
	now := time.Unix(0, 0)
	old := mustAdd(t, x, grantOf("w1", "lse_old", "agent-1", "tok_alice", ""))
	old.grantSeq, old.grantLink = 5, 1
	x.reconcile("w1", snap(30, workerLease("lse_old", "gw:ins_gw:agent-1", "tok_alice")), now)
	for range 3 {
		x.reconcile("w1", snap(12), now) // read before seq 30, told after it
	}
	if _, ok := x.ofKey(old.key); !ok {
		t.Errorf("snapshots read before the one reconciled last (seq 12 after seq 30) ended a lease the newer one listed")
	}
	if x.newer("w1", snap(29)) {
		t.Errorf("a snapshot older than the last applied (seq 29 after 30) was taken as newer")
	}
}

// A snapshot read before a release, reconciled after it, lists the lease:
// that neither brings it back nor is a finding. Once a snapshot read
// after its grant leaves it out, a worker that lists it again is lying,
// and that is a finding again.
func TestASnapshotReadBeforeAReleaseNeverBringsItBack(t *testing.T) {
	x := newLeaseIndex("ins_gw")
	now := time.Unix(0, 0)
	e := mustAdd(t, x, grantOf("w1", "lse_gone", "agent-1", "tok_alice", ""))
	e.grantSeq, e.grantLink = 20, 1
	listed := workerLease("lse_gone", "gw:ins_gw:agent-1", "tok_alice")
	x.reconcile("w1", snap(21, listed), now)
	x.remove(e) // released: the worker answered, or its lease.released came
	_, _ = x.take()

	for _, seq := range []int64{22, 23} { // read before the release
		_, found := x.reconcile("w1", snap(seq, listed), now)
		if _, ok := x.ofRequester("agent-1"); ok {
			t.Fatalf("a snapshot read before the release (seq %d) brought the released lease back: REQUESTER_ALREADY_LEASED for its requester", seq)
		}
		if len(found) != 0 {
			t.Fatalf("a snapshot read before the release (seq %d) listing the lease was taken for a lie: %v", seq, found[0].what())
		}
	}
	if puts, _ := x.take(); len(puts) != 0 {
		t.Errorf("stale snapshots staged grant records %v", puts)
	}
	x.reconcile("w1", snap(24), now) // read after the release
	if _, found := x.reconcile("w1", snap(25, listed), now); len(found) != 1 {
		t.Errorf("a lease listed again after a snapshot showed it ended made %d findings, want 1", len(found))
	}
}

// A read of a link that ended, told after a read of the next link, is
// older than it, whatever its seq (the worker may have a new event log);
// a lease granted over the first link ends at the first read over the
// next that leaves it out.
func TestAReadOfAnEndedLinkIsOlderThanTheNextLinks(t *testing.T) {
	x := newLeaseIndex("ins_gw")
	now := time.Unix(0, 0)
	e := mustAdd(t, x, grantOf("w1", "lse_a", "agent-1", "tok_alice", ""))
	e.grantSeq, e.grantLink = 500, 1
	// Granted over the next link, at seq 2 of the worker's new log.
	kept := mustAdd(t, x, grantOf("w1", "lse_b", "agent-2", "tok_bob", ""))
	kept.grantSeq, kept.grantLink = 2, 2
	x.reconcile("w1", statusRead{leases: []contract.LeaseRecord{workerLease("lse_b", "gw:ins_gw:agent-2", "tok_bob")}, gen: 9, seq: 3, link: 2}, now)
	if _, ok := x.ofKey(e.key); ok {
		t.Errorf("a read over a later link (its log started over: seq 3) that leaves out a lease granted over the first did not end it")
	}
	x.reconcile("w1", statusRead{gen: 8, seq: 499, link: 1}, now)
	if _, ok := x.ofKey(kept.key); !ok {
		t.Errorf("a read of the ended link, told after the next link's, ended a lease the newer read listed")
	}
}

// A worker the gateway forgot leaves nothing of its ended leases behind.
func TestAForgottenWorkerLeavesNoEndedLeasesBehind(t *testing.T) {
	f := New(Options{Store: newMemStore(), InstanceID: "ins_gw"})
	l := NewLeasing(f, LeasingOptions{Store: newQueueStore(), DefaultTTL: time.Minute, MaxTTL: time.Hour})
	_ = l.q.Do(func(*queue.Txn) error {
		mustAdd(t, l.idx, grantOf("w1", "lse_a", "agent-1", "tok_alice", ""))
		return nil
	})
	l.workerRemoved("w1")
	l.q.View(func() {
		if n := len(l.idx.ended["w1"]); n != 0 {
			t.Errorf("the index still remembers %d ended leases of a worker it forgot", n)
		}
	})
}
