package bench

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/simlock/simlock/internal/client"
	"github.com/simlock/simlock/internal/config"
	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/daemon"
	"github.com/simlock/simlock/internal/driver"
	"github.com/simlock/simlock/internal/driver/demo"
)

// reportClock is a demo driver whose InstallComponent notes when it
// reports each whole percentage, the moment the report leaves the driver.
type reportClock struct {
	*demo.Driver

	mu sync.Mutex
	// mu guards the field below.
	at map[pushKey]time.Time
}

var _ driver.Installer = (*reportClock)(nil)

type pushKey struct {
	component string
	percent   int
}

func (r *reportClock) InstallComponent(ctx context.Context, component string, progress func(driver.InstallProgress)) (driver.InstallResult, error) {
	return r.Driver.InstallComponent(ctx, component, func(p driver.InstallProgress) {
		k := pushKey{component, int(p.Percent)}
		r.mu.Lock()
		if _, ok := r.at[k]; !ok {
			r.at[k] = time.Now()
		}
		r.mu.Unlock()
		progress(p)
	})
}

func (r *reportClock) reported(k pushKey) (time.Time, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	t, ok := r.at[k]
	return t, ok
}

// measurePush times progress pushes from the driver's report to the
// client. The driver runs inside the daemon, so this row runs the daemon
// in this process (daemon.Start) with a demo driver wrapped in a
// reportClock, and a client on its socket asks for leases that download a
// runtime first: each percentage's latency is its receipt minus its report.
func measurePush(ctx context.Context, env Env, home string, samples int) (benchStat, error) {
	downloads := (samples + pushReports - 1) / pushReports
	versions := make([]string, downloads)
	for i := range versions {
		versions[i] = fmt.Sprintf("26.%d", 4+i)
	}
	drv, err := demo.New(demo.Options{Platform: contract.PlatformIOS, DownloadableRuntimes: versions, DownloadTime: pushDownload})
	if err != nil {
		return benchStat{}, benchError("demo driver", err)
	}
	rc := &reportClock{Driver: drv, at: map[pushKey]time.Time{}}
	cfg := config.Default()
	for _, kv := range [][2]string{
		{"capacity.strategy", "fixed"},
		{"capacity.config.maxRunning", "2"},
		{"capacity.config.ios.maxDevices", strconv.Itoa(downloads + 1)},
		{"health.enabled", "false"},
	} {
		if cfg, err = cfg.Override(kv[0], kv[1]); err != nil {
			return benchStat{}, benchError("config", err)
		}
	}
	d, err := daemon.Start(ctx, daemon.Options{
		Home: home, Version: env.Version, Config: cfg,
		Drivers:     map[contract.Platform]driver.Driver{contract.PlatformIOS: rc},
		DriverNotes: map[contract.Platform]string{contract.PlatformAndroid: "bench serves iOS only here"},
		Host:        env.Host, StopGrace: benchStopBound,
	})
	if err != nil {
		return benchStat{}, benchError("in-process daemon", err)
	}
	defer d.Stop("bench")
	c, err := bounded(ctx, "connect", func(ctx context.Context) (*client.Client, error) {
		return client.Dial(ctx, daemon.SocketPath(home), contract.HelloInput{Client: "simlock-bench", Principal: benchPrincipal})
	})
	if err != nil {
		return benchStat{}, err
	}
	defer c.Close()

	var lat []time.Duration
	for _, v := range versions {
		recv := map[pushKey]time.Time{}
		in := contract.LeaseRequestInput{Platform: contract.PlatformIOS, OSVersion: v, AllowDownload: true, RequesterID: benchPrincipal + "/push"}
		g, err := bounded(ctx, "lease.request (download)", func(ctx context.Context) (contract.LeaseGrant, error) {
			return c.RequestLease(ctx, in, func(p contract.LeaseProgress) {
				if p.Stage != contract.StageDownloading || p.Percent == nil || p.Waiting {
					return
				}
				k := pushKey{p.Component, *p.Percent}
				if _, ok := recv[k]; !ok {
					recv[k] = time.Now()
				}
			})
		})
		if err != nil {
			return benchStat{}, err
		}
		if _, err := bounded(ctx, "lease.release", func(ctx context.Context) (contract.ReleaseResult, error) {
			return c.Release(ctx, g.Lease.ID)
		}); err != nil {
			return benchStat{}, err
		}
		// The pushes were routed before the grant, so recv is complete.
		for k, at := range recv {
			if rep, ok := rc.reported(k); ok {
				lat = append(lat, at.Sub(rep))
			}
		}
	}
	if len(lat) == 0 {
		return benchStat{}, contract.Errorf(contract.CodeInternal, "bench: no download push matched a driver report")
	}
	return summarize(lat), nil
}
