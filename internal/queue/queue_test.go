package queue

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/simlock/simlock/internal/contract"
)

var (
	ios     = contract.LeaseRequestInput{Platform: contract.PlatformIOS}
	android = contract.LeaseRequestInput{Platform: contract.PlatformAndroid}
)

func positions(c *call) []int {
	var out []int
	for _, p := range c.steps() {
		if p.Stage == contract.StageQueued {
			out = append(out, p.QueuePosition)
		}
	}
	return out
}

func TestWaitersAreServedInArrivalOrderAndHearEachNewPlace(t *testing.T) {
	r := newRig(t)
	r.pl.instant = true
	a, b, c := r.mustSubmit("a", ios), r.mustSubmit("b", ios), r.mustSubmit("c", ios)
	if got := positions(c); !slices.Equal(got, []int{3}) {
		t.Fatalf("c's places after joining: %v, want [3]", got)
	}
	for i := range 3 {
		r.pl.release(contract.PlatformIOS, "")
		if i == 0 && !answered(a) {
			t.Fatal("a is not granted after the first release")
		}
	}
	for _, w := range []*call{a, b, c} {
		if _, cerr := w.t.Result(); cerr != nil {
			t.Fatalf("%s: %v", w.t.RequestID(), cerr)
		}
	}
	if want := []string{a.t.RequestID(), b.t.RequestID(), c.t.RequestID()}; !slices.Equal(r.pl.placed, want) {
		t.Fatalf("placed %v, want arrival order %v", r.pl.placed, want)
	}
	if got := positions(c); !slices.Equal(got, []int{3, 2, 1}) {
		t.Fatalf("c's places: %v, want [3 2 1]", got)
	}
}

func TestOnlyWaitersWhosePlaceChangedAreTold(t *testing.T) {
	r := newRig(t)
	a, b := r.mustSubmit("a", ios), r.mustSubmit("b", ios)
	r.mustSubmit("c", ios)
	before := len(a.steps()) + len(b.steps())
	if _, err := r.q.Cancel(context.Background(), Caller{Principal: "c"}, contract.LeaseCancelInput{}); err != nil {
		t.Fatal(err)
	}
	if after := len(a.steps()) + len(b.steps()); after != before {
		t.Fatalf("a and b, ahead of the cancelled c, were told %d more steps", after-before)
	}
	if _, err := r.q.Cancel(context.Background(), Caller{Principal: "a"}, contract.LeaseCancelInput{}); err != nil {
		t.Fatal(err)
	}
	if got := positions(b); !slices.Equal(got, []int{2, 1}) {
		t.Fatalf("b's places after a left: %v, want [2 1]", got)
	}
}

func TestHeadBlockingIsPerPlatformUnlessTheBlockIsMachineWide(t *testing.T) {
	r := newRig(t)
	r.pl.instant = true
	iosHead := r.mustSubmit("a", ios)
	r.pl.free[contract.PlatformIOS] = 0
	laterIOS := r.mustSubmit("b", ios)
	_ = laterIOS
	r.pl.free[contract.PlatformAndroid] = 1
	droid := r.mustSubmit("c", android)
	if !answered(droid) {
		t.Fatal("an android request waited behind an iOS head blocked by its own platform")
	}
	if answered(iosHead) {
		t.Fatal("the iOS head was granted without a slot")
	}

	r.pl.scope[contract.PlatformIOS] = ScopeAll
	r.pl.free[contract.PlatformAndroid] = 1 // room for it, were it not for the head
	droid2 := r.mustSubmit("d", android)
	if answered(droid2) {
		t.Fatal("an android request went ahead of a head whose block is machine-wide")
	}
}

func TestTheHeadIsNeverBypassedByALaterWaiterOfItsPlatform(t *testing.T) {
	r := newRig(t)
	r.pl.instant = true
	head := r.mustSubmit("a", ios)
	next := r.mustSubmit("b", ios)
	r.pl.release(contract.PlatformIOS, "")
	if !answered(head) || answered(next) {
		t.Fatalf("one slot: head answered %v, next answered %v; want only the head", answered(head), answered(next))
	}
}

