package e2e

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/simlock/simlock/internal/testtool"

	"howett.net/plist"
)

// serviceHome is a home whose user home (HOME, where a user unit goes) is
// a temporary directory of its own, and whose PATH starts with dir when
// dir is not "".
func serviceHome(t *testing.T, shimDir string) (*home, string) {
	t.Helper()
	if runtime.GOOS != "linux" {
		t.Skip("the service tests drive systemd, Linux's service manager")
	}
	h := newHome(t)
	userHome := t.TempDir()
	h.Env = append(h.Env, "HOME="+userHome)
	if shimDir != "" {
		h.Env = append(h.Env, "PATH="+shimDir+string(os.PathListSeparator)+os.Getenv("PATH"))
	}
	return h, userHome
}

// serviceDryRun is what `simlock service install --dry-run --json` prints.
type serviceDryRun struct {
	DryRun   bool   `json:"dryRun"`
	Manager  string `json:"manager"`
	Scope    string `json:"scope"`
	Name     string `json:"name"`
	Path     string `json:"path"`
	File     string `json:"file"`
	Commands []struct {
		Args []string `json:"args"`
	} `json:"commands"`
}

// dryRun runs `simlock service install --dry-run --json` with flags.
func dryRun(t *testing.T, h *home, flags ...string) serviceDryRun {
	t.Helper()
	r := h.run(append([]string{"service", "install", "--dry-run", "--json"}, flags...)...)
	var out serviceDryRun
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &out) != nil {
		t.Fatalf("service install --dry-run %v failed or printed no JSON\n%s", flags, r)
	}
	return out
}

// `simlock service install --dry-run` prints the user unit of the home,
// the exact commands, and where the unit would go, writes nothing, and
// the unit passes systemd's own check with the real binary as ExecStart.
func TestServiceInstallDryRunPrintsAUnitSystemdAccepts(t *testing.T) {
	h, userHome := serviceHome(t, "")
	out := dryRun(t, h)
	if !out.DryRun || out.Manager != "systemd" || out.Scope != "user" || !strings.HasPrefix(out.Name, "simlock-") ||
		out.Path != filepath.Join(userHome, ".config", "systemd", "user", out.Name) {
		t.Errorf("dry run says manager %q scope %q name %q path %q, want a systemd user unit under %s", out.Manager, out.Scope, out.Name, out.Path, userHome)
	}
	var cmds [][]string
	for _, c := range out.Commands {
		cmds = append(cmds, c.Args)
	}
	want := [][]string{{"systemctl", "--user", "daemon-reload"}, {"systemctl", "--user", "enable", "--now", out.Name}}
	if !slices.EqualFunc(cmds, want, slices.Equal) {
		t.Errorf("dry run commands %q, want %q", cmds, want)
	}
	bin, err := filepath.EvalSymlinks(simlockBin)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range []string{
		`ExecStart="` + bin + `" "daemon" "run"`,
		`Environment="SIMLOCK_HOME=` + h.Dir + `"`,
		"Restart=on-failure",
		"WantedBy=default.target",
	} {
		if !strings.Contains(out.File, "\n"+line+"\n") {
			t.Errorf("the unit has no line %s:\n%s", line, out.File)
		}
	}
	if _, err := os.Stat(out.Path); !os.IsNotExist(err) {
		t.Errorf("a dry run wrote %s (stat: %v)", out.Path, err)
	}

	analyze := testtool.Find(t, "install Debian's systemd package (apt-get install -y systemd); the unit was not verified", "systemd-analyze")
	unit := filepath.Join(t.TempDir(), out.Name)
	if err := os.WriteFile(unit, []byte(out.File), 0o644); err != nil {
		t.Fatal(err)
	}
	said, err := exec.Command(analyze, "verify", unit).CombinedOutput()
	if err != nil || strings.Contains(string(said), out.Name) {
		t.Errorf("systemd-analyze verify: %v\n%s\n%s", err, said, out.File)
	}
}

