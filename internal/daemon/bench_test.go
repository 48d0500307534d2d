package daemon

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/simlock/simlock/internal/config"
	"github.com/simlock/simlock/internal/contract"
)

// BenchmarkRenewRoundTrip measures lease.renew round trips over the unix
// socket: frame, dispatch, one SQLite transaction, answer.
func BenchmarkRenewRoundTrip(b *testing.B) {
	_, home := startDaemon(b, nil)
	c := dial(b, home, "bench", false)
	ctx := context.Background()
	g, err := c.RequestLease(ctx, contract.LeaseRequestInput{Platform: contract.PlatformIOS}, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for b.Loop() {
		if _, err := c.Renew(ctx, g.Lease.ID, 0); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "renews/s")
}

// BenchmarkGrantIdleReadyDevice measures the time from lease.request to the
// grant when an idle ready device fits (demo timings at zero): the queue,
// the plan and the grant's commit, over the socket.
func BenchmarkGrantIdleReadyDevice(b *testing.B) {
	_, home := startDaemon(b, nil)
	c := dial(b, home, "bench", false)
	admin := dial(b, home, "ops", true)
	ctx := context.Background()
	events, _, err := admin.Subscribe(ctx)
	if err != nil {
		b.Fatal(err)
	}
	// Android reclaims leave the device ready: one lease and release warm it.
	in := contract.LeaseRequestInput{Platform: contract.PlatformAndroid}
	release := func(id string) {
		if _, err := c.Release(ctx, id); err != nil {
			b.Fatal(err)
		}
		for ev := range events {
			if ev.Event == "device.reclaimed" {
				return
			}
		}
		b.Fatal("event stream ended")
	}
	g, err := c.RequestLease(ctx, in, nil)
	if err != nil {
		b.Fatal(err)
	}
	release(g.Lease.ID)
	b.ResetTimer()
	for b.Loop() {
		g, err := c.RequestLease(ctx, in, nil)
		if err != nil {
			b.Fatal(err)
		}
		if g.Source != contract.SourceWarm {
			b.Fatalf("source %s, want warm", g.Source)
		}
		b.StopTimer()
		release(g.Lease.ID)
		b.StartTimer()
	}
}

// BenchmarkStatusFull measures a full status.get with 10,000 live leases:
// the snapshot, its encoding and the read of the frame by the client
// (decoded into a contract.Status, and only read as raw JSON).
func BenchmarkStatusFull(b *testing.B) {
	cfg, err := config.Parse([]byte(`{"capacity":{"strategy":"fixed","config":{"maxRunning":20000,"ios":{"maxRunning":20000,"maxDevices":20000}}},"lease":{"defaultTtlMs":3600000}}`))
	if err != nil {
		b.Fatal(err)
	}
	_, home := startDaemon(b, cfg)
	ctx := context.Background()
	admin := dial(b, home, "ops", true)
	for i := range 10000 {
		if _, err := admin.RequestLease(ctx, contract.LeaseRequestInput{Platform: contract.PlatformIOS, RequesterID: fmt.Sprintf("r%d", i)}, nil); err != nil {
			b.Fatal(err)
		}
	}
	b.Run("decoded", func(b *testing.B) {
		for b.Loop() {
			if _, err := admin.Status(ctx); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("raw", func(b *testing.B) {
		for b.Loop() {
			var raw json.RawMessage
			if err := admin.Call(ctx, contract.OpStatusGet, contract.StatusGetInput{}, &raw); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkReleaseToQueuedGrant measures the time from a release to the
// grant of the request queued behind it (the device is cleaned at once, in
// the demo driver at zero timings, and handed on in the clean's commit).
func BenchmarkReleaseToQueuedGrant(b *testing.B) {
	cfg, err := config.Parse([]byte(`{"capacity":{"strategy":"fixed","config":{"maxRunning":1}}}`))
	if err != nil {
		b.Fatal(err)
	}
	_, home := startDaemon(b, cfg)
	ctx := context.Background()
	a, w := dial(b, home, "a", false), dial(b, home, "w", false)
	in := contract.LeaseRequestInput{Platform: contract.PlatformAndroid}
	held, err := a.RequestLease(ctx, in, nil)
	if err != nil {
		b.Fatal(err)
	}
	holder, waiter := a, w
	for b.Loop() {
		b.StopTimer()
		queued := make(chan struct{}, 1)
		got := make(chan contract.LeaseGrant, 1)
		go func() {
			g, err := waiter.RequestLease(ctx, in, func(p contract.LeaseProgress) {
				if p.Stage == contract.StageQueued {
					select {
					case queued <- struct{}{}:
					default:
					}
				}
			})
			if err != nil {
				b.Error(err)
			}
			got <- g
		}()
		<-queued
		b.StartTimer()
		if _, err := holder.Release(ctx, held.Lease.ID); err != nil {
			b.Fatal(err)
		}
		held = <-got
		holder, waiter = waiter, holder
	}
}

// BenchmarkRoundTrip measures the protocol alone: a lease.list of no
// leases, which decides nothing and touches no store.
func BenchmarkRoundTrip(b *testing.B) {
	_, home := startDaemon(b, nil)
	c := dial(b, home, "bench", false)
	ctx := context.Background()
	for b.Loop() {
		if _, err := c.Leases(ctx); err != nil {
			b.Fatal(err)
		}
	}
}
