package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/simlock/simlock/internal/testtool"
)

// promTool finds a Prometheus program (prometheus, promtool) on the PATH.
// Without it the test is skipped, saying why, except under CI=true, where
// it fails: CI installs Debian's prometheus package, so a missing one there
// is a broken machine, not a choice.
func promTool(t *testing.T, name string) string {
	t.Helper()
	return testtool.Find(t, "install Debian's prometheus package (apt-get install -y prometheus)", name)
}

// scrapeJob is one job of the throwaway Prometheus's scrape config.
type scrapeJob struct {
	name, target string
	// tokenFile, when set, holds the bearer token the scrape sends.
	tokenFile string
}

// promServer is a Prometheus running as a throwaway process on loopback.
type promServer struct {
	t    *testing.T
	base string
}

// startPrometheus runs Debian's prometheus on a loopback port with its own
// data directory, scraping jobs every second, and waits until it is ready.
// Prometheus cannot report a port it chose, so a free one is picked and, if
// another process takes it first, another is tried. It is stopped when the
// test ends.
func startPrometheus(t *testing.T, jobs ...scrapeJob) *promServer {
	t.Helper()
	bin := promTool(t, "prometheus")
	dir := t.TempDir()
	var cfg strings.Builder
	cfg.WriteString("global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\nscrape_configs:\n")
	for _, j := range jobs {
		fmt.Fprintf(&cfg, "  - job_name: %s\n    static_configs:\n      - targets: [%q]\n", j.name, j.target)
		if j.tokenFile != "" {
			fmt.Fprintf(&cfg, "    authorization:\n      credentials_file: %s\n", j.tokenFile)
		}
	}
	cfgPath := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(cfgPath, []byte(cfg.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	for attempt := 0; attempt < 5; attempt++ {
		port := freePort(t)
		var logs bytes.Buffer
		cmd := exec.Command(bin, "--config.file="+cfgPath, "--storage.tsdb.path="+filepath.Join(dir, "data"+strconv.Itoa(attempt)),
			"--web.listen-address=127.0.0.1:"+port, "--log.level=warn")
		cmd.Stdout, cmd.Stderr = &logs, &logs
		if err := cmd.Start(); err != nil {
			t.Fatalf("start prometheus: %v", err)
		}
		exited := make(chan struct{})
		go func() { _ = cmd.Wait(); close(exited) }()
		stop := func() {
			_ = cmd.Process.Kill()
			<-exited
		}
		p := &promServer{t: t, base: "http://127.0.0.1:" + port}
		switch p.awaitReady(exited, 30*time.Second) {
		case nil:
			t.Cleanup(func() {
				stop()
				if t.Failed() {
					t.Logf("prometheus's log:\n%s\nits config:\n%s", logs.String(), cfg.String())
				}
			})
			return p
		case errExited:
			stop()
			if strings.Contains(logs.String(), "address already in use") {
				continue // the port was taken meanwhile: another one
			}
			t.Fatalf("prometheus exited at start:\n%s", logs.String())
		default:
			stop()
			t.Fatalf("prometheus was not ready within 30s:\n%s", logs.String())
		}
	}
	t.Fatal("prometheus found no free port in 5 tries")
	return nil
}

var (
	errExited  = fmt.Errorf("prometheus exited")
	errTimeout = fmt.Errorf("prometheus not ready")
)

// awaitReady polls /-/ready until it answers 200, the process exits, or
// bound passes.
func (p *promServer) awaitReady(exited <-chan struct{}, bound time.Duration) error {
	deadline := time.Now().Add(bound)
	for time.Now().Before(deadline) {
		select {
		case <-exited:
			return errExited
		default:
		}
		if resp, err := http.Get(p.base + "/-/ready"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		time.Sleep(pollEvery)
	}
	return errTimeout
}

// query runs an instant query and returns its samples by their labels'
// text ({a="b",...}, sorted by name, __name__ left out).
func (p *promServer) query(expr string) (map[string]float64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, p.base+"/api/v1/query?query="+url.QueryEscape(expr), nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var out struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			Result []struct {
				Metric map[string]string `json:"metric"`
				Value  [2]any            `json:"value"`
			} `json:"result"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		return nil, err
	}
	if out.Status != "success" {
		return nil, fmt.Errorf("query %s: %s", expr, out.Error)
	}
	m := map[string]float64{}
	for _, r := range out.Data.Result {
		s, _ := r.Value[1].(string)
		v, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return nil, fmt.Errorf("query %s: value %v", expr, r.Value[1])
		}
		m[labelText(r.Metric)] = v
	}
	return m, nil
}

// labelText is a sample's labels as one comparable string.
func labelText(m map[string]string) string {
	var parts []string
	for k, v := range m {
		if k != "__name__" {
			parts = append(parts, k+"="+strconv.Quote(v))
		}
	}
	slices.Sort(parts)
	return "{" + strings.Join(parts, ",") + "}"
}

// await polls expr until it returns exactly want (one sample per label
// set), for at most bound; it fails naming the query and what it last
// returned.
func (p *promServer) await(expr string, want map[string]float64, bound time.Duration) {
	p.t.Helper()
	deadline := time.Now().Add(bound)
	var got map[string]float64
	var err error
	for {
		got, err = p.query(expr)
		if err == nil && equalSamples(got, want) {
			return
		}
		if time.Now().After(deadline) {
			p.t.Fatalf("prometheus: %s returned %v (err %v) for %s, want %v", expr, got, err, bound, want)
		}
		time.Sleep(pollEvery * 4)
	}
}

func equalSamples(a, b map[string]float64) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// getText is a GET whose answer may be other than JSON (the metrics'
// text): its status, its body, and the error code when the body is the
// API's JSON error.
func (a *api) getText(path, secret string) (status int, body, code string) {
	a.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), commandBound)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, a.base+path, nil)
	if err != nil {
		a.t.Fatal(err)
	}
	if secret != "" {
		req.Header.Set("Authorization", "Bearer "+secret)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		a.t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		a.t.Fatalf("GET %s: read body: %v", path, err)
	}
	var e struct {
		Error struct {
			Code string `json:"code"`
		} `json:"error"`
	}
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") && json.Unmarshal(b, &e) == nil {
		code = e.Error.Code
	}
	return resp.StatusCode, string(b), code
}
