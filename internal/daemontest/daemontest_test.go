package daemontest_test

import (
	"context"
	"testing"
	"time"

	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/daemontest"
	"github.com/simlock/simlock/internal/driver"
	"github.com/simlock/simlock/internal/driver/demo"
)

// The default daemon is a worker with demo drivers: the typed client
// leases a device on it as the default principal, and the admin session
// sees that lease's owner.
func TestAWorkerLeasesADemoDeviceToTheClient(t *testing.T) {
	d := daemontest.Start(t)
	ctx := context.Background()
	g, err := d.Client().RequestLease(ctx, contract.LeaseRequestInput{Platform: contract.PlatformIOS}, nil)
	if err != nil {
		t.Fatalf("lease on the default daemon: %v", err)
	}
	if g.Lease.OwnerID != "agent" || g.Device.ID == "" {
		t.Errorf("grant = lease %+v device %q, want a device owned by agent", g.Lease, g.Device.ID)
	}
	leases, err := d.Admin().Leases(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(leases) != 1 || leases[0].ID != g.Lease.ID {
		t.Errorf("the admin sees leases %+v, want the one granted", leases)
	}
}

// Principal names who Client is; Set writes config before the start.
func TestOptionsNameThePrincipalAndTheConfig(t *testing.T) {
	d := daemontest.Start(t, daemontest.Principal("robot"), daemontest.Set("lease.defaultTtlMs", "123000"))
	g, err := d.Client().RequestLease(context.Background(), contract.LeaseRequestInput{Platform: contract.PlatformAndroid}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if g.Lease.OwnerID != "robot" || g.Lease.TTLMs != 123000 {
		t.Errorf("lease = %+v, want owner robot and the configured default TTL 123000 ms", g.Lease)
	}
}

// WrapDemo puts the test's driver in front of each demo driver.
func TestWrapDemoReachesTheDaemonsDrivers(t *testing.T) {
	wrapped := 0
	d := daemontest.Start(t, daemontest.WrapDemo(func(dd *demo.Driver) driver.Driver { wrapped++; return dd }))
	if wrapped != len(contract.Platforms()) {
		t.Errorf("WrapDemo saw %d drivers, want one per platform (%d)", wrapped, len(contract.Platforms()))
	}
	if _, err := d.Client().Status(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// A lease lives in the home: after Restart the daemon still has it, and
// Client is a new session on the new start.
func TestRestartKeepsTheHome(t *testing.T) {
	d := daemontest.Start(t)
	ctx := context.Background()
	g, err := d.Client().RequestLease(ctx, contract.LeaseRequestInput{Platform: contract.PlatformIOS, TTLMs: 600000}, nil)
	if err != nil {
		t.Fatal(err)
	}
	home := d.Home
	d.Restart()
	if d.Home != home {
		t.Fatalf("Restart moved the home from %s to %s", home, d.Home)
	}
	leases, err := d.Admin().Leases(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(leases) != 1 || leases[0].ID != g.Lease.ID {
		t.Errorf("after Restart the leases are %+v, want %s", leases, g.Lease.ID)
	}
	if _, err := d.Client().Status(ctx); err != nil {
		t.Errorf("Client after Restart: %v", err)
	}
	d.Stop()
	d.Stop() // twice is harmless
}

// Gateway starts a gateway with its HTTP API; a worker started with Join
// and the gateway's worker token shows up connected in its worker list.
func TestAWorkerJoinsAGatewayStartedByTheHarness(t *testing.T) {
	gw := daemontest.Start(t, daemontest.Gateway(), daemontest.Set("gateway.heartbeatMs", "200"))
	if gw.HTTPURL() == "" {
		t.Fatal("a gateway from Gateway() serves no HTTP")
	}
	ctx := context.Background()
	st, err := gw.Admin().StatusWith(ctx, contract.StatusGetInput{WaitReady: true})
	if err != nil {
		t.Fatal(err)
	}
	if st.Daemon.Mode != contract.ModeGateway {
		t.Fatalf("status mode = %q, want gateway", st.Daemon.Mode)
	}
	admin := gw.Admin()
	events, _, err := admin.Subscribe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	daemontest.Start(t, daemontest.Join(gw.HTTPURL(), gw.WorkerToken(), "w1"), daemontest.Set("gateway.heartbeatMs", "200"))
	timeout := time.After(10 * time.Second)
	for connected := false; !connected; {
		select {
		case ev := <-events:
			connected = ev.Event == "worker.connected"
		case <-timeout:
			t.Fatal("no worker.connected on the gateway within 10 s of the worker's start")
		}
	}
	var list contract.WorkerListResult
	if err := admin.Call(ctx, contract.OpWorkerList, contract.Empty{}, &list); err != nil {
		t.Fatal(err)
	}
	if len(list.Workers) != 1 || list.Workers[0].Label != "w1" || list.Workers[0].Connection != contract.WorkerConnected {
		t.Errorf("worker list after worker.connected = %+v, want w1 connected", list)
	}
}
