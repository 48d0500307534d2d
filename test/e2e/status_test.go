package e2e

import (
	"encoding/json"
	"strings"
	"testing"
)

// status --summary gives counts instead of lists, and list --limit pages
// through every lease once, each page resuming after the last.
func TestStatusSummaryAndListPages(t *testing.T) {
	t.Parallel()
	h := newHome(t, append([]string{"capacity.strategy", "fixed", "capacity.config.maxRunning", "5"}, fastDemo...)...)
	var ids []string
	for _, agent := range []string{"a", "b", "c", "d", "e"} {
		ids = append(ids, h.leaseDetached(agent, "ios").Lease.ID)
	}

	r := h.run("status", "--summary")
	if r.code != 0 || !strings.Contains(r.stdout, "Devices: 5 (5 leased)\n") || !strings.Contains(r.stdout, "Leases: 5\n") ||
		strings.Contains(r.stdout, ids[0]) {
		t.Fatalf("status --summary: want counts and no lease lines\n%s", r)
	}
	var sum map[string]any
	if r := h.run("status", "--summary", "--json"); json.Unmarshal([]byte(r.stdout), &sum) != nil {
		t.Fatalf("status --summary --json\n%s", r)
	}
	counts, _ := sum["counts"].(map[string]any)
	if _, hasLeases := sum["leases"]; hasLeases || counts["leases"] != float64(5) || counts["devices"] != float64(5) {
		t.Fatalf("summary JSON: leases list %v, counts %v; want no list and 5 of each", sum["leases"], counts)
	}

	seen := map[string]int{}
	after := ""
	pages := 0
	for {
		args := []string{"list", "--leases", "--limit", "2"}
		if after != "" {
			args = append(args, "--after", after)
		}
		r := h.run(args...)
		var page struct {
			Leases []struct {
				ID string `json:"id"`
			} `json:"leases"`
			Next string `json:"next"`
		}
		if r.code != 0 || json.Unmarshal([]byte(r.stdout), &page) != nil || len(page.Leases) > 2 {
			t.Fatalf("list page %d\n%s", pages, r)
		}
		pages++
		for _, l := range page.Leases {
			seen[l.ID]++
		}
		if page.Next == "" {
			break
		}
		after = page.Next
	}
	if pages != 3 || len(seen) != 5 {
		t.Fatalf("%d pages covering %v, want 3 pages and the 5 leases", pages, seen)
	}
	for _, id := range ids {
		if seen[id] != 1 {
			t.Errorf("lease %s listed %d times", id, seen[id])
		}
	}
	expectFailure(t, h.run("list", "--leases", "--limit", "10001"), 2, "USAGE")
	expectFailure(t, h.run("list", "--leases", "--limit", "2", "--after", "not-a-cursor"), 2, "USAGE")
}

// GET /v1/status?summary=true answers counts without the lists; a bad value
// is 400 naming the parameter.
func TestHTTPStatusSummary(t *testing.T) {
	t.Parallel()
	h, a := httpHome(t, fastDemo...)
	_, agent := h.token("operator", "dash") // an agent's status would not list another's lease
	g := h.leaseDetached("a", "ios")
	full := a.do("GET", "/v1/status", agent, "")
	sum := a.do("GET", "/v1/status?summary=true", agent, "")
	if full.status != 200 || sum.status != 200 {
		t.Fatalf("status %d / summary %d: %s %s", full.status, sum.status, full.raw, sum.raw)
	}
	if !strings.Contains(full.raw, g.Lease.ID) || strings.Contains(sum.raw, g.Lease.ID) {
		t.Fatalf("the full status should list the lease and the summary should not:\n%s\n%s", full.raw, sum.raw)
	}
	if c := sum.obj("counts"); c["leases"] != float64(1) {
		t.Fatalf("summary counts %v, want one lease", c)
	}
	if bad := a.do("GET", "/v1/status?summary=yes-please", agent, ""); bad.status != 400 || bad.errCode() != "BAD_REQUEST" ||
		!strings.Contains(bad.raw, `"field":"summary"`) {
		t.Fatalf("bad summary: %d %s", bad.status, bad.raw)
	}
}
