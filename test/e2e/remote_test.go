package e2e

import (
	"bytes"
	"encoding/json"
	"encoding/pem"
	"image/png"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// remoteHome is a CLI with only a remote profile: SIMLOCK_URL and an agent
// token, and a SIMLOCK_HOME where no daemon ever runs (the test checks).
func remoteHome(t *testing.T, url, token string, extra ...string) *home {
	t.Helper()
	h := newHome(t)
	orig := h.Env
	h.Env = append(slices.Clip(h.Env), append([]string{"SIMLOCK_URL=" + url, "SIMLOCK_TOKEN=" + token, "XDG_CONFIG_HOME=" + t.TempDir()}, extra...)...)
	t.Cleanup(func() {
		// The home's own cleanup (daemon stop) runs after this one, as a
		// local command.
		h.Env = orig
		if lockHeld(h.Dir) {
			t.Errorf("a daemon runs in the remote CLI's SIMLOCK_HOME; the remote profile must not start one")
		}
	})
	return h
}

// keysOf is the sorted top-level keys of a JSON object line.
func keysOf(t *testing.T, s string) []string {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal([]byte(strings.TrimSpace(s)), &m); err != nil {
		t.Fatalf("not a JSON object: %v\n%s", err, s)
	}
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

// leaseRenewedAfter polls the remote CLI's list until lease id shows a
// renewal after since.
func leaseRenewedAfter(t *testing.T, h *home, id string, since time.Time, bound time.Duration) {
	t.Helper()
	deadline := time.Now().Add(bound)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		r := h.run("list", "--leases")
		var res struct {
			Leases []leaseRec `json:"leases"`
		}
		if r.code == 0 && json.Unmarshal([]byte(r.stdout), &res) == nil {
			for _, l := range res.Leases {
				if l.ID == id && l.LastRenewedAt > since.UnixMilli() {
					return
				}
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("lease %s shows no renewal after %s within %s; last list: %s", id, since.Format(time.RFC3339Nano), bound, r)
		}
		<-tick.C
	}
}

// From a shell with only SIMLOCK_URL and an agent token, simlock lease
// against a gateway shows the steps of the wait, holds and renews the lease
// across a gateway restart, and releases it on SIGINT; a lease ended by
// someone else exits 14; a screenshot is a PNG; the one-shot commands print
// what they print on the socket; local-only commands refuse.
func TestRemoteProfileLeasesHoldsAndReleasesThroughAGateway(t *testing.T) {
	t.Parallel()
	f := newFleet(t)
	w := f.worker("remote-w", 2)
	f.await("the worker connected", 10*time.Second, connected(instanceID(t, w)))
	_, agent := f.gw.token("agent", "remote-cli")
	rem := remoteHome(t, f.url, agent)

	// lease: the steps of the wait, as JSON progress lines on a pipe.
	p := rem.start("lease", "--platform", "ios", "--ttl", "10s")
	p.waitLine(p.stderr, "a provisioning or booting step", func(s string) bool {
		pr, ok := parseProgress(s)
		return ok && (pr.Stage == "provisioning" || pr.Stage == "booting")
	})
	g := parseGrant(t, p.waitLine(p.stdout, "the grant", func(s string) bool { return strings.Contains(s, `"lease"`) }).text)
	if g.Lease.ID == "" || g.Device.Spec.Platform != "ios" {
		t.Fatalf("the grant over HTTP: %+v", g)
	}
	// The grant says how its device came to be ready, and the driver's
	// estimates, as a local grant does.
	if (g.Source != "provisioned" && g.Source != "booted") || g.Timing == nil || g.Timing.EstimatedReadyMs == nil || *g.Timing.EstimatedReadyMs == 0 {
		t.Errorf("the grant over HTTP has source %q and timing %+v, want a new device's and the driver's estimates", g.Source, g.Timing)
	}

	// Held: renewed, and still renewed after the gateway restarts.
	leaseRenewedAfter(t, rem, g.Lease.ID, time.UnixMilli(g.Lease.GrantedAt), 10*time.Second)
	if err := syscall.Kill(lockPID(f.gw.Dir), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if !waitLockFree(f.gw.Dir, 10*time.Second) {
		t.Fatal("the gateway still holds its lock 10 s after SIGKILL")
	}
	// The gateway stays down until a renewal has failed, so the holder
	// sees it gone; it keeps the lease and says so.
	p.waitLine(p.stderr, "the daemon-connection-lost notice", func(s string) bool {
		return strings.Contains(s, `"notice":"daemon-connection-lost"`)
	})
	f.gw.startDaemon()
	restarted := time.Now()
	p.waitLine(p.stderr, "the daemon-reconnected notice", func(s string) bool {
		return strings.Contains(s, `"notice":"daemon-reconnected"`)
	})
	leaseRenewedAfter(t, rem, g.Lease.ID, restarted, 15*time.Second)
	if !p.running() {
		t.Fatalf("the holder exited across the gateway restart\n%s", p.dump())
	}

	// Ctrl-C releases.
	p.signal(syscall.SIGINT)
	if code := p.wait(); code != 0 {
		t.Fatalf("the holder exited %d on SIGINT, want 0\n%s", code, p.dump())
	}
	if r := rem.run("list", "--leases"); strings.Contains(r.stdout, g.Lease.ID) {
		t.Fatalf("lease %s is still listed after SIGINT: %s", g.Lease.ID, r)
	}

	// A lease ended under its holder exits 14.
	p2 := rem.start("lease", "--platform", "ios", "--ttl", "10s")
	g2 := parseGrant(t, p2.waitLine(p2.stdout, "the grant", func(s string) bool { return strings.Contains(s, `"lease"`) }).text)
	if r := f.gw.run("release", "--token", f.gw.adminToken(), g2.Lease.ID); r.code != 0 {
		t.Fatalf("an operator's release: %s", r)
	}
	if code := p2.wait(); code != 14 {
		t.Fatalf("the holder of a lease released by an operator exited %d, want 14\n%s", code, p2.dump())
	}

	// One-shot commands print the socket's shapes.
	det := parseGrant(t, rem.run("lease", "--platform", "android", "--detach").stdout)
	local := f.gw.leaseDetached("socket-agent", "android")
	for _, args := range [][2][]string{
		{{"lease", "renew", det.Lease.ID}, {"lease", "renew", "--agent-id", "socket-agent", local.Lease.ID}},
		{{"status", "--json"}, {"status", "--json"}},
		{{"catalog", "--json"}, {"catalog", "--json"}},
		{{"list", "--leases"}, {"list", "--leases"}},
	} {
		rr, lr := rem.run(args[0]...), f.gw.run(args[1]...)
		if rr.code != 0 || lr.code != 0 {
			t.Fatalf("remote %s / socket %s", rr, lr)
		}
		if a, b := keysOf(t, rr.stdout), keysOf(t, lr.stdout); !slices.Equal(a, b) {
			t.Errorf("simlock %s prints keys %v over HTTP, %v on the socket", strings.Join(args[0], " "), a, b)
		}
	}

	// A screenshot from the remote gateway is a PNG that decodes.
	shot := filepath.Join(t.TempDir(), "shot.png")
	if r := rem.run("screenshot", shot, "--lease", det.Lease.ID); r.code != 0 {
		t.Fatalf("screenshot: %s", r)
	}
	b, err := os.ReadFile(shot)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := png.Decode(bytes.NewReader(b)); err != nil {
		t.Fatalf("the screenshot does not decode as a PNG: %v", err)
	}

	// The device tools go through their routes: a deep link, the
	// appearance, and the device's log, which shows both.
	for _, args := range [][]string{
		{"open-url", "myapp://checkout", "--lease", det.Lease.ID},
		{"appearance", "dark", "--lease", det.Lease.ID},
	} {
		if r := rem.run(args...); r.code != 0 {
			t.Fatalf("simlock %s over the remote profile: %s", strings.Join(args, " "), r)
		}
	}
	if r := rem.run("logs", "--lines", "50", "--lease", det.Lease.ID); r.code != 0 || !strings.Contains(r.stdout, "myapp://checkout") {
		t.Errorf("simlock logs over the remote profile shows no line of the opened URL: %s", r)
	}

	rr, lr := rem.run("release", det.Lease.ID), f.gw.run("release", "--agent-id", "socket-agent", local.Lease.ID)
	if rr.code != 0 || lr.code != 0 {
		t.Fatalf("release: remote %s / socket %s", rr, lr)
	}
	if a, b := keysOf(t, rr.stdout), keysOf(t, lr.stdout); !slices.Equal(a, b) {
		t.Errorf("simlock release prints keys %v over HTTP, %v on the socket", a, b)
	}

	// What only makes sense on the daemon's machine says so.
	for _, args := range [][]string{{"daemon", "stop"}, {"nuke", "--yes"}, {"doctor", "--fix"}, {"release", "--all", "--yes"}} {
		e := expectFailure(t, rem.run(args...), 2, "USAGE")
		if !strings.Contains(message(e), "remote profile") {
			t.Errorf("simlock %s with a remote profile: %q, want it to say a remote profile is active", strings.Join(args, " "), message(e))
		}
	}
}

// https with a private CA: SIMLOCK_CA makes the CLI trust it; without it
// the server's certificate is refused.
func TestRemoteProfileOverHTTPSWithAPrivateCA(t *testing.T) {
	t.Parallel()
	h, a := httpHome(t)
	_, agent := h.token("agent", "tls")
	target, _ := url.Parse(a.base)
	front := httptest.NewTLSServer(httputil.NewSingleHostReverseProxy(target))
	t.Cleanup(front.Close)
	ca := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: front.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	expectFailure(t, remoteHome(t, front.URL, agent).run("status"), 1, "DAEMON_CONNECTION_LOST")
	rem := remoteHome(t, front.URL, agent, "SIMLOCK_CA="+ca)
	if r := rem.run("status", "--json"); r.code != 0 || !strings.Contains(r.stdout, `"daemon"`) {
		t.Fatalf("status over https with SIMLOCK_CA: %s", r)
	}
	g := parseGrant(t, rem.run("lease", "--platform", "android", "--detach").stdout)
	if r := rem.run("release", g.Lease.ID); r.code != 0 {
		t.Fatalf("release over https: %s", r)
	}
}
