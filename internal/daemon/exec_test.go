package daemon

import (
	"context"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/simlock/simlock/internal/client"
	"github.com/simlock/simlock/internal/config"
	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/driver"
	"github.com/simlock/simlock/internal/driver/demo"
)

// shellDriver is a demo driver whose passthrough runs a shell script, so
// device.exec has a real process to stream.
type shellDriver struct {
	*demo.Driver
	script string
}

// Passthrough runs the script with the caller's args, and tells it the
// target it was given: SIMLOCK_TARGET is "<device id> <address> remote" or
// "... local".
func (d shellDriver) Passthrough(t driver.Target, args []string) (driver.Command, error) {
	where := "local"
	if t.Remote {
		where = "remote"
	}
	return driver.Command{Tool: "simctl", Path: "/bin/sh", Args: append([]string{"-c", d.script, "sh"}, args...),
		Env: []string{"SIMLOCK_TARGET=" + t.Device.ID + " " + t.Device.Address + " " + where}}, nil
}

func startExecDaemon(t *testing.T, script string, cfg *config.Config) string {
	t.Helper()
	_, home := startShellDaemon(t, script, cfg)
	return home
}

// startShellDaemon starts a daemon whose drivers' passthrough runs script.
func startShellDaemon(t *testing.T, script string, cfg *config.Config) (*Daemon, string) {
	t.Helper()
	drivers := map[contract.Platform]driver.Driver{}
	for _, p := range contract.Platforms() {
		d, err := demo.New(demo.Options{Platform: p})
		if err != nil {
			t.Fatal(err)
		}
		drivers[p] = shellDriver{Driver: d, script: script}
	}
	return startDaemonWith(t, cfg, drivers)
}

type collected struct {
	mu     sync.Mutex
	chunks []contract.ExecOutput
}

func (c *collected) add(o contract.ExecOutput) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.chunks = append(c.chunks, o)
}

func (c *collected) text(stream string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var b strings.Builder
	for _, o := range c.chunks {
		if o.Stream == stream {
			b.WriteString(o.Chunk)
		}
	}
	return b.String()
}

func TestExecStreamsOutputAndExitCode(t *testing.T) {
	home := startExecDaemon(t, `printf 'out:%s\n' "$1"; printf 'h\303'; printf '\251llo\n'; read line; echo "in:$line" >&2; exit 3`, nil)
	ctx := context.Background()
	c, g := execLease(t, home)
	var out collected
	stdin := "typed\n"
	res, err := c.Exec(ctx, contract.ExecInput{LeaseID: g.Lease.ID, Tool: "simctl", Args: []string{"list"}, Stdin: &stdin}, out.add)
	if err != nil {
		t.Fatal(err)
	}
	if res.ExitCode != 3 {
		t.Errorf("exit code = %d, want 3", res.ExitCode)
	}
	if got := out.text("stdout"); got != "out:list\nhéllo\n" {
		t.Errorf("stdout = %q", got)
	}
	if got := out.text("stderr"); got != "in:typed\n" {
		t.Errorf("stderr = %q", got)
	}
	for _, o := range out.chunks {
		if strings.ContainsRune(o.Chunk, '\uFFFD') {
			t.Errorf("chunk %q splits a character", o.Chunk)
		}
	}
}

func TestExecRefusesBeforeRunning(t *testing.T) {
	home := startExecDaemon(t, `echo ran`, nil)
	ctx := context.Background()
	c, g := execLease(t, home)
	var out collected
	cases := []struct {
		name string
		c    func() error
		want contract.Code
	}{
		{"unknown tool", func() error {
			_, err := c.Exec(ctx, contract.ExecInput{LeaseID: g.Lease.ID, Tool: "fastboot"}, out.add)
			return err
		}, contract.CodeUnknownPassthroughTool},
		{"adb on an iOS lease", func() error {
			_, err := c.Exec(ctx, contract.ExecInput{LeaseID: g.Lease.ID, Tool: "adb", Args: []string{"devices"}}, out.add)
			return err
		}, contract.CodePassthroughRefused},
		{"unknown lease", func() error {
			_, err := c.Exec(ctx, contract.ExecInput{LeaseID: "lse_nope", Tool: "simctl"}, out.add)
			return err
		}, contract.CodeUnknownLease},
		{"another agent's lease", func() error {
			_, err := dial(t, home, "b", false).Exec(ctx, contract.ExecInput{LeaseID: g.Lease.ID, Tool: "simctl"}, out.add)
			return err
		}, contract.CodeForbidden},
		{"admin without the requester", func() error {
			_, err := dial(t, home, "op", true).Exec(ctx, contract.ExecInput{LeaseID: g.Lease.ID, Tool: "simctl"}, out.add)
			return err
		}, contract.CodeForbidden},
	}
	for _, tc := range cases {
		if err := tc.c(); code(err) != tc.want {
			t.Errorf("%s: %v, want %s", tc.name, err, tc.want)
		}
	}
	if len(out.chunks) != 0 {
		t.Errorf("a refused command produced output: %+v", out.chunks)
	}
	res, err := dial(t, home, "op", true).Exec(ctx, contract.ExecInput{LeaseID: g.Lease.ID, Tool: "simctl", RequesterID: "a"}, out.add)
	if err != nil || res.ExitCode != 0 || out.text("stdout") != "ran\n" {
		t.Errorf("admin naming the requester: %+v, %v, output %q", res, err, out.text("stdout"))
	}
}

