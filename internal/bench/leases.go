package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/simlock/simlock/internal/client"
	"github.com/simlock/simlock/internal/config"
	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/daemon"
)

// heldLease is a lease and the session that holds it.
type heldLease struct {
	c  *client.Client
	id string
}

// benchLeases measures one lease count against its own daemon, whose
// running limit is n+1: n iOS leases and one Android device fill it. With
// events >= 0 it then stops the daemon, fills its event log to that many
// events and times a start.
func benchLeases(ctx context.Context, env Env, home string, n, samples, events int, floor *floorSampler, note func(string, ...any)) (run benchRun, start benchStart, err error) {
	run.Leases = n
	if err := writeBenchConfig(home, n); err != nil {
		return run, start, err
	}
	note("%d leases: starting the daemon", n)
	var d *benchDaemon
	defer func() {
		if d != nil {
			if serr := d.stop(ctx); serr != nil && err == nil {
				err = serr
			}
		}
	}()
	d, first, err := startAndWait(ctx, env, home, 0)
	if err != nil {
		return run, start, err
	}
	first.Close()
	admin, err := d.dial(ctx, true)
	if err != nil {
		return run, start, benchError("connect", err)
	}
	defer admin.Close()
	if run.RSSStartKiB, err = rssKiB(ctx, d.pid()); err != nil {
		return run, start, err
	}
	sessions := make([]*client.Client, benchSessions)
	for i := range sessions {
		if sessions[i], err = d.dial(ctx, false); err != nil {
			return run, start, benchError("connect", err)
		}
		defer sessions[i].Close()
	}

	note("%d leases: taking them", n)
	held, err := holdLeases(ctx, sessions, n)
	if err != nil {
		return run, start, err
	}
	if run.RSSKiB, err = rssKiB(ctx, d.pid()); err != nil {
		return run, start, err
	}

	if err := floor.take(ctx, samples/8); err != nil {
		return run, start, err
	}
	note("%d leases: ping", n)
	run.Ping, err = timed(ctx, samples, func(ctx context.Context, _ int) (time.Duration, error) {
		var dt time.Duration
		_, err := bounded(ctx, "ping", func(ctx context.Context) (struct{}, error) {
			t0 := time.Now()
			err := sessions[0].Ping(ctx)
			dt = time.Since(t0)
			return struct{}{}, err
		})
		return dt, err
	})
	if err != nil {
		return run, start, err
	}
	note("%d leases: renew", n)
	run.Renew, err = timed(ctx, samples, func(ctx context.Context, i int) (time.Duration, error) {
		h := held[i%len(held)]
		var dt time.Duration
		_, err := bounded(ctx, "lease.renew", func(ctx context.Context) (contract.LeaseRecord, error) {
			t0 := time.Now()
			l, err := h.c.Renew(ctx, h.id, 0)
			dt = time.Since(t0)
			return l, err
		})
		return dt, err
	})
	if err != nil {
		return run, start, err
	}
	note("%d leases: renewals a second, %d agents", n, renewAgents)
	if run.RenewsPerSecond50, err = measureRenewRate(ctx, d, held); err != nil {
		return run, start, err
	}
	for _, summary := range []bool{false, true} {
		if err := floor.take(ctx, samples/8); err != nil {
			return run, start, err
		}
		note("%d leases: status.get (summary: %v)", n, summary)
		st, err := timed(ctx, samples, func(ctx context.Context, _ int) (time.Duration, error) {
			var dt time.Duration
			_, err := bounded(ctx, "status.get", func(ctx context.Context) (json.RawMessage, error) {
				// Timed until the whole answer is read, not decoded into Go
				// values: that is the caller's cost, not the daemon's.
				var raw json.RawMessage
				t0 := time.Now()
				err := sessions[0].Call(ctx, contract.OpStatusGet, contract.StatusGetInput{Summary: summary}, &raw)
				dt = time.Since(t0)
				return raw, err
			})
			return dt, err
		})
		if err != nil {
			return run, start, err
		}
		if summary {
			run.StatusSummary = st
		} else {
			run.StatusFull = st
		}
	}

	reclaimed, err := watchReclaims(ctx, admin)
	if err != nil {
		return run, start, err
	}
	if err := floor.take(ctx, samples/8); err != nil {
		return run, start, err
	}
	note("%d leases: warm grant", n)
	if run.WarmGrant, err = measureWarmGrant(ctx, sessions[0], reclaimed, samples); err != nil {
		return run, start, err
	}
	if err := floor.take(ctx, samples/8); err != nil {
		return run, start, err
	}
	note("%d leases: release → next queued grant", n)
	if run.ReleaseToGrant, err = measureQueuedGrant(ctx, sessions[1], sessions[2], samples); err != nil {
		return run, start, err
	}
	if events < 0 {
		return run, start, nil
	}

	note("%d leases: stopping the daemon, filling its event log to %d", n, events)
	admin.Close()
	for _, s := range sessions {
		s.Close()
	}
	if err := d.stop(ctx); err != nil {
		return run, start, err
	}
	d = nil
	ids := make([]string, len(held))
	for i, h := range held {
		ids[i] = h.id
	}
	events, err = appendEvents(ctx, filepath.Join(home, daemon.DBName), events, ids)
	if err != nil {
		return run, start, err
	}
	note("%d leases: timing a start with %d events", n, events)
	t0 := time.Now()
	d, c, err := startAndWait(ctx, env, home, n)
	if err != nil {
		return run, start, err
	}
	elapsed := time.Since(t0)
	c.Close()
	start = benchStart{Leases: n, Events: events, Ms: math.Round(float64(elapsed)/float64(time.Millisecond)*10) / 10}
	return run, start, nil
}

