package queue

import (
	"context"
	"testing"
	"testing/synctest"

	"github.com/simlock/simlock/internal/contract"
)

// A request placed at once by a Start that carries is recorded by the
// next decision, with the writes of that decision: until then nobody is
// shown it. A status read of it commits it before it answers; a step of
// progress after that is told at once.
func TestACarriedRequestIsToldNothingBeforeItsRecordCommits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := carryRig(t)
		c := r.mustSubmit("agent-a", contract.LeaseRequestInput{Platform: contract.PlatformIOS})
		w := <-r.pl.started
		if n := r.st.commits; n != 0 {
			t.Fatalf("%d commits once the request was placed, want none: its record waits for the next decision", n)
		}
		st, err := r.q.Status(context.Background(), Caller{Admin: true}, contract.LeaseRequestGetInput{RequestID: c.t.RequestID()})
		if err != nil {
			t.Fatal(err)
		}
		if r.st.commits != 1 || r.st.stateOf("agent-a") != contract.RequestStarting {
			t.Fatalf("a status read of the request answered after %d commits, stored %q; want it committed first, starting",
				r.st.commits, r.st.stateOf("agent-a"))
		}
		if st.Request.State != contract.RequestStarting {
			t.Errorf("the status read shows %s, want starting", st.Request.State)
		}
		booting := contract.LeaseProgress{Stage: contract.StageBooting, EtaMs: 50}
		r.q.Progress(w, booting)
		if s := c.steps(); len(s) != 1 || !s[0].Same(booting) {
			t.Errorf("once the request was recorded the requester heard %+v, want the step at once", s)
		}
		r.pl.finish(w)
		synctest.Wait()
		if !answered(c) || c.err != nil || r.st.stateOf("agent-a") != contract.RequestGranted {
			t.Fatalf("after the Start's grant: answered %v (%v), stored %q; want granted", answered(c), c.err, r.st.stateOf("agent-a"))
		}
	})
}

// Without a status read, the decision that grants a carried request
// records it too: one commit for the request and its grant, the request's
// events first.
func TestACarriedRequestIsRecordedWithTheDecisionThatGrantsIt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := carryRig(t)
		c := r.mustSubmit("agent-a", contract.LeaseRequestInput{Platform: contract.PlatformIOS})
		r.pl.finish(<-r.pl.started)
		synctest.Wait()
		if !answered(c) || c.err != nil {
			t.Fatalf("answered %v (%v), want granted", answered(c), c.err)
		}
		if r.st.commits != 1 || r.st.stateOf("agent-a") != contract.RequestGranted {
			t.Errorf("the grant took %d commits, stored %q; want 1, granted", r.st.commits, r.st.stateOf("agent-a"))
		}
		names := r.st.names()
		if len(names) < 2 || names[0] != contract.EvLeaseRequested || names[len(names)-1] != "lease.granted" {
			t.Errorf("stored events %v, want lease.requested first and lease.granted last", names)
		}

		// A request made as a resource is answered at once, so its
		// record commits on its own.
		r.pl.free[contract.PlatformIOS] = 1
		before := r.st.commits
		if _, err := r.q.Submit(context.Background(), Ask{Caller: Caller{Principal: "agent-b"}, Input: contract.LeaseRequestInput{Platform: contract.PlatformIOS}, TTLMs: 60_000},
			func(context.Context) Resolution { return Resolution{Need: need(contract.PlatformIOS)} }); err != nil {
			t.Fatal(err)
		}
		if r.st.commits != before+1 {
			t.Errorf("a request made as a resource took %d commits as it was made, want 1", r.st.commits-before)
		}
		r.pl.finish(<-r.pl.started)
	})
}

// A carried request is left out of the lists, and a repeat of its
// idempotency key joins it only in a decision that commits it first.
func TestACarriedRequestIsListedAndJoinedOnlyOnceRecorded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := carryRig(t)
		in := contract.LeaseRequestInput{Platform: contract.PlatformIOS, IdempotencyKey: "k-1"}
		c := r.mustSubmit("agent-a", in)
		w := <-r.pl.started
		if ws := r.q.Waiting(Caller{Admin: true}); len(ws) != 0 {
			t.Errorf("the waiting list shows %d requests before the request is recorded, want none", len(ws))
		}
		if recs, _ := r.q.Records(nil, 0); len(recs) != 0 {
			t.Errorf("the open records list %d before the request is recorded, want none", len(recs))
		}
		again := r.mustSubmit("agent-a", in)
		if again.t.RequestID() != c.t.RequestID() {
			t.Fatalf("the repeat made request %s, want it to join %s", again.t.RequestID(), c.t.RequestID())
		}
		if r.st.commits != 1 || r.st.stateOf("agent-a") != contract.RequestStarting {
			t.Errorf("the repeat joined after %d commits, stored %q; want the request committed first, starting", r.st.commits, r.st.stateOf("agent-a"))
		}
		if ws := r.q.Waiting(Caller{Admin: true}); len(ws) != 1 {
			t.Errorf("the waiting list shows %d requests once recorded, want 1", len(ws))
		}
		r.pl.finish(w)
		synctest.Wait()
		if !answered(again) || again.err != nil {
			t.Errorf("the repeat was answered %v (%v), want the grant", answered(again), again.err)
		}
	})
}

// A step of progress of a carried request has its record committed by a
// decision of its own, and is told then: a Start that pushes progress (a
// boot, a download) may run long, and nothing else need be decided
// meanwhile for its requester to hear it.
func TestACarriedRequestsProgressIsToldWithoutWaitingForAnotherDecision(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := carryRig(t)
		c := r.mustSubmit("agent-a", contract.LeaseRequestInput{Platform: contract.PlatformIOS})
		w := <-r.pl.started
		downloading := contract.LeaseProgress{Stage: contract.StageDownloading}
		r.q.Progress(w, downloading)
		synctest.Wait()
		if r.st.commits != 1 || r.st.stateOf("agent-a") != contract.RequestStarting {
			t.Fatalf("after a step of progress: %d commits, stored %q; want the request committed, starting", r.st.commits, r.st.stateOf("agent-a"))
		}
		if s := c.steps(); len(s) != 1 || !s[0].Same(downloading) {
			t.Errorf("the requester heard %+v once the request was recorded, want the download step", s)
		}
		r.pl.finish(w)
		synctest.Wait()
		if !answered(c) || c.err != nil {
			t.Fatalf("after the Start's grant: answered %v (%v), want granted", answered(c), c.err)
		}
	})
}

// carryRig is a rig whose placer starts a request at once on its one free
// iOS slot with a Start that carries (Early, Quiet and Carry).
func carryRig(t *testing.T) *rig {
	t.Helper()
	r := newRig(t)
	r.pl.free[contract.PlatformIOS] = 1
	r.pl.early, r.pl.quiet, r.pl.carry = true, true, true
	return r
}
