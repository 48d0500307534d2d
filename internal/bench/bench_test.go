package bench

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/simlock/simlock/internal/termtest"
)

func TestPercentileIsNearestRank(t *testing.T) {
	ms := func(ns ...int) []time.Duration {
		out := make([]time.Duration, len(ns))
		for i, n := range ns {
			out[i] = time.Duration(n) * time.Millisecond
		}
		return out
	}
	hundred := make([]int, 100)
	for i := range hundred {
		hundred[i] = i + 1
	}
	for _, tc := range []struct {
		name   string
		sorted []time.Duration
		p      float64
		want   time.Duration
	}{
		{"empty", nil, 50, 0},
		{"one sample is every percentile", ms(7), 99, 7 * time.Millisecond},
		{"p50 of five is the third", ms(1, 2, 3, 4, 5), 50, 3 * time.Millisecond},
		{"p99 of five is the largest", ms(1, 2, 3, 4, 5), 99, 5 * time.Millisecond},
		{"p50 of four is the second", ms(1, 2, 3, 4), 50, 2 * time.Millisecond},
		{"p50 of 1..100", ms(hundred...), 50, 50 * time.Millisecond},
		{"p99 of 1..100", ms(hundred...), 99, 99 * time.Millisecond},
		{"p100 of 1..100", ms(hundred...), 100, 100 * time.Millisecond},
		{"a tiny p is the smallest", ms(1, 2, 3), 0.1, 1 * time.Millisecond},
	} {
		if got := percentile(tc.sorted, tc.p); got != tc.want {
			t.Errorf("%s: percentile(p%v) = %v, want %v", tc.name, tc.p, got, tc.want)
		}
	}
}

func TestSummarizeSortsAndRounds(t *testing.T) {
	in := []time.Duration{900 * time.Microsecond, 123456 * time.Nanosecond, 5 * time.Millisecond, 200 * time.Microsecond}
	orig := slices.Clone(in)
	got := summarize(in)
	want := benchStat{P50Us: 200, P99Us: 5000, Samples: 4}
	if got != want {
		t.Errorf("summarize = %+v, want %+v", got, want)
	}
	if !slices.Equal(in, orig) {
		t.Errorf("summarize reordered its input: %v", in)
	}
	if got := summarize([]time.Duration{123456 * time.Nanosecond}); got.P50Us != 123.5 {
		t.Errorf("p50 of 123.456 µs = %v, want 123.5", got.P50Us)
	}
	// A routing decision takes about 100 ns: below 10 µs a stat keeps
	// the nanosecond, and the table shows it, rather than 0.
	if got := summarize([]time.Duration{97 * time.Nanosecond}); got.P50Us != 0.097 {
		t.Errorf("p50 of 97 ns = %v µs, want 0.097", got.P50Us)
	}
	if got := fmtUs(0.097); got != "0.10 µs" {
		t.Errorf("fmtUs(0.097) = %q, want 0.10 µs", got)
	}
}

// sampleBench is a fixed result for the renderers.
func sampleBench() Result {
	st := func(p50, p99 float64) benchStat { return benchStat{P50Us: p50, P99Us: p99, Samples: 200} }
	res := Result{
		Command: "simlock bench --leases 10,10000 --samples 200", Version: "1.0.0", Date: "2026-11-30",
		Machine: benchMachine{CPU: "Apple M3 Pro", Cores: 12, RAMBytes: 36 << 30, OS: "macOS 15.1", Arch: "arm64", Go: "go1.26.0"},
		Samples: 200,
		Runs: []benchRun{
			{Leases: 10, Renew: st(180.4, 420), WarmGrant: st(950, 2100), ReleaseToGrant: st(1200, 3050.5),
				StatusFull: st(210, 390), StatusSummary: st(150, 300), Ping: st(90, 200), RenewsPerSecond50: 2400, RSSKiB: 18000, RSSStartKiB: 16000},
			{Leases: 10000, Renew: st(190, 450), WarmGrant: st(1045, 2500), ReleaseToGrant: st(1300, 3300),
				StatusFull: st(85300, 120000), StatusSummary: st(160, 310), Ping: st(95, 210), RenewsPerSecond50: 2300, RSSKiB: 58000, RSSStartKiB: 16100},
		},
		PushLatency: benchStat{P50Us: 85, P99Us: 240, Samples: 209},
		Floor:       st(60, 150),
		FloorIdle:   st(160, 400),
		Start:       benchStart{Leases: 10000, Events: 100000, Ms: 412.3},
	}
	computeRatios(&res)
	return res
}