func TestABlockedHeadIsToldTheStageItWaitsOn(t *testing.T) {
	r := newRig(t)
	r.pl.stage = &contract.LeaseProgress{Stage: contract.StageReclaiming, EtaMs: 500}
	a := r.mustSubmit("a", ios)
	b := r.mustSubmit("b", ios)
	if got := a.last(); got.Stage != contract.StageReclaiming || got.EtaMs != 500 {
		t.Fatalf("the head was told %+v, want reclaiming with its ETA", got)
	}
	if got := b.last(); got.Stage != contract.StageQueued || got.QueuePosition != 2 {
		t.Fatalf("the second waiter was told %+v, want queued at 2", got)
	}
}

func TestNoWaitFailsAtOnceWhenNothingFitsAndIsGrantedWhenSomethingDoes(t *testing.T) {
	r := newRig(t)
	r.pl.instant = true
	in := ios
	in.NoWait = true
	c := r.mustSubmit("a", in)
	if _, cerr := c.t.Result(); cerr == nil || cerr.Code != contract.CodeNoCapacity {
		t.Fatalf("noWait with nothing free: %v, want NO_CAPACITY", cerr)
	}
	if rec := r.st.record(c.t.RequestID()); rec.State != contract.RequestFailed {
		t.Fatalf("stored as %s, want failed", rec.State)
	}
	r.pl.free[contract.PlatformIOS] = 1
	c = r.mustSubmit("b", in)
	if _, cerr := c.t.Result(); cerr != nil {
		t.Fatalf("noWait with a free slot: %v", cerr)
	}
}

func TestARepeatOfARefusedRequestIsRefusedAgainAndOfAnAcceptedOneGetsTheRecord(t *testing.T) {
	r := newRig(t)
	in := ios
	in.NoWait, in.IdempotencyKey = true, "k-refused"
	first := r.mustSubmit("a", in)
	if _, err := r.q.Resource(first.t); err == nil || err.(*contract.Error).Code != contract.CodeNoCapacity {
		t.Fatalf("first call: %v, want NO_CAPACITY", err)
	}
	again := r.mustSubmit("a", in)
	st, err := r.q.Resource(again.t)
	if cerr, ok := err.(*contract.Error); !ok || cerr.Code != contract.CodeNoCapacity {
		t.Fatalf("repeat of a refused request: %+v %v, want the same NO_CAPACITY", st.Request, err)
	}

	// One that was accepted and failed later answers its record, as its
	// first call did.
	in = ios
	in.IdempotencyKey = "k-cancelled"
	accepted := r.mustSubmit("b", in)
	if _, err := r.q.Resource(accepted.t); err != nil {
		t.Fatalf("first call of a request that waits: %v", err)
	}
	if _, err := r.q.Cancel(context.Background(), Caller{Principal: "b"}, contract.LeaseCancelInput{}); err != nil {
		t.Fatal(err)
	}
	<-accepted.t.Done()
	st, err = r.q.Resource(r.mustSubmit("b", in).t)
	if err != nil || st.Request.ID != accepted.t.RequestID() || st.Request.State != contract.RequestCancelled {
		t.Fatalf("repeat of a cancelled request: %+v %v, want its record", st.Request, err)
	}
}

func TestTimeoutHasOneDeadlineFromFirstQueueing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t)
		r.pl.free[contract.PlatformIOS] = 0
		in := ios
		in.TimeoutMs = 10_000
		start := time.Now()
		c := r.mustSubmit("a", in)
		time.Sleep(4 * time.Second)
		r.pl.release(contract.PlatformIOS, "") // placed: a Start begins
		w := <-r.pl.started
		time.Sleep(3 * time.Second) // the Start takes 3 s, then fails to make room
		_ = r.q.Do(func(tx *Txn) error { r.pl.free[contract.PlatformIOS] = 0; tx.Requeue(w); return nil })
		<-c.t.Done()
		_, cerr := c.t.Result()
		if cerr == nil || cerr.Code != contract.CodeQueueTimeout {
			t.Fatalf("after the requeue: %v, want QUEUE_TIMEOUT", cerr)
		}
		if got := time.Since(start); got != 10*time.Second {
			t.Fatalf("timed out after %v, want exactly the 10 s from first queueing", got)
		}
		told := len(c.steps())
		r.q.Progress(w, contract.LeaseProgress{Stage: contract.StageBooting})
		if len(c.steps()) != told {
			t.Fatal("a settled request was told progress")
		}
	})
}

