package httpapi_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"testing"

	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/httpapi"
)

// The probes answer without a token, 200 when every check passed and 503
// when one failed, list the checks only with ?verbose, ask the live or
// the ready checks by their path, and are not the console's.
func TestProbesAnswerTheirChecksWithoutAToken(t *testing.T) {
	var asked []bool
	uplinkDown := contract.HealthCheck{Name: contract.HealthUplink, Detail: "not connected to the gateway since 2026-01-02T03:04:05Z"}
	health := func(_ context.Context, live bool) []contract.HealthCheck {
		asked = append(asked, live)
		if live {
			return []contract.HealthCheck{{Name: contract.HealthServing, OK: true}}
		}
		return []contract.HealthCheck{{Name: contract.HealthStartup, OK: true}, {Name: contract.HealthStore, OK: true}, uplinkDown}
	}
	console := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusTeapot) })
	h := newHarness(t, httpapi.Options{Health: health, Console: console})
	for _, tc := range []struct {
		path   string
		status int
		live   bool
		want   string
	}{
		{"/livez", http.StatusOK, true, `{"ok":true}`},
		{"/livez?verbose", http.StatusOK, true, `{"ok":true,"checks":[{"name":"serving","ok":true}]}`},
		{"/readyz", http.StatusServiceUnavailable, false, `{"ok":false}`},
		{"/readyz?verbose=1", http.StatusServiceUnavailable, false,
			`{"ok":false,"checks":[{"name":"startup","ok":true},{"name":"store","ok":true},{"name":"uplink","ok":false,"detail":"not connected to the gateway since 2026-01-02T03:04:05Z"}]}`},
	} {
		asked = nil
		resp := h.do("GET", tc.path, "", "")
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.status || resp.Header.Get("Content-Type") != "application/json" {
			t.Errorf("GET %s: %d %s, want %d application/json", tc.path, resp.StatusCode, resp.Header.Get("Content-Type"), tc.status)
		}
		if got := string(body); got != tc.want+"\n" {
			t.Errorf("GET %s = %s, want %s", tc.path, got, tc.want)
		}
		if len(asked) != 1 || asked[0] != tc.live {
			t.Errorf("GET %s asked the checks %v, want once with live=%v", tc.path, asked, tc.live)
		}
	}
	if n := h.fake.callCount(); n != 0 {
		t.Errorf("the probes called the backend %d times", n)
	}
}

// Without a Health function both probes pass with no checks.
func TestProbesPassWithoutChecks(t *testing.T) {
	h := newHarness(t, httpapi.Options{})
	for _, p := range []string{"/livez?verbose", "/readyz"} {
		m := readJSON(t, h.do("GET", p, "", ""), http.StatusOK)
		if b, _ := json.Marshal(m); string(b) != `{"ok":true}` {
			t.Errorf("GET %s = %s, want {\"ok\":true}", p, b)
		}
	}
}
