package e2e

import (
	"encoding/json"
	"testing"
)

// stats reports exactly the leases of a scripted run on the demo driver:
// five granted and released, one refused with --no-wait on a full
// platform; a window that ends before the log's first event is
// HISTORY_NOT_KEPT.
func TestStatsCountsAScriptedRun(t *testing.T) {
	t.Parallel()
	h := newHome(t, append([]string{"capacity.strategy", "fixed", "capacity.config.maxRunning", "1"}, fastDemo...)...)

	g := h.leaseDetached("a", "ios")
	expectFailure(t, h.run("lease", "--platform", "ios", "--agent-id", "b", "--no-wait"), 11, "NO_CAPACITY")
	if r := h.run("release", g.Lease.ID); r.code != 0 {
		t.Fatalf("release\n%s", r)
	}
	for range 4 {
		g := h.leaseDetached("a", "ios")
		if r := h.run("release", g.Lease.ID); r.code != 0 {
			t.Fatalf("release\n%s", r)
		}
	}

	r := h.run("stats", "--since", "1h", "--json")
	if r.code != 0 {
		t.Fatalf("stats\n%s", r)
	}
	var res struct {
		Bucket     string `json:"bucket"`
		Partial    bool   `json:"partial"`
		CoversFrom int64  `json:"coversFrom"`
		Totals     struct {
			Requests  int            `json:"requests"`
			Granted   map[string]int `json:"granted"`
			Rejected  map[string]int `json:"rejected"`
			Cancelled int            `json:"cancelled"`
			TimedOut  int            `json:"timedOut"`
		} `json:"totals"`
		Percentiles map[string]struct {
			Count int `json:"count"`
		} `json:"percentiles"`
		ByPlatform map[string]json.RawMessage `json:"byPlatform"`
		Series     []struct {
			Requests int `json:"requests"`
		} `json:"series"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &res); err != nil {
		t.Fatalf("stats --json: %v\n%s", err, r)
	}
	tot := res.Totals
	if tot.Requests != 6 {
		t.Errorf("totals.requests = %d, want 6\n%s", tot.Requests, r.stdout)
	}
	granted := 0
	for _, n := range tot.Granted {
		granted += n
	}
	if granted != 5 {
		t.Errorf("totals.granted = %v, want 5 in all\n%s", tot.Granted, r.stdout)
	}
	if len(tot.Rejected) != 1 || tot.Rejected["no-wait"] != 1 || tot.Cancelled != 0 || tot.TimedOut != 0 {
		t.Errorf("totals.rejected = %v cancelled %d timedOut %d, want no-wait 1 only", tot.Rejected, tot.Cancelled, tot.TimedOut)
	}
	for name, want := range map[string]int{"wait": 5, "hold": 5, "turnaround": 5} {
		if got := res.Percentiles[name].Count; got != want {
			t.Errorf("percentiles.%s.count = %d, want %d", name, got, want)
		}
	}
	if _, ok := res.ByPlatform["ios"]; !ok || len(res.ByPlatform) != 1 {
		t.Errorf("byPlatform has %v, want ios only", res.ByPlatform)
	}
	sum := 0
	for _, p := range res.Series {
		sum += p.Requests
	}
	if res.Bucket != "1m" || len(res.Series) != 60 || sum != 6 {
		t.Errorf("series: bucket %q, %d points, %d requests; want 1m, 60, 6", res.Bucket, len(res.Series), sum)
	}
	if !res.Partial || res.CoversFrom == 0 {
		t.Errorf("partial = %v coversFrom = %d, want true and the first event's time: the daemon is younger than an hour", res.Partial, res.CoversFrom)
	}

	e := expectFailure(t, h.run("stats", "--since", "2h", "--until", "1h", "--json"), 1, "HISTORY_NOT_KEPT")
	if ts, _ := e["oldestTs"].(float64); int64(ts) != res.CoversFrom {
		t.Errorf("HISTORY_NOT_KEPT oldestTs = %v, want %d", e["oldestTs"], res.CoversFrom)
	}
}

// GET /v1/usage answers the same figures to an operator token, refuses an
// agent token, names a bad bucket, and answers 410 for a window before
// history.
func TestUsageOverHTTP(t *testing.T) {
	t.Parallel()
	h, a := httpHome(t)
	_, op := h.token("operator", "ops")
	_, agent := h.token("agent", "bot")
	g := h.leaseDetached("a", "android")
	if r := h.run("release", g.Lease.ID); r.code != 0 {
		t.Fatalf("release\n%s", r)
	}

	r := a.do("GET", "/v1/usage?from=1h&bucket=5m", op, "")
	tot := r.obj("totals")
	granted, _ := tot["granted"].(map[string]any)
	if r.status != 200 || tot["requests"] != float64(1) || len(granted) != 1 || r.body["bucket"] != "5m" {
		t.Errorf("GET /v1/usage = %d %s, want one request and one grant in 5m buckets", r.status, r.raw)
	}
	if byp, _ := r.body["byPlatform"].(map[string]any); byp["android"] == nil {
		t.Errorf("GET /v1/usage byPlatform = %v, want android", r.body["byPlatform"])
	}
	if r := a.do("GET", "/v1/usage?from=1h", agent, ""); r.status != 403 {
		t.Errorf("GET /v1/usage with an agent token = %d %s, want 403", r.status, r.raw)
	}
	if r := a.do("GET", "/v1/usage?from=24h&bucket=1m", op, ""); r.status != 400 || r.errCode() != "BAD_REQUEST" {
		t.Errorf("GET /v1/usage 1m over a day = %d %s, want 400 BAD_REQUEST", r.status, r.raw)
	}
	if r := a.do("GET", "/v1/usage?from=2h&to=1h", op, ""); r.status != 410 || r.errCode() != "HISTORY_NOT_KEPT" {
		t.Errorf("GET /v1/usage before history = %d %s, want 410 HISTORY_NOT_KEPT", r.status, r.raw)
	}
}
