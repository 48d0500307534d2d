package e2e

import (
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// promBound is how long a value may take to reach Prometheus: a scrape
// every second, and the query's own evaluation.
const promBound = 20 * time.Second

// hostPort is the host:port of an HTTP base URL, as a scrape target.
func hostPort(t *testing.T, base string) string {
	t.Helper()
	u, err := url.Parse(base)
	if err != nil || u.Host == "" {
		t.Fatalf("not a base URL: %q", base)
	}
	if _, _, err := net.SplitHostPort(u.Host); err != nil {
		t.Fatalf("not a host:port: %q", u.Host)
	}
	return u.Host
}

// A real Prometheus scrapes one daemon with an operator token from a file,
// and its queries show the grants and the queued request the test made.
func TestPrometheusScrapesADaemonsGrantsAndQueue(t *testing.T) {
	t.Parallel()
	h, a := httpHome(t, "capacity.strategy", "fixed", "capacity.config.maxRunning", "1")
	_, secret := h.token("operator", "prometheus")
	tokenFile := filepath.Join(t.TempDir(), "simlock.token")
	if err := os.WriteFile(tokenFile, []byte(secret), 0o600); err != nil {
		t.Fatal(err)
	}
	prom := startPrometheus(t, scrapeJob{name: "daemon", target: hostPort(t, a.base), tokenFile: tokenFile})

	first := h.leaseDetached("agent-a", "ios")
	waiting := h.start("lease", "--platform", "ios", "--agent-id", "agent-b", "--detach", "--progress", "json")
	defer waiting.kill()
	waiting.waitLine(waiting.stderr, "agent-b queued", func(s string) bool { return strings.Contains(s, `"stage":"queued"`) })

	prom.await(`sum by (platform, source) (simlock_grants_total{job="daemon"})`,
		map[string]float64{`{platform="ios",source="provisioned"}`: 1}, promBound)
	prom.await(`sum by (platform) (simlock_queue_depth{job="daemon"})`,
		map[string]float64{`{platform="ios"}`: 1, `{platform="android"}`: 0}, promBound)
	prom.await(`sum by (platform) (simlock_leases_active{job="daemon"})`,
		map[string]float64{`{platform="ios"}`: 1, `{platform="android"}`: 0}, promBound)

	if r := h.run("release", first.Lease.ID); r.code != 0 {
		t.Fatalf("release\n%s", r)
	}
	if code := waiting.wait(); code != 0 {
		t.Fatalf("the queued request, once the first lease was released: exit %d\n%s", code, waiting.dump())
	}
	prom.await(`sum by (platform) (simlock_grants_total{job="daemon"})`, map[string]float64{`{platform="ios"}`: 2}, promBound)
	prom.await(`sum by (platform) (simlock_queue_depth{job="daemon"})`,
		map[string]float64{`{platform="ios"}`: 0, `{platform="android"}`: 0}, promBound)
	prom.await(`sum by (platform, reason) (simlock_lease_ends_total{job="daemon"})`,
		map[string]float64{`{platform="ios",reason="explicit"}`: 1}, promBound)
	prom.await(`up{job="daemon"}`, map[string]float64{`{instance="` + hostPort(t, a.base) + `",job="daemon"}`: 1}, promBound)
}

// A real Prometheus scrapes a gateway with two workers, without a token
// (metrics.public): its grants, its fleet queue, its connected workers,
// and the devices and leases the workers report.
func TestPrometheusScrapesAGatewayWithTwoWorkers(t *testing.T) {
	t.Parallel()
	f := newFleet(t, "metrics.public", "true")
	w1, w2 := f.worker("worker-1", 1), f.worker("worker-2", 1)
	f.await("both workers connected", 10*time.Second, connected(instanceID(t, w1), instanceID(t, w2)))
	prom := startPrometheus(t, scrapeJob{name: "gateway", target: hostPort(t, f.url)})

	for _, agent := range []string{"agent-1", "agent-2"} {
		if r := f.gw.run("lease", "--platform", "ios", "--agent-id", agent, "--detach"); r.code != 0 {
			t.Fatalf("lease for %s through the gateway\n%s", agent, r)
		}
	}
	queued := f.startQueued("agent-3")
	defer queued.kill()

	prom.await(`sum by (platform) (simlock_grants_total{job="gateway"})`, map[string]float64{`{platform="ios"}`: 2}, promBound)
	prom.await(`sum by (platform) (simlock_queue_depth{job="gateway"})`,
		map[string]float64{`{platform="ios"}`: 1, `{platform="android"}`: 0}, promBound)
	prom.await(`sum by (connection) (simlock_workers{job="gateway"})`,
		map[string]float64{`{connection="connected"}`: 2, `{connection="disconnected"}`: 0, `{connection="incompatible"}`: 0}, promBound)
	prom.await(`count(simlock_dispatch_total{job="gateway",result="granted"})`, map[string]float64{`{}`: 2}, promBound)
	// The fleet's devices and leases, as its workers last reported them.
	prom.await(`sum by (platform) (simlock_leases_active{job="gateway"})`,
		map[string]float64{`{platform="ios"}`: 2, `{platform="android"}`: 0}, promBound)
	prom.await(`sum by (state) (simlock_devices{job="gateway",platform="ios",state="leased"})`,
		map[string]float64{`{state="leased"}`: 2}, promBound)
}

// The exposition of a daemon that has granted, queued and refused passes
// promtool check metrics, over HTTP and from `simlock metrics` alike.
func TestPromtoolChecksADaemonsMetrics(t *testing.T) {
	t.Parallel()
	promtool := promTool(t, "promtool")
	h, a := httpHome(t, "capacity.strategy", "fixed", "capacity.config.maxRunning", "1")
	first := h.leaseDetached("agent-a", "ios")
	r := h.run("lease", "--platform", "ios", "--agent-id", "agent-b", "--detach", "--no-wait")
	if r.code == 0 {
		t.Fatalf("a --no-wait request with the one slot taken was granted\n%s", r)
	}
	if r := h.run("release", first.Lease.ID); r.code != 0 {
		t.Fatalf("release\n%s", r)
	}
	_, operator := h.token("operator", "scrape")
	status, scraped, _ := a.getText("/metrics", operator)
	if status != 200 {
		t.Fatalf("GET /metrics with an operator token: %d\n%s", status, scraped)
	}
	cli := h.run("metrics")
	if cli.code != 0 {
		t.Fatalf("simlock metrics\n%s", cli)
	}
	for name, text := range map[string]string{"GET /metrics": scraped, "simlock metrics": cli.stdout} {
		for _, want := range []string{
			`simlock_grants_total{platform="ios",source="provisioned"} 1`,
			`simlock_rejections_total{code="NO_CAPACITY",platform="ios"} 1`,
			`simlock_lease_ends_total{platform="ios",reason="explicit"} 1`,
			`simlock_build_info{mode="worker",version=`,
			"go_goroutines ",
		} {
			if !strings.Contains(text, want) {
				t.Errorf("%s lacks %s:\n%s", name, want, text)
			}
		}
		cmd := exec.Command(promtool, "check", "metrics")
		cmd.Stdin = strings.NewReader(text)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("promtool check metrics on %s: %v\n%s", name, err, out)
		}
	}
}

// GET /metrics is an operator route unless metrics.public is set; its
// refusals are the API's JSON errors.
func TestMetricsNeedAnOperatorTokenUnlessPublic(t *testing.T) {
	t.Parallel()
	h, a := httpHome(t)
	_, agent := h.token("agent", "an-agent")
	_, operator := h.token("operator", "an-operator")
	for _, c := range []struct {
		who, secret string
		status      int
		code        string
	}{{"no token", "", 401, "UNAUTHENTICATED"}, {"an agent token", agent, 403, "FORBIDDEN"}, {"an operator token", operator, 200, ""}} {
		status, body, code := a.getText("/metrics", c.secret)
		if status != c.status || code != c.code {
			t.Errorf("GET /metrics with %s: %d %s, want %d %s\n%s", c.who, status, code, c.status, c.code, body)
		}
	}
	_, pub := httpHome(t, "metrics.public", "true")
	if status, body, _ := pub.getText("/metrics", ""); status != 200 || !strings.Contains(body, "simlock_build_info") {
		t.Errorf("GET /metrics without a token, metrics.public true: %d\n%s", status, body)
	}
}
