package mcpserver

import (
	"context"
	"testing"

	"github.com/simlock/simlock/internal/client"
	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/daemon"
)

// An MCP session may choose a lease id another agent holds a lease of,
// and its tools reach its own lease by it: releasing build-42 releases the
// session's, and the other agent's lease goes on.
func TestAnMCPSessionsChosenLeaseIDIsItsOwn(t *testing.T) {
	r := newRig(t, "capacity.strategy", "fixed", "capacity.config.maxRunning", "2")
	ctx := context.Background()
	bob, err := client.Dial(ctx, daemon.SocketPath(r.home), contract.HelloInput{Principal: "bob"})
	if err != nil {
		t.Fatal(err)
	}
	defer bob.Close()
	gb, err := bob.RequestLease(ctx, contract.LeaseRequestInput{Platform: contract.PlatformAndroid, LeaseID: "build-42"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	res, grant, err := r.call(ctx, "lease_simulator", map[string]any{"platform": "ios", "leaseId": "build-42"})
	if err != nil || res.IsError {
		t.Fatalf("an MCP lease choosing build-42, which bob holds a lease of: %v %v, want its own", err, grant)
	}
	lease := grant["lease"].(map[string]any)
	if lease["id"] != "build-42" || lease["deviceId"] == gb.Device.ID {
		t.Fatalf("the MCP session's lease %v, want its own build-42", lease)
	}
	if res, out, err := r.call(ctx, "release_simulator", map[string]any{"leaseId": "build-42"}); err != nil || res.IsError || out["released"] != true {
		t.Fatalf("release build-42 over MCP: %v %v", err, out)
	}
	var got contract.LeaseGetResult
	if err := bob.Call(ctx, contract.OpLeaseGet, contract.LeaseIDInput{LeaseID: "build-42"}, &got); err != nil || got.Device.ID != gb.Device.ID {
		t.Errorf("bob's build-42 after the MCP session released its own: %+v, %v; want it held", got.Device, err)
	}
}