func TestARequeuePastTheDeadlineTimesOutAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t)
		in := ios
		in.TimeoutMs = 1000
		r.pl.free[contract.PlatformIOS] = 1
		c := r.mustSubmit("a", in)
		w := <-r.pl.started
		time.Sleep(5 * time.Second)
		start := time.Now()
		_ = r.q.Do(func(tx *Txn) error { tx.Requeue(w); return nil })
		_, cerr := c.t.Result()
		if cerr == nil || cerr.Code != contract.CodeQueueTimeout || time.Since(start) != 0 {
			t.Fatalf("requeued past its deadline: %v after %v, want QUEUE_TIMEOUT at once", cerr, time.Since(start))
		}
	})
}

func TestARequeuedNoWaitRequestFailsWithNoCapacity(t *testing.T) {
	r := newRig(t)
	in := ios
	in.NoWait = true
	r.pl.free[contract.PlatformIOS] = 1
	c := r.mustSubmit("a", in)
	w := <-r.pl.started
	_ = r.q.Do(func(tx *Txn) error { tx.Requeue(w); return nil })
	if _, cerr := c.t.Result(); cerr == nil || cerr.Code != contract.CodeNoCapacity {
		t.Fatalf("requeued noWait request: %v, want NO_CAPACITY", cerr)
	}
}

func TestOneOpenRequestOrLeasePerRequester(t *testing.T) {
	r := newRig(t)
	c := r.mustSubmit("a", ios)
	ce := expectCode(t, "second request", r.submit("a", ios).err, contract.CodeRequesterAlreadyLeased)
	if ce.Details["existingRequestId"] != c.t.RequestID() {
		t.Fatalf("details %v, want existingRequestId %s", ce.Details, c.t.RequestID())
	}
	r.pl.instant = true
	r.pl.release(contract.PlatformIOS, "")
	ce = expectCode(t, "request while holding a lease", r.submit("a", ios).err, contract.CodeRequesterAlreadyLeased)
	if ce.Details["existingLeaseId"] != "lse_"+c.t.RequestID() {
		t.Fatalf("details %v, want the lease", ce.Details)
	}
}

func TestAnAgentRequestsOnlyInItsOwnLane(t *testing.T) {
	r := newRig(t)
	alice := Caller{Principal: "alice"}
	as := func(requester string) contract.LeaseRequestInput { in := ios; in.RequesterID = requester; return in }
	ce := expectCode(t, "alice as bob", r.submitAs(alice, as("bob")).err, contract.CodeForbidden)
	if ce.Details["requesterId"] != "bob" {
		t.Fatalf("details %v, want the refused requesterId", ce.Details)
	}
	expectCode(t, "alice as alicex", r.submitAs(alice, as("alicex/1")).err, contract.CodeForbidden)
	if len(r.st.all()) != 0 {
		t.Fatalf("a refused request was stored: %v", r.st.all())
	}
	if c := r.submitAs(alice, as("alice/build-1")); c.err != nil {
		t.Fatalf("alice in her own lane: %v", c.err)
	}
	if c := r.submitAs(Caller{Principal: "gw", Admin: true}, as("bob")); c.err != nil {
		t.Fatalf("an admin acting for bob: %v", c.err)
	}
	if _, err := r.q.Cancel(context.Background(), alice, contract.LeaseCancelInput{RequesterID: "bob"}); err == nil {
		t.Fatal("alice cancelled bob's request by his requester id")
	} else {
		expectCode(t, "alice cancelling as bob", err, contract.CodeForbidden)
	}
	if r.q.byRequester["bob"] == nil {
		t.Fatal("bob's request is gone after alice's refused cancel")
	}
}

func TestABusyRequesterIsNotToldOfALeaseItCannotSee(t *testing.T) {
	r := newRig(t)
	r.pl.instant = true
	r.pl.free[contract.PlatformIOS] = 1
	in := ios
	in.RequesterID = "alice"
	if c := r.submitAs(Caller{Principal: "frontend", Admin: true}, in); c.err != nil {
		t.Fatal(c.err)
	}
	if _, held := r.pl.leases["alice"]; !held {
		t.Fatal("no lease was made for alice")
	}
	ce := expectCode(t, "alice while a lease is held for her", r.submit("alice", ios).err, contract.CodeRequesterAlreadyLeased)
	if _, ok := ce.Details["existingLeaseId"]; ok || strings.Contains(ce.Message, "lse_") {
		t.Fatalf("alice was told of a lease she cannot see: %q %v", ce.Message, ce.Details)
	}
}