// `simlock service install --dry-run --os macos` prints, on any machine,
// the LaunchAgent a Mac would get: it parses as a property list, runs the
// real binary's absolute path with `daemon run` in the home, restarts the
// daemon when it dies, and is loaded into the user's GUI session. Without
// --dry-run, --os for another system is a usage error and writes nothing.
func TestServiceInstallDryRunForMacOSPrintsALaunchAgent(t *testing.T) {
	h, userHome := serviceHome(t, "")
	out := dryRun(t, h, "--os", "macos")
	if out.Manager != "launchd" || out.Path != filepath.Join(userHome, "Library", "LaunchAgents", out.Name+".plist") {
		t.Errorf("dry run says manager %q, path %q; want a LaunchAgent in %s", out.Manager, out.Path, filepath.Join(userHome, "Library", "LaunchAgents"))
	}
	var agent struct {
		Label                string            `plist:"Label"`
		ProgramArguments     []string          `plist:"ProgramArguments"`
		EnvironmentVariables map[string]string `plist:"EnvironmentVariables"`
		RunAtLoad            bool              `plist:"RunAtLoad"`
		KeepAlive            map[string]bool   `plist:"KeepAlive"`
	}
	if _, err := plist.Unmarshal([]byte(out.File), &agent); err != nil {
		t.Fatalf("the LaunchAgent does not parse as a property list: %v\n%s", err, out.File)
	}
	bin, err := filepath.EvalSymlinks(simlockBin)
	if err != nil {
		t.Fatal(err)
	}
	if agent.Label != out.Name || !slices.Equal(agent.ProgramArguments, []string{bin, "daemon", "run"}) ||
		agent.EnvironmentVariables["SIMLOCK_HOME"] != h.Dir || !agent.RunAtLoad {
		t.Errorf("the LaunchAgent is %+v; want label %s, arguments [%s daemon run], SIMLOCK_HOME %s and RunAtLoad", agent, out.Name, bin, h.Dir)
	}
	if kept, ok := agent.KeepAlive["SuccessfulExit"]; !ok || kept {
		t.Errorf("KeepAlive = %v, want the daemon restarted when it exits unsuccessfully", agent.KeepAlive)
	}
	if len(out.Commands) == 0 || !slices.Contains(out.Commands[len(out.Commands)-1].Args, "bootstrap") {
		t.Errorf("dry run commands %+v, want launchctl bootstrap last", out.Commands)
	}

	r := h.run("service", "install", "--os", "macos")
	if r.code != 2 || !strings.Contains(r.stderr, "--dry-run") {
		t.Errorf("install --os macos on Linux without --dry-run: want exit 2 saying to add --dry-run\n%s", r)
	}
	if _, err := os.Stat(filepath.Join(userHome, "Library")); !os.IsNotExist(err) {
		t.Errorf("a refused install wrote into %s (stat: %v)", userHome, err)
	}
}

// fakeSystemctl is a systemctl for one home that does what systemd would
// do with its unit: `enable --now` and `start` run the daemon (detached,
// as the manager's child would be) and record its pid; `disable --now`
// stops it. Every call is appended to calls.log. With failStart, `start`
// fails as systemctl does without a user bus.
func fakeSystemctl(t *testing.T, failStart bool) string {
	t.Helper()
	dir := t.TempDir()
	fail := ""
	if failStart {
		fail = `if [ "$2" = start ]; then echo "Failed to connect to bus: No medium found" >&2; exit 1; fi`
	}
	script := `#!/bin/sh
dir=$(dirname "$0")
echo "$*" >> "$dir/calls.log"
` + fail + `
case "$2 $3" in
"enable --now"|"start "*)
	setsid ` + strconv.Quote(simlockBin) + ` daemon run </dev/null >>"$dir/daemon.out" 2>&1 &
	echo $! > "$dir/started.pid" ;;
"disable --now")
	` + strconv.Quote(simlockBin) + ` daemon stop >/dev/null 2>&1 ;;
esac
exit 0
`
	if err := os.WriteFile(filepath.Join(dir, "systemctl"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

func shimCalls(t *testing.T, dir string) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "calls.log"))
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSpace(string(b)), "\n")
}

// awaitServiceDaemon waits until the daemon the fake manager started at
// install holds the home (the manager does not wait for it).
func awaitServiceDaemon(t *testing.T, h *home, shim string) {
	t.Helper()
	for deadline := time.Now().Add(waitBound); lockPID(h.Dir) == 0 || lockPID(h.Dir) != startedPID(t, shim); {
		if time.Now().After(deadline) {
			t.Fatalf("the daemon the service manager started (pid %d) does not hold the home (lock: pid %d)", startedPID(t, shim), lockPID(h.Dir))
		}
		time.Sleep(pollEvery)
	}
}

func startedPID(t *testing.T, dir string) int {
	t.Helper()
	b, _ := os.ReadFile(filepath.Join(dir, "started.pid"))
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	return pid
}

