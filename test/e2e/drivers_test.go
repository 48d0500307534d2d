package e2e

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/simlock/simlock/internal/bintest"
	"github.com/simlock/simlock/internal/shimtest"
)

// withShims points h's commands (and the daemon they start) at the fake
// platform tools, with the given drivers enabled.
//
// With the Android driver, its private adb server gets a port from the OS
// (h.adbPort), not the default 5038, which another program on the host may
// hold: the suite does not depend on what else runs.
func (h *home) withShims(e shimtest.Env, drivers string) {
	if strings.Contains(drivers, "android") {
		h.adbPort = freePort(h.T)
		if r := h.run("config", "set", "drivers.android.adbServerPort", h.adbPort); r.code != 0 {
			h.T.Fatalf("config set drivers.android.adbServerPort %s: %s", h.adbPort, r)
		}
	}
	var env []string
	for _, kv := range e.Environ(h.Env) {
		if !strings.HasPrefix(kv, "SIMLOCK_DRIVERS=") {
			env = append(env, kv)
		}
	}
	h.Env = append(env, "SIMLOCK_DRIVERS="+drivers)
}

// shim runs a fake tool directly, as a user's own script would, outside
// simlock.
func shim(t *testing.T, e shimtest.Env, tool string, args ...string) string {
	t.Helper()
	cmd := exec.Command(filepath.Join(e.Bin, tool), args...)
	cmd.Env = e.Environ(nil)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %v: %v\n%s", tool, args, err, out)
	}
	return strings.TrimSpace(string(out))
}

func simctlCalls(t *testing.T, e shimtest.Env) []shimtest.Call {
	var out []shimtest.Call
	for _, c := range e.Calls(t) {
		if c.Tool == "xcrun" && len(c.Args) > 0 && c.Args[0] == "simctl" {
			out = append(out, c)
		}
	}
	return out
}

func subcommand(c shimtest.Call) string {
	args := c.Args[1:]
	if len(args) >= 2 && args[0] == "--set" {
		args = args[2:]
	}
	if len(args) == 0 {
		return ""
	}
	return args[0]
}

// The iOS driver on the shims: create, boot, bootstatus, all scoped to the
// root; release cleans with shutdown + erase; a simulator outside the root
// is never touched by release, doctor --fix, or passthrough refusals.
func TestIOSDriverLeasesThroughSimctl(t *testing.T) {
	t.Parallel()
	e := shimtest.Build(t)
	h := newHome(t)
	h.withShims(e, "ios")
	root := h.path("devices/ios")

	theirs := shim(t, e, "xcrun", "simctl", "create", "My iPhone", "com.apple.CoreSimulator.SimDeviceType.iPhone-16", "com.apple.CoreSimulator.SimRuntime.iOS-18-6")
	shim(t, e, "xcrun", "simctl", "boot", theirs)

	f := h.follow()
	r := h.run("lease", "--platform", "ios", "--device", "iPhone 16", "--detach", "--agent-id", "a")
	if r.code != 0 {
		t.Fatalf("lease\n%s", r)
	}
	g := parseGrant(t, r.stdout)
	if g.Device.Spec.Model != "iPhone 16" || g.Device.DriverDeviceID == "" || g.Device.Address != g.Device.DriverDeviceID {
		t.Fatalf("grant device = %+v, want an iPhone 16 addressed by its UDID", g.Device)
	}
	if !strings.Contains(shim(t, e, "xcrun", "simctl", "--set", root, "list", "devices"), g.Device.DriverDeviceID) {
		t.Errorf("the granted UDID is not a simulator in simlock's root")
	}
	var subs []string
	for _, c := range simctlCalls(t, e) {
		if slices.Contains(c.Args, theirs) || c.Args[1] != "--set" {
			continue // the test's own calls
		}
		if c.Args[2] != root {
			t.Errorf("simctl call with --set %s, want %s: %q", c.Args[2], root, c.Args)
		}
		subs = append(subs, subcommand(c))
	}
	if !containsInOrder(subs, []string{"create", "boot", "bootstatus"}) {
		t.Errorf("simctl subcommands = %q, want create, boot, bootstatus", subs)
	}

	if r := h.run("release", g.Lease.ID); r.code != 0 {
		t.Fatalf("release\n%s", r)
	}
	f.find("device.reclaimed", isEvent("device.reclaimed", "deviceId", g.Device.ID))
	subs = nil
	for _, c := range simctlCalls(t, e) {
		if slices.Contains(c.Args, g.Device.DriverDeviceID) {
			subs = append(subs, subcommand(c))
		}
	}
	if !containsInOrder(subs, []string{"shutdown", "erase"}) {
		t.Errorf("calls naming the device after release = %q, want shutdown then erase", subs)
	}

	if r := h.run("doctor", "--fix"); r.code != 0 {
		t.Fatalf("doctor --fix\n%s", r)
	}
	r = h.run("simctl", "erase", "all")
	expectFailure(t, r, 2, "USAGE")
	for _, c := range simctlCalls(t, e) {
		if subcommand(c) == "erase" && slices.Contains(c.Args, "all") {
			t.Errorf("simlock simctl erase all ran: %q", c.Args)
		}
		if slices.Contains(c.Args, theirs) && c.Args[1] == "--set" {
			t.Errorf("simlock named the simulator outside its root: %q", c.Args)
		}
	}
	if list := shim(t, e, "xcrun", "simctl", "list", "devices"); !strings.Contains(list, theirs+") (Booted)") {
		t.Errorf("the simulator outside the root changed:\n%s", list)
	}
	r = h.run("lease", "--platform", "ios", "--detach", "--export-env", "--agent-id", "env")
	if want := "export SIMLOCK_IOS_DEVICE_SET='" + root + "'\n"; r.code != 0 || r.stdout != want {
		t.Errorf("--export-env printed %q, want %q\n%s", r.stdout, want, r)
	}
	r = h.run("simctl", "list", "devices")
	if r.code != 0 || !strings.Contains(r.stdout, g.Device.DriverDeviceID) || strings.Contains(r.stdout, theirs) {
		t.Errorf("simlock simctl list devices should show simlock's root only\n%s", r)
	}
}

