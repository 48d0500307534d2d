package simworker_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/simlock/simlock/internal/client"
	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/daemontest"
	"github.com/simlock/simlock/internal/simworker"
	"github.com/simlock/simlock/internal/uplink"
)

// bound bounds every wait for something the gateway does at once.
const bound = 10 * time.Second

// joined is a real gateway in the test process with one simulated worker
// of devices devices joined to it and connected.
func joined(t *testing.T, devices int) (*daemontest.Daemon, *simworker.Worker) {
	t.Helper()
	gw := daemontest.Start(t, daemontest.Gateway())
	ctx, cancel := context.WithTimeout(context.Background(), bound)
	defer cancel()
	if _, err := gw.Admin().StatusWith(ctx, contract.StatusGetInput{WaitReady: true}); err != nil {
		t.Fatal(err)
	}
	w := simworker.New(simworker.Options{ID: "sim-1", Devices: devices})
	conn, done, err := w.Join(ctx, gw.HTTPURL(), gw.WorkerToken(), uplink.Options{})
	if err != nil {
		t.Fatalf("the simulated worker could not join: %v", err)
	}
	t.Cleanup(func() { conn.Close(); <-done })
	admin := gw.Admin()
	until(t, "the simulated worker connected with its devices", func() bool {
		v := view(t, admin, "sim-1")
		return v.Connection == contract.WorkerConnected && len(v.Devices) == devices
	})
	return gw, w
}

func view(t *testing.T, admin *client.Client, id string) contract.WorkerView {
	t.Helper()
	var v contract.WorkerView
	if err := admin.Call(context.Background(), contract.OpWorkerGet, contract.WorkerIDInput{WorkerID: id}, &v); err != nil {
		var ce *contract.Error
		if errors.As(err, &ce) && ce.Code == contract.CodeUnknownWorker {
			return v
		}
		t.Fatal(err)
	}
	return v
}

// until polls ok within bound; a wait that ends unmet fails the test
// naming what was awaited.
func until(t *testing.T, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(bound)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("no %s within %s", what, bound)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A simulated worker joins a real gateway, is routed a request, grants it
// warm, and the gateway's agent releases it; every answer it gave passed
// the gateway's checks: it stays connected, with no finding, and the
// gateway's view shows the device leased and then idle again.
func TestASimulatedWorkerServesAGatewayAsAWorkerDoes(t *testing.T) {
	gw, w := joined(t, 3)
	admin := gw.Admin()
	agent := gw.Client()
	ctx, cancel := context.WithTimeout(context.Background(), bound)
	defer cancel()

	g, err := agent.RequestLease(ctx, contract.LeaseRequestInput{Platform: contract.PlatformAndroid}, nil)
	if err != nil {
		t.Fatalf("a lease request through the gateway: %v", err)
	}
	if g.Device.WorkerID != "sim-1" || g.Source != contract.SourceWarm || g.Device.Spec.Model != simworker.DeviceModel {
		t.Errorf("grant = worker %q, source %q, model %q; want sim-1, warm, %s", g.Device.WorkerID, g.Source, g.Device.Spec.Model, simworker.DeviceModel)
	}
	if w.Leased() != 1 {
		t.Errorf("the simulated worker holds %d leases after the grant, want 1", w.Leased())
	}
	until(t, "lease in the gateway's view of the worker", func() bool { return len(view(t, admin, "sim-1").Leases) == 1 })

	if _, err := agent.Release(ctx, g.Lease.ID); err != nil {
		t.Fatalf("release through the gateway: %v", err)
	}
	if w.Leased() != 0 {
		t.Errorf("the simulated worker holds %d leases after the release, want 0", w.Leased())
	}
	until(t, "idle devices in the gateway's view", func() bool {
		v := view(t, admin, "sim-1")
		return len(v.Leases) == 0 && v.Capacity != nil && v.Capacity.Global.Warm == 3
	})
	v := view(t, admin, "sim-1")
	if v.Connection != contract.WorkerConnected || v.Findings.Total() != 0 {
		t.Errorf("after a grant and a release the worker is %s with findings %+v, want connected with none", v.Connection, v.Findings)
	}
}

// A lease the simulated worker ends on its own (End, as an expiry) is
// told to its holder through the gateway, which then routes the next
// request to the freed device.
func TestASimulatedWorkersOwnEndReachesTheHolderThroughTheGateway(t *testing.T) {
	gw, w := joined(t, 1)
	agent := gw.Client()
	ctx, cancel := context.WithTimeout(context.Background(), bound)
	defer cancel()
	g, err := agent.RequestLease(ctx, contract.LeaseRequestInput{Platform: contract.PlatformAndroid}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if n := w.End(1); n != 1 {
		t.Fatalf("End ended %d leases, want 1", n)
	}
	select {
	case lost := <-agent.LeaseLost():
		if lost.LeaseID != g.Lease.ID {
			t.Errorf("lease-lost names %q, want %q", lost.LeaseID, g.Lease.ID)
		}
	case <-ctx.Done():
		t.Fatal("the holder heard nothing of the lease the worker ended")
	}
	if _, err := agent.RequestLease(ctx, contract.LeaseRequestInput{Platform: contract.PlatformAndroid}, nil); err != nil {
		t.Fatalf("a request after the worker freed its only device: %v", err)
	}
}

// The same model serves agents directly on a unix socket: a warm grant,
// the requester's second request refused REQUESTER_ALREADY_LEASED, and a
// release that frees the device.
func TestASimulatedWorkerServesAgentsOnItsSocket(t *testing.T) {
	dir, err := os.MkdirTemp("", "slsw")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	w := simworker.New(simworker.Options{ID: "sim-direct", Devices: 2})
	l, err := w.Listen(filepath.Join(dir, "sock"))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	ctx, cancel := context.WithTimeout(context.Background(), bound)
	defer cancel()
	c, err := client.Dial(ctx, filepath.Join(dir, "sock"), contract.HelloInput{Principal: "agent-a"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if c.Hello().Role != contract.RoleAgent {
		t.Errorf("hello role on the socket = %q, want agent", c.Hello().Role)
	}
	in := contract.LeaseRequestInput{Platform: contract.PlatformAndroid, RequesterID: "agent-a/1"}
	g, err := c.RequestLease(ctx, in, nil)
	if err != nil {
		t.Fatal(err)
	}
	if g.Lease.OwnerID != "agent-a" || g.Lease.RequesterID != "agent-a/1" || g.Lease.DeviceID != g.Device.ID {
		t.Errorf("grant lease = %+v, device %q; want owner agent-a, requester agent-a/1, the device granted", g.Lease, g.Device.ID)
	}
	_, err = c.RequestLease(ctx, in, nil)
	var ce *contract.Error
	if !errors.As(err, &ce) || ce.Code != contract.CodeRequesterAlreadyLeased {
		t.Errorf("a second request of the requester: %v, want REQUESTER_ALREADY_LEASED", err)
	}
	if _, err := c.Release(ctx, g.Lease.ID); err != nil {
		t.Fatal(err)
	}
	if w.Leased() != 0 {
		t.Errorf("leased after the release = %d, want 0", w.Leased())
	}
}
