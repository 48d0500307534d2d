package queue

import (
	"context"
	"testing"

	"github.com/simlock/simlock/internal/contract"
)

func TestAChosenLeaseIDHeldByAWaitingRequestIsTakenUntilThatRequestEnds(t *testing.T) {
	r := newRig(t)
	first := r.mustSubmit("a", contract.LeaseRequestInput{LeaseID: "build-7"})
	second := r.submit("b", contract.LeaseRequestInput{LeaseID: "build-7"})
	if ce := contract.AsError(second.err); ce.Code != contract.CodeLeaseIDTaken {
		t.Fatalf("a second request for the id a waiting one chose got %v, want LEASE_ID_TAKEN", second.err)
	}
	if res, err := r.q.Cancel(context.Background(), Caller{Admin: true}, contract.LeaseCancelInput{RequestID: first.t.RequestID()}); err != nil || res.Outcome != contract.CancelCancelled {
		t.Fatalf("cancel the first: %+v %v", res, err)
	}
	r.mustSubmit("b", contract.LeaseRequestInput{LeaseID: "build-7"})
}

func TestAChosenLeaseIDAnActiveLeaseHoldsIsTaken(t *testing.T) {
	r := newRig(t)
	r.q.opts.LeaseHeld = func(id string) bool { return id == "held-1" }
	c := r.submit("a", contract.LeaseRequestInput{LeaseID: "held-1"})
	if ce := contract.AsError(c.err); ce.Code != contract.CodeLeaseIDTaken || ce.Details["leaseId"] != "held-1" {
		t.Fatalf("a request for an active lease's id got %v, want LEASE_ID_TAKEN naming it", c.err)
	}
}
