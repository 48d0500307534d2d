package bench

// simlock bench --soak runs steady lease traffic against the real daemon for
// a while and samples what would show a leak: its resident memory, live
// heap, goroutines and open files, and the latency of the operations in
// each window. A soak passes when none of them grows from the first third of
// the run to the last.

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/simlock/simlock/internal/client"
	"github.com/simlock/simlock/internal/contract"
)

// SoakPlan is a soak to run.
type SoakPlan struct {
	Duration, Every time.Duration
	Agents          int
	Keep            bool
}

func (p SoakPlan) command() string {
	return fmt.Sprintf("simlock bench --soak %s --sample-every %s --agents %d", p.Duration, p.Every, p.Agents)
}

// soakRenewals is how many times an agent renews a lease before it
// releases it and asks for the next.
const soakRenewals = 3

// The result of a soak; the JSON field names are stable.
type (
	SoakResult struct {
		Command   string       `json:"command"`
		Version   string       `json:"version"`
		Date      string       `json:"date"`
		Machine   benchMachine `json:"machine"`
		Agents    int          `json:"agents"`
		DurationS float64      `json:"durationS"`
		EveryS    float64      `json:"everyS"`
		// Ops counts acknowledged operations (grants, renewals, releases);
		// Errors the calls that failed, waits that timed out included.
		Ops     int64        `json:"ops"`
		Errors  int64        `json:"errors"`
		Samples []soakSample `json:"samples"`
		Trends  []soakTrend  `json:"trends"`
		Flat    bool         `json:"flat"`
	}
	soakSample struct {
		AtS        float64 `json:"atS"`
		RSSKiB     int64   `json:"rssKiB"`
		HeapBytes  int64   `json:"heapBytes"`
		Goroutines int     `json:"goroutines"`
		OpenFiles  int     `json:"openFiles"`
		// Ops and P99Us are the window's: operations since the last
		// sample, and the p99 of its renewals and releases (grants wait
		// in the queue by design, so they are counted, not timed).
		Ops   int     `json:"ops"`
		P99Us float64 `json:"p99Us"`
	}
	// soakTrend compares a metric's mean over the first third of the
	// samples (after the first, a warm-up) with its mean over the last.
	soakTrend struct {
		Metric string  `json:"metric"`
		First  float64 `json:"first"`
		Last   float64 `json:"last"`
		// Bound is the most Last may be and still count as flat.
		Bound float64 `json:"bound"`
		Flat  bool    `json:"flat"`
	}
)

// soakWindow collects the timings of one sampling window.
type soakWindow struct {
	mu    sync.Mutex
	times []time.Duration
	ops   int
}

func (w *soakWindow) add(d time.Duration, timed bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.ops++
	if timed {
		w.times = append(w.times, d)
	}
}

// take ends the window: its operation count and p99, and starts the next.
func (w *soakWindow) take() (int, time.Duration) {
	w.mu.Lock()
	times, ops := w.times, w.ops
	w.times, w.ops = nil, 0
	w.mu.Unlock()
	slices.Sort(times)
	return ops, percentile(times, 99)
}

