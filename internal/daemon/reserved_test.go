package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/simlock/simlock/internal/client"
	"github.com/simlock/simlock/internal/contract"
)

func TestTheGatewayRequesterPrefixIsReservedForTheGatewaysUplink(t *testing.T) {
	for name, c := range map[string]struct {
		gateway bool
		id      string
		refused bool
	}{
		"an agent's own id":               {false, "agent-1", false},
		"no id":                           {false, "", false},
		"the prefix from anyone else":     {false, "gw:ins_gw:tok_victim", true},
		"the bare prefix":                 {false, "gw:", true},
		"the prefix from the uplink":      {true, "gw:ins_gw:tok_victim", false},
		"a look-alike without the colon":  {false, "gwx:a", false},
		"the prefix's letters in the end": {false, "agent-gw:", false},
	} {
		err := reservedRequester(c.gateway, "requesterId", c.id)
		var ce *contract.Error
		switch {
		case c.refused && (!errors.As(err, &ce) || ce.Code != contract.CodeForbidden || ce.Details["field"] != "requesterId"):
			t.Errorf("%s: %v, want FORBIDDEN naming requesterId", name, err)
		case !c.refused && err != nil:
			t.Errorf("%s: %v, want it allowed", name, err)
		}
	}
	if err := reservedRequesterIn(false, json.RawMessage(`{"leaseId":"l","requesterId":"gw:x:y"}`)); err == nil {
		t.Error("an operation's requesterId under the prefix passed")
	}
	if err := reservedRequesterIn(false, json.RawMessage(`[1]`)); err != nil {
		t.Errorf("input that is not an object is the operation's to refuse, got %v", err)
	}
}

// A local user may not pass for the gateway: a hello principal under gw:
// or gateway:, or a requesterId under gw:, is FORBIDDEN on every operation that takes one,
// admin included; the gateway's uplink session names them.
func TestOnlyTheGatewaysUplinkNamesARequesterUnderItsPrefix(t *testing.T) {
	d, home := startDaemon(t, nil)
	ctx := context.Background()
	_, err := client.Dial(ctx, SocketPath(home), contract.HelloInput{Principal: "gw:ins_gw:tok_victim"})
	if code(err) != contract.CodeForbidden {
		t.Errorf("hello with a principal under gw: = %v, want FORBIDDEN", err)
	}
	// Nor the gateway's own principal, whose chosen lease ids would be
	// resolved before the keys of the leases the gateway holds there.
	_, err = client.Dial(ctx, SocketPath(home), contract.HelloInput{Principal: contract.GatewayPrincipalPrefix + "ins_gw"})
	if code(err) != contract.CodeForbidden {
		t.Errorf("hello as the gateway's principal = %v, want FORBIDDEN", err)
	}
	admin := dial(t, home, "ops", true)
	for _, c := range []struct {
		op contract.Op
		in any
	}{
		{contract.OpLeaseRequest, contract.LeaseRequestInput{Platform: contract.PlatformIOS, RequesterID: "gw:ins_gw:tok_victim"}},
		{contract.OpLeaseRequestCreate, contract.LeaseRequestInput{Platform: contract.PlatformIOS, RequesterID: "gw:ins_gw:tok_victim"}},
		{contract.OpLeaseCancel, contract.LeaseCancelInput{RequesterID: "gw:ins_gw:tok_victim"}},
		{contract.OpDeviceExec, contract.ExecInput{LeaseID: "lse_x", Tool: "simctl", RequesterID: "gw:ins_gw:tok_victim"}},
	} {
		err := admin.Call(ctx, c.op, c.in, nil)
		var ce *contract.Error
		if !errors.As(err, &ce) || ce.Code != contract.CodeForbidden || ce.Details["field"] != "requesterId" {
			t.Errorf("%s naming a requester under gw: = %v, want FORBIDDEN on requesterId", c.op, err)
		}
	}
	if ls, err := admin.Leases(ctx); err != nil || len(ls) != 0 {
		t.Errorf("leases after the refusals = %v, %v; want none", ls, err)
	}
	up := dialUplink(t, d)
	if _, err := up.RequestLease(ctx, contract.LeaseRequestInput{Platform: contract.PlatformIOS, RequesterID: "gw:ins_gw:agent-1"}, nil); err != nil {
		t.Errorf("the uplink's request under its prefix: %v", err)
	}
}
