package console

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func get(t *testing.T, path string) *httptest.ResponseRecorder {
	t.Helper()
	w := httptest.NewRecorder()
	Handler().ServeHTTP(w, httptest.NewRequest(http.MethodGet, path, nil))
	return w
}

// The page is served at / and at every path of the console (it routes in
// the browser), each time with the policy that keeps it to its own origin.
func TestThePageIsServedAtEveryConsolePathWithItsPolicy(t *testing.T) {
	for _, p := range []string{"/", "/index.html", "/workers/ins_1", "/devices"} {
		w := get(t, p)
		if w.Code != http.StatusOK || !strings.Contains(w.Body.String(), "<html") {
			t.Errorf("GET %s = %d %q, want the page", p, w.Code, w.Body.String())
		}
		if got := w.Header().Get("Content-Security-Policy"); got != Policy {
			t.Errorf("GET %s: Content-Security-Policy %q, want %q", p, got, Policy)
		}
		if w.Header().Get("X-Content-Type-Options") != "nosniff" || w.Header().Get("X-Frame-Options") != "DENY" {
			t.Errorf("GET %s: headers %v lack nosniff or DENY", p, w.Header())
		}
	}
	if w := get(t, "/no-such-file.js"); w.Code != http.StatusNotFound {
		t.Errorf("a missing asset answered %d, want 404", w.Code)
	}
}

// The policy names no origin but the console's own.
func TestThePolicyAllowsNoOtherOrigin(t *testing.T) {
	for _, d := range strings.Split(Policy, ";") {
		for _, src := range strings.Fields(d)[1:] {
			if src != "'self'" && src != "'none'" && src != "data:" {
				t.Errorf("directive %q allows %s", strings.TrimSpace(d), src)
			}
		}
	}
}
