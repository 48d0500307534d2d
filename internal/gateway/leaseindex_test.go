package gateway

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/queue"
	"github.com/simlock/simlock/internal/store"
)

func workerLease(id, requester, owner string) contract.LeaseRecord {
	return contract.LeaseRecord{ID: id, RequesterID: requester, OwnerID: owner, DeviceID: "dev_" + id}
}

// grantOf is the grant record of a lease the gateway granted on workerID
// for requester, owned by owner, on the device workerLease names.
func grantOf(workerID, leaseID, requester, owner, chosen string) store.Grant {
	return store.Grant{Key: gatewayLeaseID(workerID, leaseID), WorkerID: workerID, WorkerLeaseID: leaseID, DeviceID: "dev_" + leaseID,
		OwnerID: owner, RequesterID: requester, ChosenID: chosen, RequestID: "req_" + leaseID}
}

func mustAdd(t *testing.T, x *leaseIndex, g store.Grant) *indexed {
	t.Helper()
	e, err := x.add(g)
	if err != nil {
		t.Fatalf("add %s: %v", g.Key, err)
	}
	return e
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

// A worker's snapshot can confirm a lease the gateway granted there, never
// add one: a lease it lists under the gateway's prefix that the gateway
// did not grant (a victim's requester and owner, as a hostile worker
// reports them) is a finding, once, and owns, routes and blocks nothing.
func TestAWorkersSnapshotNeverAddsALeaseTheGatewayDidNotGrant(t *testing.T) {
	x := newLeaseIndex("ins_gw")
	mustAdd(t, x, grantOf("w1", "lse_a", "agent-1", "tok_alice", ""))
	lie := workerLease("lse_lie", "gw:ins_gw:victim", "tok_victim")
	snapshot := []contract.LeaseRecord{
		workerLease("lse_a", "gw:ins_gw:agent-1", "tok_alice"),
		lie,
		workerLease("lse_b", "local-agent", "local-agent"),      // the worker's own
		workerLease("lse_c", "gw:ins_other:agent-2", "tok_bob"), // another gateway's
	}
	_, found := x.reconcile("w1", statusRead{leases: snapshot, gen: 1}, time.Unix(0, 0))
	if len(found) != 1 || !strings.Contains(found[0].what(), "lse_lie") {
		t.Fatalf("findings = %+v, want the one ungranted lease lse_lie", found)
	}
	if _, ok := x.ofRequester("victim"); ok {
		t.Error("the lie holds the victim's one lease: the victim would be REQUESTER_ALREADY_LEASED")
	}
	for _, id := range []string{"w1.lse_lie", "w1.lse_b", "w1.lse_c"} {
		if _, ok := x.ofKey(id); ok {
			t.Errorf("%s was taken into the gateway's index", id)
		}
	}
	if _, err := x.resolve(queue.Caller{Principal: "tok_victim"}, "w1.lse_lie"); code(err) != contract.CodeUnknownLease {
		t.Errorf("the victim naming the lie: %v, want UNKNOWN_LEASE", err)
	}
	if e, ok := x.ofKey("w1.lse_a"); !ok || e.missed != 0 {
		t.Errorf("the granted lease = %+v %v, want it confirmed", e, ok)
	}
	// The same lie again is not a new finding; a new one is.
	if _, found := x.reconcile("w1", statusRead{leases: append(snapshot, workerLease("lse_lie2", "gw:ins_gw:victim", "tok_victim")), gen: 1}, time.Unix(0, 0)); len(found) != 1 ||
		!strings.Contains(found[0].what(), "lse_lie2") {
		t.Errorf("findings of the next snapshot = %+v, want only the new lie", found)
	}
}

// A lease the gateway granted that its worker reports with another owner,
// requester or device is a finding; the grant record stays what says whose
// it is.
func TestAWorkersReportThatContradictsAGrantChangesNothingOfIt(t *testing.T) {
	x := newLeaseIndex("ins_gw")
	mustAdd(t, x, grantOf("w1", "lse_a", "agent-1", "tok_alice", ""))
	claim := workerLease("lse_a", "gw:ins_gw:victim", "tok_victim")
	_, found := x.reconcile("w1", statusRead{leases: []contract.LeaseRecord{claim}, gen: 1}, time.Unix(0, 0))
	if len(found) != 1 {
		t.Errorf("findings = %+v, want the contradicting report", found)
	}
	e, ok := x.ofKey("w1.lse_a")
	if !ok || e.owner != "tok_alice" || e.requester != "agent-1" {
		t.Fatalf("after the report the lease is %+v %v, want alice's as granted", e, ok)
	}
	if _, ok := x.ofRequester("victim"); ok {
		t.Error("the report gave the victim a lease")
	}
}

func TestAnEntryIsEndedOnlyAtItsSecondMissFromItsOwnWorker(t *testing.T) {
	x := newLeaseIndex("ins_gw")
	mustAdd(t, x, grantOf("w1", "lse_a", "agent-1", "tok_alice", ""))
	mustAdd(t, x, grantOf("w2", "lse_b", "agent-2", "tok_bob", ""))
	x.take()
	// Churn on w2's view never counts against w1's lease.
	for range 3 {
		x.reconcile("w2", statusRead{leases: []contract.LeaseRecord{workerLease("lse_b", "gw:ins_gw:agent-2", "tok_bob")}, gen: 1}, time.Unix(0, 0))
	}
	if _, ok := x.ofKey("w1.lse_a"); !ok {
		t.Fatal("w2's snapshots made the index forget w1's lease")
	}
	x.reconcile("w1", statusRead{leases: nil, gen: 1}, time.Unix(0, 0)) // one miss: grace
	if _, ok := x.ofKey("w1.lse_a"); !ok {
		t.Fatal("one missing snapshot forgot the lease; a grant racing the read is missing once")
	}
	x.reconcile("w1", statusRead{leases: []contract.LeaseRecord{workerLease("lse_a", "gw:ins_gw:agent-1", "tok_alice")}, gen: 1}, time.Unix(0, 0))
	x.reconcile("w1", statusRead{leases: nil, gen: 1}, time.Unix(0, 0)) // a miss again, but not in a row
	if _, ok := x.ofKey("w1.lse_a"); !ok {
		t.Fatal("two misses that were not in a row forgot the lease")
	}
	x.reconcile("w1", statusRead{leases: nil, gen: 1}, time.Unix(0, 0))
	if _, ok := x.ofKey("w1.lse_a"); ok {
		t.Fatal("two misses in a row kept the lease: the requester could never lease again")
	}
	if _, ok := x.ofRequester("agent-1"); ok {
		t.Error("the ended lease still holds its requester's one lease")
	}
	if puts, ends := x.take(); len(puts) != 0 || !slices.Equal(ends, []string{"w1.lse_a"}) {
		t.Errorf("staged for the commit: %v and ends %v, want the end of w1.lse_a's record", puts, ends)
	}
}

// A worker's snapshots reach the index after the decision lock and the
// database's: under load, snapshots read before a grant (at view generations up to the one the grant saw) may be
// reconciled after it. They say nothing of the lease, and however many
// there are, they count no miss of it; two snapshots read after its grant
// that lack it still end it.
func TestSnapshotsReadBeforeAGrantNeverEndItsLease(t *testing.T) {
	x := newLeaseIndex("ins_gw")
	e := mustAdd(t, x, grantOf("w1", "lse_a", "agent-1", "tok_alice", ""))
	e.grantGen = 5
	x.take()
	for gen := uint64(3); gen <= 5; gen++ {
		x.reconcile("w1", statusRead{leases: nil, gen: gen}, time.Unix(0, 0))
	}
	if _, ok := x.ofKey("w1.lse_a"); !ok {
		t.Fatal("snapshots read at views 3 to 5, before the grant at view 5, ended its lease: its agent's next call is UNKNOWN_LEASE")
	}
	x.reconcile("w1", statusRead{leases: nil, gen: 6}, time.Unix(0, 0))
	x.reconcile("w1", statusRead{leases: nil, gen: 7}, time.Unix(0, 0))
	if _, ok := x.ofKey("w1.lse_a"); ok {
		t.Error("two snapshots read after the grant without the lease kept it")
	}
}

// A grant that repeats a lease id or a device the gateway holds a lease of
// on that worker is refused and changes nothing: the first lease stays
// indexed; the same device on another worker is another device.
func TestAGrantThatRepeatsALeaseOrADeviceIsRefusedAndTheFirstStays(t *testing.T) {
	x := newLeaseIndex("ins_gw")
	first := mustAdd(t, x, grantOf("w1", "lse_a", "agent-1", "tok_alice", ""))
	again := grantOf("w1", "lse_a", "agent-2", "tok_bob", "")
	again.DeviceID = "dev_other"
	if _, err := x.add(again); !errors.Is(err, errDoubleLease) {
		t.Errorf("a second grant of lease lse_a: %v, want the double lease refused", err)
	}
	sameDevice := grantOf("w1", "lse_z", "agent-2", "tok_bob", "")
	sameDevice.DeviceID = first.deviceID
	if _, err := x.add(sameDevice); !errors.Is(err, errDoubleDevice) {
		t.Errorf("a second lease of device %s: %v, want the double device refused", first.deviceID, err)
	}
	if e, ok := x.ofKey("w1.lse_a"); !ok || e != first || e.owner != "tok_alice" {
		t.Errorf("after the double grants lse_a is %+v %v, want alice's first grant", e, ok)
	}
	if _, ok := x.ofRequester("agent-2"); ok {
		t.Error("a refused grant holds its requester's lease")
	}
	elsewhere := grantOf("w2", "lse_z", "agent-2", "tok_bob", "")
	elsewhere.DeviceID = first.deviceID
	mustAdd(t, x, elsewhere)
	if puts, _ := x.take(); len(puts) != 2 {
		t.Errorf("staged %d grant records, want the two accepted", len(puts))
	}
}

// Chosen lease ids are scoped per owner: two owners each hold build-42,
// each resolves its own, a third owner naming it learns nothing
// (UNKNOWN_LEASE, not FORBIDDEN), and an admin names one by its key when
// the id is ambiguous.
func TestAChosenLeaseIDResolvesWithinItsOwnersLeases(t *testing.T) {
	x := newLeaseIndex("ins_gw")
	a := mustAdd(t, x, grantOf("w1", "lse_a", "agent-a", "tok_alice", "build-42"))
	b := mustAdd(t, x, grantOf("w2", "lse_b", "agent-b", "tok_bob", "build-42"))
	if a.id != "build-42" || b.id != "build-42" {
		t.Fatalf("ids %q %q, want both the chosen build-42", a.id, b.id)
	}
	if _, err := x.add(grantOf("w1", "lse_c", "agent-a2", "tok_alice", "build-42")); !errors.Is(err, errChosenTaken) {
		t.Errorf("alice's second build-42: %v, want the chosen id taken", err)
	}
	for who, want := range map[string]*indexed{"tok_alice": a, "tok_bob": b} {
		if e, err := x.resolve(queue.Caller{Principal: who}, "build-42"); err != nil || e != want {
			t.Errorf("%s's build-42 = %+v, %v; want its own", who, e, err)
		}
		if !x.heldBy(who, "build-42") {
			t.Errorf("heldBy(%s, build-42) is false", who)
		}
	}
	if x.heldBy("tok_carol", "build-42") {
		t.Error("heldBy(carol, build-42) is true: carol holds none")
	}
	if _, err := x.resolve(queue.Caller{Principal: "tok_carol"}, "build-42"); code(err) != contract.CodeUnknownLease {
		t.Errorf("carol naming build-42: %v, want UNKNOWN_LEASE", err)
	}
	// A chosen id's lease is not told of to another owner, even by its key.
	if _, err := x.resolve(queue.Caller{Principal: "tok_carol"}, a.key); code(err) != contract.CodeUnknownLease {
		t.Errorf("carol naming alice's lease by its key: %v, want UNKNOWN_LEASE", err)
	}
	var ce *contract.Error
	if _, err := x.resolve(queue.Caller{Principal: "ops", Admin: true}, "build-42"); !errors.As(err, &ce) || ce.Code != contract.CodeBadRequest ||
		!strings.Contains(ce.Message, a.key) || !strings.Contains(ce.Message, b.key) {
		t.Errorf("an admin naming the ambiguous build-42: %v, want BAD_REQUEST naming both keys", err)
	}
	if e, err := x.resolve(queue.Caller{Principal: "ops", Admin: true}, b.key); err != nil || e != b {
		t.Errorf("an admin naming bob's by its key: %+v %v", e, err)
	}
	x.remove(a)
	if e, err := x.resolve(queue.Caller{Principal: "ops", Admin: true}, "build-42"); err != nil || e != b {
		t.Errorf("an admin naming build-42 once only bob holds it: %+v %v", e, err)
	}
	if !x.heldBy("tok_bob", "build-42") || x.heldBy("tok_alice", "build-42") {
		t.Error("after alice's ended, build-42 is held by bob alone")
	}
}

// A lease a worker grants for a request the gateway withdrew (it gave up
// waiting) is nobody's: reconcile gives it back instead of taking it, so
// the requester is not locked out by a lease it never got.
func TestALeaseGrantedForAWithdrawnRequestIsGivenBack(t *testing.T) {
	x := newLeaseIndex("ins_gw")
	now := time.Unix(1000, 0)
	x.withdraw("w1", "agent-1", now)
	back, _ := x.reconcile("w2", statusRead{leases: []contract.LeaseRecord{workerLease("lse_other", "gw:ins_gw:agent-1", "tok_alice")}, gen: 1}, now)
	if len(back) != 0 {
		t.Errorf("a lease of the requester on another worker was given back: %v", back)
	}
	back, found := x.reconcile("w1", statusRead{leases: []contract.LeaseRecord{workerLease("lse_late", "gw:ins_gw:agent-1", "tok_alice")}, gen: 1}, now)
	if len(back) != 1 || back[0] != "lse_late" || len(found) != 0 {
		t.Fatalf("reconcile gave back %v (findings %v), want the late grant lse_late", back, found)
	}
	if _, ok := x.ofRequester("agent-1"); ok {
		t.Error("the late grant of a withdrawn request was indexed: its requester is locked out")
	}
	// Given back once: the same report again is a claim the gateway did
	// not grant.
	if back, found = x.reconcile("w1", statusRead{leases: []contract.LeaseRecord{workerLease("lse_next", "gw:ins_gw:agent-1", "tok_alice")}, gen: 1}, now); len(back) != 0 || len(found) != 1 {
		t.Errorf("the next report gave back %v with findings %v, want none given back and one finding", back, found)
	}
	// A withdrawal is forgotten after withdrawnFor.
	x.withdraw("w1", "agent-2", now)
	if back, _ = x.reconcile("w1", statusRead{leases: []contract.LeaseRecord{workerLease("lse_much_later", "gw:ins_gw:agent-2", "tok_bob")}, gen: 1}, now.Add(withdrawnFor+time.Minute)); len(back) != 0 {
		t.Errorf("a withdrawal older than %s still gave back %v", withdrawnFor, back)
	}
}

// What the gateway remembers of the requests it gave up on is bounded,
// however many requesters' requests a worker fails to answer: past
// maxWithdrawn the oldest withdrawal goes, and the withdrawals on a
// worker the gateway forgot go with it.
func TestWithdrawalsAreBoundedAndGoWithTheirWorker(t *testing.T) {
	x := newLeaseIndex("ins_gw")
	start := time.Unix(1000, 0)
	for i := range maxWithdrawn + 10 {
		x.withdraw("w1", fmt.Sprintf("agent-%d", i), start.Add(time.Duration(i)*time.Millisecond))
	}
	if len(x.withdrawn) != maxWithdrawn {
		t.Errorf("%d withdrawals remembered after %d, want at most %d", len(x.withdrawn), maxWithdrawn+10, maxWithdrawn)
	}
	if x.withdrawnFrom("w1", "agent-0") || !x.withdrawnFrom("w1", fmt.Sprintf("agent-%d", maxWithdrawn+9)) {
		t.Error("the bound kept the oldest withdrawal or dropped the newest")
	}
	x.withdraw("w2", "agent-x", start)
	x.forget("w1")
	if len(x.withdrawn) != 1 || !x.withdrawnFrom("w2", "agent-x") {
		t.Errorf("after w1 was forgotten %d withdrawals remain, want w2's alone", len(x.withdrawn))
	}
}

// The records a gateway loads at start are its index again, staged for no
// write; two that contradict each other keep the older.
func TestLoadedGrantRecordsAreTheIndexAgain(t *testing.T) {
	x := newLeaseIndex("ins_gw")
	a := grantOf("w1", "lse_a", "agent-1", "tok_alice", "build-42")
	dup := grantOf("w1", "lse_b", "agent-2", "tok_bob", "")
	dup.DeviceID = a.DeviceID
	x.load([]store.Grant{a, dup}, time.Time{})
	if e, err := x.resolve(queue.Caller{Principal: "tok_alice"}, "build-42"); err != nil || e.key != a.Key {
		t.Errorf("alice's build-42 after the load: %+v %v", e, err)
	}
	if puts, ends := x.take(); len(puts) != 0 || !slices.Equal(ends, []string{dup.Key}) {
		t.Errorf("staged %v and ends %v, want no write and the contradicting record ended", puts, ends)
	}
}

func code(err error) contract.Code {
	var ce *contract.Error
	if errors.As(err, &ce) {
		return ce.Code
	}
	return ""
}

// A lease under the gateway's prefix that no record names, listed in its
// worker's first snapshot of this run and granted before the run loaded
// its grant records, is nobody's: its request's record may never have
// been saved (the forward leaves while the decision that placed it
// commits, and the run ended between), or its grant's commit failed. It
// is given back. One granted since, or first listed in a later snapshot
// (a grant of this run's in flight, whatever the worker's clock says), is
// a finding, as before.
func TestALeaseGrantedBeforeTheRunLoadedAndNotRecordedIsGivenBack(t *testing.T) {
	x := newLeaseIndex("ins_gw")
	start := time.Unix(1000, 0)
	x.load(nil, start)
	before := workerLease("lse_before", "gw:ins_gw:agent-1", "tok_alice")
	before.GrantedAt = start.Add(-time.Second).UnixMilli()
	since := workerLease("lse_since", "gw:ins_gw:agent-2", "tok_bob")
	since.GrantedAt = start.Add(time.Second).UnixMilli()
	back, found := x.reconcile("w1", statusRead{leases: []contract.LeaseRecord{before, since}, gen: 1}, start.Add(2*time.Second))
	if !slices.Equal(back, []string{"lse_before"}) {
		t.Errorf("reconcile gave back %v, want the lease granted before the run loaded, lse_before", back)
	}
	if len(found) != 1 || !strings.Contains(found[0].what(), "lse_since") {
		t.Errorf("findings = %+v, want the one granted since the run loaded, lse_since", found)
	}
	if _, ok := x.ofRequester("agent-1"); ok {
		t.Error("the unrecorded lease was indexed: its requester is locked out")
	}
	// Listed first in a later snapshot, dated before the load by a worker
	// whose clock is behind: perhaps this run's own grant, not yet
	// recorded. Not given back.
	late := workerLease("lse_late", "gw:ins_gw:agent-3", "tok_carol")
	late.GrantedAt = start.Add(-time.Minute).UnixMilli()
	back, found = x.reconcile("w1", statusRead{leases: []contract.LeaseRecord{since, late}, gen: 2}, start.Add(3*time.Second))
	if len(back) != 0 {
		t.Errorf("a later snapshot gave back %v, want nothing: the lease may be a grant of this run in flight", back)
	}
	if len(found) != 1 || !strings.Contains(found[0].what(), "lse_late") {
		t.Errorf("findings of the later snapshot = %+v, want lse_late", found)
	}
}

// A lease a snapshot ends (read after its grant, without it) is kept as
// untold until the worker's event of the end is relayed, which may come
// after the snapshot: the relayed end then finds it, once, so its holders
// hear of it with the event's reason.
func TestALeaseASnapshotEndedIsToldWhenItsEndIsRelayed(t *testing.T) {
	x := newLeaseIndex("ins_gw")
	e := mustAdd(t, x, grantOf("w1", "lse_a", "agent-1", "tok_alice", ""))
	e.grantSeq, e.grantLink = 5, 1
	x.take()
	x.reconcile("w1", statusRead{leases: nil, gen: 2, seq: 6, link: 1}, time.Unix(0, 0))
	if _, ok := x.ofKey("w1.lse_a"); ok {
		t.Fatal("a snapshot read after the grant that leaves the lease out kept it")
	}
	got, ok := x.takeUntold("w1", "lse_a")
	if !ok || got != e {
		t.Fatalf("takeUntold after the snapshot's end = %v, %v; want the ended lease, for its holders", got, ok)
	}
	if _, ok := x.takeUntold("w1", "lse_a"); ok {
		t.Error("an untold lease was taken twice: its holders would hear of its end twice")
	}
	e2 := mustAdd(t, x, grantOf("w1", "lse_b", "agent-2", "tok_bob", ""))
	e2.grantSeq, e2.grantLink = 7, 1
	x.reconcile("w1", statusRead{leases: nil, gen: 3, seq: 8, link: 1}, time.Unix(0, 0))
	x.forget("w1")
	if _, ok := x.takeUntold("w1", "lse_b"); ok {
		t.Error("a forgotten worker's untold lease was kept")
	}
}

// A snapshot read between a worker's grant and the gateway's judging it
// lists a lease of a requester whose request is forwarded to that worker:
// not a finding then (a healthy worker would show findings at every busy
// read), and still one at the next snapshot if the gateway did not take
// the grant.
func TestALeaseOfARequestStillForwardedIsNoFindingUntilItsGrantIsJudged(t *testing.T) {
	x := newLeaseIndex("ins_gw")
	inFlight := map[string]bool{"w1/agent-1": true}
	x.dispatching = func(workerID, requester string) bool { return inFlight[workerID+"/"+requester] }
	granting := workerLease("lse_new", "gw:ins_gw:agent-1", "tok_alice")
	if _, found := x.reconcile("w1", statusRead{leases: []contract.LeaseRecord{granting}, gen: 1}, time.Unix(0, 0)); len(found) != 0 {
		t.Errorf("findings = %+v while agent-1's request is forwarded to w1, want none", found)
	}
	if _, found := x.reconcile("w2", statusRead{leases: []contract.LeaseRecord{workerLease("lse_x", "gw:ins_gw:agent-1", "tok_alice")}, gen: 1}, time.Unix(0, 0)); len(found) != 1 {
		t.Errorf("findings on w2, where agent-1 has nothing forwarded = %+v, want the lease", found)
	}
	delete(inFlight, "w1/agent-1") // judged, and refused
	if _, found := x.reconcile("w1", statusRead{leases: []contract.LeaseRecord{granting}, gen: 2}, time.Unix(0, 0)); len(found) != 1 {
		t.Errorf("findings once the grant was judged and not taken = %+v, want the lease", found)
	}
}
