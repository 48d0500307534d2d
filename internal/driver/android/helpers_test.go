package android_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/simlock/simlock/internal/bintest"
	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/driver"
	"github.com/simlock/simlock/internal/driver/android"
	"github.com/simlock/simlock/internal/ownership"
	"github.com/simlock/simlock/internal/runner"
	"github.com/simlock/simlock/internal/shimtest"
)

// fixture is one test's SDK shims, SIMLOCK_HOME, AVD root and adb port.
type fixture struct {
	shims shimtest.Env
	home  string
	root  string
	port  int
	opts  android.Options
}

func hostABI() string {
	if runtime.GOARCH == "arm64" {
		return "arm64-v8a"
	}
	return "x86_64"
}

// newFixture lays out shims and directories. Every process the shims
// record (emulators, adb servers) is killed when the test ends, whatever
// happened.
func newFixture(t *testing.T) *fixture {
	t.Helper()
	sh := shimtest.Build(t)
	base := t.TempDir()
	f := &fixture{shims: sh, home: filepath.Join(base, "home"), root: filepath.Join(base, "devices", "android"), port: freePort(t)}
	if err := os.Mkdir(f.home, 0o700); err != nil {
		t.Fatal(err)
	}
	in, err := ownership.LoadInstance(f.home)
	if err != nil {
		t.Fatal(err)
	}
	f.opts = android.Options{
		Root:     f.root,
		Instance: in,
		SDKRoot:  sh.SDK,
		AdbPort:  f.port,
		Home:     f.home,
		Env:      f.shimEnv(),
	}
	t.Cleanup(func() { killLeftovers(t, sh) })
	return f
}

func (f *fixture) shimEnv() []string {
	return []string{"SIMLOCK_SHIM_STATE=" + f.shims.State, "ANDROID_HOME=" + f.shims.SDK}
}

func (f *fixture) tool(name string) string {
	switch name {
	case "adb":
		return filepath.Join(f.shims.SDK, "platform-tools", "adb")
	case "emulator":
		return filepath.Join(f.shims.SDK, "emulator", "emulator")
	}
	return filepath.Join(f.shims.SDK, "cmdline-tools", "latest", "bin", name)
}