// While a service is installed for a home, a command that finds no daemon
// asks the service manager to start the service and uses the daemon it
// started: it never starts one of its own beside it. Uninstall stops it
// and removes the unit.
func TestACommandStartsTheInstalledServiceNotADaemonOfItsOwn(t *testing.T) {
	shim := fakeSystemctl(t, false)
	h, userHome := serviceHome(t, shim)
	r := h.run("service", "install", "--json")
	if r.code != 0 {
		t.Fatalf("service install failed\n%s", r)
	}
	var out struct{ Name, Path string }
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil {
		t.Fatalf("%v\n%s", err, r)
	}
	if filepath.Dir(out.Path) != filepath.Join(userHome, ".config", "systemd", "user") {
		t.Errorf("unit path %s, want in %s/.config/systemd/user", out.Path, userHome)
	}
	if got, want := shimCalls(t, shim), []string{"--user daemon-reload", "--user enable --now " + out.Name}; !slices.Equal(got, want) {
		t.Errorf("install ran systemctl %q, want %q", got, want)
	}
	awaitServiceDaemon(t, h, shim)
	// The daemon stops cleanly, as systemd would leave it (on-failure).
	if r := h.run("daemon", "stop"); r.code != 0 {
		t.Fatalf("daemon stop\n%s", r)
	}
	if !waitLockFree(h.Dir, waitBound) {
		t.Fatal("the service's daemon did not stop")
	}

	r = h.run("status", "--json")
	if r.code != 0 {
		t.Fatalf("status with the service installed and stopped\n%s", r)
	}
	calls := shimCalls(t, shim)
	if last := calls[len(calls)-1]; last != "--user start "+out.Name {
		t.Errorf("status ran systemctl %q last, want --user start %s", last, out.Name)
	}
	if pid, started := lockPID(h.Dir), startedPID(t, shim); pid == 0 || pid != started {
		t.Errorf("the home's daemon is pid %d, want %d, the one the service manager started", pid, started)
	}
	if _, err := os.Stat(h.path("daemon.out")); !os.IsNotExist(err) {
		t.Errorf("status started a daemon on demand (daemon.out is there: %v)", err)
	}

	r = h.run("service", "uninstall", "--json")
	if r.code != 0 {
		t.Fatalf("service uninstall\n%s", r)
	}
	calls = shimCalls(t, shim)
	if got, want := calls[len(calls)-2:], []string{"--user disable --now " + out.Name, "--user daemon-reload"}; !slices.Equal(got, want) {
		t.Errorf("uninstall ran systemctl %q, want %q", got, want)
	}
	if _, err := os.Stat(out.Path); !os.IsNotExist(err) {
		t.Errorf("uninstall left %s (stat: %v)", out.Path, err)
	}
	if !waitLockFree(h.Dir, waitBound) {
		t.Error("uninstall left the service's daemon running")
	}
}

// When the manager cannot start the installed service, the command fails
// at once with SERVICE_MANAGER_FAILED, saying how to fix it, and no daemon
// runs for the home: a second daemon beside the service's would fight it
// for the home.
func TestACommandThatCannotStartTheServiceSaysWhyAndStartsNoDaemon(t *testing.T) {
	shim := fakeSystemctl(t, true)
	h, _ := serviceHome(t, shim)
	if r := h.run("service", "install", "--json"); r.code != 0 {
		t.Fatalf("service install failed\n%s", r)
	}
	awaitServiceDaemon(t, h, shim)
	if r := h.run("daemon", "stop"); r.code != 0 {
		t.Fatalf("daemon stop\n%s", r)
	}
	if !waitLockFree(h.Dir, waitBound) {
		t.Fatal("the service's daemon did not stop")
	}
	began := time.Now()
	r := h.run("status", "--json")
	e := expectFailure(t, r, 1, "SERVICE_MANAGER_FAILED")
	if !strings.Contains(message(e), "loginctl enable-linger") || !strings.Contains(message(e), "is installed") {
		t.Errorf("the error does not say the service is installed and how to reach the user manager: %s", message(e))
	}
	if d := time.Since(began); d > commandBound/2 {
		t.Errorf("the refusal took %s", d)
	}
	if lockHeld(h.Dir) {
		t.Errorf("a daemon runs for the home (pid %d) though its service could not be started", lockPID(h.Dir))
	}
}

// With a real user systemd (a login session, or lingering), install runs
// the daemon under it, status says so, and uninstall stops it and removes
// the unit. A machine without one skips: the unit's validation above
// stands for it there.
func TestServiceInstallAndUninstallUnderARealUserSystemd(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("systemd is Linux's service manager")
	}
	if out, err := exec.Command("systemctl", "--user", "show-environment").CombinedOutput(); err != nil {
		t.Skipf("no user systemd instance answers here (systemctl --user: %v: %s)", err, strings.TrimSpace(string(out)))
	}
	h := newHome(t) // the real HOME: a user unit goes where systemd reads it
	r := h.run("service", "install", "--json")
	if r.code != 0 {
		t.Fatalf("service install\n%s", r)
	}
	var out struct{ Name, Path string }
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil {
		t.Fatalf("%v\n%s", err, r)
	}
	t.Cleanup(func() {
		_ = exec.Command("systemctl", "--user", "disable", "--now", out.Name).Run()
		_ = os.Remove(out.Path)
	})
	if r := h.run("status", "--json"); r.code != 0 {
		t.Fatalf("status under the service\n%s", r)
	}
	r = h.run("service", "status", "--json")
	var st struct{ Installed, Loaded, Running bool }
	if err := json.Unmarshal([]byte(r.stdout), &st); err != nil || !st.Installed || !st.Loaded || !st.Running {
		t.Errorf("service status: %+v (%v)\n%s", st, err, r)
	}
	if r := h.run("service", "uninstall", "--json"); r.code != 0 {
		t.Fatalf("service uninstall\n%s", r)
	}
	if !waitLockFree(h.Dir, waitBound) {
		t.Error("uninstall left the daemon running")
	}
	if _, err := os.Stat(out.Path); !os.IsNotExist(err) {
		t.Errorf("uninstall left %s", out.Path)
	}
}