// The catalog reflects the tools, classes and ranges pick as the reference
// says, and unknown models are refused.
func TestIOSCatalogClassesAndRanges(t *testing.T) {
	t.Parallel()
	e := shimtest.Build(t)
	h := newHome(t, "capacity.strategy", "fixed", "capacity.config.maxRunning", "4")
	h.withShims(e, "ios")

	r := h.run("catalog", "--json", "--platform", "ios")
	var cat struct {
		Platforms []struct {
			Models         []string            `json:"models"`
			Runtimes       []string            `json:"runtimes"`
			DefaultRuntime string              `json:"defaultRuntime"`
			ModelRuntimes  map[string][]string `json:"modelRuntimes"`
			ModelClasses   map[string]string   `json:"modelClasses"`
		} `json:"platforms"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &cat); err != nil || len(cat.Platforms) != 1 {
		t.Fatalf("catalog --json: %v\n%s", err, r)
	}
	p := cat.Platforms[0]
	if !slices.Contains(p.Models, "iPhone 16") || !slices.Contains(p.Runtimes, "18.6") || p.DefaultRuntime != "26.1" ||
		!slices.Equal(p.ModelRuntimes["iPhone 17"], []string{"26.1"}) || p.ModelClasses["iPad Pro 11-inch (M5)"] != "tablet" {
		t.Errorf("catalog = %+v", p)
	}

	g := h.leaseDetached("tab", "ios", "--class", "tablet")
	if g.Device.Spec.Model != "iPad Pro 11-inch (M5)" {
		t.Errorf("--class tablet got %s, want the first of the preference list", g.Device.Spec.Model)
	}
	g = h.leaseDetached("range", "ios", "--os", ">=18 <26")
	if g.Device.Spec.Model != "iPhone 16" || g.Device.Spec.OSVersion != "18.6" {
		t.Errorf("--os '>=18 <26' got %+v, want iPhone 16 on 18.6 (iPhone 17 needs 26)", g.Device.Spec)
	}
	r = h.run("lease", "--platform", "ios", "--device", "iPhone 99", "--detach", "--agent-id", "x")
	expectFailure(t, r, 12, "UNKNOWN_MODEL")
	r = h.run("lease", "--platform", "ios", "--device", "iPhone 16", "--class", "phone", "--detach", "--agent-id", "y")
	expectFailure(t, r, 2, "BAD_REQUEST")
}

// A device root that is not simlock's disables its platform only.
func TestUnownedRootDisablesOnlyItsPlatform(t *testing.T) {
	t.Parallel()
	e := shimtest.Build(t)
	h := newHome(t)
	h.withShims(e, "ios,android")
	if err := os.MkdirAll(h.path("devices/ios/SOMEONE-ELSES-SIM"), 0o700); err != nil {
		t.Fatal(err)
	}
	r := h.run("status", "--json")
	var st struct {
		Drivers []struct {
			Platform     string `json:"platform"`
			Enabled      bool   `json:"enabled"`
			RootRejected *struct {
				Reason string `json:"reason"`
			} `json:"rootRejected"`
		} `json:"drivers"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &st); err != nil {
		t.Fatalf("status --json: %v\n%s", err, r)
	}
	for _, d := range st.Drivers {
		switch d.Platform {
		case "ios":
			if d.Enabled || d.RootRejected == nil || d.RootRejected.Reason != "non-empty-unowned-root" {
				t.Errorf("ios driver status = %+v, want disabled with non-empty-unowned-root", d)
			}
		case "android":
			if !d.Enabled {
				t.Errorf("android should still be served: %+v", d)
			}
		}
	}
	r = h.run("doctor")
	if r.code != 0 || !strings.Contains(r.stdout, `"reason":"non-empty-unowned-root"`) {
		t.Errorf("doctor does not report the refused root\n%s", r)
	}
	r = h.run("lease", "--platform", "ios", "--detach", "--agent-id", "i")
	noDriver := expectFailure(t, r, 12, "NO_DRIVER")
	// The next step, in the words of a running daemon: a variable set for
	// this command does not change it.
	if msg, _ := noDriver["message"].(string); !strings.Contains(msg, "not one already running") || !strings.Contains(msg, "simlock daemon stop") {
		t.Errorf("NO_DRIVER message %q does not say how to get a driver into the running daemon", msg)
	}
	// And why this daemon has none: the driver's own reason, not only
	// "simlock status says why".
	if reason, _ := noDriver["reason"].(string); !strings.Contains(reason, "non-empty-unowned-root") || !strings.Contains(message(noDriver), reason) {
		t.Errorf("NO_DRIVER %v does not carry the refused root as its reason", noDriver)
	}
	h.leaseDetached("a", "android")
	if _, err := os.Stat(h.path("devices/ios/.simlock-owned.json")); err == nil {
		t.Error("simlock marked a root that was not its own")
	}
}

