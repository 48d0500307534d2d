package leasing

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/simlock/simlock/internal/contract"
)

func TestSubmittedRequestWaitsWithNobodyWatchingAndIsGranted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := start(t, newMemStore(), fixed(1))
		ctx := context.Background()
		a := h.mustGrant(h.acquire("a", ios))
		st, err := h.e.Submit(ctx, Caller{Principal: "b"}, ios)
		if err != nil {
			t.Fatal(err)
		}
		if st.Phase() != "queued" || st.Request.QueuePosition != 1 {
			t.Fatalf("submitted request = %s at %d, want queued at 1", st.Phase(), st.Request.QueuePosition)
		}
		id := st.Request.ID
		// A wait with nothing changing runs to its end and answers the same
		// revision.
		t0 := time.Now()
		same, err := h.e.RequestStatus(ctx, Caller{Principal: "b"}, contract.LeaseRequestGetInput{RequestID: id, AfterRev: st.Rev, WaitMs: 5000})
		if err != nil || same.Rev != st.Rev || time.Since(t0) != 5*time.Second {
			t.Fatalf("idle wait = rev %d after %s (%v), want rev %d after 5s", same.Rev, time.Since(t0), err, st.Rev)
		}
		// The release wakes a waiter as soon as the request moves.
		go func() {
			time.Sleep(time.Second)
			h.release("a", a.Lease.ID)
		}()
		t0 = time.Now()
		moved, err := h.e.RequestStatus(ctx, Caller{Principal: "b"}, contract.LeaseRequestGetInput{RequestID: id, AfterRev: st.Rev, WaitMs: 60000})
		if err != nil || moved.Rev == st.Rev || time.Since(t0) != time.Second {
			t.Fatalf("wait across the release = %s rev %d after %s (%v), want a new revision after 1s", moved.Phase(), moved.Rev, time.Since(t0), err)
		}
		if moved.Phase() != "reclaiming" {
			t.Errorf("first change after the release = %s, want reclaiming", moved.Phase())
		}
		var phases []string
		last := moved
		for !last.Request.State.Terminal() {
			if len(phases) == 0 || phases[len(phases)-1] != last.Phase() { // a boot's detail moves it within booting
				phases = append(phases, last.Phase())
			}
			if last.Phase() == "booting" && (last.Target == nil || last.Target.Model != a.Device.Spec.Model) {
				t.Errorf("booting shows target %+v, want the device being booted (%s)", last.Target, a.Device.Spec.Model)
			}
			last, err = h.e.RequestStatus(ctx, Caller{Principal: "b"}, contract.LeaseRequestGetInput{RequestID: id, AfterRev: last.Rev, WaitMs: 60000})
			if err != nil {
				t.Fatal(err)
			}
		}
		phases = append(phases, last.Phase())
		if want := []string{"reclaiming", "booting", "granted"}; !equal(phases, want) {
			t.Errorf("phases = %v, want %v", phases, want)
		}
		if last.Request.Grant == nil || last.Request.LeaseID == "" {
			t.Fatalf("granted request carries no grant: %+v", last.Request)
		}
		// Read again after it settled: from the store, at once.
		again, err := h.e.RequestStatus(ctx, Caller{Principal: "b"}, contract.LeaseRequestGetInput{RequestID: id, AfterRev: last.Rev, WaitMs: 60000})
		if err != nil || again.Phase() != "granted" {
			t.Fatalf("settled read = %s, %v", again.Phase(), err)
		}
		res, err := h.e.Cancel(ctx, Caller{Principal: "b"}, contract.LeaseCancelInput{RequestID: id})
		if err != nil || res.Outcome != contract.CancelNotCancellable || res.LeaseID != last.Request.LeaseID {
			t.Errorf("cancel of a granted request = %+v, %v; want not-cancellable naming %s", res, err, last.Request.LeaseID)
		}
	})
}

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestSubmitEarlyFailuresAreErrorsAndOthersRequestsAreHidden(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := start(t, newMemStore(), fixed(1))
		ctx := context.Background()
		h.mustGrant(h.acquire("a", ios))
		_, err := h.e.Submit(ctx, Caller{Principal: "b"}, contract.LeaseRequestInput{Platform: contract.PlatformIOS, NoWait: true})
		wantCode(t, err, contract.CodeNoCapacity)
		_, err = h.e.Submit(ctx, Caller{Principal: "a"}, ios)
		wantCode(t, err, contract.CodeRequesterAlreadyLeased)

		st, err := h.e.Submit(ctx, Caller{Principal: "b"}, ios)
		if err != nil {
			t.Fatal(err)
		}
		id := st.Request.ID
		_, err = h.e.RequestStatus(ctx, Caller{Principal: "c"}, contract.LeaseRequestGetInput{RequestID: id})
		wantCode(t, err, contract.CodeUnknownLeaseRequest)
		if res, _ := h.e.Cancel(ctx, Caller{Principal: "c"}, contract.LeaseCancelInput{RequestID: id}); res.Outcome != contract.CancelNotFound {
			t.Errorf("another agent's cancel = %s, want not-found", res.Outcome)
		}
		if _, err := h.e.RequestStatus(ctx, Caller{Admin: true}, contract.LeaseRequestGetInput{RequestID: id}); err != nil {
			t.Errorf("admin read: %v", err)
		}
		// A waiter wakes when the request is cancelled.
		go func() {
			time.Sleep(time.Second)
			if res, err := h.e.Cancel(ctx, Caller{Principal: "b"}, contract.LeaseCancelInput{RequestID: id}); err != nil || res.Outcome != contract.CancelCancelled {
				t.Errorf("cancel = %+v, %v", res, err)
			}
		}()
		got, err := h.e.RequestStatus(ctx, Caller{Principal: "b"}, contract.LeaseRequestGetInput{RequestID: id, AfterRev: st.Rev, WaitMs: 60000})
		if err != nil || got.Phase() != "cancelled" {
			t.Fatalf("after cancel = %s, %v; want cancelled", got.Phase(), err)
		}
		if res, _ := h.e.Cancel(ctx, Caller{Principal: "b"}, contract.LeaseCancelInput{RequestID: id}); res.Outcome != contract.CancelCancelled {
			t.Errorf("second cancel = %s, want cancelled again", res.Outcome)
		}
		_, err = h.e.RequestStatus(ctx, Caller{Principal: "b"}, contract.LeaseRequestGetInput{RequestID: "req_nope"})
		wantCode(t, err, contract.CodeUnknownLeaseRequest)
	})
}

