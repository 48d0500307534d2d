package e2e

import (
	"context"
	"encoding/json"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/simlock/simlock/internal/bintest"
	"github.com/simlock/simlock/internal/pgserver"
	"github.com/simlock/simlock/internal/store/pgtest"
)

// fleetBenchResult is what the fleet bench's JSON is read as here.
type fleetBenchResult struct {
	Command string `json:"command"`
	Fleet   struct {
		Runs    []json.RawMessage `json:"runs"`
		Workers int               `json:"workers"`
		Agents  int               `json:"agents"`
		Stores  []struct {
			Store     string `json:"store"`
			WarmGrant *struct {
				P50Us   float64 `json:"p50Us"`
				P99Us   float64 `json:"p99Us"`
				Samples int     `json:"samples"`
			} `json:"warmGrant"`
			GrantsPerSecond float64 `json:"grantsPerSecond"`
			Grants          int     `json:"grants"`
			Skipped         string  `json:"skipped"`
		} `json:"stores"`
		PostgresCommit *struct {
			P50Us   float64 `json:"p50Us"`
			P99Us   float64 `json:"p99Us"`
			Samples int     `json:"samples"`
		} `json:"postgresCommit"`
		SQLiteCommit struct {
			P50Us float64 `json:"p50Us"`
		} `json:"sqliteCommit"`
		Postgres struct {
			Server  string `json:"server"`
			Version string `json:"version"`
			Skipped string `json:"skipped"`
		} `json:"postgres"`
	} `json:"fleet"`
}

// runFleetBench runs `simlock bench --fleet --json` with args, its
// temporary directories under a TMPDIR of its own, and checks that it
// leaves nothing there. It returns the parsed result and the whole output.
func runFleetBench(t *testing.T, args ...string) (fleetBenchResult, string) {
	t.Helper()
	consultSourcesOnce(t)
	tmp, err := os.MkdirTemp("", "slbf")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(tmp)
	// As root, a throwaway cluster runs as the user nobody, who must reach
	// its directory under TMPDIR.
	if err := os.Chmod(tmp, 0o755); err != nil {
		t.Fatal(err)
	}
	userHome, benchTmp := filepath.Join(tmp, "user-home"), filepath.Join(tmp, "tmp")
	for _, d := range []string{userHome, benchTmp} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), commandBound)
	defer cancel()
	cmd := exec.CommandContext(ctx, simlockBin, append([]string{"bench", "--fleet", "--json"}, args...)...)
	cmd.Env = append(bintest.Env(userHome), "TMPDIR="+benchTmp)
	cmd.WaitDelay = 5 * time.Second
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("simlock bench --fleet: %v\nstdout: %s\nstderr: %s", err, stdout.String(), stderr.String())
	}
	var res fleetBenchResult
	if err := json.Unmarshal([]byte(stdout.String()), &res); err != nil {
		t.Fatalf("bench --fleet output is not JSON: %v\n%s", err, stdout.String())
	}
	if left, _ := os.ReadDir(benchTmp); len(left) != 0 {
		t.Errorf("bench --fleet left %d entries in its TMPDIR (%s...)", len(left), left[0].Name())
	}
	return res, stdout.String() + stderr.String()
}

// fleetRunNames are the JSON names of one run of simulated workers: the
// interface scripts read.
var fleetRunNames = []string{"workers", "devicesPerWorker", "route", "gatewayWarmGrant", "directWarmGrant", "uplinkRoundTrip",
	"grantsPerSecond", "rssPerWorkerKiB", "rssPerWaitingKiB", "reconnectStormMs", "eventsPerSecond"}