// newDriver creates a driver with opts and closes it when the test ends.
func newDriver(t *testing.T, opts android.Options) *android.Driver {
	t.Helper()
	d, err := android.New(t.Context(), opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

// readyPixel is a pixel_8 made and booted by a new driver with opts; the
// driver is closed when the test ends.
func readyPixel(t *testing.T, opts android.Options) (*android.Driver, driver.Device) {
	t.Helper()
	d := newDriver(t, opts)
	ctx := t.Context()
	dev, err := d.MakeReady(ctx, provision(t, ctx, d, driver.Request{Platform: contract.PlatformAndroid, Model: "pixel_8"}))
	if err != nil {
		t.Fatal(err)
	}
	return d, dev
}

// provision resolves req and creates the device, failing the test on
// either error.
func provision(t *testing.T, ctx context.Context, d *android.Driver, req driver.Request) driver.Device {
	t.Helper()
	spec, err := d.ResolveSpec(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	dev, err := d.Provision(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	return dev
}

// newRefused calls New expecting a refusal. A driver it gets anyway is
// closed when the test ends, so that a broken refusal leaks no server.
func newRefused(t *testing.T, opts android.Options) error {
	t.Helper()
	d, err := android.New(t.Context(), opts)
	if err == nil {
		t.Cleanup(func() { d.Close() })
	}
	return err
}

// freePort is a TCP port on 127.0.0.1 that was free a moment ago (see
// bintest.FreePort).
func freePort(t *testing.T) int {
	t.Helper()
	port, err := bintest.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	return port
}

func listening(port int) bool {
	c, err := net.DialTimeout("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), time.Second)
	if err != nil {
		return false
	}
	c.Close()
	return true
}

// alive reports whether pid runs; a zombie does not.
func alive(pid int) bool {
	if pid <= 0 || syscall.Kill(pid, 0) != nil {
		return false
	}
	if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); err == nil {
		if i := bytes.LastIndexByte(b, ')'); i >= 0 && i+2 < len(b) && b[i+2] == 'Z' {
			return false
		}
	}
	return true
}

// shimEmulator is an entry of the emulator shim's state.
type shimEmulator struct {
	Port       int    `json:"port"`
	Avd        string `json:"avd"`
	AvdDir     string `json:"avdDir"`
	Pid        int    `json:"pid"`
	ServerPort int    `json:"serverPort"`
}

// liveEmulators lists the shim emulators whose process runs.
func liveEmulators(t *testing.T, sh shimtest.Env) []shimEmulator {
	t.Helper()
	var ems map[int]shimEmulator
	readJSON(t, filepath.Join(sh.State, "android-emulators.json"), &ems)
	var out []shimEmulator
	for _, e := range ems {
		if alive(e.Pid) {
			out = append(out, e)
		}
	}
	return out
}

func readJSON(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// killLeftovers kills every emulator and adb server the shims recorded that
// still runs, checking by command line that the pid is one of this test's
// shims and not a process that reused the pid.
func killLeftovers(t *testing.T, sh shimtest.Env) {
	var ems map[int]struct{ Pid int }
	var servers map[int]struct{ Pid int }
	readJSON(t, filepath.Join(sh.State, "android-emulators.json"), &ems)
	readJSON(t, filepath.Join(sh.State, "android-adb-servers.json"), &servers)
	var pids []int
	for _, e := range ems {
		pids = append(pids, e.Pid)
	}
	for _, s := range servers {
		pids = append(pids, s.Pid)
	}
	for _, pid := range pids {
		cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if err != nil || !bytes.Contains(cmdline, []byte(sh.SDK)) || !alive(pid) {
			continue
		}
		syscall.Kill(pid, syscall.SIGKILL)
		// SIGKILL is asynchronous; the directories go next, so wait
		// (bounded) until the process is gone.
		tick := time.NewTicker(5 * time.Millisecond)
		for deadline := time.Now().Add(5 * time.Second); alive(pid) && time.Now().Before(deadline); {
			<-tick.C
		}
		tick.Stop()
	}
}

// calls returns the logged calls of tool.
func calls(t *testing.T, sh shimtest.Env, tool string) []shimtest.Call {
	t.Helper()
	var out []shimtest.Call
	for _, c := range sh.Calls(t) {
		if c.Tool == tool {
			out = append(out, c)
		}
	}
	return out
}

// has reports whether args holds want as a contiguous run.
func has(args []string, want ...string) bool {
	for i := 0; i+len(want) <= len(args); i++ {
		if slices.Equal(args[i:i+len(want)], want) {
			return true
		}
	}
	return false
}

// findCalls returns the calls of tool whose args hold want.
func findCalls(t *testing.T, sh shimtest.Env, tool string, want ...string) []shimtest.Call {
	t.Helper()
	var out []shimtest.Call
	for _, c := range calls(t, sh, tool) {
		if has(c.Args, want...) {
			out = append(out, c)
		}
	}
	return out
}

// bootModes names the emulator launches of avd in order: "cold", "wipe" or
// "snapshot". A launch that lost its console port to a parallel test is
// retried on another port with the same arguments; such a run counts once.
func bootModes(t *testing.T, sh shimtest.Env, avd string) []string {
	t.Helper()
	var out []string
	for _, c := range findCalls(t, sh, "emulator", "-avd", avd) {
		mode := "cold"
		switch {
		case has(c.Args, "-wipe-data"):
			mode = "wipe"
		case has(c.Args, "-snapshot", "simlock_clean_baseline"):
			mode = "snapshot"
		}
		if len(out) == 0 || out[len(out)-1] != mode {
			out = append(out, mode)
		}
	}
	return out
}

// serverRecord is adb-server.json.
type serverRecord struct {
	Pid     int      `json:"pid"`
	Port    int      `json:"port"`
	Cmdline []string `json:"cmdline"`
}

func readRecord(t *testing.T, home string) (serverRecord, bool) {
	t.Helper()
	var rec serverRecord
	path := filepath.Join(home, "adb-server.json")
	if _, err := os.Stat(path); err != nil {
		return rec, false
	}
	readJSON(t, path, &rec)
	return rec, true
}

// runCommand runs a passthrough command as the CLI would.
func runCommand(t *testing.T, cmd driver.Command) runner.Result {
	t.Helper()
	res, err := runner.OS{}.Run(t.Context(), runner.Cmd{Path: cmd.Path, Args: cmd.Args, Env: cmd.Env, Timeout: 30 * time.Second})
	if err != nil {
		t.Fatalf("%s %v: %v", cmd.Path, cmd.Args, err)
	}
	return res
}

// packages lists the third-party packages on the device at serial.
func packages(t *testing.T, d *android.Driver, serial string) []string {
	t.Helper()
	cmd, err := d.Passthrough(driver.Target{Device: driver.Device{ID: "avd", Address: serial}}, []string{"shell", "pm", "list", "packages", "-3"})
	if err != nil {
		t.Fatal(err)
	}
	res := runCommand(t, cmd)
	if res.ExitCode != 0 {
		t.Fatalf("pm list packages: exit %d: %s", res.ExitCode, res.Stderr)
	}
	var out []string
	for _, line := range strings.Fields(string(res.Stdout)) {
		out = append(out, strings.TrimPrefix(line, "package:"))
	}
	return out
}

// install installs a fake app on the device at serial, as a lease holder
// would.
func install(t *testing.T, d *android.Driver, serial, pkg string) {
	t.Helper()
	cmd, err := d.Passthrough(driver.Target{Device: driver.Device{ID: "avd", Address: serial}}, []string{"install", "/tmp/" + pkg + ".apk"})
	if err != nil {
		t.Fatal(err)
	}
	if res := runCommand(t, cmd); res.ExitCode != 0 {
		t.Fatalf("install: exit %d: %s", res.ExitCode, res.Stderr)
	}
}

var serialPattern = regexp.MustCompile(`^emulator-(\d+)$`)

// consolePort checks that address is an emulator serial on a port simlock
// may use and returns the port.
func consolePort(t *testing.T, address string) int {
	t.Helper()
	m := serialPattern.FindStringSubmatch(address)
	if m == nil {
		t.Fatalf("address %q is not an emulator serial", address)
	}
	port, _ := strconv.Atoi(m[1])
	if port%2 != 0 || port < 5586 || port > 5682 {
		t.Fatalf("console port %d is not an even port in 5586-5682", port)
	}
	return port
}

// startForeignEmulator starts an emulator the way a user would, outside
// simlock, with extra options, and returns once the shim has registered it.
func startForeignEmulator(t *testing.T, f *fixture, avdHome, avd string, port int, serverPort int, extra ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(f.tool("emulator"), append([]string{"-avd", avd, "-port", strconv.Itoa(port), "-no-window"}, extra...)...)
	cmd.Env = append(os.Environ(), append(f.shimEnv(), "ANDROID_AVD_HOME="+avdHome,
		"ANDROID_ADB_SERVER_PORT="+strconv.Itoa(serverPort))...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		cmd.Wait()
	})
	// The shim prints this line once it is registered.
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), "INFO | Started ") {
			go func() {
				for sc.Scan() {
				}
			}()
			return cmd
		}
	}
	cmd.Wait()
	t.Fatalf("foreign emulator did not start: %s", stderr.String())
	return nil
}

// freeConsolePort is a console port in simlock's range nothing listens on,
// searched from the top, where the driver looks last.
func freeConsolePort(t *testing.T) int {
	t.Helper()
	for p := 5682; p >= 5586; p -= 2 {
		if !listening(p) && !listening(p+1) {
			return p
		}
	}
	t.Fatal("no free console port")
	return 0
}

// killAndReap kills pid, a program the driver started, and waits until it
// has left the process table, as it has once the driver noticed the crash.
func killAndReap(t *testing.T, ctx context.Context, pid int, what string) {
	t.Helper()
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	for syscall.Kill(pid, 0) == nil {
		select {
		case <-ctx.Done():
			t.Fatalf("%s (pid %d) is still in the process table after SIGKILL", what, pid)
		case <-time.After(10 * time.Millisecond): // a killed process has no event to wait on
		}
	}
}

func ctxTimeout(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), d)
	t.Cleanup(cancel)
	return ctx
}
