package simworker_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/simlock/simlock/internal/contract"
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
