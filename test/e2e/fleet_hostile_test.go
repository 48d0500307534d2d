package e2e

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/gateway/hostile"
)

// On a worker, nobody but its gateway names a requester under gw: (the
// gateway's prefix for the requests it forwards): `simlock lease
// --agent-id gw:<gateway>:<victim>` is FORBIDDEN, and leaves no lease that
// a gateway's index could take for the victim's.
func TestAnAgentIDUnderTheGatewayPrefixIsForbiddenOnAWorker(t *testing.T) {
	t.Parallel()
	h := newHome(t, fastDemo...)
	expectFailure(t, h.run("lease", "--platform", "ios", "--agent-id", "gw:ins_gw:tok_victim", "--detach"), 1, "FORBIDDEN")
	if ls := h.leases(); len(ls) != 0 {
		t.Errorf("the worker holds %d leases after the refusal, want none", len(ls))
	}
}

// A gateway run as a user runs it, with an honest worker and a hostile one
// (the in-repo harness, over the real uplink): the hostile worker reports
// the agent's chosen id, requester and owner under the gateway's prefix,
// and the agent's renew and release still reach only the honest worker
// that holds its lease; the claim shows on the hostile worker's view.
func TestAHostileWorkerCannotTakeAnAgentsLeaseThroughTheGateway(t *testing.T) {
	t.Parallel()
	f := newFleet(t)
	honestID := instanceID(t, f.worker("honest", 2))
	ctx, cancel := context.WithTimeout(context.Background(), commandBound)
	defer cancel()
	liar, err := hostile.Join(ctx, hostile.Options{URL: f.url, Token: f.joinSecret("ins_liar"), WorkerID: "ins_liar"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(liar.Close)
	f.await("both workers connected", 10*time.Second, connected(honestID, "ins_liar"))

	r := f.gw.run("lease", "--platform", "ios", "--agent-id", "victim", "--lease-id", "build-42", "--detach")
	if r.code != 0 {
		t.Fatalf("the agent's lease through the gateway\n%s", r)
	}
	if g := parseGrant(t, r.stdout); g.Lease.WorkerID != honestID {
		t.Fatalf("the agent's lease is on %s, want the honest worker", g.Lease.WorkerID)
	}
	if err := liar.Claim(ctx, contract.LeaseRecord{ID: "build-42", IDChosenByRequester: true, RequesterID: liar.Prefix() + "victim", OwnerID: "victim"}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		r := f.gw.run("worker", "show", "ins_liar")
		var v contract.WorkerView
		if r.code == 0 && json.Unmarshal([]byte(r.stdout), &v) == nil && v.Findings != nil && v.Findings.UngrantedLeases == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("within 10 s the gateway counted no finding against the hostile worker\n%s", r)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if r := f.gw.run("lease", "renew", "build-42", "--agent-id", "victim"); r.code != 0 {
		t.Errorf("the agent's renew after the lie\n%s", r)
	}
	if r := f.gw.run("release", "build-42", "--agent-id", "victim"); r.code != 0 {
		t.Errorf("the agent's release after the lie\n%s", r)
	}
	for _, op := range []contract.Op{contract.OpLeaseRenew, contract.OpLeaseRelease, contract.OpLeaseGet} {
		if cs := liar.Calls(op); len(cs) != 0 {
			t.Errorf("the hostile worker received the agent's %s: %s", op, cs[0].Input)
		}
	}
}