// checkFleetRuns checks the simulated fleets' rows: a run per count, in
// order, each with every name and figures that can be.
func checkFleetRuns(t *testing.T, res fleetBenchResult, workers []int, devices, waiting, samples int) {
	t.Helper()
	if len(res.Fleet.Runs) != len(workers) {
		t.Fatalf("fleet.runs has %d runs, want %d", len(res.Fleet.Runs), len(workers))
	}
	for i, raw := range res.Fleet.Runs {
		var names map[string]json.RawMessage
		if err := json.Unmarshal(raw, &names); err != nil {
			t.Fatal(err)
		}
		for _, n := range fleetRunNames {
			if _, ok := names[n]; !ok {
				t.Errorf("fleet.runs[%d] has no %q: %s", i, n, raw)
			}
		}
		var r struct {
			Workers                                                   int `json:"workers"`
			DevicesPerWorker                                          int `json:"devicesPerWorker"`
			Route, GatewayWarmGrant, DirectWarmGrant, UplinkRoundTrip struct {
				P50Us, P99Us float64
				Samples      int
			}
			GrantsPerSecond, RSSPerWorkerKiB, RSSPerWaitingKiB, ReconnectStormMs, EventsPerSecond float64
			Grants, Events, EventsPushed                                                          int
		}
		if err := json.Unmarshal(raw, &r); err != nil {
			t.Fatal(err)
		}
		if r.Workers != workers[i] || r.DevicesPerWorker != devices {
			t.Errorf("fleet.runs[%d]: %d workers of %d devices, want %d of %d", i, r.Workers, r.DevicesPerWorker, workers[i], devices)
		}
		for name, st := range map[string]struct {
			P50Us, P99Us float64
			Samples      int
		}{"route": r.Route, "gatewayWarmGrant": r.GatewayWarmGrant, "directWarmGrant": r.DirectWarmGrant} {
			if st.P50Us <= 0 || st.P99Us < st.P50Us || st.Samples != samples {
				t.Errorf("fleet.runs[%d].%s = %+v, want p50 > 0, p99 >= p50, %d samples", i, name, st, samples)
			}
		}
		if r.UplinkRoundTrip.P50Us <= 0 || r.UplinkRoundTrip.Samples < 1 {
			t.Errorf("fleet.runs[%d].uplinkRoundTrip = %+v, want a positive p50", i, r.UplinkRoundTrip)
		}
		if r.GatewayWarmGrant.P50Us <= r.DirectWarmGrant.P50Us {
			t.Errorf("fleet.runs[%d]: a warm grant through the gateway (%v µs) is no slower than one on the worker directly (%v µs)",
				i, r.GatewayWarmGrant.P50Us, r.DirectWarmGrant.P50Us)
		}
		if r.GrantsPerSecond <= 0 || r.Grants < 1 || r.Grants > waiting {
			t.Errorf("fleet.runs[%d]: %v grants per second, %d grants of %d waiting; want some, no more than waited", i, r.GrantsPerSecond, r.Grants, waiting)
		}
		if r.RSSPerWorkerKiB == 0 && r.RSSPerWaitingKiB == 0 {
			t.Errorf("fleet.runs[%d]: no RSS figure moved", i)
		}
		if r.ReconnectStormMs <= 0 || r.ReconnectStormMs > 60_000 {
			t.Errorf("fleet.runs[%d].reconnectStormMs = %v, want within the bench's bound", i, r.ReconnectStormMs)
		}
		if r.EventsPerSecond <= 0 || r.Events < 1 || r.Events > r.EventsPushed {
			t.Errorf("fleet.runs[%d]: %v events a second, %d relayed of %d pushed; want some relayed, no more than pushed", i, r.EventsPerSecond, r.Events, r.EventsPushed)
		}
	}
}

// checkFleetStore checks that the result has store's rows measured.
func checkFleetStore(t *testing.T, res fleetBenchResult, i int, store string, samples int) {
	t.Helper()
	if len(res.Fleet.Stores) <= i {
		t.Fatalf("fleet.stores = %+v, want %s at %d", res.Fleet.Stores, store, i)
	}
	s := res.Fleet.Stores[i]
	if s.Store != store || s.Skipped != "" {
		t.Fatalf("fleet.stores[%d] = %+v, want %s measured", i, s, store)
	}
	if s.WarmGrant == nil || s.WarmGrant.P50Us <= 0 || s.WarmGrant.P99Us < s.WarmGrant.P50Us || s.WarmGrant.Samples != samples {
		t.Errorf("fleet.stores[%d] (%s).warmGrant = %+v, want p50 > 0, p99 >= p50, %d samples", i, store, s.WarmGrant, samples)
	}
	if s.GrantsPerSecond <= 0 || s.Grants <= 0 {
		t.Errorf("fleet.stores[%d] (%s): %v grants per second over %d grants, want positive", i, store, s.GrantsPerSecond, s.Grants)
	}
}

