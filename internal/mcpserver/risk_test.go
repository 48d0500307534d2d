package mcpserver

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// A held lease whose renewals fail (the daemon is gone) is a warning to the
// client at the first failure, saying since when and when the lease ends;
// the server keeps renewing, and when a renewal succeeds again (the daemon
// is back, and the lease with it) the client hears it is safe again.
func TestALeaseWhoseRenewalsFailIsAtRiskThenSafeAgain(t *testing.T) {
	r := newRig(t, "lease.minTtlMs", "1000")
	ctx := context.Background()
	// 3 s: renewals every second.
	res, grant, err := r.call(ctx, "lease_simulator", map[string]any{"platform": "ios", "ttlMs": 3000})
	if err != nil || res.IsError {
		t.Fatalf("lease: %v %v", err, grant)
	}
	leaseID := grant["lease"].(map[string]any)["id"].(string)
	r.d.Stop("test: the daemon goes away")
	next := func(what string, pred func(*mcp.LoggingMessageParams) bool) (map[string]any, mcp.LoggingLevel) {
		t.Helper()
		deadline := time.After(10 * time.Second)
		for seen := 0; ; {
			r.mu.Lock()
			ws := r.warns[seen:]
			seen = len(r.warns)
			r.mu.Unlock()
			for _, w := range ws {
				if pred(w) {
					data, _ := w.Data.(map[string]any)
					return data, w.Level
				}
			}
			select {
			case <-r.heard:
			case <-deadline:
				t.Fatalf("no notification of %s; heard %+v", what, ws)
			}
		}
	}
	atRisk := func(want bool) func(*mcp.LoggingMessageParams) bool {
		return func(w *mcp.LoggingMessageParams) bool {
			data, _ := w.Data.(map[string]any)
			return data["lease_id"] == leaseID && data["at_risk"] == want
		}
	}
	risk, level := next("the lease at risk", atRisk(true))
	if msg, _ := risk["message"].(string); !strings.Contains(msg, "lease at risk: renewals failing since ") || !strings.Contains(msg, ", expires at ") {
		t.Errorf("at-risk message = %q, want since when and the expiry", msg)
	}
	if level != "warning" {
		t.Errorf("at-risk level = %q, want warning", level)
	}
	r.restart()
	safe, _ := next("the lease safe again", atRisk(false))
	if msg, _ := safe["message"].(string); !strings.Contains(msg, "lease safe again") {
		t.Errorf("safe message = %q", msg)
	}
	_, st, _ := r.call(ctx, "lease_status", map[string]any{"leaseId": leaseID})
	if st["held"] != true {
		t.Errorf("lease_status after recovery = %v, want held", st)
	}
}
