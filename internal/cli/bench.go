package cli

// simlock bench measures simlock's own costs from outside, as a user meets
// them: it starts the real daemon (this binary, `daemon run`) in a temporary
// SIMLOCK_HOME with demo devices at zero timings, holds N leases, and times
// round trips through the typed client, beside the SQLite floor measured in
// the same run. docs/PERFORMANCE.md says what each row measures.
//
// Every wait is bounded, and every exit path (Ctrl-C included) stops the
// daemons it started and removes the temporary home.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/shirou/gopsutil/v4/cpu"
	"github.com/shirou/gopsutil/v4/host"
	"github.com/shirou/gopsutil/v4/mem"
	"github.com/spf13/cobra"

	"github.com/simlock/simlock/internal/client"
	"github.com/simlock/simlock/internal/config"
	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/daemon"
	"github.com/simlock/simlock/internal/driver"
	"github.com/simlock/simlock/internal/driver/demo"
	"github.com/simlock/simlock/internal/store"
	"github.com/simlock/simlock/internal/store/sqlite"
)

// Bounds and sizes of a bench run.
const (
	// benchCallBound bounds one call to the daemon (and one wait for a
	// push or an event): a stuck daemon fails the run, it never hangs it.
	benchCallBound = 30 * time.Second
	// benchStartBound bounds a daemon's start, from exec to running.
	benchStartBound = 60 * time.Second
	// benchStopBound bounds a graceful stop; then the daemon is killed.
	benchStopBound = 30 * time.Second
	// benchPoll is the period of the few polls (a socket that does not
	// listen yet, a status that says starting).
	benchPoll = 2 * time.Millisecond

	benchPrincipal = "simlock-bench"
	// benchSessions sessions hold the leases, benchInFlight requests in
	// flight on each while they are taken.
	benchSessions = 4
	benchInFlight = 4
	// benchWarmup unmeasured calls precede each timed series.
	benchWarmup = 2
	// A simulated download of pushDownload reports pushReports percentages
	// (0, 10, ..., 100); the push row runs enough downloads for --samples.
	pushDownload = 500 * time.Millisecond
	pushReports  = 11
)