// containsInOrder reports whether want appears in got in order, not
// necessarily adjacent.
func containsInOrder(got, want []string) bool {
	i := 0
	for _, g := range got {
		if i < len(want) && g == want[i] {
			i++
		}
	}
	return i == len(want)
}

// freePort finds a TCP port nothing listens on, for a private adb server.
func freePort(t *testing.T) string {
	t.Helper()
	port, err := bintest.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	return strconv.Itoa(port)
}

// The Android driver on a shim SDK: avdmanager creates simlock_<...> in the
// root, the emulator starts on an even console port in 5586-5682, readiness
// is read through simlock's own adb server on its configured port, and the
// grant's address is emulator-<port>.
func TestAndroidDriverLeasesThroughTheSDK(t *testing.T) {
	t.Parallel()
	e := shimtest.Build(t)
	h := newHome(t, "capacity.strategy", "fixed", "capacity.config.maxRunning", "2")
	h.withShims(e, "android")
	root := h.path("devices/android")
	f := h.follow()

	g := h.leaseDetached("a", "android")
	var avd string
	port := -1
	sawReadiness := false
	for _, c := range e.Calls(t) {
		switch {
		case c.Tool == "avdmanager" && slices.Contains(c.Args, "create"):
			i := slices.Index(c.Args, "-n")
			if i < 0 || i+1 >= len(c.Args) || !strings.HasPrefix(c.Args[i+1], "simlock_") {
				t.Errorf("avdmanager create without a simlock_ name: %q", c.Args)
				continue
			}
			avd = c.Args[i+1]
			if c.Env["ANDROID_AVD_HOME"] != root {
				t.Errorf("avdmanager ran with ANDROID_AVD_HOME=%q, want %q", c.Env["ANDROID_AVD_HOME"], root)
			}
		case c.Tool == "emulator" && slices.Contains(c.Args, "-avd"):
			if c.Args[slices.Index(c.Args, "-avd")+1] != avd {
				t.Errorf("emulator started for %q, want %q", c.Args, avd)
			}
			if i := slices.Index(c.Args, "-port"); i >= 0 && i+1 < len(c.Args) {
				port, _ = strconv.Atoi(c.Args[i+1])
			}
		case c.Tool == "adb" && slices.Contains(c.Args, "sys.boot_completed"):
			sawReadiness = true
			if i := slices.Index(c.Args, "-P"); i < 0 || c.Args[i+1] != h.adbPort {
				t.Errorf("readiness asked through %q, want adb -P %s", c.Args, h.adbPort)
			}
		}
	}
	if avd == "" || port < 5586 || port > 5682 || port%2 != 0 || !sawReadiness {
		t.Fatalf("avd %q, console port %d, readiness asked %v", avd, port, sawReadiness)
	}
	if g.Device.Address != "emulator-"+strconv.Itoa(port) || g.Device.DriverDeviceID != avd {
		t.Errorf("grant device = %+v, want %s at emulator-%d", g.Device, avd, port)
	}
	if g.Environment["ANDROID_ADB_SERVER_PORT"] != h.adbPort {
		t.Errorf("grant environment = %v, want ANDROID_ADB_SERVER_PORT=%s", g.Environment, h.adbPort)
	}
	if _, err := os.Stat(filepath.Join(root, avd+".ini")); err != nil {
		t.Errorf("the AVD is not in simlock's root: %v", err)
	}

	// A second daemon for the same home is refused before it touches the
	// first one's adb server, even when configured for another port (which
	// would make it replace that server): the next lease still boots and
	// reads readiness through it.
	if r := h.run("config", "set", "drivers.android.adbServerPort", freePort(t)); r.code != 0 {
		t.Fatalf("config set\n%s", r)
	}
	if r := h.run("daemon", "run"); r.code == 0 || !strings.Contains(r.stderr, "already running") {
		t.Errorf("a second daemon run should be refused\n%s", r)
	}
	h.leaseDetached("b", "android")

	before := len(e.Calls(t))
	r := h.run("adb", "kill-server")
	expectFailure(t, r, 2, "USAGE")
	for _, c := range e.Calls(t)[before:] {
		if c.Tool == "adb" {
			t.Errorf("simlock adb kill-server ran adb: %q", c.Args)
		}
	}

	if r := h.run("release", g.Lease.ID); r.code != 0 {
		t.Fatalf("release\n%s", r)
	}
	f.find("device.reclaimed", isEvent("device.reclaimed", "deviceId", g.Device.ID))
}

