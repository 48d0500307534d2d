package bintest

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/simlock/simlock/internal/client"
	"github.com/simlock/simlock/internal/contract"
)

// CommandBound is how long Run lets one command take: a daemon start
// waits for readiness, so it is generous.
const CommandBound = 60 * time.Second

// stopBound is how long cleanup waits for a stopped daemon to let go of
// its lock, and again after killing it.
const stopBound = 10 * time.Second

// pollEvery is the period of the lock polls.
const pollEvery = 25 * time.Millisecond

// Home is one SIMLOCK_HOME a test runs the binary in, with the daemon the
// binary starts for it: the end-to-end, browser and chaos tests' harness.
// Its cleanup (registered by NewHome) stops the daemon, kills it if it
// will not stop, and removes the directory.
type Home struct {
	T *testing.T
	// Dir is the SIMLOCK_HOME directory; Env the environment every
	// command runs with (Env(Dir) unless the test changes it); Bin the
	// binary.
	Dir string
	Env []string
	Bin string
	// PID is the daemon's pid once StartDaemon started it.
	PID int

	opts HomeOptions
}

// HomeOptions shape a Home.
type HomeOptions struct {
	// Prefix begins the directory's name (kept short: a unix socket's
	// path is short). "slk" when empty.
	Prefix string
	// StopQuietly makes a daemon still running at cleanup a log line, not
	// a test error: for tests that stop, kill or freeze daemons on
	// purpose.
	StopQuietly bool
	// LogOnFailure shows the end of daemon.log at cleanup when the test
	// failed.
	LogOnFailure bool
}

// NewHome makes a fresh SIMLOCK_HOME for bin and writes the settings (key,
// value pairs) with `simlock config set`, before any daemon starts.
func NewHome(t *testing.T, bin string, opts HomeOptions, settings ...string) *Home {
	t.Helper()
	if len(settings)%2 != 0 {
		t.Fatalf("NewHome: settings must be key, value pairs")
	}
	if opts.Prefix == "" {
		opts.Prefix = "slk"
	}
	// Not t.TempDir(): its path is too long for a unix socket.
	dir, err := os.MkdirTemp("", opts.Prefix)
	if err != nil {
		t.Fatal(err)
	}
	h := &Home{T: t, Dir: dir, Env: Env(dir), Bin: bin, opts: opts}
	t.Cleanup(h.cleanup)
	for i := 0; i < len(settings); i += 2 {
		if r := h.Run("config", "set", settings[i], settings[i+1]); r.Code != 0 {
			t.Fatalf("config set %s %s: %s", settings[i], settings[i+1], r)
		}
	}
	return h
}

// Path is name inside the home.
func (h *Home) Path(name string) string { return filepath.Join(h.Dir, name) }

// Socket is the daemon's socket.
func (h *Home) Socket() string { return h.Path("daemon.sock") }

// String shows a result as a failure message does.
func (r Result) String() string {
	return fmt.Sprintf("`simlock %s` exited %d after %s\nstdout: %s\nstderr: %s",
		strings.Join(r.Args, " "), r.Code, r.Elapsed.Round(time.Millisecond), r.Stdout, r.Stderr)
}

// Exec runs the binary to completion in the home (see the function Exec).
func (h *Home) Exec(ctx context.Context, args ...string) (Result, error) {
	return Exec(ctx, h.Bin, h.Env, args...)
}

// Run runs the binary to completion within CommandBound; a command that
// could not run or did not finish fails the test. Any exit code is a
// Result.
func (h *Home) Run(args ...string) Result {
	h.T.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), CommandBound)
	defer cancel()
	r, err := h.Exec(ctx, args...)
	if err != nil {
		h.T.Fatalf("%v\n%s", err, r)
	}
	return r
}

// Must runs the binary and fails the test, naming what for, unless it
// exits 0.
func (h *Home) Must(what string, args ...string) Result {
	h.T.Helper()
	r := h.Run(args...)
	if r.Code != 0 {
		h.T.Fatalf("%s: %s", what, r)
	}
	return r
}

// StartDaemon starts the daemon with `simlock daemon start`, which answers
// once it is ready, and returns (and keeps) its pid.
func (h *Home) StartDaemon() int {
	h.T.Helper()
	r := h.Run("daemon", "start")
	var st struct {
		Status string `json:"status"`
		PID    int    `json:"pid"`
	}
	if r.Code != 0 || json.Unmarshal([]byte(r.Stdout), &st) != nil || st.Status != "running" || st.PID <= 0 {
		h.T.Fatalf("daemon start: want status running and a pid\n%s", r)
	}
	h.PID = st.PID
	return st.PID
}

