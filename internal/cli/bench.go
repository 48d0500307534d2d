package cli

// simlock bench: the command and its flags. internal/bench measures and
// renders; this file reads the flags and picks the output.

import (
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/simlock/simlock/internal/bench"
)

func benchCmd(env Env) *cobra.Command {
	var leasesFlag, soakFlag, everyFlag, workersFlag, postgresFlag string
	var samples, events, agents, devices, waiting int
	var markdown, keep, fleet bool
	cmd := &cobra.Command{
		Use:   "bench [--leases N,N] [--samples N] [--events N] [--json | --markdown] [--keep] | --soak D [--sample-every D] [--agents N] | --fleet [--workers N,N] [--devices N] [--waiting N] [--postgres URL] [--samples N]",
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
of the run to the last (docs/RELIABILITY.md has the rule).

With --fleet it measures a fleet instead. For each N of --workers
(10,100,1000) it runs a gateway (SQLite) with N simulated workers of
--devices devices (50) each, served from the bench's own process over real
uplinks, and measures: a routing decision over the gateway's views; a warm
grant through the gateway beside one on a simulated worker directly and the
uplink's own round trip; grants per second with --waiting requests (10000)
in line while the workers free devices at a steady rate; the gateway's RSS
per connected worker and per waiting request; a reconnect storm after a
gateway restart; and relayed events per second. Then, as before, a gateway
on SQLite and one on PostgreSQL, each with two demo workers (real worker
daemons) joined to it, time a warm grant through the gateway and grants per
second with four agents leasing and releasing at once, beside PostgreSQL's
own commit (BEGIN, one INSERT, COMMIT) and SQLite's floor commit measured
in the same run. The PostgreSQL server is --postgres URL's (the bench
creates a database of its own there and drops it at the end, so it needs
CREATEDB), else a throwaway cluster of Debian's postgresql package on
loopback; without either the PostgreSQL rows say skipped and why.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			asJSON, _ := cmd.Flags().GetBool("json")
			if fleet {
				return runFleetBench(cmd, env, bench.FleetPlan{Devices: devices, Waiting: waiting, Samples: samples, Postgres: postgresFlag, Keep: keep},
					workersFlag, asJSON, markdown)
			}
			for _, f := range []string{"workers", "devices", "waiting", "postgres"} {
				if cmd.Flags().Changed(f) {
					return usage("--%s goes with --fleet", f)
				}
			}
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
				res, err := bench.RunSoak(cmd.Context(), benchEnv(env), plan, benchNoter(env))
				if res.Samples != nil {
					if asJSON || !env.StdoutIsTerminal {
						if perr := printJSON(env.Stdout, res); perr != nil {
							return perr
						}
					} else {
						bench.RenderSoakTable(env.Stdout, res)
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
			if err := checkBenchRun(samples, asJSON, markdown); err != nil {
				return err
			}
			if events < 0 || events > 10_000_000 {
				return usage("--events must be from 0 to 10000000, got %d", events)
			}
			plan := bench.Plan{Leases: ns, Samples: samples, Events: events, Keep: keep}
			res, err := bench.Run(cmd.Context(), benchEnv(env), plan, benchNoter(env))
			if err != nil {
				return fail(err)
			}
			return printBench(env, asJSON, markdown, res,
				func(w io.Writer) { bench.RenderMarkdown(w, res) }, func(w io.Writer) { bench.RenderTable(w, res) })
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
	cmd.Flags().BoolVar(&fleet, "fleet", false, "measure a gateway with simulated workers, and on SQLite and PostgreSQL with demo workers, instead")
	cmd.Flags().StringVar(&workersFlag, "workers", "10,100,1000", "with --fleet: simulated worker counts, comma-separated, one run each")
	cmd.Flags().IntVar(&devices, "devices", 50, "with --fleet: devices of each simulated worker")
	cmd.Flags().IntVar(&waiting, "waiting", 10_000, "with --fleet: requests waiting in the gateway's line in the grants-per-second row")
	cmd.Flags().StringVar(&postgresFlag, "postgres", "", "with --fleet: a postgres:// server URL to create the bench's database on (default: a throwaway cluster)")
	return cmd
}

// runFleetBench is `simlock bench --fleet`.
func runFleetBench(cmd *cobra.Command, env Env, plan bench.FleetPlan, workersFlag string, asJSON, markdown bool) error {
	for _, f := range []string{"leases", "events", "soak", "sample-every", "agents"} {
		if cmd.Flags().Changed(f) {
			return usage("--%s does not apply to --fleet", f)
		}
	}
	workers, err := parseCounts(workersFlag, maxFleetBenchWorkers, "worker count", "10,100,1000")
	if err != nil {
		return usage("--workers: %v", err)
	}
	plan.Workers = workers
	if plan.Devices < 1 || plan.Devices > maxFleetBenchDevices {
		return usage("--devices must be from 1 to %d, got %d", maxFleetBenchDevices, plan.Devices)
	}
	if most := slices.Max(plan.Workers); most*plan.Devices > maxFleetBenchSimDevices {
		// All of a run's simulated devices live in this process.
		return usage("--workers × --devices must be at most %d simulated devices, got %d × %d", maxFleetBenchSimDevices, most, plan.Devices)
	}
	if plan.Waiting < 1 || plan.Waiting > maxFleetBenchWaiting {
		return usage("--waiting must be from 1 to %d, got %d", maxFleetBenchWaiting, plan.Waiting)
	}
	if err := checkBenchRun(plan.Samples, asJSON, markdown); err != nil {
		return err
	}
	res, err := bench.RunFleet(cmd.Context(), benchEnv(env), plan, benchNoter(env))
	if err != nil {
		return fail(err)
	}
	return printBench(env, asJSON, markdown, res,
		func(w io.Writer) { bench.RenderFleetMarkdown(w, res) }, func(w io.Writer) { bench.RenderFleetTable(w, res) })
}

// checkBenchRun checks what every bench run takes: --samples, and one
// output format at most.
func checkBenchRun(samples int, asJSON, markdown bool) error {
	if samples < 1 || samples > 1_000_000 {
		return usage("--samples must be from 1 to 1000000, got %d", samples)
	}
	if asJSON && markdown {
		return usage("give --json or --markdown, not both")
	}
	return nil
}

// printBench prints a bench run's result: JSON when asked or when stdout
// is not a terminal, the Markdown block when asked, else the table.
func printBench(env Env, asJSON, markdown bool, res any, md, table func(io.Writer)) error {
	switch {
	case asJSON:
		return printJSON(env.Stdout, res)
	case markdown:
		md(env.Stdout)
	case env.StdoutIsTerminal:
		table(env.Stdout)
	default:
		return printJSON(env.Stdout, res)
	}
	return nil
}

// The bounds of the fleet bench's sizes: simulated workers in one process
// (a gateway's gateway.maxWorkers goes to 100,000), devices of one (a
// status of more than 10,000 devices is not a worker's), requests waiting.
const (
	maxFleetBenchWorkers = 10_000
	maxFleetBenchDevices = 10_000
	maxFleetBenchWaiting = 1_000_000
	// maxFleetBenchSimDevices bounds one run's simulated devices, which
	// the bench process holds (ten times the default run's 50,000).
	maxFleetBenchSimDevices = 500_000
)

// soakPlanOf reads the soak flags: a soak of 1s to 24h, sampled at least
// four times (the first sample is a warm-up), by 1 to 1000 agents.
func soakPlanOf(soak, every string, agents int, keep bool) (bench.SoakPlan, error) {
	d, err := parseDuration(soak)
	if err != nil || d < time.Second || d > 24*time.Hour {
		return bench.SoakPlan{}, usage("--soak must be a duration from 1s to 24h, got %q", soak)
	}
	e, err := parseDuration(every)
	if err != nil || e < 100*time.Millisecond {
		return bench.SoakPlan{}, usage("--sample-every must be a duration of at least 100ms, got %q", every)
	}
	if d < 4*e {
		return bench.SoakPlan{}, usage("--soak %s takes fewer than four samples of --sample-every %s; make it longer", soak, every)
	}
	if agents < 1 || agents > 1000 {
		return bench.SoakPlan{}, usage("--agents must be from 1 to 1000, got %d", agents)
	}
	return bench.SoakPlan{Duration: d, Every: e, Agents: agents, Keep: keep}, nil
}

// parseLeaseCounts reads "10,10000": at least one count, each from 1 to
// 100000, returned ascending without repeats.
func parseLeaseCounts(s string) ([]int, error) {
	return parseCounts(s, 100_000, "lease count", "10,10000")
}

// parseCounts reads a comma-separated list of at least one count, each
// from 1 to most, returned ascending without repeats; what names a count
// in an error, example a list to give.
func parseCounts(s string, most int, what, example string) ([]int, error) {
	var out []int
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		n, err := strconv.Atoi(part)
		if err != nil || n < 1 || n > most {
			return nil, fmt.Errorf("%q is not a %s from 1 to %d", part, what, most)
		}
		out = append(out, n)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("give at least one %s, such as %s", what, example)
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

// benchEnv is what a bench run needs of the command.
func benchEnv(env Env) bench.Env {
	return bench.Env{Executable: env.Executable, Version: env.Version, Stderr: env.Stderr, StartupReason: startupReason, Host: readHost()}
}