func TestIdempotencyKeyJoinsTheOpenRequestAndReplaysTheSettledOne(t *testing.T) {
	r := newRig(t)
	in := ios
	in.IdempotencyKey = "k1"
	first := r.mustSubmit("a", in)
	again := r.mustSubmit("a", in)
	if again.t.RequestID() != first.t.RequestID() {
		t.Fatalf("a repeat made request %s, want the open %s", again.t.RequestID(), first.t.RequestID())
	}
	if got := again.last(); got.Stage != contract.StageQueued {
		t.Fatalf("the joiner was told %+v first, want the request's last step", got)
	}
	other := in
	other.Model = "iPhone 17"
	expectCode(t, "same key, other spec", r.submit("a", other).err, contract.CodeIdempotencyConflict)

	r.pl.instant = true
	r.pl.release(contract.PlatformIOS, "")
	g1, _ := first.t.Result()
	g2, _ := again.t.Result()
	if g1.Lease.ID == "" || g1.Lease.ID != g2.Lease.ID {
		t.Fatalf("the two calls got leases %q and %q, want the same one", g1.Lease.ID, g2.Lease.ID)
	}
	delete(r.pl.leases, "a") // the lease ended; the record stays
	replayed := r.mustSubmit("a", in)
	if g, cerr := replayed.t.Result(); cerr != nil || g.Lease.ID != g1.Lease.ID {
		t.Fatalf("repeat after settling: %v %v, want the stored grant", g.Lease.ID, cerr)
	}
}

func TestCancelWithdrawsOnlyWaitersInLine(t *testing.T) {
	r := newRig(t)
	r.pl.free[contract.PlatformIOS] = 1
	started := r.mustSubmit("a", ios)
	<-r.pl.started
	queued := r.mustSubmit("b", ios)
	ctx := context.Background()
	res, _ := r.q.Cancel(ctx, Caller{Principal: "a"}, contract.LeaseCancelInput{})
	if res.Outcome != contract.CancelNotCancellable {
		t.Fatalf("cancel of a started request: %s, want not-cancellable", res.Outcome)
	}
	res, _ = r.q.Cancel(ctx, Caller{Principal: "x"}, contract.LeaseCancelInput{RequestID: queued.t.RequestID()})
	if res.Outcome != contract.CancelNotFound {
		t.Fatalf("another agent's cancel: %s, want not-found", res.Outcome)
	}
	res, _ = r.q.Cancel(ctx, Caller{Principal: "b"}, contract.LeaseCancelInput{RequestID: queued.t.RequestID()})
	if res.Outcome != contract.CancelCancelled {
		t.Fatalf("cancel of a queued request: %s, want cancelled", res.Outcome)
	}
	if rec := r.st.record(queued.t.RequestID()); rec.State != contract.RequestCancelled {
		t.Fatalf("stored as %s, want cancelled", rec.State)
	}
	res, _ = r.q.Cancel(ctx, Caller{Principal: "b"}, contract.LeaseCancelInput{RequestID: queued.t.RequestID()})
	if res.Outcome != contract.CancelCancelled {
		t.Fatalf("cancel again after settling: %s, want cancelled (from the store)", res.Outcome)
	}
	_ = started
}

func TestAbandonCancelsInLineAndLetsAStartKeepItsDevice(t *testing.T) {
	r := newRig(t)
	r.pl.free[contract.PlatformIOS] = 1
	starting := r.mustSubmit("a", ios)
	w := <-r.pl.started
	waiting := r.mustSubmit("b", ios)
	if !r.q.Abandon(waiting.t) {
		t.Fatal("abandoning a lone waiter did not end it")
	}
	if _, cerr := waiting.t.Result(); cerr == nil || cerr.Code != contract.CodeCancelled {
		t.Fatalf("abandoned waiter: %v, want CANCELLED", cerr)
	}
	if !r.q.Abandon(starting.t) {
		t.Fatal("abandoning a started request did not end it")
	}
	if answered(starting) {
		t.Fatal("a started request was answered before its Start ended")
	}
	r.pl.finish(w)
	if _, cerr := starting.t.Result(); cerr == nil || cerr.Code != contract.CodeCancelled {
		t.Fatalf("after its Start: %v, want CANCELLED with no grant", cerr)
	}
	if r.pl.free[contract.PlatformIOS] != 1 {
		t.Fatal("the Start of an abandoned request did not keep its device for the next one")
	}
}

