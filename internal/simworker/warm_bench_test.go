package simworker_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/simlock/simlock/internal/contract"
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
	_, admin, dial := simGateway(b, n, devices)
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
	var took []time.Duration
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
		b.StartTimer()
	}
	slices.Sort(took)
	b.ReportMetric(float64(took[len(took)/2].Microseconds()), "p50-µs")
}
