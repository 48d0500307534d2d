package simworker_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/simlock/simlock/internal/client"
	"github.com/simlock/simlock/internal/config"
	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/daemon"
	"github.com/simlock/simlock/internal/simworker"
	"github.com/simlock/simlock/internal/uplink"
)

// BenchmarkGatewayWarmGrant times, on a gateway daemon in the test process
// (so -cpuprofile and -trace see the gateway's side), one warm grant
// through the gateway: an agent's lease.request on the gateway's socket,
// routed to one of 10 simulated workers of 50 idle devices, answered with
// the worker's grant. Each lease is released (untimed) and the next
// request waits until the gateway's view shows the device idle again, as
// `simlock bench --fleet` does.
//
//	go test ./internal/simworker -run XXX -bench GatewayWarmGrant -benchtime 500x -trace trace.out
func BenchmarkGatewayWarmGrant(b *testing.B) {
	ctx := context.Background()
	cfg := config.Default()
	for _, kv := range [][2]string{{"mode", "gateway"}, {"http.enabled", "true"}, {"http.port", "0"}} {
		var err error
		if cfg, err = cfg.Override(kv[0], kv[1]); err != nil {
			b.Fatal(err)
		}
	}
	home, err := os.MkdirTemp("", "slswb")
	if err != nil {
		b.Fatal(err)
	}
	defer os.RemoveAll(home)
	d, err := daemon.Start(ctx, daemon.Options{Home: home, Version: "bench", Config: cfg})
	if err != nil {
		b.Fatal(err)
	}
	defer d.Stop("bench over")
	tok, err := os.ReadFile(filepath.Join(home, daemon.AdminTokenName))
	if err != nil {
		b.Fatal(err)
	}
	dial := func(hello contract.HelloInput) *client.Client {
		c, err := client.Dial(ctx, daemon.SocketPath(home), hello)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { c.Close() })
		return c
	}
	admin := dial(contract.HelloInput{Principal: "operator", AdminToken: strings.TrimSpace(string(tok))})
	if _, err := admin.StatusWith(ctx, contract.StatusGetInput{WaitReady: true}); err != nil {
		b.Fatal(err)
	}
	const n, devices = 10, 50
	for i := range n {
		var t contract.TokenCreateResult
		if err := admin.Call(ctx, contract.OpTokenCreate, contract.TokenCreateInput{Role: contract.TokenWorker}, &t); err != nil {
			b.Fatal(err)
		}
		w := simworker.New(simworker.Options{ID: fmt.Sprintf("sim-%d", i), Devices: devices})
		conn, done, err := w.Join(ctx, d.HTTPURL(), t.Secret, uplink.Options{})
		if err != nil {
			b.Fatal(err)
		}
		defer func() { conn.Close(); <-done }()
	}
	view := func(id string) *contract.WorkerView {
		var v contract.WorkerView
		if err := admin.Call(ctx, contract.OpWorkerGet, contract.WorkerIDInput{WorkerID: id}, &v); err != nil {
			b.Fatal(err)
		}
		return &v
	}
	untilB(b, "the workers connected", func() bool {
		for i := range n {
			v := view(fmt.Sprintf("sim-%d", i))
			if v.Connection != contract.WorkerConnected || v.Capacity == nil || v.Capacity.Global.Warm != devices {
				return false
			}
		}
		return true
	})
	agent := dial(contract.HelloInput{Principal: "agent"})
	in := contract.LeaseRequestInput{Platform: contract.PlatformAndroid, RequesterID: "agent/warm"}
	for b.Loop() {
		g, err := agent.RequestLease(ctx, in, nil)
		if err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		if g.Source != contract.SourceWarm {
			b.Fatalf("source %s, want warm", g.Source)
		}
		if _, err := agent.Release(ctx, g.Lease.ID); err != nil {
			b.Fatal(err)
		}
		untilB(b, "the released device idle", func() bool {
			v := view(g.Device.WorkerID)
			return v.Capacity != nil && v.Capacity.Global.Warm == devices
		})
		b.StartTimer()
	}
}