func TestAbandonLeavesARequestOthersFollow(t *testing.T) {
	r := newRig(t)
	in := ios
	in.IdempotencyKey = "k"
	a := r.mustSubmit("a", in)
	b := r.mustSubmit("a", in)
	if r.q.Abandon(b.t) {
		t.Fatal("one of two followers leaving ended the request")
	}
	if answered(a) {
		t.Fatal("the remaining follower's request was answered")
	}
	res := r.mustResource("z", ios)
	if r.q.Abandon(res) {
		t.Fatal("a resource request ended when its creator's call returned")
	}
}

func (r *rig) mustResource(requester string, in contract.LeaseRequestInput) *Ticket {
	r.t.Helper()
	in.RequesterID = requester
	t, err := r.q.Submit(context.Background(), Ask{Caller: Caller{Principal: requester}, Input: in, TTLMs: 1},
		func(context.Context) Resolution { return Resolution{Need: need(in.Platform)} })
	if err != nil {
		r.t.Fatal(err)
	}
	return t
}

func TestStatusWaitsForTheNextRevision(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t)
		r.pl.instant = true
		r.mustSubmit("a", ios)
		b := r.mustSubmit("b", ios)
		caller := Caller{Principal: "b"}
		st, err := r.q.Status(context.Background(), caller, contract.LeaseRequestGetInput{RequestID: b.t.RequestID()})
		if err != nil || st.Request.QueuePosition != 2 {
			t.Fatalf("status %+v %v, want queued at 2", st.Request, err)
		}
		got := make(chan contract.LeaseRequestStatus)
		go func() {
			st, _ := r.q.Status(context.Background(), caller, contract.LeaseRequestGetInput{RequestID: b.t.RequestID(), WaitMs: 30_000, AfterRev: st.Rev})
			got <- st
		}()
		synctest.Wait()
		select {
		case <-got:
			t.Fatal("the long-poll answered before anything changed")
		default:
		}
		r.pl.release(contract.PlatformIOS, "") // a is granted: b moves to 1
		next := <-got
		if next.Request.QueuePosition != 1 || next.Rev == st.Rev {
			t.Fatalf("after the change: %+v rev %d, want place 1 and a new revision", next.Request, next.Rev)
		}
		if _, err := r.q.Status(context.Background(), Caller{Principal: "x"}, contract.LeaseRequestGetInput{RequestID: b.t.RequestID()}); contract.AsError(err).Code != contract.CodeUnknownLeaseRequest {
			t.Fatalf("another agent read the request: %v", err)
		}
	})
}

func TestNobodyIsToldBeforeTheCommitThatDecided(t *testing.T) {
	r := newRig(t)
	r.pl.instant = true
	var storedWhenTold []contract.RequestState
	in := ios
	in.RequesterID = "a"
	var tk *Ticket
	tk, err := r.q.Submit(context.Background(), Ask{Caller: Caller{Principal: "a"}, Input: in, TTLMs: 1,
		Progress: func(p contract.LeaseProgress) {
			// Told its place: the record that says it waits is stored.
			storedWhenTold = append(storedWhenTold, r.st.stateOf("a"))
		}},
		func(context.Context) Resolution { return Resolution{Need: need(contract.PlatformIOS)} })
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(storedWhenTold, []contract.RequestState{contract.RequestQueued}) {
		t.Fatalf("when told its place the store held %v, want the queued record", storedWhenTold)
	}
	r.pl.release(contract.PlatformIOS, "")
	<-tk.Done()
	if got := r.st.record(tk.RequestID()).State; got != contract.RequestGranted {
		t.Fatalf("when the grant was answered the store held %q, want granted", got)
	}
	r.mu.Lock()
	names := []string{}
	for _, e := range r.events {
		names = append(names, e.Event)
	}
	r.mu.Unlock()
	if !slices.Equal(names, []string{"lease.requested", "lease.queued", "queue.changed", "lease.granted", "queue.changed"}) {
		t.Fatalf("published %v, want each decision's events after its commit", names)
	}
}

