package e2e

import (
	"encoding/json"
	"errors"
	"net"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"
)

// daemonStatus is `simlock daemon status --json`.
func daemonStatus(t *testing.T, h *home) map[string]any {
	t.Helper()
	r := h.run("daemon", "status", "--json")
	if r.code != 0 {
		t.Fatalf("daemon status --json\n%s", r)
	}
	var st map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &st); err != nil || strings.Count(strings.TrimSpace(r.stdout), "\n") != 0 {
		t.Fatalf("daemon status --json did not print one JSON object: %v\n%s", err, r)
	}
	return st
}

// One daemon per home; `daemon status` reports it and never starts one.
func TestDaemonSingleInstanceAndStatus(t *testing.T) {
	t.Parallel()
	h := newHome(t, fastDemo...)
	pid := h.startDaemon()

	r := h.run("daemon", "run")
	if r.code == 0 {
		t.Fatalf("a second daemon run succeeded\n%s", r)
	}
	e := cliError(t, r)
	if msg, _ := e["message"].(string); !strings.Contains(msg, "already running") {
		t.Errorf("the second daemon's error does not say one is already running\n%s", r)
	}
	if e["code"] != "DAEMON_STARTUP_FAILED" {
		t.Errorf("the second daemon's error code = %v, want DAEMON_STARTUP_FAILED", e["code"])
	}
	if got := lockPID(h.Dir); got != pid {
		t.Errorf("daemon.lock names pid %d after the second run, want the first daemon %d", got, pid)
	}

	st := daemonStatus(t, h)
	if st["status"] != "running" || st["health"] != "running" {
		t.Errorf("daemon status: %v, want status and health running", st)
	}
	if p, _ := st["pid"].(float64); int(p) != pid {
		t.Errorf("daemon status pid = %v, want %d", st["pid"], pid)
	}
	if st["home"] != h.Dir {
		t.Errorf("daemon status home = %v, want %s", st["home"], h.Dir)
	}

	r = h.run("daemon", "stop")
	switch {
	case r.code == 0:
		if strings.TrimSpace(r.stdout) != `{"status":"stopped"}` {
			t.Errorf("daemon stop printed %q", r.stdout)
		}
	case strings.Contains(r.stderr, "DAEMON_CONNECTION_LOST"):
		// Known bug (see TestDaemonStopAnswersBeforeClosing): the stop
		// happens but its answer can be lost. The lock tells.
		t.Logf("known bug: daemon stop exited %d: %s", r.code, strings.TrimSpace(r.stderr))
	default:
		t.Fatalf("daemon stop\n%s", r)
	}
	if !waitLockFree(h.Dir, waitBound) {
		t.Fatalf("the daemon still holds its lock after daemon stop")
	}

	for range 2 {
		r = h.run("daemon", "status", "--json")
		if r.code != 0 || strings.TrimSpace(r.stdout) != `{"status":"stopped"}` {
			t.Fatalf("daemon status --json of a stopped daemon\n%s", r)
		}
	}
	if lockHeld(h.Dir) {
		t.Errorf("daemon status started a daemon")
	}
	if _, err := os.Stat(h.path("daemon.sock")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("daemon.sock exists after stop and status: %v", err)
	}
}