func TestComputeRatios(t *testing.T) {
	r := sampleBench().Ratios
	if r.Smallest != 10 || r.Largest != 10000 {
		t.Errorf("smallest, largest = %d, %d", r.Smallest, r.Largest)
	}
	if r.RenewScale == nil || *r.RenewScale != 1.05 {
		t.Errorf("renew scale = %v, want 190/180.4 = 1.05", r.RenewScale)
	}
	if r.RenewOverFloor != 3.01 || r.WarmGrantOverFloor != 15.83 || r.ReleaseToGrantOverFloor != 20 {
		t.Errorf("over floor = %v %v %v", r.RenewOverFloor, r.WarmGrantOverFloor, r.ReleaseToGrantOverFloor)
	}
	// The in-situ floor is the smallest run's ping p50 plus the floor p50:
	// 90 + 60 µs.
	if r.InSituUs != 150 || r.RenewOverInSitu != 1.2 || r.WarmGrantOverInSitu != 6.33 || r.ReleaseToGrantOverInSitu != 8 {
		t.Errorf("in situ = %v µs, over it = %v %v %v; want 150, 1.2 6.33 8", r.InSituUs, r.RenewOverInSitu, r.WarmGrantOverInSitu, r.ReleaseToGrantOverInSitu)
	}
	// (58000 - 18000) KiB over 9990 leases.
	if r.RSSPerLeaseKiB != 4 || r.StatusFullMs != 85.3 || r.StartMs != 412.3 {
		t.Errorf("rss per lease %v, status full %v ms, start %v ms", r.RSSPerLeaseKiB, r.StatusFullMs, r.StartMs)
	}

	one := Result{Runs: []benchRun{{Leases: 10, RSSKiB: 16100, RSSStartKiB: 16000}}, Floor: benchStat{P50Us: 50}}
	computeRatios(&one)
	if one.Ratios.RenewScale != nil || one.Ratios.SummaryScale != nil {
		t.Errorf("one lease count gave scale ratios: %+v", one.Ratios)
	}
	if one.Ratios.RSSPerLeaseKiB != 10 {
		t.Errorf("one lease count: rss per lease = %v, want (16100-16000)/10", one.Ratios.RSSPerLeaseKiB)
	}
}

func TestBenchTableGolden(t *testing.T) {
	var b bytes.Buffer
	RenderTable(&b, sampleBench())
	termtest.Golden(t, "bench", b.Bytes())
}

func TestBenchMarkdownIsTheTableInAFence(t *testing.T) {
	var table, md bytes.Buffer
	RenderTable(&table, sampleBench())
	RenderMarkdown(&md, sampleBench())
	if want := "```text\n" + table.String() + "```\n"; md.String() != want {
		t.Errorf("markdown:\n%s\nwant:\n%s", md.String(), want)
	}
}

func TestBenchJSONGolden(t *testing.T) {
	var b bytes.Buffer
	// As the CLI prints it (printJSON): one line, not HTML-escaped.
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(sampleBench()); err != nil {
		t.Fatal(err)
	}
	termtest.Golden(t, "bench-json", b.Bytes())
	if strings.Count(b.String(), "\n") != 1 {
		t.Errorf("JSON is not one line:\n%s", b.String())
	}
}

// The JSON names the issue gives are the interface: a rename fails here
// naming the field, not only as a golden diff.
func TestBenchJSONNamesThePingTheRenewalRateAndTheInSituRatios(t *testing.T) {
	b, err := json.Marshal(sampleBench())
	if err != nil {
		t.Fatal(err)
	}
	var res struct {
		Runs []struct {
			Ping              map[string]float64 `json:"ping"`
			RenewsPerSecond50 *float64           `json:"renewsPerSecond50"`
		} `json:"runs"`
		Ratios map[string]float64 `json:"ratios"`
	}
	if err := json.Unmarshal(b, &res); err != nil {
		t.Fatal(err)
	}
	for i, r := range res.Runs {
		for _, k := range []string{"p50Us", "p99Us", "samples"} {
			if r.Ping[k] <= 0 {
				t.Errorf("runs[%d].ping.%s = %v, want it set", i, k, r.Ping[k])
			}
		}
		if r.RenewsPerSecond50 == nil || *r.RenewsPerSecond50 <= 0 {
			t.Errorf("runs[%d].renewsPerSecond50 missing or not positive: %v", i, r.RenewsPerSecond50)
		}
	}
	for _, k := range []string{"renewOverInSitu", "warmGrantOverInSitu", "releaseToGrantOverInSitu", "inSituUs"} {
		if res.Ratios[k] <= 0 {
			t.Errorf("ratios.%s = %v, want it set", k, res.Ratios[k])
		}
	}
}

func TestASoakIsFlatUnlessAMetricGrowsFromTheFirstThirdToTheLast(t *testing.T) {
	steady := make([]soakSample, 10)
	for i := range steady {
		steady[i] = soakSample{RSSKiB: 30_000 + int64(i%2)*500, HeapBytes: 5 << 20, Goroutines: 160 + i%3*5, OpenFiles: 60, P99Us: 2000}
	}
	if trends, flat := soakTrends(steady); !flat {
		t.Fatalf("a steady soak judged growing: %+v", trends)
	}
	leaking := slices.Clone(steady)
	for i := range leaking {
		leaking[i].Goroutines += 20 * i // a goroutine leak: 20 more every sample
	}
	trends, flat := soakTrends(leaking)
	if flat {
		t.Fatalf("a soak leaking goroutines judged flat: %+v", trends)
	}
	for _, tr := range trends {
		if tr.Flat != (tr.Metric != "goroutines") {
			t.Errorf("%s judged flat %v; only goroutines grow", tr.Metric, tr.Flat)
		}
	}
	if _, flat := soakTrends(steady[:3]); flat {
		t.Fatal("three samples (one a warm-up) judged flat: too few to read a trend")
	}
}