// Token makes an HTTP token with `simlock token create` and returns its
// id and secret.
func (h *Home) Token(role, label string) (id, secret string) {
	h.T.Helper()
	r := h.Run("token", "create", "--role", role, "--label", label)
	var out struct {
		Token struct {
			ID   string `json:"id"`
			Role string `json:"role"`
		} `json:"token"`
		Secret string `json:"secret"`
	}
	if r.Code != 0 || json.Unmarshal([]byte(r.Stdout), &out) != nil || out.Token.ID == "" || !strings.HasPrefix(out.Secret, "slk_") || out.Token.Role != role {
		h.T.Fatalf("token create\n%s", r)
	}
	return out.Token.ID, out.Secret
}

// AdminToken is the admin token of the running daemon's start.
func (h *Home) AdminToken() string {
	h.T.Helper()
	b, err := os.ReadFile(h.Path("admin.token"))
	if err != nil {
		h.T.Fatalf("read admin.token: %v", err)
	}
	return strings.TrimSpace(string(b))
}

// Dial opens a session with the daemon as principal (client names the
// program); admin asks for the admin role with the daemon's token.
func (h *Home) Dial(ctx context.Context, clientName, principal string, admin bool) (*client.Client, error) {
	hello := contract.HelloInput{Client: clientName, Principal: principal}
	if admin {
		b, err := os.ReadFile(h.Path("admin.token"))
		if err != nil {
			return nil, err
		}
		hello.AdminToken = strings.TrimSpace(string(b))
	}
	return client.Dial(ctx, h.Socket(), hello)
}

// InstanceID is the id the home's daemon has (the worker id it joins a
// gateway with); a failure to read it fails t.
func (h *Home) InstanceID(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(h.Path("instance.json"))
	if err != nil {
		t.Fatal(err)
	}
	var in struct {
		ID string `json:"instanceId"`
	}
	if json.Unmarshal(b, &in) != nil || in.ID == "" {
		t.Fatalf("instance.json: %s", b)
	}
	return in.ID
}

// cleanup stops the daemon gracefully, kills it if it still holds its
// lock, and removes the home. It never probes the lock before the stop:
// probing takes the lock for an instant, which a daemon starting just then
// would meet.
func (h *Home) cleanup() {
	t := h.T
	defer os.RemoveAll(h.Dir)
	if h.opts.LogOnFailure && t.Failed() {
		if b, err := os.ReadFile(h.Path("daemon.log")); err == nil {
			t.Logf("daemon.log of %s (last 6000 bytes):\n%s", h.Dir, tail(b, 6000))
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if r, err := h.Exec(ctx, "daemon", "stop"); err != nil || r.Code != 0 {
		t.Logf("cleanup: daemon stop: %v %s", err, r)
	}
	if WaitLockFree(h.Dir, stopBound) {
		return
	}
	pid := LockPID(h.Dir)
	if pid <= 0 {
		pid = h.PID
	}
	report := t.Errorf
	if h.opts.StopQuietly {
		report = t.Logf
	}
	report("cleanup: the daemon (pid %d) still holds %s %s after daemon stop; killing it", pid, h.Path("daemon.lock"), stopBound)
	if pid > 0 {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	if !WaitLockFree(h.Dir, stopBound) {
		report("cleanup: daemon.lock is still held after SIGKILL of pid %d", pid)
	}
}

func tail(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}

// WaitLockFree polls until nobody holds dir's daemon lock; false if bound
// passed first.
func WaitLockFree(dir string, bound time.Duration) bool {
	deadline := time.NewTimer(bound)
	defer deadline.Stop()
	tick := time.NewTicker(pollEvery)
	defer tick.Stop()
	for LockHeld(dir) {
		select {
		case <-deadline.C:
			return !LockHeld(dir)
		case <-tick.C:
		}
	}
	return true
}

// LockPID is the pid on dir's daemon.lock's first line, or 0.
func LockPID(dir string) int {
	b, err := os.ReadFile(filepath.Join(dir, "daemon.lock"))
	if err != nil {
		return 0
	}
	first, _, _ := strings.Cut(string(b), "\n")
	pid, _ := strconv.Atoi(strings.TrimSpace(first))
	return pid
}
