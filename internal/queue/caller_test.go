package queue

import (
	"testing"

	"github.com/simlock/simlock/internal/contract"
)

// SeesLease is the one rule both modes list leases and name them on
// devices by: an admin sees every lease, an agent only a known lease it
// owns.
func TestSeesLeaseIsAnAdminsOrTheOwners(t *testing.T) {
	admin, alice := Caller{Principal: "ops", Admin: true}, Caller{Principal: "alice"}
	for _, c := range []struct {
		name  string
		who   Caller
		owner string
		known bool
		want  bool
	}{
		{"an agent its own lease", alice, "alice", true, true},
		{"an agent another's lease", alice, "bob", true, false},
		{"an agent a lease no record bears out, named as its own", alice, "alice", false, false},
		{"an admin another's lease", admin, "bob", true, true},
		{"an admin a lease no record bears out", admin, "", false, true},
		{"an agent with no principal an unowned unknown lease", Caller{}, "", false, false},
	} {
		if got := c.who.SeesLease(c.owner, c.known); got != c.want {
			t.Errorf("%s: SeesLease(%q, %v) = %v, want %v", c.name, c.owner, c.known, got, c.want)
		}
	}
}

// ActsOn is the one rule both modes authorize a command or a file transfer
// on a lease by, with the same refusals: a requester named must be the
// lease's, and an admin acting on another's lease must name its requester.
func TestActsOnRefusesWithTheSameWordsInBothModes(t *testing.T) {
	admin, alice := Caller{Principal: "ops", Admin: true}, Caller{Principal: "alice"}
	for _, c := range []struct {
		name                       string
		who                        Caller
		requester                  string // named by the call
		leaseRequester, leaseOwner string
		want                       string // the refusal's message, "" for none
	}{
		{"an agent its own lease", alice, "", "alice", "alice", ""},
		{"an agent naming its lease's requester", alice, "alice/ci", "alice/ci", "alice", ""},
		{"an agent naming another requester", alice, "alice/other", "alice/ci", "alice", "lease lse_1 was not made for alice/other"},
		{"an admin its own lease", admin, "", "ops", "ops", ""},
		{"an admin another's lease, naming its requester", admin, "bob/ci", "bob/ci", "bob", ""},
		{"an admin another's lease, naming no requester", admin, "", "bob/ci", "bob", "to act on someone else's lease, name its requester (requesterId)"},
		{"an admin naming the wrong requester", admin, "carol", "bob/ci", "bob", "lease lse_1 was not made for carol"},
	} {
		err := c.who.ActsOn("lse_1", c.requester, c.leaseRequester, c.leaseOwner)
		if c.want == "" {
			if err != nil {
				t.Errorf("%s: ActsOn = %v, want allowed", c.name, err)
			}
			continue
		}
		ce := contract.AsError(err)
		if err == nil || ce.Code != contract.CodeForbidden || ce.Message != c.want || ce.Details["leaseId"] != "lse_1" {
			t.Errorf("%s: ActsOn = %v, want FORBIDDEN %q naming lse_1", c.name, err, c.want)
		}
	}
}
