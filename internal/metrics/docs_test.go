package metrics

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/simlock/simlock/internal/testtool"

	"github.com/simlock/simlock/internal/contract"
)

// metricsSection is docs/OPERATIONS.md's Metrics section: from its heading
// to the next section of the same level.
func metricsSection(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "docs", "OPERATIONS.md"))
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	i := strings.Index(doc, "\n## Metrics\n")
	if i < 0 {
		t.Fatal("docs/OPERATIONS.md has no ## Metrics section")
	}
	sec := doc[i+1:]
	if j := strings.Index(sec[3:], "\n## "); j >= 0 {
		sec = sec[:j+3]
	}
	return sec
}

// yamlBlock is the first ```yaml block of sec that holds marker.
func yamlBlock(t *testing.T, sec, marker string) string {
	t.Helper()
	for _, m := range regexp.MustCompile("(?s)```yaml\n(.*?)```").FindAllStringSubmatch(sec, -1) {
		if strings.Contains(m[1], marker) {
			return m[1]
		}
	}
	t.Fatalf("docs/OPERATIONS.md's Metrics section has no yaml block with %q", marker)
	return ""
}

// promtool is the promtool on the PATH; without one the test is skipped,
// except under CI=true, where it fails: CI installs it.
func promtool(t *testing.T) string {
	t.Helper()
	return testtool.Find(t, "install Debian's prometheus package (apt-get install -y prometheus)", "promtool")
}

// The alert rules and the scrape config pass promtool as the doc writes
// them, so the doc cannot rot.
func TestTheDocsRulesAndScrapeConfigPassPromtool(t *testing.T) {
	tool := promtool(t)
	sec := metricsSection(t)
	dir := t.TempDir()

	rules := filepath.Join(dir, "simlock-rules.yml")
	if err := os.WriteFile(rules, []byte(yamlBlock(t, sec, "groups:")), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(tool, "check", "rules", rules).CombinedOutput(); err != nil {
		t.Errorf("promtool check rules on the doc's rules: %v\n%s", err, out)
	}
	// The three alerts the doc promises, on the metrics this package has.
	text := yamlBlock(t, sec, "groups:")
	for _, want := range []string{"simlock_queue_oldest_wait_seconds", `simlock_workers{connection="disconnected"}`, `simlock_devices{state="quarantined"}`} {
		if !strings.Contains(text, want) {
			t.Errorf("the doc's rules do not use %s", want)
		}
	}

	// The scrape config names a token file; promtool checks it exists.
	token := filepath.Join(dir, "simlock.token")
	if err := os.WriteFile(token, []byte("slk_x"), 0o600); err != nil {
		t.Fatal(err)
	}
	scrape := yamlBlock(t, sec, "scrape_configs:")
	if !strings.Contains(scrape, "credentials_file: /etc/prometheus/simlock.token") {
		t.Fatalf("the doc's scrape config no longer reads its token from /etc/prometheus/simlock.token:\n%s", scrape)
	}
	cfg := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(cfg, []byte(strings.ReplaceAll(scrape, "/etc/prometheus/simlock.token", token)), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(tool, "check", "config", cfg).CombinedOutput(); err != nil {
		t.Errorf("promtool check config on the doc's scrape config: %v\n%s", err, out)
	}
}

// Every simlock_ metric a worker or a gateway exports has its row in the
// doc's table, and every row names one that exists.
func TestEveryMetricIsDocumented(t *testing.T) {
	sec := metricsSection(t)
	documented := map[string]bool{}
	for _, m := range regexp.MustCompile("(?m)^\\| `(simlock_[a-z_]+)` \\|").FindAllStringSubmatch(sec, -1) {
		documented[m[1]] = true
	}
	exported := map[string]bool{}
	for _, mode := range []string{"worker", "gateway"} {
		state := Snapshot{Platforms: []Platform{{Platform: contract.PlatformIOS}}}
		if mode == "gateway" {
			state.Workers = map[contract.WorkerConnection]int{}
			state.Replica = &Replica{}
		}
		m := New(Options{Version: "1.0", Mode: mode, Read: func() Snapshot { return state }})
		// Each vector gets a series, so it is gathered.
		m.grants.WithLabelValues("ios", "warm")
		m.rejections.WithLabelValues("ios", "NO_CAPACITY")
		m.ends.WithLabelValues("ios", "explicit")
		m.dispatches.WithLabelValues("w", "granted")
		m.queueWait.WithLabelValues("ios", "warm")
		mfs, err := m.reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			if strings.HasPrefix(mf.GetName(), "simlock_") {
				exported[mf.GetName()] = true
			}
		}
	}
	for name := range exported {
		if !documented[name] {
			t.Errorf("%s is exported but docs/OPERATIONS.md's Metrics table has no row for it", name)
		}
	}
	for name := range documented {
		if !exported[name] {
			t.Errorf("docs/OPERATIONS.md documents %s, which no daemon exports", name)
		}
	}
	if len(exported) < 16 || !exported["simlock_uplink_rtt_seconds"] {
		t.Errorf("exported only %d simlock_ metrics: %v", len(exported), exported)
	}
}
