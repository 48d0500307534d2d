package simworker_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/simlock/simlock/internal/client"
	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/simworker"
)

// BenchmarkGatewayWarmGrant times, on a gateway daemon in the test process
// (so -cpuprofile and -trace see the gateway's side), one warm grant
// through the gateway: an agent's lease.request on the gateway's socket,
// routed to one of 10 simulated workers of 50 idle devices, answered with
// the worker's grant. Each lease is released (untimed) and the next
// request waits until the gateway's view shows the device idle again, as
// `simlock bench --fleet` does. Besides the mean (ns/op), it reports the
// median grant (p50-µs), which a stray slow grant on a shared machine
// does not move.
//
//	go test ./internal/simworker -run XXX -bench GatewayWarmGrant -benchtime 500x -trace trace.out
func BenchmarkGatewayWarmGrant(b *testing.B) {
	ctx := context.Background()
	const n, devices = 10, 50
	_, admin, dial, first := simGateway(b, n, devices)
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
	var took, rtts []time.Duration
	for b.Loop() {
		start := time.Now()
		g, err := agent.RequestLease(ctx, in, nil)
		if err != nil {
			b.Fatal(err)
		}
		took = append(took, time.Since(start))
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
		// The uplink's own round trip, between the grants, as `simlock
		// bench --fleet` times it.
		rtt, err := first.Ping(ctx)
		if err != nil {
			b.Fatal(err)
		}
		rtts = append(rtts, rtt)
		b.StartTimer()
	}
	b.StopTimer()
	direct := directWarmGrants(b, devices, len(took))
	p50 := func(ds []time.Duration) float64 {
		slices.Sort(ds)
		return float64(ds[len(ds)/2].Nanoseconds()) / 1e3
	}
	// The goal of the fleet bench: a warm grant through the gateway within
	// a direct one plus two uplink round trips (bound-µs).
	b.ReportMetric(p50(took), "p50-µs")
	b.ReportMetric(p50(direct), "direct-p50-µs")
	b.ReportMetric(p50(rtts), "uplink-rtt-p50-µs")
	b.ReportMetric(p50(direct)+2*p50(rtts), "bound-µs")
}

// directWarmGrants times n warm grants on a simulated worker of devices
// devices of its own, on its socket, each released (untimed), as `simlock
// bench --fleet` times its direct warm grant.
func directWarmGrants(b *testing.B, devices, n int) []time.Duration {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "slsd") // a socket path must stay short
	if err != nil {
		b.Fatal(err)
	}
	defer os.RemoveAll(dir)
	w := simworker.New(simworker.Options{ID: "sim-direct", Devices: devices})
	l, err := w.Listen(filepath.Join(dir, "direct.sock"))
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	c, err := client.Dial(ctx, filepath.Join(dir, "direct.sock"), contract.HelloInput{Principal: "agent"})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	in := contract.LeaseRequestInput{Platform: contract.PlatformAndroid, RequesterID: "agent/warm"}
	took := make([]time.Duration, 0, n)
	for range n {
		start := time.Now()
		g, err := c.RequestLease(ctx, in, nil)
		if err != nil {
			b.Fatal(err)
		}
		took = append(took, time.Since(start))
		if _, err := c.Release(ctx, g.Lease.ID); err != nil {
			b.Fatal(err)
		}
	}
	return took
}