func TestAFailedCommitStopsTheQueueAndTellsNobody(t *testing.T) {
	r := newRig(t)
	waiting := r.mustSubmit("a", ios)
	told := len(waiting.steps())
	r.pl.instant = true
	r.st.failNext = true
	r.pl.release(contract.PlatformIOS, "") // the grant's commit fails
	if err := <-r.fatal; err == nil {
		t.Fatal("Fatal was not told the commit error")
	}
	_, cerr := waiting.t.Result()
	if cerr == nil || cerr.Code != contract.CodeInternal {
		t.Fatalf("the waiter whose grant failed to commit got %v, want INTERNAL", cerr)
	}
	if len(waiting.steps()) != told {
		t.Fatal("the waiter was told progress from the failed decision")
	}
	if rec := r.st.record(waiting.t.RequestID()); rec.State != contract.RequestQueued {
		t.Fatalf("the store holds %s, want the last committed state (queued)", rec.State)
	}
	if r.q.Err() == nil {
		t.Fatal("Err is nil after a failed commit")
	}
	expectCode(t, "a decision after the failure", r.q.Do(func(*Txn) error { return nil }), contract.CodeInternal)
	expectCode(t, "a request after the failure", r.submit("b", ios).err, contract.CodeInternal)
}

// A commit failure that Options.Refused names (a gateway replica deposed
// under the decision) is answered as it says, not INTERNAL: nothing was
// saved, and the requests' records stay for the next leader.
func TestACommitFailureTheOwnerNamesIsAnsweredAsItSays(t *testing.T) {
	errDeposed := errors.New("deposed")
	r := newRig(t, func(o *Options) {
		o.Refused = func(err error) *contract.Error {
			if errors.Is(err, errDeposed) {
				return contract.Errorf(contract.CodeNotLeader, "not the leader")
			}
			return nil
		}
	})
	waiting := r.mustSubmit("a", ios)
	r.pl.instant = true
	r.st.failWith = fmt.Errorf("store: commit: fence term 1: %w", errDeposed)
	r.st.failNext = true
	r.pl.release(contract.PlatformIOS, "") // the grant's commit is refused
	<-r.fatal
	if _, cerr := waiting.t.Result(); cerr == nil || cerr.Code != contract.CodeNotLeader {
		t.Fatalf("the waiter whose grant a deposed leader could not commit got %v, want NOT_LEADER", cerr)
	}
	if rec := r.st.record(waiting.t.RequestID()); rec.State != contract.RequestQueued {
		t.Fatalf("the store holds %s, want the request still queued for the next leader", rec.State)
	}
	expectCode(t, "a request after the deposition", r.submit("b", ios).err, contract.CodeNotLeader)
}

func TestStopAnswersWaitersAndLeavesTheirRecordsOpen(t *testing.T) {
	r := newRig(t)
	c := r.mustSubmit("a", ios)
	r.q.Stop()
	if _, cerr := c.t.Result(); cerr == nil || cerr.Code != contract.CodeDaemonStopping {
		t.Fatalf("after Stop: %v, want DAEMON_STOPPING", cerr)
	}
	if rec := r.st.record(c.t.RequestID()); rec.State != contract.RequestQueued {
		t.Fatalf("stored as %s, want still queued (the next start settles it)", rec.State)
	}
	expectCode(t, "request after Stop", r.submit("b", ios).err, contract.CodeDaemonStopping)
}

func TestAdmitRefusalAndAnUnresolvableSpecAreStoredAsFailed(t *testing.T) {
	r := newRig(t)
	in := ios
	in.Model = "Gone"
	r.pl.refuse["Gone"] = contract.Errorf(contract.CodeRuntimeMissing, "being removed")
	c := r.mustSubmit("a", in)
	if _, cerr := c.t.Result(); cerr == nil || cerr.Code != contract.CodeRuntimeMissing {
		t.Fatalf("refused by Admit: %v", cerr)
	}
	if got := r.st.names(); !slices.Equal(got, []string{"lease.requested", "lease.rejected"}) {
		t.Fatalf("events %v, want requested then rejected in one commit", got)
	}
	if r.st.commits != 1 {
		t.Fatalf("%d commits, want 1", r.st.commits)
	}
}

