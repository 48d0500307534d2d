package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"github.com/simlock/simlock/internal/bintest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// simlock bench at tiny counts prints every row with positive numbers, runs
// its daemons in a temporary home of its own (not SIMLOCK_HOME), and leaves
// nothing behind. --events is small here only to keep the test quick.
func TestBenchJSONHasEveryRowAndCleansUp(t *testing.T) {
	t.Parallel()
	consultSourcesOnce(t)
	// bench's temporary home goes under TMPDIR; a short one keeps the
	// socket path within bounds.
	tmp, err := os.MkdirTemp("", "slbt")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(tmp)
	userHome := filepath.Join(tmp, "user-home")
	benchTmp := filepath.Join(tmp, "tmp")
	for _, d := range []string{userHome, benchTmp} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), commandBound)
	defer cancel()
	cmd := exec.CommandContext(ctx, simlockBin, "bench", "--leases", "3,6", "--samples", "5", "--events", "2000", "--json")
	cmd.Env = append(bintest.Env(userHome), "TMPDIR="+benchTmp)
	cmd.WaitDelay = 5 * time.Second
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("simlock bench: %v\nstdout: %s\nstderr: %s", err, stdout.String(), stderr.String())
	}

	var res map[string]any
	if err := json.Unmarshal([]byte(stdout.String()), &res); err != nil {
		t.Fatalf("bench output is not JSON: %v\n%s", err, stdout.String())
	}
	positive := func(where string, v any) {
		t.Helper()
		if f, ok := v.(float64); !ok || f <= 0 {
			t.Errorf("%s = %v, want a positive number", where, v)
		}
	}
	stat := func(where string, v any) {
		t.Helper()
		m, ok := v.(map[string]any)
		if !ok {
			t.Errorf("%s = %v, want {p50Us, p99Us, samples}", where, v)
			return
		}
		for _, k := range []string{"p50Us", "p99Us", "samples"} {
			positive(where+"."+k, m[k])
		}
		if p50, p99 := m["p50Us"].(float64), m["p99Us"].(float64); p99 < p50 {
			t.Errorf("%s: p99 %v < p50 %v", where, p99, p50)
		}
	}

	machine, _ := res["machine"].(map[string]any)
	positive("machine.cores", machine["cores"])
	positive("machine.ramBytes", machine["ramBytes"])
	for _, k := range []string{"os", "arch", "go"} {
		if s, _ := machine[k].(string); s == "" {
			t.Errorf("machine.%s is empty", k)
		}
	}
	runs, _ := res["runs"].([]any)
	if len(runs) != 2 {
		t.Fatalf("runs = %v, want two (3 and 6 leases)", res["runs"])
	}
	for i, want := range []float64{3, 6} {
		run, _ := runs[i].(map[string]any)
		if run["leases"] != want {
			t.Errorf("runs[%d].leases = %v, want %v", i, run["leases"], want)
		}
		for _, row := range []string{"renew", "warmGrant", "releaseToGrant", "statusFull", "statusSummary", "ping"} {
			stat(fmt.Sprintf("runs[%d].%s", i, row), run[row])
			if m, _ := run[row].(map[string]any); m["samples"] != float64(5) {
				t.Errorf("runs[%d].%s.samples = %v, want 5", i, row, m["samples"])
			}
		}
		positive(fmt.Sprintf("runs[%d].renewsPerSecond50", i), run["renewsPerSecond50"])
		positive("rssKiB", run["rssKiB"])
		positive("rssStartKiB", run["rssStartKiB"])
	}
	stat("floor", res["floor"])
	stat("pushLatency", res["pushLatency"])
	start, _ := res["start"].(map[string]any)
	positive("start.ms", start["ms"])
	if start["leases"] != float64(6) {
		t.Errorf("start.leases = %v, want 6", start["leases"])
	}
	if ev, _ := start["events"].(float64); ev < 2000 {
		t.Errorf("start.events = %v, want at least 2000", start["events"])
	}
	ratios, _ := res["ratios"].(map[string]any)
	for _, k := range []string{"renewScale", "renewOverFloor", "warmGrantOverFloor", "warmGrantScale",
		"releaseToGrantOverFloor", "summaryScale", "statusFullMs", "startMs",
		"inSituUs", "renewOverInSitu", "warmGrantOverInSitu", "releaseToGrantOverInSitu"} {
		positive("ratios."+k, ratios[k])
	}
	// Between 3 and 6 leases the RSS difference is noise, of either sign.
	if _, ok := ratios["rssPerLeaseKiB"].(float64); !ok {
		t.Errorf("ratios.rssPerLeaseKiB = %v, want a number", ratios["rssPerLeaseKiB"])
	}

	for _, dir := range []string{benchTmp, userHome} {
		left, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		if len(left) != 0 {
			names := make([]string, len(left))
			for i, e := range left {
				names[i] = e.Name()
			}
			t.Errorf("bench left %v in %s", names, dir)
		}
	}
}