// writeBenchConfig writes the config of a daemon that holds n leases:
// demo devices at zero timings, running limit n+1, nothing that acts on its
// own (health probes, idle shutdown) within a run, leases that outlive it.
func writeBenchConfig(home string, n int) error {
	if err := os.MkdirAll(home, 0o700); err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	limit := strconv.Itoa(n + 1)
	const day = "86400000"
	settings := [][2]string{
		{"drivers.enabled", "demo"},
		{"drivers.demo.provisionMs", "0"},
		{"drivers.demo.bootMs", "0"},
		{"drivers.demo.reclaimMs", "0"},
		{"drivers.demo.downloadMs", "0"},
		{"capacity.strategy", "fixed"},
		{"capacity.config.maxRunning", limit},
		{"capacity.config.ios.maxRunning", limit},
		{"capacity.config.ios.maxDevices", limit},
		{"health.enabled", "false"},
		{"idle.shutdownAfterMs", day},
		{"idle.deleteAfterMs", day},
		{"lease.maxTtlMs", day}, // first: the default may not exceed it
		{"lease.defaultTtlMs", day},
	}
	for _, kv := range settings {
		if _, err := config.Set(home, kv[0], kv[1]); err != nil {
			return fmt.Errorf("bench: config: %w", err)
		}
	}
	return nil
}

// holdLeases takes n iOS leases for n requesters, benchInFlight requests at
// a time on each session.
func holdLeases(ctx context.Context, sessions []*client.Client, n int) ([]heldLease, error) {
	held := make([]heldLease, n)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var next atomic.Int64
	var once sync.Once
	var firstErr error
	var wg sync.WaitGroup
	for w := range len(sessions) * benchInFlight {
		c := sessions[w%len(sessions)]
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= n || ctx.Err() != nil {
					return
				}
				in := contract.LeaseRequestInput{Platform: contract.PlatformIOS, RequesterID: fmt.Sprintf(benchPrincipal+"/%06d", i)}
				g, err := bounded(ctx, "lease.request", func(ctx context.Context) (contract.LeaseGrant, error) {
					return c.RequestLease(ctx, in, nil)
				})
				if err != nil {
					once.Do(func() { firstErr = err; cancel() })
					return
				}
				held[i] = heldLease{c: c, id: g.Lease.ID}
			}
		})
	}
	wg.Wait()
	return held, firstErr
}

// watchReclaims subscribes to events and passes on the device id of each
// device.reclaimed. The subscription ends with the session.
func watchReclaims(ctx context.Context, admin *client.Client) (<-chan string, error) {
	events, err := bounded(ctx, "events.subscribe", func(ctx context.Context) (<-chan contract.Event, error) {
		ch, _, err := admin.Subscribe(ctx)
		return ch, err
	})
	if err != nil {
		return nil, err
	}
	out := make(chan string, 1024)
	go func() {
		defer close(out)
		for ev := range events {
			if ev.Event != contract.EvDeviceReclaimed {
				continue
			}
			var p struct {
				DeviceID string `json:"deviceId"`
			}
			if json.Unmarshal(ev.Payload, &p) == nil {
				select {
				case out <- p.DeviceID:
				default: // nobody waits for it
				}
			}
		}
	}()
	return out, nil
}

// waitReclaimed waits, bounded, for device dev's device.reclaimed.
func waitReclaimed(ctx context.Context, reclaimed <-chan string, dev string) error {
	t := time.NewTimer(benchCallBound)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
			return contract.Errorf(contract.CodeInternal, "bench: device %s was not reclaimed within %s of its release", dev, benchCallBound)
		case id, ok := <-reclaimed:
			if !ok {
				return contract.Errorf(contract.CodeDaemonConnectionLost, "bench: the event stream ended")
			}
			if id == dev {
				return nil
			}
		}
	}
}