// fleetQuick are the smallest simulated fleets a run of the fleet bench
// takes: the tests of its other rows need them done, not measured.
var fleetQuick = []string{"--workers", "1", "--devices", "2", "--waiting", "4"}

// simlock bench --fleet measures a gateway on SQLite and, where Debian's
// PostgreSQL server binaries are, one on a throwaway cluster beside that
// cluster's own commit; without them the PostgreSQL rows say skipped and
// why, and the run still succeeds. It leaves nothing in its TMPDIR.
func TestBenchFleetMeasuresAGatewayOnSQLiteAndOnPostgreSQL(t *testing.T) {
	t.Parallel()
	res, _ := runFleetBench(t, "--workers", "5,3", "--devices", "4", "--waiting", "20", "--samples", "5")
	checkFleetRuns(t, res, []int{3, 5}, 4, 20, 5)
	if res.Fleet.Workers != 2 || res.Fleet.Agents <= 1 {
		t.Errorf("fleet.workers, agents = %d, %d; want 2 and several", res.Fleet.Workers, res.Fleet.Agents)
	}
	if res.Fleet.SQLiteCommit.P50Us <= 0 {
		t.Errorf("fleet.sqliteCommit.p50Us = %v, want positive", res.Fleet.SQLiteCommit.P50Us)
	}
	checkFleetStore(t, res, 0, "sqlite", 5)
	if len(res.Fleet.Stores) != 2 || res.Fleet.Stores[1].Store != "postgres" {
		t.Fatalf("fleet.stores = %+v, want sqlite then postgres", res.Fleet.Stores)
	}
	if _, err := pgserver.Find(); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("under CI the PostgreSQL server binaries must be installed: %v", err)
		}
		if res.Fleet.Stores[1].Skipped == "" || res.Fleet.Postgres.Skipped == "" || res.Fleet.PostgresCommit != nil {
			t.Errorf("without PostgreSQL's binaries: stores[1] = %+v, postgres = %+v, postgresCommit = %+v; want skipped with why",
				res.Fleet.Stores[1], res.Fleet.Postgres, res.Fleet.PostgresCommit)
		}
		return
	}
	checkFleetStore(t, res, 1, "postgres", 5)
	if c := res.Fleet.PostgresCommit; c == nil || c.P50Us <= 0 || c.P99Us < c.P50Us || c.Samples != 5 {
		t.Errorf("fleet.postgresCommit = %+v, want p50 > 0, p99 >= p50, 5 samples", c)
	}
	if p := res.Fleet.Postgres; p.Server != "throwaway" || p.Version == "" || p.Skipped != "" {
		t.Errorf("fleet.postgres = %+v, want a throwaway cluster with its version", p)
	}
}

// Given --postgres, the bench works in a database of its own on that
// server and drops it at the end: the database named in the URL and its
// tables are left as they were, and no bench database remains.
func TestBenchFleetOnAGivenServerUsesADatabaseOfItsOwnAndDropsIt(t *testing.T) {
	t.Parallel()
	pg := pgtest.Start(t)
	theirs := pg.Database(t)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, theirs)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE TABLE mine (v text); INSERT INTO mine VALUES ('kept')"); err != nil {
		t.Fatal(err)
	}

	res, _ := runFleetBench(t, append(fleetQuick, "--samples", "3", "--postgres", theirs)...)
	checkFleetStore(t, res, 1, "postgres", 3)
	if res.Fleet.Postgres.Server != "url" || res.Fleet.PostgresCommit == nil {
		t.Errorf("fleet.postgres = %+v, postgresCommit = %+v; want the given server measured", res.Fleet.Postgres, res.Fleet.PostgresCommit)
	}

	var tables []string
	rows, err := conn.Query(ctx, "SELECT tablename FROM pg_tables WHERE schemaname = 'public' ORDER BY 1")
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var n string
		_ = rows.Scan(&n)
		tables = append(tables, n)
	}
	if rows.Err() != nil || len(tables) != 1 || tables[0] != "mine" {
		t.Errorf("the given database holds tables %v (%v) after the bench, want only its own: mine", tables, rows.Err())
	}
	var left int
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM pg_database WHERE datname LIKE 'simlock_bench_%'").Scan(&left); err != nil || left != 0 {
		t.Errorf("%d bench databases (%v) remain on the server after the bench, want 0", left, err)
	}
}