// Bad settings are refused naming their key, over-long TTLs naming ttlMs,
// and a daemon with an invalid config.json refuses to start, saying why.
func TestConfigAndTTLValidation(t *testing.T) {
	t.Parallel()
	t.Run("config set", func(t *testing.T) {
		h := newHome(t)
		r := h.run("config", "set", "lease.maxTtlMs", "abc")
		e := expectFailure(t, r, 2, "BAD_REQUEST")
		if e["field"] != "lease.maxTtlMs" || !strings.Contains(message(e), "lease.maxTtlMs") {
			t.Errorf("the error does not name lease.maxTtlMs\n%s", r)
		}
		if _, err := os.Stat(h.path("config.json")); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("a refused setting was written: %v", err)
		}
		r = h.run("config", "get", "lease.maxTtlMs") // no daemon: read from the file
		if r.code != 0 || !strings.Contains(r.stdout, `"value":14400000`) {
			t.Errorf("lease.maxTtlMs is not the default after a refused set\n%s", r)
		}
	})
	t.Run("ttl over the maximum", func(t *testing.T) {
		h := newHome(t, fastDemo...)
		r := h.run("lease", "--platform", "ios", "--ttl", "5h", "--detach")
		e := expectFailure(t, r, 2, "BAD_REQUEST")
		// Said in the flag's terms; the field and the limit stay for programs.
		if e["field"] != "ttlMs" || e["flag"] != "--ttl" || e["maxTtlMs"] != float64(14_400_000) ||
			message(e) != "--ttl 5h is above the 4h maximum (lease.maxTtlMs)" {
			t.Errorf("the error does not say --ttl 5h is above the 4h maximum\n%s", r)
		}
		if r.stdout != "" {
			t.Errorf("a refused lease printed on stdout: %q", r.stdout)
		}
		if n := len(h.leases()); n != 0 {
			t.Errorf("%d leases exist after a refused request", n)
		}
	})
	t.Run("invalid config.json", func(t *testing.T) {
		h := newHome(t)
		if err := os.WriteFile(h.path("config.json"), []byte(`{"lease":{"defaultTtlMs":-1}}`), 0o600); err != nil {
			t.Fatal(err)
		}
		r := h.run("lease", "--platform", "ios", "--detach")
		e := expectFailure(t, r, 1, "DAEMON_STARTUP_FAILED")
		if !strings.Contains(message(e), "lease.defaultTtlMs") {
			t.Errorf("the error does not name lease.defaultTtlMs\n%s", r)
		}
		if lockHeld(h.Dir) {
			t.Errorf("a daemon runs despite the invalid config")
		}
		r = h.run("status", "--json")
		e = expectFailure(t, r, 1, "DAEMON_STARTUP_FAILED")
		if !strings.Contains(message(e), "lease.defaultTtlMs") {
			t.Errorf("a second command's error does not name lease.defaultTtlMs\n%s", r)
		}
	})
}

// `simlock daemon stop` gets its answer every time: the daemon writes the
// frames it has queued for a session before closing it.
func TestDaemonStopAnswersBeforeClosing(t *testing.T) {
	t.Parallel()
	h := newHome(t, fastDemo...)
	for i := range 10 {
		h.startDaemon()
		r := h.run("daemon", "stop")
		if r.code != 0 || strings.TrimSpace(r.stdout) != `{"status":"stopped"}` {
			t.Fatalf("stop #%d\n%s", i+1, r)
		}
		if !waitLockFree(h.Dir, waitBound) {
			t.Fatalf("the daemon did not stop")
		}
	}
}

// The first command in a fresh home starts the daemon and waits until its
// startup has converged: a first `status` shows the drivers and capacity,
// not a daemon still starting. Commands racing to start it all wait for the
// one that won.
func TestFirstStatusInAFreshHomeShowsTheFullView(t *testing.T) {
	t.Parallel()
	h := newHome(t, fastDemo...)
	var runs []<-chan result
	for range 3 {
		runs = append(runs, h.runAsync("status"))
	}
	for i, ch := range runs {
		r := awaitResult(t, ch)
		if r.code != 0 {
			t.Fatalf("status #%d\n%s", i+1, r)
		}
		for _, want := range []string{"Daemon: running (", "Driver ios: demo", "Driver android: demo", "Capacity (", "  ios: ", "Devices: 0", "Leases: 0"} {
			if !strings.Contains(r.stdout, want) {
				t.Errorf("status #%d in a fresh home lacks %q\n%s", i+1, want, r.stdout)
			}
		}
	}
	if pid := h.startDaemon(); pid != lockPID(h.Dir) {
		t.Errorf("daemon start answered for pid %d, the lock names %d", pid, lockPID(h.Dir))
	}
	if st := daemonStatus(t, h); st["health"] != "running" {
		t.Errorf("daemon status after daemon start: %v, want health running", st)
	}
}

// `daemon start` waits for startup: one that fails after the socket
// listened (here, a damaged instance.json stops the drivers) exits with
// DAEMON_STARTUP_FAILED and the reason, and leaves no daemon behind.
func TestDaemonStartReportsAFailedStartup(t *testing.T) {
	t.Parallel()
	h := newHome(t, fastDemo...)
	if err := os.WriteFile(h.path("instance.json"), []byte("{damaged"), 0o600); err != nil {
		t.Fatal(err)
	}
	r := h.run("daemon", "start")
	e := expectFailure(t, r, 1, "DAEMON_STARTUP_FAILED")
	if !strings.Contains(message(e), "instance.json is damaged") || !strings.Contains(message(e), "daemon.log") {
		t.Errorf("the error does not give the reason and the log to read\n%s", r)
	}
	if strings.Contains(r.stdout, "running") {
		t.Errorf("a failed start printed running\n%s", r)
	}
	if !waitLockFree(h.Dir, waitBound) {
		t.Errorf("the daemon whose startup failed still holds its lock")
	}
}

