package daemon

import (
	"context"
	"slices"
	"testing"

	"github.com/simlock/simlock/internal/contract"
)

// A worker's status says which event of its log its lists reflect, and a
// grant which event a status must reach to show it: a status read before
// the grant is below the grant's seq and does not list the lease, one read
// after reaches it and does, and one read after the release is above the
// release's events and does not list it. A gateway orders snapshots and
// grants by these.
func TestStatusAndGrantSayWhichEventTheyReflect(t *testing.T) {
	_, home := startDaemon(t, nil)
	admin := dial(t, home, "admin", true)
	agent := dial(t, home, "agent", false)
	ctx := context.Background()
	listed := func(s contract.Status, id string) bool {
		return slices.ContainsFunc(s.Leases, func(l contract.LeaseRecord) bool { return l.ID == id })
	}

	before, err := admin.StatusWith(ctx, contract.StatusGetInput{WaitReady: true})
	if err != nil {
		t.Fatal(err)
	}
	g, err := agent.RequestLease(ctx, contract.LeaseRequestInput{Platform: contract.PlatformAndroid}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if g.EventSeq <= before.EventSeq || before.EventSeq <= 0 {
		t.Errorf("a status read before the grant is at seq %d and the grant at %d: want the grant's higher, both set", before.EventSeq, g.EventSeq)
	}
	after, err := admin.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if after.EventSeq < g.EventSeq || !listed(after, g.Lease.ID) {
		t.Errorf("a status read after the grant is at seq %d (grant %d) and lists the lease: %v; want a seq at least the grant's, listing it",
			after.EventSeq, g.EventSeq, listed(after, g.Lease.ID))
	}
	if _, err := agent.Release(ctx, g.Lease.ID); err != nil {
		t.Fatal(err)
	}
	evs, err := admin.Replay(ctx, contract.EventsReplayInput{AfterSeq: after.EventSeq, Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	released := int64(0)
	for _, ev := range evs {
		if ev.Event == "lease.released" {
			released = ev.Seq
		}
	}
	gone, err := admin.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if released == 0 || gone.EventSeq < released || listed(gone, g.Lease.ID) {
		t.Errorf("a status read after the release (lease.released at seq %d) is at seq %d and lists the lease: %v; want a seq at least the release's, without it",
			released, gone.EventSeq, listed(gone, g.Lease.ID))
	}
}
