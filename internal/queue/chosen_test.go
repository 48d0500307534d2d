package queue

import (
	"context"
	"testing"

	"github.com/simlock/simlock/internal/contract"
)

// A chosen id is taken within its owner: a second request of the same
// owner (another of its requesters) for the id a waiting one chose is
// LEASE_ID_TAKEN until that request ends; another owner's request for it
// is its own, and is never told of the first.
func TestAChosenLeaseIDHeldByAWaitingRequestIsTakenWithinItsOwner(t *testing.T) {
	r := newRig(t)
	first := r.mustSubmit("a", contract.LeaseRequestInput{LeaseID: "build-7"})
	second := r.submitAs(Caller{Principal: "a"}, contract.LeaseRequestInput{RequesterID: "a/second", LeaseID: "build-7"})
	if ce := contract.AsError(second.err); ce.Code != contract.CodeLeaseIDTaken {
		t.Fatalf("a second request of the same owner for the id a waiting one chose got %v, want LEASE_ID_TAKEN", second.err)
	}
	r.mustSubmit("b", contract.LeaseRequestInput{LeaseID: "build-7"})
	if res, err := r.q.Cancel(context.Background(), Caller{Admin: true}, contract.LeaseCancelInput{RequestID: first.t.RequestID()}); err != nil || res.Outcome != contract.CancelCancelled {
		t.Fatalf("cancel the first: %+v %v", res, err)
	}
	again := r.submitAs(Caller{Principal: "a"}, contract.LeaseRequestInput{RequesterID: "a/second", LeaseID: "build-7"})
	if again.err != nil {
		t.Fatalf("the id once its owner's request ended: %v", again.err)
	}
}

func TestAChosenLeaseIDAnActiveLeaseOfTheSameOwnerHoldsIsTaken(t *testing.T) {
	r := newRig(t)
	r.q.opts.LeaseHeld = func(owner, id string) bool { return owner == "a" && id == "held-1" }
	c := r.submit("a", contract.LeaseRequestInput{LeaseID: "held-1"})
	if ce := contract.AsError(c.err); ce.Code != contract.CodeLeaseIDTaken || ce.Details["leaseId"] != "held-1" {
		t.Fatalf("a request for its owner's active lease's id got %v, want LEASE_ID_TAKEN naming it", c.err)
	}
	if c := r.submit("b", contract.LeaseRequestInput{LeaseID: "held-1"}); c.err != nil {
		t.Fatalf("another owner's request for the id: %v, want it accepted", c.err)
	}
}
