package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/simlock/simlock/internal/bintest"
)

// fastDemo makes the demo driver quick; its timings are real waits.
var fastDemo = []string{
	"drivers.demo.provisionMs", "40",
	"drivers.demo.bootMs", "40",
	"drivers.demo.reclaimMs", "40",
}

// Agents lease, renew and release over the socket and HTTP while the daemon
// is killed with SIGKILL between random operations and started again; after
// every restart, and at the end, what the daemon holds is checked against
// what it acknowledged.
func TestKilledDaemonsLoseNothingAcknowledged(t *testing.T) {
	enabled(t)
	port, err := bintest.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	settings := append([]string{
		"http.enabled", "true", "http.port", strconv.Itoa(port),
		"capacity.strategy", "fixed", "capacity.config.maxRunning", "4",
	}, fastDemo...)
	h := newHome(t, settings...)
	h.start()
	var base string
	{
		var st struct {
			Daemon struct {
				HTTPURL string `json:"httpUrl"`
			} `json:"daemon"`
		}
		if err := jsonOut(h.cli("status", "--json"), &st); err != nil || st.Daemon.HTTPURL == "" {
			t.Fatalf("status --json shows no daemon.httpUrl: %v", err)
		}
		base = st.Daemon.HTTPURL
	}

	seed := chaosSeed(t)
	rng := rand.New(rand.NewPCG(seed, 0))
	l := newLedger()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	nHTTP := startAgents(ctx, &wg, seed, l, h, base, nil)

	var vs violationLog
	report := vs.report
	var restarts []time.Duration
	kills := 0
	for kills < *minKills || l.ops.Load() < int64(*minOps) {
		target := l.ops.Load() + 10 + int64(rng.IntN(80))
		if !l.waitOps(target, 60*time.Second) {
			cancel()
			wg.Wait()
			t.Fatalf("no progress: %d operations acknowledged, %d wanted before kill %d; violations so far: %v",
				l.ops.Load(), target, kills+1, append(vs.all, l.found()...))
		}
		killed := time.Now()
		h.kill()
		kills++
		h.start()
		restarts = append(restarts, time.Since(killed))
		report(fmt.Sprintf("after kill %d", kills), check(ctx, h, l))
	}
	cancel()
	wg.Wait()
	report("at the end", check(context.Background(), h, l))
	report("seen by an agent", l.found())

	slices.Sort(restarts)
	t.Logf("chaos: %d agents (%d over HTTP), %d operations acknowledged, %d leases granted, %d kills, restart (kill to ready) median %v, max %v, %d violations",
		*agents, nHTTP, l.ops.Load(), len(l.snapshot()), kills, restarts[len(restarts)/2].Round(time.Millisecond),
		restarts[len(restarts)-1].Round(time.Millisecond), len(vs.all))
	for _, v := range vs.all {
		t.Errorf("violation: %s", v)
	}
}
