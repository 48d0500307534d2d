package daemon

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/simlock/simlock/internal/client"
	"github.com/simlock/simlock/internal/config"
	"github.com/simlock/simlock/internal/contract"
)

// A worker daemon joins a gateway daemon over its uplink, in one process:
// the gateway lists it connected with its capacity, and relays its events.
func TestAWorkerJoinsAGatewayAndItsLeaseShowsThere(t *testing.T) {
	gcfg, err := config.Parse([]byte(`{"mode":"gateway","http":{"enabled":true,"port":0},"gateway":{"heartbeatMs":200}}`))
	if err != nil {
		t.Fatal(err)
	}
	gw, gwHome := startDaemonOpts(t, Options{Config: gcfg})
	admin := dial(t, gwHome, "ops", true)
	if _, err := admin.StatusWith(context.Background(), contract.StatusGetInput{WaitReady: true}); err != nil {
		t.Fatal(err)
	}
	var tok contract.TokenCreateResult
	if err := admin.Call(context.Background(), contract.OpTokenCreate, contract.TokenCreateInput{Role: contract.TokenWorker}, &tok); err != nil {
		t.Fatal(err)
	}
	wcfg, err := config.Parse([]byte(fmt.Sprintf(`{"capacity":{"strategy":"fixed","config":{"maxRunning":3}},"gateway":{"url":%q,"token":%q,"label":"w1","heartbeatMs":200}}`,
		gw.httpURL, tok.Secret)))
	if err != nil {
		t.Fatal(err)
	}
	_, wHome := startDaemon(t, wcfg)
	events, _, err := admin.Subscribe(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var list contract.WorkerListResult
	for deadline := time.Now().Add(10 * time.Second); ; {
		if err := admin.Call(context.Background(), contract.OpWorkerList, contract.Empty{}, &list); err != nil {
			t.Fatal(err)
		}
		if len(list.Workers) == 1 && list.Workers[0].Connection == contract.WorkerConnected {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("worker list after 10 s = %+v, want w1 connected", list)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if w := list.Workers[0]; w.Label != "w1" || w.MaxRunning != 3 {
		t.Errorf("worker line = %+v, want w1 with 3 running slots", w)
	}
	g, err := dial(t, wHome, "agent", false).RequestLease(context.Background(), contract.LeaseRequestInput{Platform: contract.PlatformIOS}, nil)
	if err != nil {
		t.Fatal(err)
	}
	timeout := time.After(10 * time.Second)
	for {
		select {
		case ev := <-events:
			if ev.Event == "lease.granted" && strings.Contains(string(ev.Payload), g.Lease.ID) && strings.Contains(string(ev.Payload), list.Workers[0].ID) {
				return
			}
		case <-timeout:
			t.Fatalf("no relayed lease.granted of %s with the worker's id within 10 s", g.Lease.ID)
		}
	}
}

func TestAGatewayWithoutTheHTTPAPIFailsItsStartSayingWhy(t *testing.T) {
	cfg, err := config.Parse([]byte(`{"mode":"gateway"}`))
	if err != nil {
		t.Fatal(err)
	}
	_, home := startDaemonOpts(t, Options{Config: cfg})
	_, err = dial(t, home, "ops", true).StatusWith(context.Background(), contract.StatusGetInput{WaitReady: true})
	var ce *contract.Error
	if !errors.As(err, &ce) || ce.Code != contract.CodeDaemonStartupFailed || !strings.Contains(ce.Message, "http.enabled") {
		t.Fatalf("status of a gateway without HTTP = %v, want DAEMON_STARTUP_FAILED naming http.enabled", err)
	}
}

func TestEachModeRefusesTheOtherModesOperationsWithItsCode(t *testing.T) {
	gcfg, err := config.Parse([]byte(`{"mode":"gateway","http":{"enabled":true,"port":0}}`))
	if err != nil {
		t.Fatal(err)
	}
	_, gwHome := startDaemonOpts(t, Options{Config: gcfg})
	gw := dial(t, gwHome, "ops", true)
	for _, op := range []contract.Op{contract.OpNuke, contract.OpCleanupRun, contract.OpDoctorRun, contract.OpPassthrough,
		contract.OpComponentRemove, contract.OpLeaseBind} {
		err := gw.Call(context.Background(), op, map[string]any{}, nil)
		var ce *contract.Error
		if !errors.As(err, &ce) || ce.Code != contract.CodeUnsupportedInGatewayMode || ce.Details["operation"] != string(op) {
			t.Errorf("%s on a gateway = %v, want UNSUPPORTED_IN_GATEWAY_MODE naming it", op, err)
		}
	}

	// A gateway's own callers may not name an owner either, admin included.
	var ce *contract.Error
	if _, err := gw.RequestLease(context.Background(), contract.LeaseRequestInput{Platform: contract.PlatformIOS, Owner: "tok_x"}, nil); !errors.As(err, &ce) || ce.Code != contract.CodeForbidden {
		t.Errorf("lease.request naming an owner on a gateway = %v, want FORBIDDEN", err)
	}

	_, wHome := startDaemon(t, nil)
	w := dial(t, wHome, "ops", true)
	var list contract.WorkerListResult
	if err := w.Call(context.Background(), contract.OpWorkerList, contract.Empty{}, &list); err != nil {
		t.Fatal(err)
	}
	if list.Mode != contract.ModeWorker || len(list.Workers) != 1 || list.Workers[0].Connection != contract.WorkerConnected {
		t.Errorf("worker.list on a worker = %+v, want the fleet of one", list)
	}
	for _, c := range []struct {
		op contract.Op
		in any
	}{
		{contract.OpWorkerDrain, contract.WorkerIDInput{WorkerID: "w1"}},
		{contract.OpWorkerGet, contract.WorkerIDInput{WorkerID: "w1"}},
		{contract.OpTokenCreate, contract.TokenCreateInput{Role: contract.TokenWorker}},
	} {
		err := w.Call(context.Background(), c.op, c.in, nil)
		var ce *contract.Error
		if !errors.As(err, &ce) || ce.Code != contract.CodeUnsupportedInWorkerMode {
			t.Errorf("%s on a worker = %v, want UNSUPPORTED_IN_WORKER_MODE", c.op, err)
		}
	}
}

// dialUplink is a session as a worker serves its gateway's uplink: over a
// pipe, trusted as the config's gateway.
func dialUplink(t *testing.T, d *Daemon) *client.Client {
	t.Helper()
	ours, theirs := net.Pipe()
	c := newConn(d, ours)
	c.trusted = true
	d.mu.Lock()
	d.conns[c] = struct{}{}
	d.mu.Unlock()
	go c.run()
	cl, err := client.New(context.Background(), theirs, contract.HelloInput{Principal: "gateway:ins_gw",
		Protocol: contract.VersionRange{Min: contract.ProtocolMin, Max: contract.ProtocolMax}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close() })
	return cl
}

func TestOnlyTheGatewaysUplinkMayNameTheOwnerOfALeaseRequest(t *testing.T) {
	d, home := startDaemon(t, nil)
	ctx := context.Background()
	in := contract.LeaseRequestInput{Platform: contract.PlatformIOS, RequesterID: "gw:ins_gw:agent-1", Owner: "tok_alice"}
	for name, c := range map[string]*client.Client{"an admin": dial(t, home, "ops", true), "an agent": dial(t, home, "agent", false)} {
		// Their own requester id: one under gw: is refused before the owner is read.
		own := in
		own.RequesterID = ""
		_, err := c.RequestLease(ctx, own, nil)
		var ce *contract.Error
		if !errors.As(err, &ce) || ce.Code != contract.CodeForbidden || ce.Details["field"] != "owner" {
			t.Errorf("%s naming an owner: %v, want FORBIDDEN on owner", name, err)
		}
	}
	up := dialUplink(t, d)
	if up.Hello().Role != contract.RoleAdmin {
		t.Fatalf("the uplink session's role is %s, want admin", up.Hello().Role)
	}
	g, err := up.RequestLease(ctx, in, nil)
	if err != nil {
		t.Fatal(err)
	}
	if g.Lease.OwnerID != "tok_alice" || g.Lease.RequesterID != "gw:ins_gw:agent-1" {
		t.Errorf("lease through the uplink = %+v, want owner tok_alice and the gateway's requester id", g.Lease)
	}
	// The gateway, acting for every owner, renews it.
	if _, err := up.Renew(ctx, g.Lease.ID, 0); err != nil {
		t.Errorf("the gateway's renewal: %v", err)
	}
}