func RunSoak(ctx context.Context, env Env, plan SoakPlan, note func(string, ...any)) (res SoakResult, err error) {
	root, done, err := benchRoot(env, "sls", plan.Keep)
	if err != nil {
		return res, err
	}
	defer done(ctx, &err)
	if env.Executable == "" {
		return res, fmt.Errorf("bench: the simlock binary's path is unknown")
	}
	res = SoakResult{
		Command: plan.command(), Version: env.Version, Date: time.Now().UTC().Format(time.DateOnly),
		Machine: readMachine(ctx), Agents: plan.Agents, DurationS: plan.Duration.Seconds(), EveryS: plan.Every.Seconds(),
	}
	home := filepath.Join(root, "soak")
	// Four devices for every five agents: some always wait in line.
	if err := writeBenchConfig(home, max(plan.Agents*4/5, 1)-1); err != nil {
		return res, err
	}
	d, first, err := startAndWait(ctx, env, home, 0)
	if err != nil {
		return res, err
	}
	defer func() {
		if serr := d.stop(ctx); serr != nil && err == nil {
			err = serr
		}
	}()
	first.Close()
	admin, err := d.dial(ctx, true)
	if err != nil {
		return res, benchError("connect", err)
	}
	defer admin.Close()

	note("soak: %d agents for %s, a sample every %s", plan.Agents, plan.Duration, plan.Every)
	runCtx, stop := context.WithTimeout(ctx, plan.Duration)
	defer stop()
	var window soakWindow
	var ops, errs atomic.Int64
	var wg sync.WaitGroup
	for i := range plan.Agents {
		c, err := d.dial(ctx, false)
		if err != nil {
			stop()
			wg.Wait()
			return res, benchError("connect", err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer c.Close()
			soakAgent(runCtx, c, fmt.Sprintf("%s/soak-%03d", benchPrincipal, i), &window, &ops, &errs)
		}()
	}

	began := time.Now()
	tick := time.NewTicker(plan.Every)
	defer tick.Stop()
	var sampleErr error
sampling:
	for {
		select {
		case <-runCtx.Done():
			break sampling
		case <-tick.C:
		}
		s, err := takeSoakSample(ctx, d, admin, &window, began)
		if err != nil {
			sampleErr = err
			break
		}
		res.Samples = append(res.Samples, s)
		note("soak: %4.0fs  RSS %s  heap %s  %d goroutines  %d files  %d ops  p99 %s", s.AtS,
			fmtKiB(s.RSSKiB), fmtKiB(s.HeapBytes>>10), s.Goroutines, s.OpenFiles, s.Ops, fmtUs(s.P99Us))
	}
	stop()
	wg.Wait()
	if sampleErr != nil {
		return res, sampleErr
	}
	res.Ops, res.Errors = ops.Load(), errs.Load()
	res.Trends, res.Flat = soakTrends(res.Samples)
	if !res.Flat {
		var grew []string
		for _, t := range res.Trends {
			if !t.Flat {
				grew = append(grew, fmt.Sprintf("%s %.0f → %.0f (bound %.0f)", t.Metric, t.First, t.Last, t.Bound))
			}
		}
		return res, contract.Errorf(contract.CodeInternal, "soak: growing: %s", strings.Join(grew, "; "))
	}
	return res, nil
}

// soakAgent leases, renews and releases until ctx ends, as requester.
func soakAgent(ctx context.Context, c *client.Client, requester string, w *soakWindow, ops, errs *atomic.Int64) {
	fail := func() {
		if ctx.Err() == nil {
			errs.Add(1)
		}
	}
	for ctx.Err() == nil {
		g, err := c.RequestLease(ctx, contract.LeaseRequestInput{Platform: contract.PlatformIOS, RequesterID: requester, TimeoutMs: 10_000}, nil)
		if err != nil {
			fail()
			continue
		}
		ops.Add(1)
		w.add(0, false)
		for range soakRenewals {
			began := time.Now()
			if _, err := c.Renew(ctx, g.Lease.ID, 0); err != nil {
				fail()
				break
			}
			ops.Add(1)
			w.add(time.Since(began), true)
		}
		// Released even as the soak ends: the next agent's line must not
		// wait on a lease nobody holds.
		began := time.Now()
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), benchCallBound)
		_, err = c.Release(rctx, g.Lease.ID)
		cancel()
		if err != nil {
			fail()
			continue
		}
		ops.Add(1)
		w.add(time.Since(began), true)
	}
}

