package ios

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/driver"
	"github.com/simlock/simlock/internal/ownership"
	"github.com/simlock/simlock/internal/runner"
	"github.com/simlock/simlock/internal/shimtest"
)

// The identifiers the xcrun shim prints.
const (
	typeIPhone16 = "com.apple.CoreSimulator.SimDeviceType.iPhone-16"
	runtime186   = "com.apple.CoreSimulator.SimRuntime.iOS-18-6"
)

// recorder is the test's runner: it runs the real shim processes through
// runner.OS, remembers every command (with its timeout), and can answer a
// call itself instead, to stand in for what a shim cannot do quickly, such
// as a two-minute timeout.
type recorder struct {
	inner runner.Runner
	// mu guards the fields below.
	mu   sync.Mutex
	cmds []runner.Cmd
	fake func(runner.Cmd) (runner.Result, bool, error)
}

func (r *recorder) Run(ctx context.Context, c runner.Cmd) (runner.Result, error) {
	r.mu.Lock()
	r.cmds = append(r.cmds, c)
	fake := r.fake
	r.mu.Unlock()
	if fake != nil {
		if res, ok, err := fake(c); ok {
			return res, err
		}
	}
	return r.inner.Run(ctx, c)
}

func (r *recorder) Start(c runner.Cmd, logPath string) (runner.Process, error) {
	return r.inner.Start(c, logPath)
}

func (r *recorder) setFake(f func(runner.Cmd) (runner.Result, bool, error)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.fake = f
}

func (r *recorder) commands() []runner.Cmd {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.cmds)
}

// subcommand is the simctl subcommand of a scoped xcrun call.
func subcommand(args []string) string {
	if len(args) >= 4 && args[0] == "simctl" && args[1] == "--set" {
		return args[3]
	}
	return ""
}

type harness struct {
	env  shimtest.Env
	root string
	rec  *recorder
	opts Options
	d    *Driver
}

// lookIn finds tools in dir only, as exec.LookPath would with PATH=dir.
func lookIn(dir string) func(string) (string, error) {
	return func(name string) (string, error) {
		p := filepath.Join(dir, name)
		if _, err := os.Stat(p); err != nil {
			return "", &exec.Error{Name: name, Err: exec.ErrNotFound}
		}
		return p, nil
	}
}

func noTools(name string) (string, error) {
	return "", &exec.Error{Name: name, Err: exec.ErrNotFound}
}

// shimEnv is the extra environment every tool call gets: the shims' state
// directory, taken from the environment shimtest would give a program.
func shimEnv(e shimtest.Env) []string {
	var out []string
	for _, kv := range e.Environ(nil) {
		if strings.HasPrefix(kv, "SIMLOCK_SHIM_STATE=") {
			out = append(out, kv)
		}
	}
	return out
}

// newOptions lays out the shims and options for a driver on a fresh root.
func newOptions(t *testing.T) (Options, shimtest.Env, *recorder) {
	t.Helper()
	e := shimtest.Build(t)
	rec := &recorder{inner: runner.OS{}}
	return Options{
		Root:     filepath.Join(t.TempDir(), "devices", "ios"),
		Instance: ownership.Instance{ID: "ins_test"},
		Runner:   rec,
		Env:      shimEnv(e),
		LookPath: lookIn(e.Bin),
		GOOS:     "darwin", // the shims stand in for a Mac's tools
	}, e, rec
}

func newHarness(t *testing.T) *harness {
	t.Helper()
	opts, e, rec := newOptions(t)
	d, err := New(t.Context(), opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	// A harness records what its test does, not New's Xcode check.
	rec.mu.Lock()
	rec.cmds = nil
	rec.mu.Unlock()
	e.ForgetCalls(t)
	return &harness{env: e, root: opts.Root, rec: rec, opts: opts, d: d}
}

// xcrun runs the xcrun shim directly, as a user would: no --set unless the
// test passes one.
func (h *harness) xcrun(t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.Command(filepath.Join(h.env.Bin, "xcrun"), args...)
	cmd.Env = h.env.Environ(nil)
	out, err := cmd.Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		t.Fatalf("xcrun %v: %v\n%s", args, err, stderr)
	}
	return strings.TrimSpace(string(out))
}

func (h *harness) provision(t *testing.T, model, osVersion string) driver.Device {
	t.Helper()
	dev, err := h.d.Provision(t.Context(), contract.DeviceSpec{Platform: contract.PlatformIOS, Model: model, OSVersion: osVersion})
	if err != nil {
		t.Fatalf("Provision(%s %s): %v", model, osVersion, err)
	}
	return dev
}

func (h *harness) boot(t *testing.T, dev driver.Device) driver.Device {
	t.Helper()
	ready, err := h.d.MakeReady(t.Context(), dev)
	if err != nil {
		t.Fatalf("MakeReady(%s): %v", dev.ID, err)
	}
	return ready
}

// states maps each UDID in the root to its run state.
func (h *harness) states(t *testing.T) map[string]driver.RunState {
	t.Helper()
	r, err := h.d.ListManaged(t.Context())
	if err != nil {
		t.Fatalf("ListManaged: %v", err)
	}
	out := map[string]driver.RunState{}
	for _, o := range r.Devices {
		out[o.ID] = o.RunState
	}
	return out
}

// simctlCalls returns the subcommands of the xcrun calls logged from index
// from on, failing the test on any that is not scoped to the root.
func (h *harness) simctlCalls(t *testing.T, from int) []shimtest.Call {
	t.Helper()
	calls := h.env.Calls(t)
	var out []shimtest.Call
	for _, c := range calls[min(from, len(calls)):] {
		if c.Tool != "xcrun" {
			continue
		}
		if len(c.Args) < 4 || c.Args[0] != "simctl" || c.Args[1] != "--set" || c.Args[2] != h.root {
			t.Errorf("xcrun call not scoped to --set %s: %q", h.root, c.Args)
		}
		out = append(out, c)
	}
	return out
}

func subcommands(calls []shimtest.Call) []string {
	var out []string
	for _, c := range calls {
		if len(c.Args) >= 4 {
			out = append(out, c.Args[3])
		}
	}
	return out
}

// crashOf asserts err is a *driver.CrashError of op and returns it.
func crashOf(t *testing.T, err error, op string) *driver.CrashError {
	t.Helper()
	var ce *driver.CrashError
	if !errors.As(err, &ce) {
		t.Fatalf("error %v (%T) is not a *driver.CrashError", err, err)
	}
	if ce.Op != op {
		t.Errorf("CrashError.Op = %q, want %q", ce.Op, op)
	}
	return ce
}
