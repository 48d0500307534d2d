package daemon

import (
	"context"
	"testing"

	"github.com/simlock/simlock/internal/contract"
)

// Sessions hold a lease by its key, and a chosen id is unique within its
// owner only: the end of one owner's lease is told to its owner's sessions
// and admins, never to another owner's session holding its own lease of
// that id, nor to another owner's session that holds the key itself.
func TestALeasesEndIsToldOnlyToItsOwnersSessionsOfThatID(t *testing.T) {
	d := &Daemon{holders: map[string]map[*session]struct{}{}}
	got := map[string][]string{}
	sess := func(role contract.Role, principal string) *session {
		return newSession(d, context.Background(), role, principal, func(p contract.Push) {
			got[principal] = append(got[principal], p.Push)
		}, nil)
	}
	alice, bob, ops := sess(contract.RoleAgent, "tok_alice"), sess(contract.RoleAgent, "tok_bob"), sess(contract.RoleAdmin, "ops")
	for _, s := range []*session{alice, bob, ops} {
		d.holds(s, "lse_alice")
	}
	d.holds(bob, "lse_bob")
	d.deviceHealth(contract.LeaseRecord{ID: "build-42", Key: "lse_alice", OwnerID: "tok_alice"}, contract.PushDeviceUnhealthy, 0)
	d.leaseEnded(contract.LeaseRecord{ID: "build-42", Key: "lse_alice", OwnerID: "tok_alice"}, "expired")
	if len(got["tok_alice"]) != 2 || len(got["ops"]) != 2 || len(got["tok_bob"]) != 0 {
		t.Errorf("pushes = %v, want alice's and the admin's two, none to bob", got)
	}
	d.leaseEnded(contract.LeaseRecord{ID: "build-42", Key: "lse_bob", OwnerID: "tok_bob"}, "expired")
	if len(got["tok_bob"]) != 1 {
		t.Errorf("bob's own lease's end was not told to bob: %v", got)
	}
}
