package bench

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/simlock/simlock/internal/termtest"
)

// sampleFleet is a fixed fleet result for the renderers; skipped drops
// its PostgreSQL rows as a run without PostgreSQL does.
func sampleFleet(skipped bool) FleetResult {
	st := func(p50, p99 float64) *benchStat { return &benchStat{P50Us: p50, P99Us: p99, Samples: 200} }
	res := FleetResult{
		Command: "simlock bench --fleet --workers 10,100,1000 --devices 50 --waiting 10000 --samples 200", Version: "1.0.0", Date: "2026-12-07",
		Machine: benchMachine{CPU: "Intel(R) Xeon(R) Processor", Cores: 2, RAMBytes: 8 << 30, OS: "linux 6.1 (debian 12.11)", Arch: "amd64", Go: "go1.26.0"},
		Samples: 200,
		Fleet: fleetResult{
			Runs:    []fleetRun{sampleRun(10, 1), sampleRun(100, 3), sampleRun(1000, 12)},
			Workers: fleetStoreWorkers, Agents: fleetAgents,
			Stores: []fleetStore{
				{Store: fleetStoreSQLite, WarmGrant: st(1830, 2960.6), GrantsPerSecond: 284.36, Grants: 200},
				{Store: fleetStorePostgres, WarmGrant: st(13086.3, 25454.7), GrantsPerSecond: 81.26, Grants: 200},
			},
			PostgresCommit: st(3379.4, 5233.7),
			SQLiteCommit:   *st(39.3, 426.5),
			Postgres:       fleetPostgres{Server: "throwaway", Version: "15.20"},
		},
	}
	if skipped {
		why := "no --postgres URL and no PostgreSQL server binaries"
		res.Fleet.Stores[1] = fleetStore{Store: fleetStorePostgres, Skipped: why}
		res.Fleet.PostgresCommit = nil
		res.Fleet.Postgres = fleetPostgres{Skipped: why}
	}
	return res
}

// sampleRun is a fixed simulated fleet's rows, at n workers, its routing
// decision scaled by k.
func sampleRun(n int, k float64) fleetRun {
	return fleetRun{Workers: n, DevicesPerWorker: 50,
		Route:            benchStat{P50Us: 14.2 * k, P99Us: 20.5 * k, Samples: 200},
		GatewayWarmGrant: benchStat{P50Us: 1410.3, P99Us: 3020.8, Samples: 200},
		DirectWarmGrant:  benchStat{P50Us: 31.4, P99Us: 60.2, Samples: 200},
		UplinkRoundTrip:  benchStat{P50Us: 250.6, P99Us: 1900.1, Samples: 400},
		GrantsPerSecond:  812.45, Grants: 2600, WindowMs: 3200, FreeRate: 2500, Waiting: 10000,
		RSSPerWorkerKiB: 402.5, RSSPerWaitingKiB: 3.21, ReconnectStormMs: 95.5 * k, EventsPerSecond: 9120.33,
		Events: 20000, EventsPushed: 20000}
}

func TestFleetTableGolden(t *testing.T) {
	var b bytes.Buffer
	RenderFleetTable(&b, sampleFleet(false))
	termtest.Golden(t, "bench-fleet", b.Bytes())
}

// Without PostgreSQL the table still has its rows, each saying skipped,
// and says why once.
func TestFleetTableSaysWhyPostgreSQLWasSkipped(t *testing.T) {
	var b bytes.Buffer
	RenderFleetTable(&b, sampleFleet(true))
	out := b.String()
	if !strings.Contains(out, "PostgreSQL: skipped: no --postgres URL and no PostgreSQL server binaries") {
		t.Errorf("the table does not say why PostgreSQL was skipped:\n%s", out)
	}
	for _, row := range []string{"warm grant via gateway (PostgreSQL)", "commit (PostgreSQL)", "grants per second (PostgreSQL)"} {
		var found bool
		for _, l := range strings.Split(out, "\n") {
			if strings.HasPrefix(l, row) {
				found = true
				if !strings.HasSuffix(l, "skipped") {
					t.Errorf("row %q = %q, want it to say skipped", row, l)
				}
			}
		}
		if !found {
			t.Errorf("no row %q in:\n%s", row, out)
		}
	}
}

func TestFleetMarkdownIsTheTableInAFence(t *testing.T) {
	var table, md bytes.Buffer
	RenderFleetTable(&table, sampleFleet(false))
	RenderFleetMarkdown(&md, sampleFleet(false))
	if want := "```text\n" + table.String() + "```\n"; md.String() != want {
		t.Errorf("markdown:\n%s\nwant:\n%s", md.String(), want)
	}
}

// The JSON names are an interface (scripts and later fleet rows read and
// extend the same "fleet" object): the golden files pin them.
func TestFleetJSONGolden(t *testing.T) {
	for _, skipped := range []bool{false, true} {
		var b bytes.Buffer
		enc := json.NewEncoder(&b)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(sampleFleet(skipped)); err != nil {
			t.Fatal(err)
		}
		name := "bench-fleet-json"
		if skipped {
			name += "-skipped"
		}
		termtest.Golden(t, name, b.Bytes())
	}
}