// A held `simlock lease` survives `simlock daemon stop && simlock daemon
// start`: it says the daemon is stopping, reconnects once the daemon is back,
// and the new daemon renews its lease; Ctrl-C then still releases it.
func TestAHeldLeaseSurvivesADaemonRestartAndIsRenewedAfterIt(t *testing.T) {
	t.Parallel()
	h := newHome(t, append([]string{"lease.minTtlMs", "1000"}, fastDemo...)...) // a short TTL, renewed across the restart
	holder := h.start("lease", "--platform", "android", "--agent-id", "keeper", "--ttl", "3s")
	g := parseGrant(t, holder.waitLine(holder.stdout, "the grant", func(string) bool { return true }).text)

	if r := h.run("daemon", "stop"); r.code != 0 {
		t.Fatalf("daemon stop\n%s", r)
	}
	// Told it is a stop, not a crash: the daemon said so before closing.
	notice := holder.waitLine(holder.stderr, "a notice of the daemon's end", func(s string) bool {
		return strings.Contains(s, `"notice":"daemon-`) && strings.Contains(s, g.Lease.ID)
	})
	if !strings.Contains(notice.text, `"notice":"daemon-stopping"`) || !strings.Contains(notice.text, `"reason":"requested"`) {
		t.Errorf("the holder's notice of a daemon stop is %s, want notice daemon-stopping with reason requested", notice.text)
	}
	restarted := time.Now().UnixMilli()
	if r := h.run("daemon", "start"); r.code != 0 {
		t.Fatalf("daemon start\n%s", r)
	}
	holder.waitLine(holder.stderr, "the reconnected notice", func(s string) bool {
		return strings.Contains(s, `"notice":"daemon-reconnected"`)
	})
	f := h.follow()
	// Renewals every TTL/3 by the daemon that came back: two in a row, so
	// the holder goes on renewing, not just once at the reconnect.
	for range 2 {
		ev := f.next("a renewal of "+g.Lease.ID+" after the restart", func(ev event) bool {
			if ev.str("leaseId") == g.Lease.ID && (ev.Event == "lease.expired" || ev.Event == "lease.released") {
				t.Fatalf("the lease ended after the restart: %v", ev)
			}
			return ev.Event == "lease.renewed" && ev.str("leaseId") == g.Lease.ID
		})
		if ev.Timestamp < restarted {
			t.Fatalf("renewal at %d, before the restart at %d", ev.Timestamp, restarted)
		}
	}
	if !holder.running() {
		t.Fatalf("the holder exited across the restart\n%s", holder.dump())
	}
	holder.signal(syscall.SIGINT)
	if code := holder.wait(); code != 0 {
		t.Fatalf("holder after SIGINT exited %d, want 0 (released)\n%s", code, holder.dump())
	}
	if leases := h.leases(); len(leases) != 0 {
		t.Errorf("leases after the holder's release: %v", leases)
	}
}

// A daemon killed a moment ago may still accept a connection on its socket
// and then drop it unanswered; `daemon start` takes that for no daemon and
// starts one, rather than failing on the dropped session.
func TestDaemonStartStartsADaemonWhenTheSocketDropsTheSessionUnanswered(t *testing.T) {
	t.Parallel()
	h := newHome(t)
	if err := os.MkdirAll(h.Dir, 0o700); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("unix", h.path("daemon.sock"))
	if err != nil {
		t.Fatal(err)
	}
	// The daemon takes the socket's path over: closing this listener
	// must not remove the daemon's socket file.
	ln.(*net.UnixListener).SetUnlinkOnClose(false)
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	r := h.run("daemon", "start")
	if r.code != 0 || !strings.Contains(r.stdout, `"status":"running"`) {
		t.Fatalf("daemon start over a socket that drops its sessions\n%s", r)
	}
}
