package daemon

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/simlock/simlock/internal/config"
	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/core"
	"github.com/simlock/simlock/internal/driver"
	"github.com/simlock/simlock/internal/driver/demo"
)

// metricsText is metrics.get as c sees it.
func metricsText(t *testing.T, c interface {
	Call(context.Context, contract.Op, any, any) error
}) (string, error) {
	t.Helper()
	var r contract.MetricsResult
	err := c.Call(context.Background(), contract.OpMetricsGet, contract.Empty{}, &r)
	return r.Text, err
}

// metrics.get answers the admin the exposition with the grants and leases
// the engine made, read while leases are granted and released (the race
// detector watches the scrape's reads), and refuses an agent.
func TestMetricsGetReadsTheEngineWhileItDecides(t *testing.T) {
	_, home := startDaemon(t, nil)
	admin := dial(t, home, "ops", true)
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Go(func() {
			c := dial(t, home, "agent-"+string(rune('a'+i)), false)
			for range 3 {
				g, err := c.RequestLease(context.Background(), contract.LeaseRequestInput{Platform: contract.PlatformAndroid}, nil)
				if err != nil {
					t.Errorf("lease: %v", err)
					return
				}
				if _, err := c.Release(context.Background(), g.Lease.ID); err != nil {
					t.Errorf("release: %v", err)
					return
				}
			}
		})
	}
	scraped := make(chan struct{})
	go func() {
		defer close(scraped)
		for range 20 {
			if _, err := metricsText(t, admin); err != nil {
				t.Errorf("metrics.get while leasing: %v", err)
				return
			}
		}
	}()
	wg.Wait()
	<-scraped

	text, err := metricsText(t, admin)
	if err != nil {
		t.Fatal(err)
	}
	var grants float64
	for _, l := range strings.Split(text, "\n") {
		if strings.HasPrefix(l, `simlock_grants_total{platform="android"`) {
			if v, err := strconv.ParseFloat(l[strings.LastIndex(l, " ")+1:], 64); err == nil {
				grants += v
			}
		}
	}
	if grants != 12 {
		t.Errorf("simlock_grants_total for android sums %v after 12 grants, want 12:\n%s", grants, text)
	}
	for _, want := range []string{`simlock_leases_active{platform="android"} 0`, `simlock_build_info{mode="worker",version="test"} 1`, `simlock_lease_ends_total{platform="android",reason="explicit"} 12`} {
		if !strings.Contains(text, want) {
			t.Errorf("metrics.get lacks %s:\n%s", want, text)
		}
	}

	if _, err := metricsText(t, dial(t, home, "agent", false)); code(err) != contract.CodeForbidden {
		t.Errorf("metrics.get as an agent: %v, want FORBIDDEN", err)
	}
}

// A lease granted before a restart ends, after it, counted by its
// platform: the fold learns the leases the engine loaded when it starts.
func TestALeaseFromBeforeARestartEndsByItsPlatform(t *testing.T) {
	drivers := map[contract.Platform]driver.Driver{}
	for _, p := range contract.Platforms() {
		d, err := demo.New(demo.Options{Platform: p})
		if err != nil {
			t.Fatal(err)
		}
		drivers[p] = d
	}
	d, home := startDaemonWith(t, nil, drivers)
	g, err := dial(t, home, "a", false).RequestLease(context.Background(), contract.LeaseRequestInput{Platform: contract.PlatformAndroid}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Stop("test"); err != nil {
		t.Fatal(err)
	}
	again, err := Start(context.Background(), Options{Home: home, Version: "test", Config: config.Default(), Drivers: drivers, Host: core.Host{CPUs: 8, RAMBytes: 64 << 30}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { again.Stop("test over") })
	if _, err := dial(t, home, "a", false).Release(context.Background(), g.Lease.ID); err != nil {
		t.Fatalf("release after the restart: %v", err)
	}
	text, err := metricsText(t, dial(t, home, "ops", true))
	if err != nil {
		t.Fatal(err)
	}
	if want := `simlock_lease_ends_total{platform="android",reason="explicit"} 1`; !strings.Contains(text, want) {
		t.Errorf("after the restart, the release of the lease granted before it: no %s in\n%s", want, text)
	}
}