func benchCmd(env Env) *cobra.Command {
	var leasesFlag, soakFlag, everyFlag string
	var samples, events, agents int
	var markdown, keep bool
	cmd := &cobra.Command{
		Use:   "bench [--leases N,N] [--samples N] [--events N] [--json | --markdown] [--keep] | --soak D [--sample-every D] [--agents N]",
		Short: "Measure simlock's own costs (renew, grant, queue, status, memory, start) beside the SQLite floor",
		Long: `bench starts simlock's daemon in a temporary SIMLOCK_HOME with demo devices
at zero timings, holds N live leases for each N of --leases, and measures p50
and p99 of: lease.renew, a warm grant, release to the next queued grant,
status.get (full and summary); then the daemon's RSS per live lease, its start
with the largest N leases and --events stored events, the progress push
latency, and one durable SQLite commit (the floor) in the same run.

Results go to stdout: a table on a terminal, else JSON (--json forces JSON;
--markdown prints the table as docs/PERFORMANCE.md embeds it). Progress notes
go to stderr on a terminal. The temporary home is removed at the end, Ctrl-C
included, unless --keep. docs/PERFORMANCE.md says what each row measures.

With --soak 10m it runs a soak instead: --agents agents (50) lease, renew
and release without pause for that long, against four devices for every
five agents, while the daemon's RSS, live heap, goroutines, open files and
the p99 of the window's renewals and releases are sampled every
--sample-every (10s). It exits 1 when any of them grows from the first third
of the run to the last (docs/RELIABILITY.md has the rule).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			asJSON, _ := cmd.Flags().GetBool("json")
			if soakFlag != "" {
				for _, f := range []string{"leases", "samples", "events", "markdown"} {
					if cmd.Flags().Changed(f) {
						return usage("--%s does not apply to --soak", f)
					}
				}
				plan, err := soakPlanOf(soakFlag, everyFlag, agents, keep)
				if err != nil {
					return err
				}
				res, err := runSoak(cmd.Context(), env, plan, benchNoter(env))
				if res.Samples != nil {
					if asJSON || !env.StdoutIsTerminal {
						if perr := printJSON(env.Stdout, res); perr != nil {
							return perr
						}
					} else {
						renderSoakTable(env.Stdout, res)
					}
				}
				return fail(err)
			}
			if cmd.Flags().Changed("sample-every") || cmd.Flags().Changed("agents") {
				return usage("--sample-every and --agents go with --soak")
			}
			ns, err := parseLeaseCounts(leasesFlag)
			if err != nil {
				return usage("--leases: %v", err)
			}
			if samples < 1 || samples > 1_000_000 {
				return usage("--samples must be from 1 to 1000000, got %d", samples)
			}
			if events < 0 || events > 10_000_000 {
				return usage("--events must be from 0 to 10000000, got %d", events)
			}
			if asJSON && markdown {
				return usage("give --json or --markdown, not both")
			}
			plan := benchPlan{Leases: ns, Samples: samples, Events: events, Keep: keep}
			res, err := runBench(cmd.Context(), env, plan, benchNoter(env))
			if err != nil {
				return fail(err)
			}
			switch {
			case asJSON:
				return printJSON(env.Stdout, res)
			case markdown:
				renderBenchMarkdown(env.Stdout, res)
			case env.StdoutIsTerminal:
				renderBenchTable(env.Stdout, res)
			default:
				return printJSON(env.Stdout, res)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&leasesFlag, "leases", "10,10000", "live lease counts to measure at, comma-separated")
	cmd.Flags().IntVar(&samples, "samples", 200, "timed iterations of each measurement")
	// 100,000 is what the daemon keeps at most: it prunes beyond.
	cmd.Flags().IntVar(&events, "events", 100_000, "stored events the timed daemon start loads beside the leases")
	cmd.Flags().BoolVar(&markdown, "markdown", false, "print the table as a Markdown code block (scripts/perf-report puts it in docs/PERFORMANCE.md)")
	cmd.Flags().BoolVar(&keep, "keep", false, "keep the temporary SIMLOCK_HOME (its path goes to stderr)")
	cmd.Flags().StringVar(&soakFlag, "soak", "", "run a soak for this long (10m, 1h) instead of the benchmark")
	cmd.Flags().StringVar(&everyFlag, "sample-every", "10s", "with --soak: how often the daemon is sampled")
	cmd.Flags().IntVar(&agents, "agents", 50, "with --soak: agents leasing at once")
	return cmd
}

// soakPlanOf reads the soak flags: a soak of 1s to 24h, sampled at least
// four times (the first sample is a warm-up), by 1 to 1000 agents.
func soakPlanOf(soak, every string, agents int, keep bool) (soakPlan, error) {
	d, err := parseDuration(soak)
	if err != nil || d < time.Second || d > 24*time.Hour {
		return soakPlan{}, usage("--soak must be a duration from 1s to 24h, got %q", soak)
	}
	e, err := parseDuration(every)
	if err != nil || e < 100*time.Millisecond {
		return soakPlan{}, usage("--sample-every must be a duration of at least 100ms, got %q", every)
	}
	if d < 4*e {
		return soakPlan{}, usage("--soak %s takes fewer than four samples of --sample-every %s; make it longer", soak, every)
	}
	if agents < 1 || agents > 1000 {
		return soakPlan{}, usage("--agents must be from 1 to 1000, got %d", agents)
	}
	return soakPlan{Duration: d, Every: e, Agents: agents, Keep: keep}, nil
}

// parseLeaseCounts reads "10,10000": at least one count, each from 1 to
// 100000, returned ascending without repeats.
func parseLeaseCounts(s string) ([]int, error) {
	var out []int
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		n, err := strconv.Atoi(part)
		if err != nil || n < 1 || n > 100_000 {
			return nil, fmt.Errorf("%q is not a lease count from 1 to 100000", part)
		}
		out = append(out, n)
	}
	if len(out) == 0 {
		return nil, errors.New("give at least one lease count, such as 10,10000")
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// benchNoter writes progress notes to stderr when a person watches it.
func benchNoter(env Env) func(string, ...any) {
	if !env.StderrIsTerminal {
		return func(string, ...any) {}
	}
	return func(format string, args ...any) {
		fmt.Fprintf(env.Stderr, "bench: "+format+"\n", args...)
	}
}

// benchPlan is what to measure.
type benchPlan struct {
	Leases  []int
	Samples int
	// Events is the event history the timed start loads.
	Events int
	Keep   bool
}

// command is the plan as a command line, for the output.
func (p benchPlan) command() string {
	ns := make([]string, len(p.Leases))
	for i, n := range p.Leases {
		ns[i] = strconv.Itoa(n)
	}
	cmd := fmt.Sprintf("simlock bench --leases %s --samples %d", strings.Join(ns, ","), p.Samples)
	if p.Events != 100_000 {
		cmd += fmt.Sprintf(" --events %d", p.Events)
	}
	return cmd
}

// The result of a run; the JSON field names are stable.
type (
	benchResult struct {
		Command string       `json:"command"`
		Version string       `json:"version"`
		Date    string       `json:"date"`
		Machine benchMachine `json:"machine"`
		Samples int          `json:"samples"`
		Runs    []benchRun   `json:"runs"`
		// PushLatency comes from an in-process daemon (see measurePush).
		PushLatency benchStat `json:"pushLatency"`
		Floor       benchStat `json:"floor"`
		// FloorIdle is the floor commit after an idle pause each (see
		// floorIdleGap); the goals are stated against Floor.
		FloorIdle benchStat   `json:"floorIdle"`
		Start     benchStart  `json:"start"`
		Ratios    benchRatios `json:"ratios"`
	}
	benchMachine struct {
		CPU string `json:"cpu"`
		// Cores counts logical cores.
		Cores    int    `json:"cores"`
		RAMBytes int64  `json:"ramBytes"`
		OS       string `json:"os"`
		Arch     string `json:"arch"`
		Go       string `json:"go"`
	}
	// benchStat is a series of timings: p50 and p99 in microseconds.
	benchStat struct {
		P50Us   float64 `json:"p50Us"`
		P99Us   float64 `json:"p99Us"`
		Samples int     `json:"samples"`
	}
	benchRun struct {
		Leases         int       `json:"leases"`
		Renew          benchStat `json:"renew"`
		WarmGrant      benchStat `json:"warmGrant"`
		ReleaseToGrant benchStat `json:"releaseToGrant"`
		StatusFull     benchStat `json:"statusFull"`
		StatusSummary  benchStat `json:"statusSummary"`
		// RSSKiB is the daemon's RSS holding Leases leases; RSSStartKiB
		// its RSS once it ran, before the first lease.
		RSSKiB      int64 `json:"rssKiB"`
		RSSStartKiB int64 `json:"rssStartKiB"`
	}
	benchStart struct {
		Leases int     `json:"leases"`
		Events int     `json:"events"`
		Ms     float64 `json:"ms"`
	}
	// benchRatios are the figures the project's goals are stated in, from
	// p50s: "smallest" and "largest" are the smallest and largest lease
	// counts of the run. The scale ratios need two counts.
	benchRatios struct {
		Smallest                int      `json:"smallest"`
		Largest                 int      `json:"largest"`
		RenewScale              *float64 `json:"renewScale,omitempty"`
		RenewOverFloor          float64  `json:"renewOverFloor"`
		WarmGrantOverFloor      float64  `json:"warmGrantOverFloor"`
		WarmGrantScale          *float64 `json:"warmGrantScale,omitempty"`
		ReleaseToGrantOverFloor float64  `json:"releaseToGrantOverFloor"`
		// RenewOverIdleFloor compares renew with the commit it makes as a
		// daemon between requests makes it; not a goal, a reading aid.
		RenewOverIdleFloor float64  `json:"renewOverIdleFloor"`
		SummaryScale       *float64 `json:"summaryScale,omitempty"`
		StatusFullMs       float64  `json:"statusFullMs"`
		RSSPerLeaseKiB     float64  `json:"rssPerLeaseKiB"`
		StartMs            float64  `json:"startMs"`
	}
)

// percentile is the nearest-rank p-th percentile (0 < p <= 100) of sorted:
// the smallest sample that at least p percent of the samples do not exceed.
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	rank := int(math.Ceil(p / 100 * float64(len(sorted))))
	rank = min(max(rank, 1), len(sorted))
	return sorted[rank-1]
}

// summarize turns timings into a benchStat.
func summarize(ds []time.Duration) benchStat {
	s := slices.Clone(ds)
	slices.Sort(s)
	us := func(d time.Duration) float64 { return math.Round(float64(d)/float64(time.Microsecond)*10) / 10 }
	return benchStat{P50Us: us(percentile(s, 50)), P99Us: us(percentile(s, 99)), Samples: len(s)}
}

func round2(v float64) float64 { return math.Round(v*100) / 100 }

// ratio is a/b rounded, or 0 when b is not positive.
func ratio(a, b float64) float64 {
	if b <= 0 {
		return 0
	}
	return round2(a / b)
}

// computeRatios fills res.Ratios from the runs, the floor and the start.
func computeRatios(res *benchResult) {
	small, large := res.Runs[0], res.Runs[len(res.Runs)-1]
	r := benchRatios{
		Smallest: small.Leases, Largest: large.Leases,
		RenewOverFloor:          ratio(small.Renew.P50Us, res.Floor.P50Us),
		WarmGrantOverFloor:      ratio(small.WarmGrant.P50Us, res.Floor.P50Us),
		ReleaseToGrantOverFloor: ratio(small.ReleaseToGrant.P50Us, res.Floor.P50Us),
		RenewOverIdleFloor:      ratio(small.Renew.P50Us, res.FloorIdle.P50Us),
		StatusFullMs:            round2(large.StatusFull.P50Us / 1000),
		StartMs:                 res.Start.Ms,
	}
	if len(res.Runs) > 1 {
		scale := func(a, b benchStat) *float64 { v := ratio(a.P50Us, b.P50Us); return &v }
		r.RenewScale = scale(large.Renew, small.Renew)
		r.WarmGrantScale = scale(large.WarmGrant, small.WarmGrant)
		r.SummaryScale = scale(large.StatusSummary, small.StatusSummary)
		r.RSSPerLeaseKiB = round2(float64(large.RSSKiB-small.RSSKiB) / float64(large.Leases-small.Leases))
	} else {
		r.RSSPerLeaseKiB = round2(float64(small.RSSKiB-small.RSSStartKiB) / float64(small.Leases))
	}
	res.Ratios = r
}

// runBench runs the plan in a fresh temporary home.
func runBench(ctx context.Context, env Env, plan benchPlan, note func(string, ...any)) (res benchResult, err error) {
	root, done, err := benchRoot(env, "slb", plan.Keep)
	if err != nil {
		return res, err
	}
	defer done(ctx, &err)
	// The deepest path is the largest run's socket.
	if sock := daemon.SocketPath(benchHome(root, plan.Leases[len(plan.Leases)-1])); len(sock) > 103 {
		return res, usage("the temporary directory's path is too long for a unix socket (%s); set TMPDIR to a shorter one", sock)
	}
	if env.Executable == "" {
		return res, errors.New("bench: the simlock binary's path is unknown")
	}

	res = benchResult{
		Command: plan.command(), Version: env.Version, Date: time.Now().UTC().Format(time.DateOnly),
		Machine: readMachine(ctx), Samples: plan.Samples,
	}
	floorDir := filepath.Join(root, "floor")
	if err := os.MkdirAll(floorDir, 0o700); err != nil {
		return res, fmt.Errorf("bench: %w", err)
	}
	floor, err := openFloor(ctx, floorDir)
	if err != nil {
		return res, err
	}
	defer floor.closeDB()
	for i, n := range plan.Leases {
		last := i == len(plan.Leases)-1
		events := -1 // no timed start
		if last {
			events = plan.Events
		}
		run, start, err := benchLeases(ctx, env, benchHome(root, n), n, plan.Samples, events, floor, note)
		if err != nil {
			return res, err
		}
		res.Runs = append(res.Runs, run)
		if last {
			res.Start = start
		}
	}
	res.Floor, res.FloorIdle = floor.stat(), floor.idleStat()
	note("progress push latency: in-process daemon, simulated downloads")
	if res.PushLatency, err = measurePush(ctx, env, filepath.Join(root, "push"), plan.Samples); err != nil {
		return res, err
	}
	computeRatios(&res)
	return res, nil
}

// benchRoot makes a run's temporary directory. done, deferred with the
// run's error, removes it (unless keep: its path goes to stderr) and makes
// an interrupted run's error CANCELLED.
func benchRoot(env Env, prefix string, keep bool) (root string, done func(context.Context, *error), err error) {
	root, err = os.MkdirTemp("", prefix)
	if err != nil {
		return "", nil, fmt.Errorf("bench: temporary home: %w", err)
	}
	return root, func(ctx context.Context, err *error) {
		if *err != nil && ctx.Err() != nil {
			*err = contract.Errorf(contract.CodeCancelled, "bench interrupted")
		}
		if keep {
			fmt.Fprintf(env.Stderr, "bench: kept %s\n", root)
			return
		}
		if rerr := os.RemoveAll(root); rerr != nil && *err == nil {
			*err = fmt.Errorf("bench: remove the temporary home: %w", rerr)
		}
	}, nil
}

func benchHome(root string, n int) string { return filepath.Join(root, "n"+strconv.Itoa(n)) }

// readMachine describes the machine; what it cannot read stays empty.
func readMachine(ctx context.Context) benchMachine {
	m := benchMachine{Cores: runtime.NumCPU(), OS: runtime.GOOS, Arch: runtime.GOARCH, Go: runtime.Version()}
	if infos, err := cpu.InfoWithContext(ctx); err == nil && len(infos) > 0 {
		m.CPU = strings.Join(strings.Fields(infos[0].ModelName), " ")
	}
	if n, err := cpu.CountsWithContext(ctx, true); err == nil && n > 0 {
		m.Cores = n
	}
	if vm, err := mem.VirtualMemoryWithContext(ctx); err == nil {
		m.RAMBytes = int64(vm.Total)
	}
	if h, err := host.InfoWithContext(ctx); err == nil {
		switch {
		case runtime.GOOS == "darwin":
			m.OS = "macOS " + h.PlatformVersion
		case h.Platform != "":
			m.OS = fmt.Sprintf("%s %s (%s %s)", runtime.GOOS, h.KernelVersion, h.Platform, h.PlatformVersion)
		default:
			m.OS = runtime.GOOS + " " + h.KernelVersion
		}
	}
	return m
}

// benchError prefixes what failed to err's message, keeping its code; a
// call that ran out of its bound says so.
func benchError(what string, err error) error {
	if errors.Is(err, context.DeadlineExceeded) {
		return contract.Errorf(contract.CodeInternal, "bench: %s: no answer within %s", what, benchCallBound)
	}
	ce := contract.AsError(err)
	return &contract.Error{Code: ce.Code, Message: "bench: " + what + ": " + ce.Message, Details: ce.Details}
}

// bounded runs one call under benchCallBound.
func bounded[T any](ctx context.Context, what string, f func(context.Context) (T, error)) (T, error) {
	cctx, cancel := context.WithTimeout(ctx, benchCallBound)
	defer cancel()
	v, err := f(cctx)
	if err != nil {
		if ctx.Err() != nil {
			return v, ctx.Err()
		}
		return v, benchError(what, err)
	}
	return v, nil
}

// timed runs f samples times after benchWarmup untimed runs and returns
// the durations f reports.
func timed(ctx context.Context, samples int, f func(ctx context.Context, i int) (time.Duration, error)) (benchStat, error) {
	ds := make([]time.Duration, 0, samples)
	for i := range samples + benchWarmup {
		if err := ctx.Err(); err != nil {
			return benchStat{}, err
		}
		d, err := f(ctx, i)
		if err != nil {
			return benchStat{}, err
		}
		if i >= benchWarmup {
			ds = append(ds, d)
		}
	}
	return summarize(ds), nil
}

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
			if ev.Event != "device.reclaimed" {
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
	in := contract.LeaseRequestInput{Platform: contract.PlatformAndroid, RequesterID: benchPrincipal + "/warm"}
	request := func(ctx context.Context) (contract.LeaseGrant, error) { return c.RequestLease(ctx, in, nil) }
	release := func(ctx context.Context, g contract.LeaseGrant) error {
		if _, err := bounded(ctx, "lease.release", func(ctx context.Context) (contract.ReleaseResult, error) {
			return c.Release(ctx, g.Lease.ID)
		}); err != nil {
			return err
		}
		return waitReclaimed(ctx, reclaimed, g.Device.ID)
	}
	// The first lease makes the device; its release leaves it ready.
	g, err := bounded(ctx, "lease.request", request)
	if err != nil {
		return benchStat{}, err
	}
	if err := release(ctx, g); err != nil {
		return benchStat{}, err
	}
	return timed(ctx, samples, func(ctx context.Context, _ int) (time.Duration, error) {
		var dt time.Duration
		g, err := bounded(ctx, "lease.request", func(ctx context.Context) (contract.LeaseGrant, error) {
			t0 := time.Now()
			g, err := request(ctx)
			dt = time.Since(t0)
			return g, err
		})
		if err != nil {
			return 0, err
		}
		if g.Source != contract.SourceWarm {
			return 0, contract.Errorf(contract.CodeInternal, "bench: a warm grant came from a %s device, not an idle ready one", g.Source)
		}
		return dt, release(ctx, g)
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

// benchDaemon is a `simlock daemon run` this bench started.
type benchDaemon struct {
	home   string
	cmd    *exec.Cmd
	exited chan struct{} // closed once the process is reaped
}

func (d *benchDaemon) pid() int { return d.cmd.Process.Pid }

// startBenchDaemon execs the daemon for home, with an environment free of
// the caller's SIMLOCK_ settings. Its output goes to daemon.out.
func startBenchDaemon(exe, home string) (*benchDaemon, error) {
	out, err := os.OpenFile(filepath.Join(home, "daemon.out"), os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return nil, fmt.Errorf("bench: start daemon: %w", err)
	}
	cmd := exec.Command(exe, "daemon", "run")
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "SIMLOCK_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, "SIMLOCK_HOME="+home, "SIMLOCK_DRIVERS=demo")
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		out.Close()
		return nil, contract.Errorf(contract.CodeDaemonStartupFailed, "bench: start daemon: %v", err)
	}
	d := &benchDaemon{home: home, cmd: cmd, exited: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		out.Close()
		close(d.exited)
	}()
	return d, nil
}

// startAndWait starts the daemon of home and returns it with an agent
// session once status.get says it runs with leases leases loaded.
func startAndWait(ctx context.Context, env Env, home string, leases int) (*benchDaemon, *client.Client, error) {
	d, err := startBenchDaemon(env.Executable, home)
	if err != nil {
		return nil, nil, err
	}
	c, err := d.waitRunning(ctx, leases)
	if err != nil {
		_ = d.stop(ctx)
		return nil, nil, err
	}
	return d, c, nil
}

// dial opens a session: the admin's (with the token the daemon wrote) or
// the agent's.
func (d *benchDaemon) dial(ctx context.Context, admin bool) (*client.Client, error) {
	hello := contract.HelloInput{Client: "simlock-bench", Principal: benchPrincipal}
	if admin {
		b, err := os.ReadFile(filepath.Join(d.home, daemon.AdminTokenName))
		if err != nil {
			return nil, err
		}
		hello.AdminToken = strings.TrimSpace(string(b))
	}
	cctx, cancel := context.WithTimeout(ctx, benchCallBound)
	defer cancel()
	return client.Dial(cctx, daemon.SocketPath(d.home), hello)
}

// waitRunning polls, within benchStartBound, until the daemon answers and
// status.get (waitReady, summary) says it runs with leases leases; it
// returns the agent session it asked with. (An admin session would need
// the token, which the daemon writes just after it listens.)
func (d *benchDaemon) waitRunning(ctx context.Context, leases int) (*client.Client, error) {
	ctx, cancel := context.WithTimeout(ctx, benchStartBound)
	defer cancel()
	tick := time.NewTicker(benchPoll)
	defer tick.Stop()
	wait := func() error {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-d.exited:
			return contract.Errorf(contract.CodeDaemonStartupFailed, "bench: the daemon exited at startup: %s", d.lastWords())
		case <-tick.C:
			return nil
		}
	}
	var c *client.Client
	for c == nil {
		var err error
		if c, err = d.dial(ctx, false); err != nil {
			if !notListening(err) {
				return nil, benchError("connect", err)
			}
			if err := wait(); err != nil {
				return nil, d.startError(err)
			}
		}
	}
	for {
		s, err := c.StatusWith(ctx, contract.StatusGetInput{WaitReady: true, Summary: true})
		switch {
		case err != nil:
			c.Close()
			return nil, d.startError(err)
		case s.Daemon.Health == "failed":
			c.Close()
			return nil, contract.Errorf(contract.CodeDaemonStartupFailed, "bench: the daemon's startup failed; see %s", filepath.Join(d.home, daemon.LogName))
		case s.Daemon.Health == "running" && leaseCount(s) == leases:
			return c, nil
		case s.Daemon.Health == "running":
			c.Close()
			return nil, contract.Errorf(contract.CodeInternal, "bench: the daemon started with %d leases, want %d", leaseCount(s), leases)
		}
		if err := wait(); err != nil {
			c.Close()
			return nil, d.startError(err)
		}
	}
}

func (d *benchDaemon) startError(err error) error {
	if errors.Is(err, context.DeadlineExceeded) {
		return contract.Errorf(contract.CodeDaemonStartupFailed, "bench: the daemon did not run within %s; see %s", benchStartBound, filepath.Join(d.home, daemon.LogName))
	}
	var ce *contract.Error
	if errors.As(err, &ce) {
		return err
	}
	if errors.Is(err, context.Canceled) {
		return err
	}
	return benchError("start", err)
}

// lastWords is what a daemon that died printed last.
func (d *benchDaemon) lastWords() string {
	b, _ := os.ReadFile(filepath.Join(d.home, "daemon.out"))
	return startupReason(string(b))
}

// leaseCount reads the lease count from a status, summary or not.
func leaseCount(s contract.Status) int {
	if s.Counts != nil {
		return s.Counts.Leases
	}
	return len(s.Leases)
}

// stop stops the daemon gracefully, killing it if it is not gone within
// benchStopBound. It runs on every exit path, so it does not use ctx's
// cancellation.
func (d *benchDaemon) stop(ctx context.Context) error {
	select {
	case <-d.exited:
		return nil
	default:
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), benchStopBound)
	defer cancel()
	if c, err := d.dial(sctx, true); err == nil {
		_ = c.Stop(sctx)
		c.Close()
	}
	select {
	case <-d.exited:
		return nil
	case <-sctx.Done():
	}
	_ = d.cmd.Process.Kill()
	<-d.exited
	return contract.Errorf(contract.CodeInternal, "bench: the daemon did not stop within %s and was killed", benchStopBound)
}

// rssKiB is the resident set of process pid: VmRSS of /proc/<pid>/status
// on Linux, ps elsewhere (macOS).
func rssKiB(ctx context.Context, pid int) (int64, error) {
	if runtime.GOOS == "linux" {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
		if err != nil {
			return 0, fmt.Errorf("bench: read the daemon's RSS: %w", err)
		}
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
				return strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			}
		}
		return 0, errors.New("bench: no VmRSS in the daemon's /proc status")
	}
	cctx, cancel := context.WithTimeout(ctx, benchCallBound)
	defer cancel()
	out, err := exec.CommandContext(cctx, "ps", "-o", "rss=", "-p", strconv.Itoa(pid)).Output()
	if err != nil {
		return 0, fmt.Errorf("bench: ps -o rss= -p %d: %w", pid, err)
	}
	return strconv.ParseInt(strings.TrimSpace(string(out)), 10, 64)
}

// openFloorCommit opens a scratch database at path and returns the store's
// floor commit on it: what a renewal writes (one lease row updated, one
// event appended) in one transaction, through the same prepared statements
// as every decision. The first commit seeds the scratch rows and is not
// timed.
func openFloorCommit(ctx context.Context, path string) (commit func(context.Context) error, closeDB func() error, err error) {
	db, err := sqlite.Open(ctx, path)
	if err != nil {
		return nil, nil, err
	}
	if err := db.CommitFloor(ctx); err != nil {
		db.Close()
		return nil, nil, err
	}
	return db.CommitFloor, db.Close, nil
}

// appendEvents fills the event log of a stopped daemon's database to total
// stored events (lease.renewed of the given leases), in transactions of
// 10,000, and returns how many it holds. The database is fresh, so its
// last seq is its event count.
func appendEvents(ctx context.Context, path string, total int, leaseIDs []string) (int, error) {
	db, err := sqlite.Open(ctx, path)
	if err != nil {
		return 0, benchError("open the daemon's database", err)
	}
	defer db.Close()
	last, err := db.LastSeq(ctx)
	if err != nil {
		return 0, benchError("read the event log", err)
	}
	now := time.Now().UnixMilli()
	const ttl = 86_400_000
	for have := int(last); have < total; {
		batch := make([]store.NewEvent, min(10_000, total-have))
		for i := range batch {
			k := have + i
			payload, _ := json.Marshal(map[string]any{"leaseId": leaseIDs[k%len(leaseIDs)], "ttlDeadline": now + ttl, "ttlMs": ttl})
			batch[i] = store.NewEvent{ID: fmt.Sprintf("evt_bench%010d", k), Timestamp: now, Event: "lease.renewed", Payload: payload}
		}
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		if _, err := db.Commit(ctx, store.Change{Events: batch}); err != nil {
			return 0, benchError("append events", err)
		}
		have += len(batch)
	}
	return max(int(last), total), nil
}

// floorSampler times floor commits in a scratch database, a few before each
// timed series, so the floor is measured across the whole run, as the disk
// and the machine were while the rows were: one measurement at one moment
// can land on a quiet or a busy spell and skew every ratio.
type floorSampler struct {
	commit  func(context.Context) error
	closeDB func() error
	times   []time.Duration
	// idle are the same commit, each after floorIdleGap of doing nothing:
	// what a commit costs a daemon that waited for its next request.
	idle []time.Duration
}

// floorIdleGap is the pause before each idle floor commit, about what a
// daemon waits between two requests of one client.
const floorIdleGap = 300 * time.Microsecond

func openFloor(ctx context.Context, dir string) (*floorSampler, error) {
	commit, closeDB, err := openFloorCommit(ctx, filepath.Join(dir, "floor.db"))
	if err != nil {
		return nil, benchError("floor database", err)
	}
	return &floorSampler{commit: commit, closeDB: closeDB}, nil
}

// take times n floor commits back to back (the floor), then n more each
// after an idle pause.
func (f *floorSampler) take(ctx context.Context, n int) error {
	for i := range 2 * max(n, 1) {
		if err := ctx.Err(); err != nil {
			return err
		}
		idle := i >= max(n, 1)
		if idle {
			time.Sleep(floorIdleGap) // the condition measured, not a wait for anything
		}
		t0 := time.Now()
		if err := f.commit(ctx); err != nil {
			return benchError("floor commit", err)
		}
		if idle {
			f.idle = append(f.idle, time.Since(t0))
		} else {
			f.times = append(f.times, time.Since(t0))
		}
	}
	return nil
}

func (f *floorSampler) stat() benchStat { return summarize(f.times) }

func (f *floorSampler) idleStat() benchStat { return summarize(f.idle) }

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
		Host:        readHost(), StopGrace: benchStopBound,
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

// The renderers below are pure: the result in, text out.

// fmtUs shows microseconds in the unit that suits them.
func fmtUs(us float64) string {
	switch {
	case us < 1000:
		return fmt.Sprintf("%.0f µs", us)
	case us < 1e6:
		return fmt.Sprintf("%.2f ms", us/1000)
	}
	return fmt.Sprintf("%.2f s", us/1e6)
}

func fmtKiB(kib int64) string { return fmt.Sprintf("%.1f MiB", float64(kib)/1024) }

// padRight and padLeft pad to width runes (the table has µ and →).
func padRight(s string, width int) string {
	return s + strings.Repeat(" ", max(0, width-utf8.RuneCountInString(s)))
}

func padLeft(s string, width int) string {
	return strings.Repeat(" ", max(0, width-utf8.RuneCountInString(s))) + s
}

const (
	benchLabelWidth = 36
	benchCellWidth  = 11
)

// renderBenchTable is the human view of a result.
func renderBenchTable(w io.Writer, res benchResult) {
	line := func(label string, cells ...string) {
		var b strings.Builder
		b.WriteString(padRight(label, benchLabelWidth))
		for _, c := range cells {
			b.WriteString(padLeft(c, benchCellWidth))
		}
		fmt.Fprintln(w, strings.TrimRight(b.String(), " "))
	}
	m := res.Machine
	fmt.Fprintln(w, res.Command)
	fmt.Fprintf(w, "simlock %s, %s, %s\n", res.Version, m.Go, res.Date)
	fmt.Fprintf(w, "%s, %d cores, %.1f GiB RAM, %s, %s\n\n", m.CPU, m.Cores, float64(m.RAMBytes)/(1<<30), m.OS, m.Arch)

	var head, sub []string
	for _, r := range res.Runs {
		head = append(head, "", fmt.Sprintf("%d leases", r.Leases))
		sub = append(sub, "p50", "p99")
	}
	line("", head...)
	line("", sub...)
	rows := []struct {
		label string
		stat  func(benchRun) benchStat
	}{
		{"renew", func(r benchRun) benchStat { return r.Renew }},
		{"warm grant", func(r benchRun) benchStat { return r.WarmGrant }},
		{"release → next queued grant", func(r benchRun) benchStat { return r.ReleaseToGrant }},
		{"status (full)", func(r benchRun) benchStat { return r.StatusFull }},
		{"status (summary)", func(r benchRun) benchStat { return r.StatusSummary }},
	}
	for _, row := range rows {
		var cells []string
		for _, r := range res.Runs {
			s := row.stat(r)
			cells = append(cells, fmtUs(s.P50Us), fmtUs(s.P99Us))
		}
		line(row.label, cells...)
	}
	var rss []string
	for _, r := range res.Runs {
		rss = append(rss, fmtKiB(r.RSSKiB), "")
	}
	line("daemon RSS", rss...)
	fmt.Fprintln(w)
	line("", "p50", "p99")
	line("progress push (driver → client) ¹", fmtUs(res.PushLatency.P50Us), fmtUs(res.PushLatency.P99Us))
	line("floor commit (SQLite)", fmtUs(res.Floor.P50Us), fmtUs(res.Floor.P99Us))
	line("floor commit after 300 µs idle ³", fmtUs(res.FloorIdle.P50Us), fmtUs(res.FloorIdle.P99Us))
	line("daemon start ²", fmt.Sprintf("%.0f ms", res.Start.Ms))
	fmt.Fprintln(w)

	r := res.Ratios
	at := func(n int) string { return "@" + strconv.Itoa(n) }
	x := func(v float64) string { return fmt.Sprintf("%.2f", v) }
	fmt.Fprintln(w, "ratios (of p50s)")
	if r.RenewScale != nil {
		line("renew "+at(r.Largest)+" / "+at(r.Smallest), x(*r.RenewScale))
	}
	line("renew "+at(r.Smallest)+" / floor", x(r.RenewOverFloor))
	line("warm grant "+at(r.Smallest)+" / floor", x(r.WarmGrantOverFloor))
	if r.WarmGrantScale != nil {
		line("warm grant "+at(r.Largest)+" / "+at(r.Smallest), x(*r.WarmGrantScale))
	}
	line("release → grant "+at(r.Smallest)+" / floor", x(r.ReleaseToGrantOverFloor))
	line("renew "+at(r.Smallest)+" / idle floor ³", x(r.RenewOverIdleFloor))
	if r.SummaryScale != nil {
		line("status summary "+at(r.Largest)+" / "+at(r.Smallest), x(*r.SummaryScale))
	}
	line("status full "+at(r.Largest), fmt.Sprintf("%.2f ms", r.StatusFullMs))
	line("RSS per live lease", fmt.Sprintf("%.2f KiB", r.RSSPerLeaseKiB))
	line("daemon start", fmt.Sprintf("%.0f ms", r.StartMs))
	fmt.Fprintln(w)
	fmt.Fprintf(w, "¹ %d pushes from an in-process daemon (daemon.Start) with a wrapped demo driver;\n", res.PushLatency.Samples)
	fmt.Fprintln(w, "  every other row runs `simlock daemon run` as a subprocess.")
	fmt.Fprintf(w, "² exec to status.get running with %d leases loaded and %d stored events.\n", res.Start.Leases, res.Start.Events)
	fmt.Fprintln(w, "³ the floor's commit, each after 300 µs of doing nothing, as a daemon commits between")
	fmt.Fprintln(w, "  two requests; a reading aid, not a goal (the goals are against the floor).")
}

// renderBenchMarkdown is the table as docs/PERFORMANCE.md embeds it.
func renderBenchMarkdown(w io.Writer, res benchResult) {
	fmt.Fprintln(w, "```text")
	renderBenchTable(w, res)
	fmt.Fprintln(w, "```")
}
