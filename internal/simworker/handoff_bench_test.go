package simworker_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/simlock/simlock/internal/client"
	"github.com/simlock/simlock/internal/config"
	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/daemon"
	"github.com/simlock/simlock/internal/simworker"
	"github.com/simlock/simlock/internal/uplink"
)

// BenchmarkGatewayHandOff times, on a gateway daemon in the test process (so
// -cpuprofile profiles the gateway), one hand-off with requests waiting:
// a simulated worker ends a lease on its own, as an expiry, and the
// gateway grants the freed device to the next request in line, seen as
// its grant.recorded. Every device of 10 workers of 50 is leased and
// the line holds the sub-benchmark's count of requests, each of its own
// requester; b.N must stay below it.
//
//	go test ./internal/simworker -run XXX -bench GatewayHandOff -benchtime 500x -cpuprofile cpu.out
func BenchmarkGatewayHandOff(b *testing.B) {
	for _, waiting := range []int{1000, 10000} {
		b.Run("waiting="+strconv.Itoa(waiting), func(b *testing.B) { benchHandOff(b, 10, 50, waiting) })
	}
}

// simGateway starts a gateway daemon in the test process (config keys
// overridden by kvs) with n simulated workers of devices devices each
// joined to it, and returns them, an admin session, a dial for more
// sessions, and the uplink of the first worker; all ends with the
// benchmark.
func simGateway(b *testing.B, n, devices int, kvs ...[2]string) ([]*simworker.Worker, *client.Client, func(contract.HelloInput) *client.Client, *uplink.Conn) {
	ctx := context.Background()
	cfg := config.Default()
	for _, kv := range append([][2]string{{"mode", "gateway"}, {"http.enabled", "true"}, {"http.port", "0"}}, kvs...) {
		var err error
		if cfg, err = cfg.Override(kv[0], kv[1]); err != nil {
			b.Fatal(err)
		}
	}
	home, err := os.MkdirTemp("", "slswb")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { os.RemoveAll(home) })
	d, err := daemon.Start(ctx, daemon.Options{Home: home, Version: "bench", Config: cfg})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { d.Stop("bench over") })
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
	ws := make([]*simworker.Worker, n)
	var first *uplink.Conn
	for i := range ws {
		var t contract.TokenCreateResult
		if err := admin.Call(ctx, contract.OpTokenCreate, contract.TokenCreateInput{Role: contract.TokenWorker}, &t); err != nil {
			b.Fatal(err)
		}
		ws[i] = simworker.New(simworker.Options{ID: fmt.Sprintf("sim-%d", i), Devices: devices})
		conn, done, err := ws[i].Join(ctx, d.HTTPURL(), t.Secret, uplink.Options{})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { conn.Close(); <-done })
		if first == nil {
			first = conn
		}
	}
	return ws, admin, dial, first
}

// fullGateway starts a gateway daemon in the test process with n
// simulated workers of devices devices each joined to it, every device
// leased by the workers' own agents, and waiting requests in its line,
// each of its own requester. It returns the workers and an admin session;
// all ends with the benchmark.
func fullGateway(b *testing.B, n, devices, waiting int) ([]*simworker.Worker, *client.Client) {
	ctx := context.Background()
	ws, admin, dial, _ := simGateway(b, n, devices, [2]string{"lease.maxRequestRecords", strconv.Itoa(3 * waiting)})
	leased := func() (int, int) {
		var l contract.WorkerListResult
		if err := admin.Call(ctx, contract.OpWorkerList, struct{}{}, &l); err != nil {
			b.Fatal(err)
		}
		up, ls := 0, 0
		for _, w := range l.Workers {
			if w.Connection == contract.WorkerConnected {
				up++
			}
			ls += w.Leases
		}
		return up, ls
	}
	untilB(b, "the workers connected", func() bool { up, _ := leased(); return up == n })
	for _, w := range ws {
		w.Occupy()
	}
	untilB(b, "every device leased", func() bool { _, ls := leased(); return ls == n*devices })
	var wg sync.WaitGroup
	for a := range 8 {
		c := dial(contract.HelloInput{Principal: fmt.Sprintf("agent%d", a)})
		wg.Go(func() {
			for i := a; i < waiting; i += 8 {
				in := contract.LeaseRequestInput{Platform: contract.PlatformAndroid, RequesterID: fmt.Sprintf("agent%d/r%d", a, i)}
				if err := c.Call(ctx, contract.OpLeaseRequestCreate, in, nil); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	return ws, admin
}

func benchHandOff(b *testing.B, n, devices, waiting int) {
	ctx := context.Background()
	ws, admin := fullGateway(b, n, devices, waiting)
	events, _, err := admin.Subscribe(ctx)
	if err != nil {
		b.Fatal(err)
	}
	if b.N >= waiting {
		b.Fatalf("b.N = %d, want fewer than the %d requests waiting", b.N, waiting)
	}
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		ws[i%n].End(1)
		for ev := range events {
			if ev.Event == contract.EvGrantRecorded {
				break
			}
		}
	}
}

// untilB is until for a benchmark's setup.
func untilB(b *testing.B, what string, ok func() bool) {
	b.Helper()
	for range 1000 {
		if ok() {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	b.Fatalf("no %s", what)
}

// BenchmarkGatewayGrantRate measures, on a gateway daemon in the test
// process, the grants a second with 10,000 requests waiting while the
// simulated workers end their oldest leases (as expiries, none younger
// than 100 ms) at 2,500 a second between them, over a window of one
// second per b.N, as the fleet bench's grants row does; the metric is
// grants/s. With -cpuprofile it profiles the gateway's side of it.
//
//	go test ./internal/simworker -run XXX -bench GatewayGrantRate -benchtime 3x -cpuprofile cpu.out
func BenchmarkGatewayGrantRate(b *testing.B) {
	for _, n := range []int{10, 1000} {
		b.Run("workers="+strconv.Itoa(n), func(b *testing.B) { benchGrantRate(b, n, 50, 10000, 2500) })
	}
}

func benchGrantRate(b *testing.B, n, devices, waiting, freeRate int) {
	ctx := context.Background()
	ws, admin := fullGateway(b, n, devices, waiting)
	waitingNow := func() int {
		s, err := admin.StatusWith(ctx, contract.StatusGetInput{Summary: true})
		if err != nil || s.Counts == nil {
			b.Fatalf("status: %v", err)
		}
		return s.Counts.Waiting
	}
	b.ResetTimer()
	w0, t0 := waitingNow(), time.Now()
	stop := make(chan struct{})
	freed := make(chan struct{})
	go func() {
		defer close(freed)
		tick := time.NewTicker(2 * time.Millisecond)
		defer tick.Stop()
		ended, next := 0, 0
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			due := int(time.Since(t0).Seconds() * float64(freeRate))
			for tries := 0; ended < due && tries < n; next++ {
				if ws[next%n].EndOlder(1, 100*time.Millisecond) == 1 {
					ended, tries = ended+1, 0
				} else {
					tries++
				}
			}
		}
	}()
	for b.Loop() {
		time.Sleep(time.Second) // the window: a rate over wall time
	}
	w1 := waitingNow()
	close(stop)
	<-freed
	b.ReportMetric(float64(w0-w1)/time.Since(t0).Seconds(), "grants/s")
}
