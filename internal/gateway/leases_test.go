package gateway

import (
	"context"
	"testing"
	"time"

	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/queue"
)

// A lease is listed from the moment its grant is answered, not from its
// worker's next report: until a snapshot shows it, the list shows it as
// the grant answered it (its TTL included), on a connected worker.
func TestALeaseIsListedFromItsGrantBeforeItsWorkerReportsIt(t *testing.T) {
	f, _ := grantingFleet(t)
	l := NewLeasing(f, LeasingOptions{Store: newQueueStore(), DefaultTTL: time.Minute, MaxTTL: time.Hour})
	defer l.Close()
	owner := queue.Caller{Principal: "tok_a"}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	g, err := l.Acquire(ctx, owner, contract.LeaseRequestInput{Platform: contract.PlatformIOS}, nil)
	if err != nil {
		t.Fatal(err)
	}
	// No snapshot of the worker since the grant: the fleet's report is
	// empty.
	for _, c := range []queue.Caller{owner, {Principal: "op", Admin: true}} {
		got := l.Leases(c, nil)
		if len(got) != 1 || got[0].ID != g.Lease.ID {
			t.Fatalf("%+v lists %+v right after the grant of %s, want that lease", c, got, g.Lease.ID)
		}
		if r := got[0]; r.Unreachable || r.TTLDeadline != g.Lease.TTLDeadline || r.DeviceID != "dev_1" || r.Worker == nil || r.Worker.ID != "w1" {
			t.Errorf("%+v lists the new lease as %+v, want it reachable on w1, on dev_1, with the grant's TTL deadline %d", c, r, g.Lease.TTLDeadline)
		}
	}
	if got := l.Leases(queue.Caller{Principal: "tok_b"}, nil); len(got) != 0 {
		t.Errorf("another agent lists %+v, want none of the lease it does not own", got)
	}
}