func TestCancelAllCancelsTheLineAndAbandonsStarts(t *testing.T) {
	r := newRig(t)
	r.pl.free[contract.PlatformIOS] = 1
	starting := r.mustSubmit("a", ios)
	w := <-r.pl.started
	queued := r.mustSubmit("b", ios)
	var ids []string
	_ = r.q.Do(func(tx *Txn) error {
		ids = tx.CancelAll(contract.Errorf(contract.CodeCancelled, "released everything"), "killed", false)
		return nil
	})
	if len(ids) != 2 {
		t.Fatalf("cancelled %v, want both", ids)
	}
	if _, cerr := queued.t.Result(); cerr == nil || cerr.Code != contract.CodeCancelled {
		t.Fatalf("queued: %v", cerr)
	}
	if answered(starting) {
		t.Fatal("the started request was settled; want it abandoned until its Start ends")
	}
	r.pl.finish(w)
	if _, cerr := starting.t.Result(); cerr == nil {
		t.Fatal("the abandoned request was granted")
	}
}

func TestAPassCostsOnePlacePerPlatformWhateverTheLineLength(t *testing.T) {
	r := newRig(t)
	for i := range 500 {
		r.mustSubmit("r"+strings.Repeat("x", i%3)+string(rune('a'+i%26))+time.Duration(i).String(), ios)
	}
	r.pl.asked = 0
	_ = r.q.Do(func(tx *Txn) error { tx.Kick(); return nil })
	if r.pl.asked != 1 {
		t.Fatalf("a pass over a blocked line of 500 asked the placer %d times, want 1", r.pl.asked)
	}
}

func TestTheQueueKnowsNothingOfDevicesDriversOrSQLite(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Skipf("go list: %v", err)
	}
	for _, dep := range strings.Fields(string(out)) {
		for _, banned := range []string{"/internal/driver", "/internal/core", "/internal/store", "/internal/leasing", "sqlite", "database/sql"} {
			if strings.Contains(dep, banned) {
				t.Errorf("internal/queue depends on %s", dep)
			}
		}
	}
}

// A request whose start is in flight is out of the line: however often the
// line is served meanwhile, it is placed once (a request is never sent to
// two workers, or started twice).
func TestARequestBeingStartedIsNeverPlacedAgain(t *testing.T) {
	r := newRig(t)
	r.pl.free[contract.PlatformIOS] = 2
	a := r.mustSubmit("a", ios)
	<-r.pl.started
	for range 3 {
		if err := r.q.Do(func(tx *Txn) error { tx.Kick(); return nil }); err != nil {
			t.Fatal(err)
		}
	}
	if want := []string{a.t.RequestID()}; !slices.Equal(r.pl.placed, want) {
		t.Errorf("placed %v, want only %v: a request being started was placed again", r.pl.placed, want)
	}
	if n := len(r.pl.started); n != 0 {
		t.Errorf("%d more starts began for a request already being started", n)
	}
}

// A noWait request that nothing fits fails without ever being queued: no
// lease.queued event and no progress, whether the line is empty or holds
// another platform's waiter.
func TestANoWaitRequestNothingFitsIsNeverQueued(t *testing.T) {
	for _, before := range []string{"an empty line", "an android waiter in line"} {
		r := newRig(t)
		if before != "an empty line" {
			r.mustSubmit("waiting", android)
		}
		skip := len(r.st.names())
		in := ios
		in.NoWait = true
		c := r.mustSubmit("nowait", in)
		if _, cerr := c.t.Result(); cerr == nil || cerr.Code != contract.CodeNoCapacity {
			t.Fatalf("with %s: %v, want NO_CAPACITY", before, cerr)
		}
		if got, want := r.st.names()[skip:], []string{"lease.requested", "lease.rejected"}; !slices.Equal(got, want) {
			t.Errorf("with %s, the noWait request's events = %v, want %v", before, got, want)
		}
		if s := c.steps(); len(s) != 0 {
			t.Errorf("with %s, the noWait request was told %+v", before, s)
		}
	}
}

// A quiet start tells its requester nothing: the first step it hears is
// the one its work reports (a gateway's worker), while a read of the
// request shows the start's stage.
func TestAQuietStartLeavesTheFirstStepToItsWork(t *testing.T) {
	r := newRig(t)
	r.pl.free[contract.PlatformIOS], r.pl.quiet = 1, true
	c := r.mustSubmit("a", ios)
	w := <-r.pl.started
	if s := c.steps(); len(s) != 0 {
		t.Fatalf("a quiet start told its requester %+v", s)
	}
	st, err := r.q.Resource(c.t)
	if err != nil || st.Progress == nil || st.Progress.Stage != contract.StageBooting {
		t.Fatalf("a read of the started request = %+v %v, want the start's booting stage", st.Progress, err)
	}
	r.q.Progress(w, contract.LeaseProgress{Stage: contract.StageProvisioning})
	if s := c.steps(); len(s) != 1 || s[0].Stage != contract.StageProvisioning {
		t.Errorf("after the work's first step the requester heard %+v, want only provisioning", s)
	}
}