// lease.identity.ios fresh: a lease end deletes the simulator (shut down,
// then simctl delete) instead of erasing it, and the next lease gets a new
// one, so no two leases see the same identity.
func TestAFreshIdentityLeaseEndDeletesTheSimulatorAndTheNextLeaseGetsANewOne(t *testing.T) {
	t.Parallel()
	e := shimtest.Build(t)
	h := newHome(t, "lease.identity.ios", "fresh")
	h.withShims(e, "ios")
	root := h.path("devices/ios")
	f := h.follow()
	first := h.leaseDetached("a", "ios", "--device", "iPhone 16")
	if r := h.run("release", first.Lease.ID); r.code != 0 {
		t.Fatalf("release\n%s", r)
	}
	f.find("device.deleted of the first device, as fresh identity", isEvent("device.deleted", "deviceId", first.Device.ID, "initiator", "fresh-identity"))
	var subs []string
	for _, c := range simctlCalls(t, e) {
		if slices.Contains(c.Args, first.Device.DriverDeviceID) {
			subs = append(subs, subcommand(c))
		}
	}
	if !containsInOrder(subs, []string{"shutdown", "delete"}) || slices.Contains(subs, "erase") {
		t.Errorf("calls naming the device after release = %q, want shutdown then delete, and no erase", subs)
	}
	if strings.Contains(shim(t, e, "xcrun", "simctl", "--set", root, "list", "devices"), first.Device.DriverDeviceID) {
		t.Error("the released simulator is still in simlock's root")
	}
	second := h.leaseDetached("b", "ios", "--device", "iPhone 16")
	if second.Device.ID == first.Device.ID || second.Device.DriverDeviceID == first.Device.DriverDeviceID {
		t.Errorf("the second lease got device %s (%s) again, want a new one", second.Device.ID, second.Device.DriverDeviceID)
	}
}