// measureWarmGrant times lease.request of an idle ready Android device (an
// Android reclaim leaves the device running): before each sample the
// previous lease is released and its device reclaimed.
func measureWarmGrant(ctx context.Context, c *client.Client, reclaimed <-chan string, samples int) (benchStat, error) {
	reclaim := func(ctx context.Context, g contract.LeaseGrant) error {
		return waitReclaimed(ctx, reclaimed, g.Device.ID)
	}
	// The first lease makes the device; its release leaves it ready.
	g, err := bounded(ctx, "lease.request", func(ctx context.Context) (contract.LeaseGrant, error) {
		return c.RequestLease(ctx, warmAsk(), nil)
	})
	if err != nil {
		return benchStat{}, err
	}
	if _, err := bounded(ctx, "lease.release", func(ctx context.Context) (contract.ReleaseResult, error) {
		return c.Release(ctx, g.Lease.ID)
	}); err != nil {
		return benchStat{}, err
	}
	if err := reclaim(ctx, g); err != nil {
		return benchStat{}, err
	}
	return warmGrants(ctx, c, samples, reclaim)
}

// warmAsk is the request every warm-grant series makes.
func warmAsk() contract.LeaseRequestInput {
	return contract.LeaseRequestInput{Platform: contract.PlatformAndroid, RequesterID: benchPrincipal + "/warm"}
}

// warmGrants times samples warm grants to c, each released (untimed),
// then settle (if any) waits for the device to show idle again.
func warmGrants(ctx context.Context, c *client.Client, samples int, settle func(context.Context, contract.LeaseGrant) error) (benchStat, error) {
	return timed(ctx, samples, func(ctx context.Context, _ int) (time.Duration, error) {
		var dt time.Duration
		g, err := bounded(ctx, "lease.request", func(ctx context.Context) (contract.LeaseGrant, error) {
			t0 := time.Now()
			g, err := c.RequestLease(ctx, warmAsk(), nil)
			dt = time.Since(t0)
			return g, err
		})
		if err != nil {
			return 0, err
		}
		if g.Source != contract.SourceWarm {
			return 0, contract.Errorf(contract.CodeInternal, "bench: a warm grant came from a %s device, not an idle ready one", g.Source)
		}
		if _, err := bounded(ctx, "lease.release", func(ctx context.Context) (contract.ReleaseResult, error) {
			return c.Release(ctx, g.Lease.ID)
		}); err != nil {
			return 0, err
		}
		if settle != nil {
			return dt, settle(ctx, g)
		}
		return dt, nil
	})
}

// measureQueuedGrant times, with capacity exactly full (n iOS leases and
// one Android lease), the release of the Android lease to the grant of an
// Android request queued behind it. Each sample's waiter holds the lease
// the next sample releases; holder and waiter swap sessions and requesters.
func measureQueuedGrant(ctx context.Context, a, b *client.Client, samples int) (benchStat, error) {
	holder, waiter := a, b
	holderID, waiterID := benchPrincipal+"/queue-a", benchPrincipal+"/queue-b"
	g, err := bounded(ctx, "lease.request", func(ctx context.Context) (contract.LeaseGrant, error) {
		return holder.RequestLease(ctx, contract.LeaseRequestInput{Platform: contract.PlatformAndroid, RequesterID: holderID}, nil)
	})
	if err != nil {
		return benchStat{}, err
	}
	lease := g.Lease.ID
	type granted struct {
		g   contract.LeaseGrant
		at  time.Time
		err error
	}
	st, err := timed(ctx, samples, func(ctx context.Context, _ int) (time.Duration, error) {
		wctx, cancel := context.WithTimeout(ctx, benchCallBound)
		defer cancel()
		queued := make(chan struct{}, 1)
		done := make(chan granted, 1)
		in := contract.LeaseRequestInput{Platform: contract.PlatformAndroid, RequesterID: waiterID}
		go func() {
			g, err := waiter.RequestLease(wctx, in, func(p contract.LeaseProgress) {
				if p.Stage == contract.StageQueued {
					select {
					case queued <- struct{}{}:
					default:
					}
				}
			})
			done <- granted{g: g, at: time.Now(), err: err}
		}()
		select {
		case <-queued:
		case r := <-done:
			if r.err != nil {
				return 0, benchError("lease.request (queued)", r.err)
			}
			return 0, contract.Errorf(contract.CodeInternal, "bench: a request was granted at once while capacity should be full")
		case <-wctx.Done():
			if ctx.Err() != nil {
				return 0, ctx.Err()
			}
			return 0, contract.Errorf(contract.CodeInternal, "bench: no queued progress within %s", benchCallBound)
		}
		t0 := time.Now()
		if _, err := holder.Release(wctx, lease); err != nil {
			return 0, benchError("lease.release", err)
		}
		r := <-done
		if r.err != nil {
			if ctx.Err() != nil {
				return 0, ctx.Err()
			}
			return 0, benchError("lease.request (queued)", r.err)
		}
		lease = r.g.Lease.ID
		holder, waiter = waiter, holder
		holderID, waiterID = waiterID, holderID
		return r.at.Sub(t0), nil
	})
	if err != nil {
		return benchStat{}, err
	}
	_, err = bounded(ctx, "lease.release", func(ctx context.Context) (contract.ReleaseResult, error) {
		return holder.Release(ctx, lease)
	})
	return st, err
}
