package daemon

import (
	"context"
	"strings"
	"testing"

	"github.com/simlock/simlock/internal/client"
	"github.com/simlock/simlock/internal/contract"
)

// targetOf is the SIMLOCK_TARGET a shellDriver command was given.
func targetOf(env []string) string {
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "SIMLOCK_TARGET="); ok {
			return v
		}
	}
	return ""
}

// A CLI passthrough without --lease is pinned to the caller's only lease
// on the tool's platform; with none it names no device (only device-less
// commands pass then); with several it must name one.
func TestPassthroughWithoutALeaseUsesTheCallersOnlyLease(t *testing.T) {
	home := startExecDaemon(t, `echo ran`, nil)
	ctx := context.Background()
	c := dial(t, home, "a", false)
	pass := func() (contract.PassthroughResult, error) {
		var res contract.PassthroughResult
		err := c.Call(ctx, contract.OpPassthrough, contract.PassthroughInput{Tool: "simctl", Args: []string{"list"}}, &res)
		return res, err
	}
	res, err := pass()
	if err != nil || targetOf(res.Env) != "  local" {
		t.Fatalf("passthrough with no lease: %+v, %v; want a target with no device", res, err)
	}
	// Another agent's lease is not the caller's.
	if _, err := dial(t, home, "b", false).RequestLease(ctx, contract.LeaseRequestInput{Platform: contract.PlatformIOS}, nil); err != nil {
		t.Fatal(err)
	}
	// Nor is a lease on the other platform.
	if _, err := c.RequestLease(ctx, contract.LeaseRequestInput{Platform: contract.PlatformAndroid, RequesterID: "a/droid"}, nil); err != nil {
		t.Fatal(err)
	}
	if res, err := pass(); err != nil || targetOf(res.Env) != "  local" {
		t.Fatalf("passthrough with only others' and Android leases: %+v, %v; want a target with no device", res, err)
	}
	first, err := c.RequestLease(ctx, contract.LeaseRequestInput{Platform: contract.PlatformIOS, RequesterID: "a/1"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err = pass()
	if want := first.Device.DriverDeviceID + " " + first.Device.Address + " local"; err != nil || targetOf(res.Env) != want {
		t.Fatalf("passthrough with one iOS lease: target %q, %v; want %q", targetOf(res.Env), err, want)
	}
	second, err := c.RequestLease(ctx, contract.LeaseRequestInput{Platform: contract.PlatformIOS, RequesterID: "a/2"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = pass()
	var ce *contract.Error
	if code(err) != contract.CodeBadRequest || !strings.Contains(err.Error(), first.Lease.ID) || !strings.Contains(err.Error(), second.Lease.ID) {
		t.Errorf("passthrough with two iOS leases: %v, want BAD_REQUEST naming both", err)
	} else if ce = contract.AsError(err); ce.Details["field"] != "leaseId" {
		t.Errorf("the refusal names field %v, want leaseId", ce.Details["field"])
	}
	var named contract.PassthroughResult
	err = c.Call(ctx, contract.OpPassthrough, contract.PassthroughInput{Tool: "simctl", Args: []string{"list"}, LeaseID: second.Lease.ID}, &named)
	if want := second.Device.DriverDeviceID + " " + second.Device.Address + " local"; err != nil || targetOf(named.Env) != want {
		t.Errorf("passthrough naming the second lease: target %q, %v; want %q", targetOf(named.Env), err, want)
	}
}

// Every surface reaches the driver with the lease's device and with what
// it is: the socket is local; HTTP, a session confined by its hello
// (simlock mcp) and a gateway's uplink are remote.
func TestExecTellsTheDriverWhetherItsCallerIsRemote(t *testing.T) {
	d, home := startShellDaemon(t, `echo "$SIMLOCK_TARGET"`, nil)
	ctx := context.Background()
	c, g := execLease(t, home)
	want := g.Device.DriverDeviceID + " " + g.Device.Address
	run := func(c *client.Client) string {
		t.Helper()
		return execTarget(t, c, contract.ExecInput{LeaseID: g.Lease.ID, Tool: "simctl", Args: []string{"list"}})
	}
	if got := run(c); got != want+" local" {
		t.Errorf("exec over the socket: target %q, want %q", got, want+" local")
	}
	confined, err := client.Dial(ctx, SocketPath(home), contract.HelloInput{Principal: "a", Remote: true})
	if err != nil {
		t.Fatal(err)
	}
	defer confined.Close()
	if !confined.Hello().Remote {
		t.Errorf("hello with remote: the answer does not say the session is remote")
	}
	if got := run(confined); got != want+" remote" {
		t.Errorf("exec over a session confined by its hello: target %q, want %q", got, want+" remote")
	}
	var res contract.PassthroughResult
	err = confined.Call(ctx, contract.OpPassthrough, contract.PassthroughInput{Tool: "simctl", Args: []string{"list"}}, &res)
	if code(err) != contract.CodePassthroughRefused || !strings.Contains(err.Error(), "device.exec") {
		t.Errorf("device.passthrough on a remote session: %+v, %v; want PASSTHROUGH_REFUSED pointing at device.exec", res, err)
	}

	// A gateway's uplink is remote though its hello does not say so: it
	// forwards the commands of callers on other machines.
	up := dialUplink(t, d)
	if !up.Hello().Remote {
		t.Errorf("the gateway's uplink session: the hello's answer does not say it is remote")
	}
	ug, err := up.RequestLease(ctx, contract.LeaseRequestInput{Platform: contract.PlatformIOS, RequesterID: "gw:ins_gw:agent-1", Owner: "tok_alice"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	uwant := ug.Device.DriverDeviceID + " " + ug.Device.Address + " remote"
	if got := execTarget(t, up, contract.ExecInput{LeaseID: ug.Lease.ID, RequesterID: ug.Lease.RequesterID, Tool: "simctl", Args: []string{"list"}}); got != uwant {
		t.Errorf("exec forwarded by a gateway: target %q, want %q", got, uwant)
	}
	err = up.Call(ctx, contract.OpPassthrough, contract.PassthroughInput{Tool: "simctl", Args: []string{"list"}}, &res)
	if code(err) != contract.CodePassthroughRefused {
		t.Errorf("device.passthrough on a gateway's uplink: %+v, %v; want PASSTHROUGH_REFUSED", res, err)
	}
}

// execTarget runs in over c and returns what the shellDriver's command
// printed: the target it was given.
func execTarget(t *testing.T, c *client.Client, in contract.ExecInput) string {
	t.Helper()
	var out collected
	res, err := c.Exec(context.Background(), in, out.add)
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("exec: %+v, %v", res, err)
	}
	return strings.TrimSpace(out.text("stdout"))
}

// An HTTP session is remote: its exec reaches the driver as a remote
// caller's.
func TestHTTPExecIsRemote(t *testing.T) {
	d, home := startShellDaemon(t, `echo "$SIMLOCK_TARGET"`, nil)
	ctx := context.Background()
	admin := dial(t, home, "op", true)
	var tok contract.TokenCreateResult
	if err := admin.Call(ctx, contract.OpTokenCreate, contract.TokenCreateInput{Role: contract.TokenAgent}, &tok); err != nil {
		t.Fatal(err)
	}
	agent := dial(t, home, tok.Token.ID, false)
	g, err := agent.RequestLease(ctx, contract.LeaseRequestInput{Platform: contract.PlatformIOS}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var out collected
	push := func(p contract.Push) {
		if p.Output != nil {
			out.add(*p.Output)
		}
	}
	res, err := httpBackend{d}.Call(ctx, tok.Token, contract.OpDeviceExec, contract.ExecInput{LeaseID: g.Lease.ID, Tool: "simctl", Args: []string{"list"}}, push)
	if err != nil {
		t.Fatal(err)
	}
	want := g.Device.DriverDeviceID + " " + g.Device.Address + " remote"
	if got := strings.TrimSpace(out.text("stdout")); got != want {
		t.Errorf("exec over HTTP (%+v): target %q, want %q", res, got, want)
	}
	_, err = httpBackend{d}.Call(ctx, tok.Token, contract.OpPassthrough, contract.PassthroughInput{Tool: "simctl", Args: []string{"list"}}, nil)
	if code(err) != contract.CodePassthroughRefused {
		t.Errorf("device.passthrough over HTTP: %v, want PASSTHROUGH_REFUSED", err)
	}
}