func TestSubmittedRequestIsNotWithdrawnWhenAJoinerGivesUp(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := start(t, newMemStore(), fixed(1))
		ctx := context.Background()
		a := h.mustGrant(h.acquire("a", ios))
		in := contract.LeaseRequestInput{Platform: contract.PlatformIOS, IdempotencyKey: "k1"}
		st, err := h.e.Submit(ctx, Caller{Principal: "b"}, in)
		if err != nil {
			t.Fatal(err)
		}
		again, err := h.e.Submit(ctx, Caller{Principal: "b"}, in)
		if err != nil || again.Request.ID != st.Request.ID {
			t.Fatalf("repeat with the same key = %s, %v; want %s", again.Request.ID, err, st.Request.ID)
		}
		joiner := h.acquire("b", in)
		synctest.Wait()
		joiner.cancel()
		<-joiner.done
		if _, err := joiner.grant, joiner.err; err == nil {
			t.Fatal("the joiner that gave up was granted")
		}
		h.release("a", a.Lease.ID)
		got := st
		for !got.Request.State.Terminal() && err == nil {
			got, err = h.e.RequestStatus(ctx, Caller{Principal: "b"}, contract.LeaseRequestGetInput{RequestID: st.Request.ID, AfterRev: got.Rev, WaitMs: 60000})
		}
		if err != nil || got.Phase() != "granted" {
			t.Fatalf("request after the joiner left = %s, %v; want granted", got.Phase(), err)
		}
	})
}
