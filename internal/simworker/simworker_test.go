package simworker_test

import (
	"context"
	"encoding/json"
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
	gw, w, _ := joinedWith(t, devices)
	return gw, w
}

// joinedWith is joined, with the worker's token to join again with.
func joinedWith(t *testing.T, devices int) (*daemontest.Daemon, *simworker.Worker, string) {
	t.Helper()
	gw := daemontest.Start(t, daemontest.Gateway())
	ctx, cancel := context.WithTimeout(context.Background(), bound)
	defer cancel()
	if _, err := gw.Admin().StatusWith(ctx, contract.StatusGetInput{WaitReady: true}); err != nil {
		t.Fatal(err)
	}
	w := simworker.New(simworker.Options{ID: "sim-1", Devices: devices})
	token := gw.WorkerToken()
	conn, done, err := w.Join(ctx, gw.HTTPURL(), token, uplink.Options{})
	if err != nil {
		t.Fatalf("the simulated worker could not join: %v", err)
	}
	t.Cleanup(func() { conn.Close(); <-done })
	admin := gw.Admin()
	until(t, "the simulated worker connected with its devices", func() bool {
		v := view(t, admin, "sim-1")
		return v.Connection == contract.WorkerConnected && len(v.Devices) == devices
	})
	return gw, w, token
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

// The gateway keeps the worker's view from the events it relays: after a
// lease the worker ends on its own (its end, its device's clean, its
// capacity), the next request is placed on the freed device without the
// gateway reading the worker's status; an event the view cannot take
// (device.ready) still has it read.
func TestAFreedDeviceIsPlacedWithoutAStatusRead(t *testing.T) {
	gw, w := joined(t, 1)
	admin, agent := gw.Admin(), gw.Client()
	ctx, cancel := context.WithTimeout(context.Background(), bound)
	defer cancel()
	g, err := agent.RequestLease(ctx, contract.LeaseRequestInput{Platform: contract.PlatformAndroid}, nil)
	if err != nil {
		t.Fatal(err)
	}
	until(t, "the lease in the gateway's view", func() bool {
		v := view(t, admin, "sim-1")
		return len(v.Leases) == 1 && v.Capacity != nil && v.Capacity.Global.Warm == 0
	})
	reads := w.StatusReads()
	if n := w.End(1); n != 1 {
		t.Fatalf("End ended %d leases, want 1", n)
	}
	select {
	case <-agent.LeaseLost():
	case <-ctx.Done():
		t.Fatal("the holder heard nothing of the lease the worker ended")
	}
	g2, err := agent.RequestLease(ctx, contract.LeaseRequestInput{Platform: contract.PlatformAndroid}, nil)
	if err != nil {
		t.Fatalf("a request after the worker freed its only device: %v", err)
	}
	if g2.Device.ID != g.Device.ID {
		t.Errorf("the next request was placed on %q, want the freed %q", g2.Device.ID, g.Device.ID)
	}
	until(t, "the new lease in the gateway's view", func() bool {
		v := view(t, admin, "sim-1")
		return len(v.Leases) == 1 && v.Leases[0].ID != g.Lease.ID && v.Capacity != nil && v.Capacity.Global.Warm == 0
	})
	if got := w.StatusReads() - reads; got != 0 {
		t.Errorf("the gateway read the worker's status %d times for a lease end, a clean and a grant, want 0", got)
	}

	w.Emit(contract.EvDeviceReady, map[string]any{"deviceId": g.Device.ID}, 1)
	until(t, "a status read after device.ready", func() bool { return w.StatusReads() > reads })
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

// Events the simulated worker commits while its uplink is down are
// replayed to the gateway when it joins again (events.replay after the
// last seq relayed), and relayed to the gateway's subscribers in order.
func TestASimulatedWorkersEventsAreReplayedAfterAReconnect(t *testing.T) {
	gw, w, token := joinedWith(t, 1)
	ctx, cancel := context.WithTimeout(context.Background(), bound)
	defer cancel()
	events, _, err := gw.Admin().Subscribe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	depth := func(n int) map[string]any { return map[string]any{"depth": n} }
	w.Emit(contract.EvQueueChanged, depth(1), 1)
	await := func(want int) {
		t.Helper()
		for {
			select {
			case ev := <-events:
				if ev.Event != contract.EvQueueChanged {
					continue
				}
				var p struct {
					Depth    int    `json:"depth"`
					WorkerID string `json:"workerId"`
				}
				_ = json.Unmarshal(ev.Payload, &p)
				if p.WorkerID != "sim-1" || p.Depth != want {
					t.Fatalf("relayed queue.changed = %s, want depth %d from sim-1", ev.Payload, want)
				}
				return
			case <-ctx.Done():
				t.Fatalf("the gateway relayed no queue.changed of depth %d", want)
			}
		}
	}
	await(1)

	admin := gw.Admin()
	// The uplink of joinedWith is closed by its cleanup; this one is the
	// worker's second.
	var second *uplink.Conn
	var done <-chan struct{}
	until(t, "the worker's uplink replaced", func() bool {
		var err error
		second, done, err = w.Join(ctx, gw.HTTPURL(), token, uplink.Options{})
		return err == nil
	})
	until(t, "the worker connected again", func() bool { return view(t, admin, "sim-1").Connection == contract.WorkerConnected })
	second.Close()
	<-done
	until(t, "the worker disconnected", func() bool { return view(t, admin, "sim-1").Connection != contract.WorkerConnected })
	w.Emit(contract.EvQueueChanged, depth(2), 1)
	w.Emit(contract.EvQueueChanged, depth(3), 1)
	third, done3, err := w.Join(ctx, gw.HTTPURL(), token, uplink.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { third.Close(); <-done3 }()
	await(2)
	await(3)
}

// End ends the oldest leases first, as expiries of one TTL come, and
// EndOlder none granted more recently than its age.
func TestEndEndsTheOldestLeasesFirst(t *testing.T) {
	w := simworker.New(simworker.Options{ID: "sim-1", Devices: 3})
	if n := w.Occupy(); n != 3 {
		t.Fatalf("Occupy leased %d, want 3", n)
	}
	if n := w.EndOlder(1, time.Hour); n != 0 {
		t.Errorf("EndOlder(1, 1h) ended %d leases granted just now, want 0", n)
	}
	if n := w.End(1); n != 1 {
		t.Fatalf("End(1) ended %d, want 1", n)
	}
	w.Occupy() // the first device again, as lse_sim_4: the newest
	if n := w.End(2); n != 2 {
		t.Fatalf("End(2) ended %d, want 2", n)
	}
	s := w.Status()
	if len(s.Leases) != 1 || s.Leases[0].ID != "lse_sim_4" {
		t.Errorf("after End(2) the leases left are %+v, want only the newest, lse_sim_4", s.Leases)
	}
}