// A --postgres server that cannot be reached skips the PostgreSQL rows
// with the reason, the SQLite rows are still measured, the run succeeds,
// and the URL's password is never shown.
func TestBenchFleetWithAnUnreachablePostgresSkipsItsRowsAndHidesThePassword(t *testing.T) {
	t.Parallel()
	const secret = "hunter2-secret"
	u := url.URL{Scheme: "postgres", User: url.UserPassword("bench", secret), Host: "127.0.0.1:" + closedPort(t), Path: "/x",
		RawQuery: "sslmode=disable&connect_timeout=5"}
	res, out := runFleetBench(t, append(fleetQuick, "--samples", "3", "--postgres", u.String())...)
	checkFleetStore(t, res, 0, "sqlite", 3)
	if len(res.Fleet.Stores) != 2 || res.Fleet.Stores[1].Store != "postgres" || !strings.Contains(res.Fleet.Stores[1].Skipped, "connect") {
		t.Errorf("fleet.stores = %+v, want postgres skipped because it could not connect", res.Fleet.Stores)
	}
	if res.Fleet.PostgresCommit != nil || res.Fleet.Postgres.Skipped == "" {
		t.Errorf("fleet.postgres = %+v, postgresCommit = %+v; want skipped", res.Fleet.Postgres, res.Fleet.PostgresCommit)
	}
	if strings.Contains(out, secret) {
		t.Errorf("bench --fleet showed the --postgres password:\n%s", out)
	}
}

// closedPort is a loopback port nothing listens on (the OS's pick, closed
// again).
func closedPort(t *testing.T) string {
	t.Helper()
	return freePort(t)
}

// bench's --fleet flags are checked before anything starts, each bad
// value refused USAGE naming its flag.
func TestBenchFleetFlagsAreChecked(t *testing.T) {
	t.Parallel()
	h := newHome(t)
	for _, c := range []struct {
		flag string
		args []string
	}{
		{"--workers", []string{"bench", "--workers", "2"}},
		{"--devices", []string{"bench", "--devices", "2"}},
		{"--waiting", []string{"bench", "--waiting", "2"}},
		{"--postgres", []string{"bench", "--postgres", "postgres://127.0.0.1/x"}},
		{"--leases", []string{"bench", "--fleet", "--leases", "10"}},
		{"--soak", []string{"bench", "--fleet", "--soak", "10s"}},
		{"--workers", []string{"bench", "--fleet", "--workers", "0"}},
		{"--workers", []string{"bench", "--fleet", "--workers", "two"}},
		{"--workers", []string{"bench", "--fleet", "--workers", "10,,x"}},
		{"--workers", []string{"bench", "--fleet", "--workers", "10001"}},
		{"--devices", []string{"bench", "--fleet", "--devices", "0"}},
		{"--devices", []string{"bench", "--fleet", "--workers", "10,10000", "--devices", "1000"}},
		{"--waiting", []string{"bench", "--fleet", "--waiting", "0"}},
		{"--waiting", []string{"bench", "--fleet", "--waiting", "1000001"}},
	} {
		e := expectFailure(t, h.run(c.args...), 2, "USAGE")
		if msg, _ := e["message"].(string); !strings.Contains(msg, c.flag) {
			t.Errorf("%v: the usage error %q does not name %s", c.args, msg, c.flag)
		}
	}
}
