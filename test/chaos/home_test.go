package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/simlock/simlock/internal/bintest"
	"github.com/simlock/simlock/internal/client"
)

// home is one SIMLOCK_HOME (bintest.Home) and the daemon run for it. The
// tests kill and freeze daemons on purpose: one still running at cleanup
// is killed without failing the test.
type home struct{ *bintest.Home }

// cliBound bounds one CLI command; a daemon start waits for readiness.
const cliBound = bintest.CommandBound

func newHome(t *testing.T, settings ...string) *home {
	t.Helper()
	h := &home{bintest.NewHome(t, simlockBin, bintest.HomeOptions{Prefix: "slkc", StopQuietly: true})}
	for i := 0; i+1 < len(settings); i += 2 {
		h.cli("config", "set", settings[i], settings[i+1])
	}
	return h
}

// cli runs simlock with args and returns its stdout; a failure fails the
// test.
func (h *home) cli(args ...string) string {
	h.T.Helper()
	out, err := h.try(args...)
	if err != nil {
		h.T.Fatalf("simlock %s: %v", strings.Join(args, " "), err)
	}
	return out
}

func (h *home) try(args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), cliBound)
	defer cancel()
	r, err := h.Exec(ctx, args...)
	if err == nil && r.Code != 0 {
		err = fmt.Errorf("exit status %d", r.Code)
	}
	if err != nil {
		return r.Stdout, fmt.Errorf("%w\n%s%s", err, r.Stdout, r.Stderr)
	}
	return r.Stdout, nil
}

// start starts the daemon with `simlock daemon start`, which answers once
// it is ready.
func (h *home) start() {
	h.T.Helper()
	h.StartDaemon()
}

// kill sends SIGKILL to the daemon and waits until its lock is free: the
// kernel frees it when the process is gone.
func (h *home) kill() {
	h.T.Helper()
	if err := syscall.Kill(h.PID, syscall.SIGKILL); err != nil {
		h.T.Fatalf("SIGKILL %d: %v", h.PID, err)
	}
	free := make(chan error, 1)
	go func() {
		f, err := os.OpenFile(filepath.Join(h.Dir, "daemon.lock"), os.O_RDWR, 0)
		if err != nil {
			free <- err
			return
		}
		defer f.Close()
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
			free <- err
			return
		}
		free <- syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
	}()
	select {
	case err := <-free:
		if err != nil {
			h.T.Fatalf("taking the daemon's lock after SIGKILL: %v", err)
		}
	case <-time.After(10 * time.Second):
		h.T.Fatalf("the daemon's lock is still held 10s after SIGKILL of %d", h.PID)
	}
}

// signal sends sig (SIGSTOP, SIGCONT) to the daemon.
func (h *home) signal(sig syscall.Signal) {
	h.T.Helper()
	if err := syscall.Kill(h.PID, sig); err != nil {
		h.T.Fatalf("%v to %d: %v", sig, h.PID, err)
	}
}

func (h *home) socket() string { return h.Socket() }

// dial opens a session as principal; admin asks for the role with this
// daemon start's token.
func (h *home) dial(ctx context.Context, principal string, admin bool) (*client.Client, error) {
	return h.Dial(ctx, "chaos", principal, admin)
}

// token makes an HTTP token and returns its secret.
func (h *home) token(role, label string) string {
	h.T.Helper()
	_, secret := h.Token(role, label)
	return secret
}

// rss is the daemon's resident memory in bytes.
func (h *home) rss() int64 {
	h.T.Helper()
	if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", h.PID)); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
				kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
				if err == nil {
					return kb << 10
				}
			}
		}
	}
	out, err := exec.Command("ps", "-o", "rss=", "-p", strconv.Itoa(h.PID)).Output()
	if err != nil {
		h.T.Fatalf("reading the daemon's RSS: %v", err)
	}
	kb, err := strconv.ParseInt(strings.TrimSpace(string(out)), 10, 64)
	if err != nil {
		h.T.Fatalf("ps rss %q: %v", out, err)
	}
	return kb << 10
}

func jsonOut(s string, v any) error { return json.Unmarshal([]byte(s), v) }
