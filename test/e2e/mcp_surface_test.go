package e2e

import (
	"context"
	"strings"
	"testing"
)

// Each lease_simulator call with a progress token ends its progress with
// "Leased …", the first of a session too (the one that starts the daemon
// and creates the device).
func TestMCPEveryLeaseCallEndsItsProgressLeased(t *testing.T) {
	t.Parallel()
	h := newHome(t, fastDemo...)
	m := h.mcpConnect("agent-leased")
	for i, token := range []string{"first", "second"} {
		res, grant := m.call("lease_simulator", map[string]any{"platform": "ios"}, token)
		if res.IsError {
			t.Fatalf("lease_simulator %d: %v", i+1, grant)
		}
		lease, _ := grant["lease"].(map[string]any)
		m.awaitHeard("the "+token+" call's Leased progress", func() bool {
			for _, p := range m.progress {
				if p.ProgressToken == token && strings.HasPrefix(p.Message, "Leased ") {
					return true
				}
			}
			return false
		})
		if res, rel := m.call("release_simulator", map[string]any{"leaseId": lease["id"]}, nil); res.IsError {
			t.Fatalf("release %d: %v", i+1, rel)
		}
	}
}

// What the MCP server says is so: a ttlMs past the protocol's ceiling is
// told the ceiling (not "must be a positive number"), a lease id this
// session never held is unknown (not "no longer has it"), and
// run_on_device's description says the demo driver refuses it.
func TestMCPSaysTheRealBoundTheUnknownLeaseAndTheDemoRefusal(t *testing.T) {
	t.Parallel()
	h := newHome(t, fastDemo...)
	m := h.mcpConnect("agent-words")

	res, out := m.call("lease_simulator", map[string]any{"platform": "ios", "ttlMs": int64(1) << 31}, nil)
	if msg, _ := out["message"].(string); !res.IsError || out["code"] != "BAD_REQUEST" || out["field"] != "ttlMs" || !strings.Contains(msg, "at most 604800000") {
		t.Errorf("ttlMs 2^31: %v, want BAD_REQUEST saying the 7-day ceiling", out)
	}

	res, st := m.call("lease_status", map[string]any{"leaseId": "lse_0000000000000000"}, nil)
	if msg, _ := st["message"].(string); res.IsError || st["held"] != false || st["reason"] != "unknown" || !strings.Contains(msg, "is unknown") || strings.Contains(msg, "no longer") {
		t.Errorf("lease_status of an id never held: %v, want held false, reason unknown", st)
	}

	ctx, cancel := context.WithTimeout(context.Background(), waitBound)
	defer cancel()
	tools, err := m.cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tool := range tools.Tools {
		if tool.Name == "run_on_device" && !strings.Contains(tool.Description, "demo driver") {
			t.Errorf("run_on_device's description does not say the demo driver refuses it: %q", tool.Description)
		}
	}
}
