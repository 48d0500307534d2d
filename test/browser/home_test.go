package browser

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/simlock/simlock/internal/bintest"
)

// commandBound is how long a command run to completion may take.
const commandBound = 60 * time.Second

// home is one SIMLOCK_HOME, with the daemon the CLI starts for it.
type home struct {
	t   *testing.T
	dir string
	env []string
}

// newHome makes a fresh SIMLOCK_HOME with the demo driver and writes the
// settings (key, value pairs) before any daemon starts. Its cleanup stops
// the daemon and removes the directory.
func newHome(t *testing.T, settings ...string) *home {
	t.Helper()
	consultSourcesOnce(t)
	// Not t.TempDir(): its path is too long for a unix socket.
	dir, err := os.MkdirTemp("", "slk")
	if err != nil {
		t.Fatal(err)
	}
	h := &home{t: t, dir: dir, env: bintest.Env(dir)}
	t.Cleanup(h.cleanup)
	for i := 0; i+1 < len(settings); i += 2 {
		if r := h.run("config", "set", settings[i], settings[i+1]); r.code != 0 {
			t.Fatalf("config set %s %s: %s", settings[i], settings[i+1], r)
		}
	}
	return h
}

func (h *home) path(name string) string { return filepath.Join(h.dir, name) }

// cleanup stops the daemon, kills it if it still holds its lock, and
// removes the home; on a failure it shows the daemon's log first.
func (h *home) cleanup() {
	t := h.t
	defer os.RemoveAll(h.dir)
	if t.Failed() {
		if b, err := os.ReadFile(h.path("daemon.log")); err == nil {
			t.Logf("daemon.log of %s (last 6000 bytes):\n%s", h.dir, tail(b, 6000))
		}
	}
	if !bintest.LockHeld(h.dir) {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if r, err := h.exec(ctx, "daemon", "stop"); err != nil || r.code != 0 {
		t.Logf("cleanup: daemon stop: %v %s", err, r)
	}
	deadline := time.Now().Add(10 * time.Second)
	for bintest.LockHeld(h.dir) && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if bintest.LockHeld(h.dir) {
		pid := lockPID(h.dir)
		t.Errorf("cleanup: the daemon (pid %d) still runs 10s after daemon stop; killing it", pid)
		if pid > 0 {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

func tail(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}

func lockPID(dir string) int {
	b, err := os.ReadFile(filepath.Join(dir, "daemon.lock"))
	if err != nil {
		return 0
	}
	first, _, _ := strings.Cut(string(b), "\n")
	pid, _ := strconv.Atoi(strings.TrimSpace(first))
	return pid
}

// result is a command run to completion.
type result struct {
	args           []string
	stdout, stderr string
	code           int
}

func (r result) String() string {
	return fmt.Sprintf("`simlock %s` exited %d\nstdout: %s\nstderr: %s", strings.Join(r.args, " "), r.code, r.stdout, r.stderr)
}

func (h *home) exec(ctx context.Context, args ...string) (result, error) {
	r, err := bintest.Exec(ctx, simlockBin, h.env, args...)
	return result{args: r.Args, stdout: r.Stdout, stderr: r.Stderr, code: r.Code}, err
}

// run runs simlock to completion.
func (h *home) run(args ...string) result {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), commandBound)
	defer cancel()
	r, err := h.exec(ctx, args...)
	if err != nil {
		h.t.Fatalf("%v\n%s", err, r)
	}
	return r
}

// must runs simlock and fails the test, naming what for, unless it
// exits 0.
func (h *home) must(what string, args ...string) result {
	h.t.Helper()
	r := h.run(args...)
	if r.code != 0 {
		h.t.Fatalf("%s: %s", what, r)
	}
	return r
}

// proc is a simlock command running in the background.
type proc struct {
	cmd  *exec.Cmd
	done chan struct{}
	mu   sync.Mutex
	out  strings.Builder
	code int
}

// start runs simlock in the background; its cleanup kills it if it still
// runs.
func (h *home) start(args ...string) *proc {
	h.t.Helper()
	p := &proc{cmd: exec.Command(simlockBin, args...), done: make(chan struct{})}
	p.cmd.Env = h.env
	p.cmd.Stdout = &lockedWriter{p: p}
	p.cmd.Stderr = &lockedWriter{p: p}
	if err := p.cmd.Start(); err != nil {
		h.t.Fatalf("start simlock %s: %v", strings.Join(args, " "), err)
	}
	go func() {
		_ = p.cmd.Wait()
		p.code = p.cmd.ProcessState.ExitCode()
		close(p.done)
	}()
	h.t.Cleanup(p.kill)
	return p
}

type lockedWriter struct{ p *proc }

func (w *lockedWriter) Write(b []byte) (int, error) {
	w.p.mu.Lock()
	defer w.p.mu.Unlock()
	return w.p.out.Write(b)
}

func (p *proc) output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.out.String()
}

func (p *proc) kill() {
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Kill()
	<-p.done
}

// wait waits at most bound for the command to exit and returns its code
// and output.
func (p *proc) wait(t *testing.T, what string, bound time.Duration) (int, string) {
	t.Helper()
	select {
	case <-p.done:
		return p.code, p.output()
	case <-time.After(bound):
		t.Fatalf("%s: the command had not ended %s later; its output:\n%s", what, bound, p.output())
	}
	return 0, ""
}

// startDaemon starts the daemon with `simlock daemon start`.
func (h *home) startDaemon() {
	h.t.Helper()
	h.must("daemon start", "daemon", "start")
}

// consoleURL is where the daemon serves the console (daemon.consoleUrl).
func (h *home) consoleURL() string {
	h.t.Helper()
	r := h.must("status --json", "status", "--json")
	var st struct {
		Daemon struct {
			ConsoleURL string `json:"consoleUrl"`
		} `json:"daemon"`
	}
	if json.Unmarshal([]byte(r.stdout), &st) != nil || !strings.HasPrefix(st.Daemon.ConsoleURL, "http://") {
		h.t.Fatalf("status --json shows no daemon.consoleUrl\n%s", r)
	}
	return strings.TrimSuffix(st.Daemon.ConsoleURL, "/")
}

// token makes an HTTP token and returns its id and secret.
func (h *home) token(role, label string) (id, secret string) {
	h.t.Helper()
	r := h.must("token create", "token", "create", "--role", role, "--label", label)
	var out struct {
		Token struct {
			ID string `json:"id"`
		} `json:"token"`
		Secret string `json:"secret"`
	}
	if json.Unmarshal([]byte(r.stdout), &out) != nil || out.Token.ID == "" || !strings.HasPrefix(out.Secret, "slk_") {
		h.t.Fatalf("token create\n%s", r)
	}
	return out.Token.ID, out.Secret
}

// grant is what `simlock lease` prints, as far as the tests read it.
type grant struct {
	Device struct {
		ID string `json:"id"`
	} `json:"device"`
	Lease struct {
		ID string `json:"id"`
	} `json:"lease"`
	RequestID string `json:"requestId"`
}

// parseGrant reads the grant line of a lease command's output.
func parseGrant(t *testing.T, out string) grant {
	t.Helper()
	for _, l := range strings.Split(out, "\n") {
		var g grant
		if json.Unmarshal([]byte(l), &g) == nil && g.Lease.ID != "" && g.Device.ID != "" {
			return g
		}
	}
	t.Fatalf("no grant in the lease's output:\n%s", out)
	return grant{}
}

// instanceID is the worker id a home joins a gateway with.
func instanceID(t *testing.T, h *home) string {
	t.Helper()
	b, err := os.ReadFile(h.path("instance.json"))
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