func TestBareAdbShellIsRefused(t *testing.T) {
	for args, want := range map[string]bool{
		"shell":                  true,
		"-s emulator-5554 shell": true,
		"shell -x":               true,
		"shell getprop":          false,
		"devices":                false,
		"-s shell devices":       false,
	} {
		if got := bareShell(strings.Fields(args)); got != want {
			t.Errorf("bareShell(%q) = %v, want %v", args, got, want)
		}
	}
}

func TestExecTimeoutStopsTheCommand(t *testing.T) {
	cfg, err := config.Default().Override("exec.timeoutMs", "200")
	if err != nil {
		t.Fatal(err)
	}
	home := startExecDaemon(t, `echo started; exec sleep 30`, cfg)
	ctx := context.Background()
	c, g := execLease(t, home)
	var out collected
	_, err = c.Exec(ctx, contract.ExecInput{LeaseID: g.Lease.ID, Tool: "simctl"}, out.add)
	if code(err) != contract.CodeExecTimeout {
		t.Fatalf("exec past its timeout: %v, want EXEC_TIMEOUT", err)
	}
	if out.text("stdout") != "started\n" {
		t.Errorf("output before the timeout = %q", out.text("stdout"))
	}
}

// A call's own timeoutMs stops the command before exec.timeoutMs would,
// and the error says which bound stopped it.
func TestTheCallsTimeoutStopsTheCommandSooner(t *testing.T) {
	home := startExecDaemon(t, `echo started; exec sleep 30`, nil) // exec.timeoutMs: 10 min
	ctx := context.Background()
	c, g := execLease(t, home)
	var out collected
	_, err := c.Exec(ctx, contract.ExecInput{LeaseID: g.Lease.ID, Tool: "simctl", TimeoutMs: 200}, out.add)
	if code(err) != contract.CodeExecTimeout || !strings.Contains(err.Error(), "the call's timeoutMs (200 ms)") {
		t.Fatalf("exec past the call's timeoutMs: %v, want EXEC_TIMEOUT naming the call's timeoutMs", err)
	}
	if out.text("stdout") != "started\n" {
		t.Errorf("output before the timeout = %q", out.text("stdout"))
	}
}

func TestChunksNeverSplitACharacter(t *testing.T) {
	var got []contract.ExecOutput
	s := newSession(nil, context.Background(), contract.RoleAgent, "a", func(p contract.Push) { got = append(got, *p.Output) }, func() {})
	c := &chunker{s: s}
	w := c.stream("stdout")
	for _, part := range [][]byte{[]byte("h\xc3"), []byte("\xa9llo \xe2\x82"), []byte("\xac")} {
		if _, err := w.Write(part); err != nil {
			t.Fatal(err)
		}
	}
	c.flush()
	want := []string{"h", "éllo ", "€"}
	if len(got) != len(want) {
		t.Fatalf("chunks = %+v, want %q", got, want)
	}
	for i, o := range got {
		if o.Chunk != want[i] || o.Stream != "stdout" {
			t.Errorf("chunk %d = %+v, want stdout %q", i, o, want[i])
		}
	}
}

// execLease dials home as agent "a" and leases an iOS device to run
// commands on.
func execLease(t *testing.T, home string) (*client.Client, contract.LeaseGrant) {
	t.Helper()
	c := dial(t, home, "a", false)
	g, err := c.RequestLease(context.Background(), contract.LeaseRequestInput{Platform: contract.PlatformIOS}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return c, g
}

// missingToolDriver is a demo driver whose passthrough names a tool that
// is not there, at path.
type missingToolDriver struct {
	*demo.Driver
	path string
}

func (d missingToolDriver) Passthrough(driver.Target, []string) (driver.Command, error) {
	return driver.Command{Tool: "simctl", Path: d.path}, nil
}

// A tool that cannot run is INTERNAL; the error names the tool's path on
// the daemon's machine to a local caller, never to a remote one.
func TestAToolThatCannotRunNamesNoHostPathToARemoteCaller(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sdk", "xcrun")
	drivers := map[contract.Platform]driver.Driver{}
	for _, p := range contract.Platforms() {
		d, err := demo.New(demo.Options{Platform: p})
		if err != nil {
			t.Fatal(err)
		}
		drivers[p] = missingToolDriver{Driver: d, path: path}
	}
	_, home := startDaemonWith(t, nil, drivers)
	ctx := context.Background()
	c, g := execLease(t, home)
	in := contract.ExecInput{LeaseID: g.Lease.ID, Tool: "simctl", Args: []string{"list"}}
	_, err := c.Exec(ctx, in, func(contract.ExecOutput) {})
	if code(err) != contract.CodeInternal || !strings.Contains(err.Error(), path) {
		t.Errorf("exec of a missing tool over the socket: %v, want INTERNAL naming %s", err, path)
	}
	confined, err := client.Dial(ctx, SocketPath(home), contract.HelloInput{Principal: "a", Remote: true})
	if err != nil {
		t.Fatal(err)
	}
	defer confined.Close()
	_, err = confined.Exec(ctx, in, func(contract.ExecOutput) {})
	if code(err) != contract.CodeInternal || strings.Contains(err.Error(), filepath.Dir(path)) {
		t.Errorf("exec of a missing tool for a remote caller: %v, want INTERNAL naming no path of the daemon's machine", err)
	}
}
