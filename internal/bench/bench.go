package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/shirou/gopsutil/v4/cpu"
	"github.com/shirou/gopsutil/v4/host"
	"github.com/shirou/gopsutil/v4/mem"

	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/daemon"
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

// Plan is what to measure.
type Plan struct {
	Leases  []int
	Samples int
	// Events is the event history the timed start loads.
	Events int
	Keep   bool
}

// command is the plan as a command line, for the output.
func (p Plan) command() string {
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

// Run runs the plan in a fresh temporary home.
func Run(ctx context.Context, env Env, plan Plan, note func(string, ...any)) (res Result, err error) {
	root, done, err := benchRoot(env, "slb", plan.Keep)
	if err != nil {
		return res, err
	}
	defer done(ctx, &err)
	// The deepest path is the largest run's socket.
	if sock := daemon.SocketPath(benchHome(root, plan.Leases[len(plan.Leases)-1])); len(sock) > 103 {
		return res, contract.Errorf(contract.CodeUsage, "the temporary directory's path is too long for a unix socket (%s); set TMPDIR to a shorter one", sock)
	}
	if env.Executable == "" {
		return res, errors.New("bench: the simlock binary's path is unknown")
	}

	res = Result{
		Command: plan.command(), Version: env.Version, Date: time.Now().UTC().Format(time.DateOnly),
		Machine: readMachine(ctx), Samples: plan.Samples,
	}
	floor, err := openFloorIn(ctx, root)
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