// takeSoakSample reads the daemon's figures and ends the window.
func takeSoakSample(ctx context.Context, d *benchDaemon, admin *client.Client, w *soakWindow, began time.Time) (soakSample, error) {
	rss, err := rssKiB(ctx, d.pid())
	if err != nil {
		return soakSample{}, err
	}
	st, err := bounded(ctx, "status.get", func(ctx context.Context) (contract.Status, error) {
		return admin.StatusWith(ctx, contract.StatusGetInput{Summary: true})
	})
	if err != nil {
		return soakSample{}, err
	}
	n, p99 := w.take()
	return soakSample{
		AtS: round2(time.Since(began).Seconds()), RSSKiB: rss, HeapBytes: st.Daemon.HeapBytes,
		Goroutines: st.Daemon.Goroutines, OpenFiles: st.Daemon.OpenFiles, Ops: n, P99Us: round2(float64(p99.Nanoseconds()) / 1e3),
	}, nil
}

// soakTrends compares the first third of the samples after the first with
// the last third. Each metric may grow by a share and a fixed slack and
// still be flat: memory by 10% and 4 MiB, goroutines by 10% and 10, open
// files by 10% and 5, the p99 by 50% and 1 ms (latency is noisy; a leak is
// not). With fewer than three samples after the first there is no trend to
// read, and the soak is not flat.
func soakTrends(samples []soakSample) ([]soakTrend, bool) {
	if len(samples) < 4 {
		return nil, false
	}
	s := samples[1:]
	third := len(s) / 3
	mean := func(part []soakSample, f func(soakSample) float64) float64 {
		sum := 0.0
		for _, x := range part {
			sum += f(x)
		}
		return sum / float64(len(part))
	}
	metrics := []struct {
		name         string
		share, slack float64
		of           func(soakSample) float64
	}{
		{"rssKiB", 0.10, 4 << 10, func(x soakSample) float64 { return float64(x.RSSKiB) }},
		{"heapBytes", 0.10, 4 << 20, func(x soakSample) float64 { return float64(x.HeapBytes) }},
		{"goroutines", 0.10, 10, func(x soakSample) float64 { return float64(x.Goroutines) }},
		{"openFiles", 0.10, 5, func(x soakSample) float64 { return float64(x.OpenFiles) }},
		{"p99Us", 0.50, 1000, func(x soakSample) float64 { return x.P99Us }},
	}
	flat := true
	var out []soakTrend
	for _, m := range metrics {
		first, last := mean(s[:third], m.of), mean(s[len(s)-third:], m.of)
		t := soakTrend{Metric: m.name, First: round2(first), Last: round2(last), Bound: round2(first*(1+m.share) + m.slack)}
		t.Flat = last <= t.Bound
		flat = flat && t.Flat
		out = append(out, t)
	}
	return out, flat
}

func RenderSoakTable(w io.Writer, res SoakResult) {
	m := res.Machine
	fmt.Fprintln(w, res.Command)
	fmt.Fprintf(w, "simlock %s, %s, %s\n", res.Version, m.Go, res.Date)
	fmt.Fprintf(w, "%s, %d cores, %.1f GiB RAM, %s, %s\n\n", m.CPU, m.Cores, float64(m.RAMBytes)/(1<<30), m.OS, m.Arch)
	fmt.Fprintf(w, "%8s %10s %10s %11s %6s %8s %10s\n", "at", "RSS", "heap", "goroutines", "files", "ops", "p99")
	for _, s := range res.Samples {
		fmt.Fprintf(w, "%7.0fs %10s %10s %11d %6d %8d %10s\n", s.AtS, fmtKiB(s.RSSKiB), fmtKiB(s.HeapBytes>>10),
			s.Goroutines, s.OpenFiles, s.Ops, fmtUs(s.P99Us))
	}
	fmt.Fprintf(w, "\n%d operations, %d errors\n", res.Ops, res.Errors)
	for _, t := range res.Trends {
		verdict := "flat"
		if !t.Flat {
			verdict = "GROWING"
		}
		fmt.Fprintf(w, "%-11s first third %.0f, last third %.0f (flat up to %.0f): %s\n", t.Metric, t.First, t.Last, t.Bound, verdict)
	}
}
