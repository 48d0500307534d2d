package chaos

import (
	"bytes"
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
	"github.com/simlock/simlock/internal/contract"
)

// home is one SIMLOCK_HOME and the daemon run for it.
type home struct {
	t   *testing.T
	dir string
	env []string
	pid int
}

// cliBound bounds one CLI command; a daemon start waits for readiness.
const cliBound = 60 * time.Second

func newHome(t *testing.T, settings ...string) *home {
	t.Helper()
	// Not t.TempDir(): its path is too long for a unix socket.
	dir, err := os.MkdirTemp("", "slkc")
	if err != nil {
		t.Fatal(err)
	}
	h := &home{t: t, dir: dir, env: bintest.Env(dir)}
	t.Cleanup(h.cleanup)
	for i := 0; i+1 < len(settings); i += 2 {
		h.cli("config", "set", settings[i], settings[i+1])
	}
	return h
}

// cli runs simlock with args and returns its stdout; a failure fails the
// test.
func (h *home) cli(args ...string) string {
	h.t.Helper()
	out, err := h.try(args...)
	if err != nil {
		h.t.Fatalf("simlock %s: %v", strings.Join(args, " "), err)
	}
	return out
}

func (h *home) try(args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), cliBound)
	defer cancel()
	cmd := exec.CommandContext(ctx, simlockBin, args...)
	cmd.Env = h.env
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("%w\n%s%s", err, stdout.Bytes(), stderr.Bytes())
	}
	return stdout.String(), nil
}

// start starts the daemon with `simlock daemon start`, which answers once
// it is ready.
func (h *home) start() {
	h.t.Helper()
	out := h.cli("daemon", "start")
	var st struct {
		Status string `json:"status"`
		PID    int    `json:"pid"`
	}
	if err := json.Unmarshal([]byte(out), &st); err != nil || st.Status != "running" || st.PID <= 0 {
		h.t.Fatalf("daemon start printed %q, want status running and a pid", out)
	}
	h.pid = st.PID
}

// kill sends SIGKILL to the daemon and waits until its lock is free: the
// kernel frees it when the process is gone.
func (h *home) kill() {
	h.t.Helper()
	if err := syscall.Kill(h.pid, syscall.SIGKILL); err != nil {
		h.t.Fatalf("SIGKILL %d: %v", h.pid, err)
	}
	free := make(chan error, 1)
	go func() {
		f, err := os.OpenFile(filepath.Join(h.dir, "daemon.lock"), os.O_RDWR, 0)
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
			h.t.Fatalf("taking the daemon's lock after SIGKILL: %v", err)
		}
	case <-time.After(10 * time.Second):
		h.t.Fatalf("the daemon's lock is still held 10s after SIGKILL of %d", h.pid)
	}
}

// signal sends sig (SIGSTOP, SIGCONT) to the daemon.
func (h *home) signal(sig syscall.Signal) {
	h.t.Helper()
	if err := syscall.Kill(h.pid, sig); err != nil {
		h.t.Fatalf("%v to %d: %v", sig, h.pid, err)
	}
}

func (h *home) socket() string { return filepath.Join(h.dir, "daemon.sock") }

// dial opens a session as principal; admin asks for the role with this
// daemon start's token.
func (h *home) dial(ctx context.Context, principal string, admin bool) (*client.Client, error) {
	hello := contract.HelloInput{Client: "chaos", Principal: principal}
	if admin {
		b, err := os.ReadFile(filepath.Join(h.dir, "admin.token"))
		if err != nil {
			return nil, err
		}
		hello.AdminToken = strings.TrimSpace(string(b))
	}
	return client.Dial(ctx, h.socket(), hello)
}

// token makes an HTTP token and returns its secret.
func (h *home) token(role, label string) string {
	h.t.Helper()
	var out struct {
		Secret string `json:"secret"`
	}
	if err := json.Unmarshal([]byte(h.cli("token", "create", "--role", role, "--label", label)), &out); err != nil || out.Secret == "" {
		h.t.Fatalf("token create: %v", err)
	}
	return out.Secret
}

// rss is the daemon's resident memory in bytes.
func (h *home) rss() int64 {
	h.t.Helper()
	if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", h.pid)); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
				kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
				if err == nil {
					return kb << 10
				}
			}
		}
	}
	out, err := exec.Command("ps", "-o", "rss=", "-p", strconv.Itoa(h.pid)).Output()
	if err != nil {
		h.t.Fatalf("reading the daemon's RSS: %v", err)
	}
	kb, err := strconv.ParseInt(strings.TrimSpace(string(out)), 10, 64)
	if err != nil {
		h.t.Fatalf("ps rss %q: %v", out, err)
	}
	return kb << 10
}

// cleanup stops the daemon, kills it if it will not stop, and removes the
// home.
func (h *home) cleanup() {
	defer os.RemoveAll(h.dir)
	if _, err := h.try("daemon", "stop"); err != nil {
		h.t.Logf("cleanup: daemon stop: %v", err)
	}
	if bintest.LockHeld(h.dir) && h.pid > 0 {
		_ = syscall.Kill(h.pid, syscall.SIGKILL)
	}
}

func jsonOut(s string, v any) error { return json.Unmarshal([]byte(s), v) }
