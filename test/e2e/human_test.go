package e2e

import (
	"strings"
	"testing"
)

// Every command whose result used to print as JSON on a terminal says it in
// words there, and still prints JSON with --json; config set never prints a
// secret, and says when the setting takes effect.
func TestEveryResultIsWordsOnATerminal(t *testing.T) {
	h := newHome(t, append(fastDemo, "capacity.strategy", "fixed", "capacity.config.maxRunning", "1",
		"capacity.config.ios.maxRunning", "1", "capacity.config.ios.maxDevices", "1")...)
	const secret = "s3cr3t-join-token-value"
	words := func(args ...string) string {
		t.Helper()
		out := ptyRun(t, h, args...)
		if strings.HasPrefix(strings.TrimSpace(out), "{") {
			t.Errorf("simlock %s on a terminal printed JSON:\n%s", strings.Join(args, " "), out)
		}
		return out
	}
	expect := func(out string, want ...string) {
		t.Helper()
		for _, w := range want {
			if !strings.Contains(out, w) {
				t.Errorf("the terminal shows %q, want it to say %q", out, w)
			}
		}
	}

	out := words("config", "set", "gateway.token", secret)
	expect(out, "✓ Set gateway.token = (hidden)", "within 2 s")
	if strings.Contains(out, secret) {
		t.Errorf("config set gateway.token echoed the secret: %q", out)
	}
	if js := ptyRun(t, h, "config", "set", "gateway.token", secret, "--json"); strings.Contains(js, secret) ||
		!strings.Contains(js, `"appliesAt":"within 2 s"`) {
		t.Errorf("config set gateway.token --json: %q, want the secret hidden and appliesAt within 2 s", js)
	}
	expect(words("config", "set", "lease.defaultTtlMs", "600000"), "✓ Set lease.defaultTtlMs = 600000", "next start")
	expect(words("config", "get", "lease.defaultTtlMs"), "lease.defaultTtlMs = 600000")

	expect(words("daemon", "start"), "running (pid ")

	g := h.leaseDetached("holder", "ios")
	expect(words("lease", "renew", g.Lease.ID, "--agent-id", "holder"), "✓ Renewed lease "+g.Lease.ID)

	// A request waits behind the holder; cancelling it says so.
	waiter := h.start("lease", "--platform", "ios", "--agent-id", "waiter", "--detach")
	waiter.waitLine(waiter.stderr, "its place in line", func(s string) bool { return strings.Contains(s, `"stage":"queued"`) })
	expect(words("lease", "cancel", "--agent-id", "waiter"), "✓ Cancelled lease request req_")
	waiter.wait()

	expect(words("release", g.Lease.ID, "--agent-id", "holder"), "✓ Released lease "+g.Lease.ID)
	if js := strings.TrimSpace(ptyRun(t, h, "release", "--all", "--yes", "--json")); !strings.HasPrefix(js, `{"released":`) {
		t.Errorf("release --all --json on a terminal: %q, want JSON", js)
	}
	expect(words("release", "--all", "--yes"), "✓ Released no leases; cancelled no waiting requests")

	expect(words("daemon", "stop"), "✓ The daemon stopped")
	expect(words("daemon", "stop"), "The daemon was not running")
}