// The waiting list shows each started request's last step, as its
// requester heard it, and the device being readied for it.
func TestTheWaitingListShowsTheLastStepAndTheDeviceBeingReadied(t *testing.T) {
	r := newRig(t)
	r.pl.free[contract.PlatformIOS] = 1
	c := r.mustSubmit("a", ios)
	w := <-r.pl.started
	r.q.Progress(w, contract.LeaseProgress{Stage: contract.StageProvisioning, EtaMs: 900})
	ws := r.q.Waiting(Caller{Admin: true})
	if len(ws) != 1 || ws[0].RequestID != c.t.RequestID() {
		t.Fatalf("waiting = %+v, want the started request", ws)
	}
	if p := ws[0].Progress; p == nil || p.Stage != contract.StageProvisioning || p.EtaMs != 900 {
		t.Errorf("its progress = %+v, want provisioning with its eta", p)
	}
	if ws[0].DeviceID != "dev_"+c.t.RequestID() {
		t.Errorf("its deviceId = %q, want the device the placer readies", ws[0].DeviceID)
	}
}

// A failed request is made again as it was stored: its spec, TTL, timeout,
// noWait and download permission, by its owner for its requester; one that
// has not failed is NOT_RETRYABLE, and one the caller may not see is not
// found, as is an id nobody made.
func TestAFailedRequestIsRetriedAsItWasStored(t *testing.T) {
	r := newRig(t)
	r.pl.instant = true
	in := contract.LeaseRequestInput{Platform: contract.PlatformIOS, Model: "iPhone 17", OSVersion: "26.1",
		TTLMs: 120_000, TimeoutMs: 5_000, NoWait: true, AllowDownload: true}
	c := r.mustSubmit("agent/a", in) // nothing free: noWait fails it
	if _, cerr := c.t.Result(); cerr == nil || cerr.Code != contract.CodeNoCapacity {
		t.Fatalf("the request to retry: %v, want NO_CAPACITY", cerr)
	}
	id := c.t.RequestID()
	who, again, err := r.q.RetryInput(context.Background(), Caller{Admin: true, Principal: "ops"}, id)
	if err != nil {
		t.Fatal(err)
	}
	want := in
	want.RequesterID = "agent/a"
	want.TTLMs = 60_000 // the effective TTL the rig stored
	if again != want || who.Principal != "agent/a" || !who.Admin {
		t.Errorf("RetryInput = %+v as %+v, want %+v as the owner agent/a (who may name its requester)", again, who, want)
	}
	if _, _, err := r.q.RetryInput(context.Background(), Caller{Principal: "someone-else"}, id); contract.AsError(err).Code != contract.CodeUnknownLeaseRequest {
		t.Errorf("another agent's retry: %v, want UNKNOWN_LEASE_REQUEST", err)
	}
	if _, _, err := r.q.RetryInput(context.Background(), Caller{Admin: true}, "req_nobody"); contract.AsError(err).Code != contract.CodeUnknownLeaseRequest {
		t.Errorf("an unknown id: %v, want UNKNOWN_LEASE_REQUEST", err)
	}
	r.pl.free[contract.PlatformIOS] = 1
	granted := r.mustSubmit("b", ios)
	if _, cerr := granted.t.Result(); cerr != nil {
		t.Fatal(cerr)
	}
	_, _, err = r.q.RetryInput(context.Background(), Caller{Admin: true}, granted.t.RequestID())
	if ce := contract.AsError(err); ce.Code != contract.CodeNotRetryable || ce.Details["state"] != contract.RequestGranted {
		t.Errorf("a granted request's retry: %v, want NOT_RETRYABLE naming its state", err)
	}
	if rec := r.st.record(id); rec.State != contract.RequestFailed || rec.Error == nil {
		t.Errorf("the retried request's record = %+v, want it left failed with its error", rec)
	}
}