// simlock bench --soak samples the daemon through the run and judges each
// metric's trend; it exits 0 exactly when every trend is flat.
func TestBenchSoakSamplesTheDaemonAndJudgesTheTrend(t *testing.T) {
	t.Parallel()
	consultSourcesOnce(t)
	tmp, err := os.MkdirTemp("", "slbs")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(tmp)
	ctx, cancel := context.WithTimeout(context.Background(), commandBound)
	defer cancel()
	cmd := exec.CommandContext(ctx, simlockBin, "bench", "--soak", "3s", "--sample-every", "500ms", "--agents", "10", "--json")
	cmd.Env = append(bintest.Env(tmp), "TMPDIR="+tmp)
	cmd.WaitDelay = 5 * time.Second
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	runErr := cmd.Run()
	var res struct {
		Ops     int64 `json:"ops"`
		Samples []struct {
			RSSKiB     int64 `json:"rssKiB"`
			HeapBytes  int64 `json:"heapBytes"`
			Goroutines int   `json:"goroutines"`
			OpenFiles  int   `json:"openFiles"`
			Ops        int   `json:"ops"`
		} `json:"samples"`
		Trends []struct {
			Metric string  `json:"metric"`
			Last   float64 `json:"last"`
			Bound  float64 `json:"bound"`
			Flat   bool    `json:"flat"`
		} `json:"trends"`
		Flat bool `json:"flat"`
	}
	if err := json.Unmarshal([]byte(stdout.String()), &res); err != nil {
		t.Fatalf("soak output is not JSON (%v): %v\n%s\n%s", runErr, err, stdout.String(), stderr.String())
	}
	if len(res.Samples) < 4 || res.Ops == 0 {
		t.Fatalf("%d samples and %d operations in 3s at 500ms, want at least 4 and some", len(res.Samples), res.Ops)
	}
	for i, s := range res.Samples {
		if s.RSSKiB <= 0 || s.HeapBytes <= 0 || s.Goroutines <= 0 || s.OpenFiles <= 0 || s.Ops <= 0 {
			t.Errorf("sample %d lacks a figure: %+v", i, s)
		}
	}
	if len(res.Trends) != 5 {
		t.Fatalf("%d trends, want rss, heap, goroutines, files and p99", len(res.Trends))
	}
	flat := true
	for _, tr := range res.Trends {
		if tr.Flat != (tr.Last <= tr.Bound) {
			t.Errorf("%s: last %v, bound %v, judged flat %v", tr.Metric, tr.Last, tr.Bound, tr.Flat)
		}
		flat = flat && tr.Flat
	}
	if flat != res.Flat || (runErr == nil) != res.Flat {
		t.Fatalf("trends flat %v, result flat %v, exit %v: the verdict and the exit disagree", flat, res.Flat, runErr)
	}
}
