package browser

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/simlock/simlock/internal/bintest"
)

// commandBound is how long a command run to completion may take.
const commandBound = 60 * time.Second

// home is one SIMLOCK_HOME (bintest.Home), with the daemon the CLI starts
// for it; its cleanup shows the end of the daemon's log when the test
// failed.
type home struct{ *bintest.Home }

// newHome makes a fresh SIMLOCK_HOME with the demo driver and writes the
// settings (key, value pairs) before any daemon starts. Its cleanup stops
// the daemon and removes the directory.
func newHome(t *testing.T, settings ...string) *home {
	t.Helper()
	consultSourcesOnce(t)
	return &home{bintest.NewHome(t, simlockBin, bintest.HomeOptions{LogOnFailure: true}, settings...)}
}

func (h *home) path(name string) string { return h.Path(name) }

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
	r, err := h.Exec(ctx, args...)
	return result{args: r.Args, stdout: r.Stdout, stderr: r.Stderr, code: r.Code}, err
}

// run runs simlock to completion.
func (h *home) run(args ...string) result {
	h.T.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), commandBound)
	defer cancel()
	r, err := h.exec(ctx, args...)
	if err != nil {
		h.T.Fatalf("%v\n%s", err, r)
	}
	return r
}

// must runs simlock and fails the test, naming what for, unless it
// exits 0.
func (h *home) must(what string, args ...string) result {
	h.T.Helper()
	r := h.run(args...)
	if r.code != 0 {
		h.T.Fatalf("%s: %s", what, r)
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
	h.T.Helper()
	p := &proc{cmd: exec.Command(simlockBin, args...), done: make(chan struct{})}
	p.cmd.Env = h.Env
	p.cmd.Stdout = &lockedWriter{p: p}
	p.cmd.Stderr = &lockedWriter{p: p}
	if err := p.cmd.Start(); err != nil {
		h.T.Fatalf("start simlock %s: %v", strings.Join(args, " "), err)
	}
	go func() {
		_ = p.cmd.Wait()
		p.code = p.cmd.ProcessState.ExitCode()
		close(p.done)
	}()
	h.T.Cleanup(p.kill)
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
	h.T.Helper()
	h.StartDaemon()
}

// consoleURL is where the daemon serves the console (daemon.consoleUrl).
func (h *home) consoleURL() string {
	h.T.Helper()
	r := h.must("status --json", "status", "--json")
	var st struct {
		Daemon struct {
			ConsoleURL string `json:"consoleUrl"`
		} `json:"daemon"`
	}
	if json.Unmarshal([]byte(r.stdout), &st) != nil || !strings.HasPrefix(st.Daemon.ConsoleURL, "http://") {
		h.T.Fatalf("status --json shows no daemon.consoleUrl\n%s", r)
	}
	return strings.TrimSuffix(st.Daemon.ConsoleURL, "/")
}

// token makes an HTTP token and returns its id and secret.
func (h *home) token(role, label string) (id, secret string) {
	h.T.Helper()
	return h.Token(role, label)
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
	return h.InstanceID(t)
}
