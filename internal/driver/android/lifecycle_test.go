package android_test

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/driver"
	"github.com/simlock/simlock/internal/driver/android"
	"github.com/simlock/simlock/internal/ownership"
)

var avdName = regexp.MustCompile(`^simlock_[0-9a-f]{12}$`)

// TestFullCycle provisions, boots, reclaims and destroys a device and
// checks every tool call on the way.
func TestFullCycle(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	d := newDriver(t, f.opts)
	ctx := t.Context()
	port := strconv.Itoa(f.port)

	if d.Name() != "android" || d.Platform() != contract.PlatformAndroid || d.Root() != f.root {
		t.Errorf("Name, Platform, Root = %q, %q, %q", d.Name(), d.Platform(), d.Root())
	}
	if env := d.LeaseEnvironment(); len(env) != 1 || env["ANDROID_ADB_SERVER_PORT"] != port {
		t.Errorf("LeaseEnvironment = %v, want ANDROID_ADB_SERVER_PORT=%s", env, port)
	}

	spec, err := d.ResolveSpec(ctx, driver.Request{Platform: contract.PlatformAndroid, Model: "pixel_8"})
	if err != nil {
		t.Fatalf("ResolveSpec: %v", err)
	}
	if want := (contract.DeviceSpec{Platform: contract.PlatformAndroid, Model: "Pixel 8", OSVersion: "36", ImageTag: "google_apis"}); spec != want {
		t.Fatalf("ResolveSpec = %+v, want %+v", spec, want)
	}

	dev, err := d.Provision(ctx, spec)
	if err != nil {
		t.Fatalf("Provision: %v", err)
	}
	if !avdName.MatchString(dev.ID) || dev.Address != "" {
		t.Fatalf("Provision = %+v, want an unbooted simlock_<12 hex> AVD", dev)
	}
	for _, p := range []string{dev.ID + ".ini", filepath.Join(dev.ID+".avd", "config.ini")} {
		if _, err := os.Stat(filepath.Join(f.root, p)); err != nil {
			t.Errorf("the AVD is not in the root: %v", err)
		}
	}
	create := findCalls(t, f.shims, "avdmanager", "create", "avd")
	if len(create) != 1 {
		t.Fatalf("avdmanager create calls = %d, want 1", len(create))
	}
	wantCreate := []string{"create", "avd", "-n", dev.ID, "-k", "system-images;android-36;google_apis;" + hostABI(), "-d", "pixel_8"}
	if !slices.Equal(create[0].Args, wantCreate) || create[0].Env["ANDROID_AVD_HOME"] != f.root {
		t.Errorf("avdmanager call = %v with ANDROID_AVD_HOME=%q, want %v with %q", create[0].Args, create[0].Env["ANDROID_AVD_HOME"], wantCreate, f.root)
	}

	var steps []string
	var stepsMu sync.Mutex
	ready, err := d.MakeReady(driver.WithBootSteps(ctx, func(step string) {
		stepsMu.Lock()
		defer stepsMu.Unlock()
		steps = append(steps, step)
	}), dev)
	if err != nil {
		t.Fatalf("MakeReady: %v", err)
	}
	stepsMu.Lock()
	if !slices.Contains(steps, "waiting for sys.boot_completed") {
		t.Errorf("the boot's steps were %q, want the wait for sys.boot_completed among them", steps)
	}
	for i := 1; i < len(steps); i++ {
		if steps[i] == steps[i-1] {
			t.Errorf("the boot told step %q twice in a row: %q", steps[i], steps)
		}
	}
	stepsMu.Unlock()
	console := consolePort(t, ready.Address)
	if ready.ID != dev.ID {
		t.Errorf("MakeReady changed the id to %q", ready.ID)
	}
	// The first boot is cold, captures the clean snapshot and boots again
	// from it.
	if modes := bootModes(t, f.shims, dev.ID); !slices.Equal(modes, []string{"cold", "snapshot"}) {
		t.Fatalf("boots = %v, want a cold boot, then one from simlock_clean_baseline", modes)
	}
	boots := findCalls(t, f.shims, "emulator", "-avd", dev.ID)
	if !has(boots[0].Args, "-no-snapshot-load") {
		t.Errorf("the first boot %v does not skip snapshots", boots[0].Args)
	}
	last := boots[len(boots)-1]
	if !has(last.Args, "-port", strconv.Itoa(console)) || !has(last.Args, "-no-window") ||
		last.Env["ANDROID_AVD_HOME"] != f.root || last.Env["ANDROID_ADB_SERVER_PORT"] != port {
		t.Errorf("emulator launch = %v env %v, want -port %d -no-window with the root and the private server", last.Args, last.Env, console)
	}
	if len(findCalls(t, f.shims, "adb", "emu", "avd", "snapshot", "save", "simlock_clean_baseline")) != 1 {
		t.Error("the clean snapshot was not saved")
	}
	for _, probe := range [][]string{
		{"-P", port, "-s", ready.Address, "shell", "getprop", "sys.boot_completed"},
		{"-P", port, "-s", ready.Address, "shell", "getprop", "init.svc.bootanim"},
		{"-P", port, "-s", ready.Address, "emu", "avd", "path"},
	} {
		if len(findCalls(t, f.shims, "adb", probe...)) == 0 {
			t.Errorf("no readiness call %v", probe)
		}
	}
	ems := liveEmulators(t, f.shims)
	if len(ems) != 1 || ems[0].Port != console || ems[0].Avd != dev.ID {
		t.Fatalf("running emulators = %+v, want %s on %d", ems, dev.ID, console)
	}

	r, err := d.ListManaged(ctx)
	if err != nil {
		t.Fatalf("ListManaged: %v", err)
	}
	if len(r.Devices) != 1 || r.Devices[0].ID != dev.ID || r.Devices[0].RunState != driver.Running || r.Devices[0].Address != ready.Address {
		t.Errorf("ListManaged = %+v, want %s running at %s", r.Devices, dev.ID, ready.Address)
	}

	// A lease installs an app; the reclaim must take it away again.
	install(t, d, ready.Address, "com.example.lease")
	if got := packages(t, d, ready.Address); !slices.Equal(got, []string{"com.example.lease"}) {
		t.Fatalf("packages before reclaim = %v", got)
	}
	res, err := d.Reclaim(ctx, ready)
	if err != nil {
		t.Fatalf("Reclaim: %v", err)
	}
	if res != (driver.ReclaimResult{State: contract.DeviceReady, Strategy: "snapshot"}) {
		t.Errorf("Reclaim = %+v, want ready by snapshot", res)
	}
	if len(findCalls(t, f.shims, "adb", "-s", ready.Address, "emu", "avd", "snapshot", "load", "simlock_clean_baseline")) != 1 {
		t.Error("Reclaim did not load the clean snapshot")
	}
	if got := packages(t, d, ready.Address); len(got) != 0 {
		t.Errorf("packages after reclaim = %v, want none", got)
	}
	if ems := liveEmulators(t, f.shims); len(ems) != 1 || ems[0].Port != console {
		t.Errorf("after reclaim the emulators are %+v, want the same one still running", ems)
	}
	launched := len(boots)
	again, err := d.MakeReady(ctx, ready)
	if err != nil || again.Address != ready.Address {
		t.Errorf("MakeReady of a running device = %+v, %v; want it at %s", again, err, ready.Address)
	}
	if n := len(findCalls(t, f.shims, "emulator", "-avd", dev.ID)); n != launched {
		t.Errorf("MakeReady of a running device launched an emulator (%d launches, was %d)", n, launched)
	}

	if err := d.Destroy(ctx, ready); err != nil {
		t.Fatalf("Destroy: %v", err)
	}
	if len(findCalls(t, f.shims, "adb", "-s", ready.Address, "emu", "kill")) == 0 {
		t.Error("Destroy did not ask the emulator to stop")
	}
	del := findCalls(t, f.shims, "avdmanager", "delete", "avd", "-n", dev.ID)
	if len(del) != 1 || del[0].Env["ANDROID_AVD_HOME"] != f.root {
		t.Errorf("avdmanager delete calls = %v, want one with ANDROID_AVD_HOME=%s", del, f.root)
	}
	for _, p := range []string{dev.ID + ".ini", dev.ID + ".avd"} {
		if _, err := os.Lstat(filepath.Join(f.root, p)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s is still in the root", p)
		}
	}
	if ems := liveEmulators(t, f.shims); len(ems) != 0 {
		t.Errorf("emulators still running after Destroy: %+v", ems)
	}
	if r, err := d.ListManaged(ctx); err != nil || len(r.Devices) != 0 {
		t.Errorf("ListManaged after Destroy = %+v, %v", r.Devices, err)
	}
	if err := d.Destroy(ctx, ready); err != nil {
		t.Errorf("Destroy of a destroyed device: %v", err)
	}

	for _, c := range calls(t, f.shims, "adb") {
		if len(c.Args) < 2 || c.Args[0] != "-P" || c.Args[1] != port {
			t.Errorf("adb call without -P %s first: %v", port, c.Args)
		}
	}
}

// TestReclaimPaths covers the slower ways back to a clean device: a failed
// snapshot load wipes, a full clean wipes, a stopped device boots from its
// snapshot.
func TestReclaimPaths(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	d := newDriver(t, f.opts)
	ctx := t.Context()
	dev := provision(t, ctx, d, driver.Request{Model: "Pixel 9", OSVersion: "35"})
	t.Cleanup(func() { d.Destroy(t.Context(), dev) })
	// launches lists the emulator launches since the last call.
	seen := 0
	launches := func() [][]string {
		var out [][]string
		for _, c := range findCalls(t, f.shims, "emulator", "-avd", dev.ID)[seen:] {
			out = append(out, c.Args)
		}
		seen += len(out)
		return out
	}
	// mode collapses launches into boot modes, as bootModes does.
	mode := func(l [][]string) []string {
		var out []string
		for _, args := range l {
			m := "cold"
			switch {
			case has(args, "-wipe-data"):
				m = "wipe"
			case has(args, "-snapshot", "simlock_clean_baseline"):
				m = "snapshot"
			}
			if len(out) == 0 || out[len(out)-1] != m {
				out = append(out, m)
			}
		}
		return out
	}
	ready, err := d.MakeReady(ctx, dev)
	if err != nil {
		t.Fatal(err)
	}
	launches()

	// The snapshot fails to load: the device is shut down and wiped at
	// its next boot.
	install(t, d, ready.Address, "com.example.one")
	f.shims.FailNext(t, "adb", "emu-avd-snapshot-load", 0, "KO: could not load snapshot\n")
	res, err := d.Reclaim(ctx, ready)
	if err != nil {
		t.Fatalf("Reclaim: %v", err)
	}
	if res != (driver.ReclaimResult{State: contract.DeviceShutdown, Strategy: "wipe"}) {
		t.Fatalf("Reclaim after a failed load = %+v, want shutdown by wipe", res)
	}
	if ems := liveEmulators(t, f.shims); len(ems) != 0 {
		t.Fatalf("the emulator still runs after a wipe reclaim: %+v", ems)
	}
	if r, err := d.ListManaged(ctx); err != nil || len(r.Devices) != 1 || r.Devices[0].RunState != driver.Stopped {
		t.Errorf("ListManaged = %+v, %v; want the device stopped", r.Devices, err)
	}
	ready, err = d.MakeReady(ctx, ready)
	if err != nil {
		t.Fatalf("MakeReady after a wipe reclaim: %v", err)
	}
	if l := mode(launches()); !slices.Equal(l, []string{"wipe", "snapshot"}) {
		t.Errorf("boots after a wipe reclaim = %v, want a wipe, then a boot from the new snapshot", l)
	}
	if got := packages(t, d, ready.Address); len(got) != 0 {
		t.Errorf("packages after the wipe = %v", got)
	}

	// A full clean always wipes.
	install(t, d, ready.Address, "com.example.two")
	res, err = d.ReclaimFull(ctx, ready)
	if err != nil || res != (driver.ReclaimResult{State: contract.DeviceShutdown, Strategy: "wipe"}) {
		t.Fatalf("ReclaimFull = %+v, %v; want shutdown by wipe", res, err)
	}
	if ready, err = d.MakeReady(ctx, ready); err != nil {
		t.Fatal(err)
	}
	if l := mode(launches()); !slices.Equal(l, []string{"wipe", "snapshot"}) {
		t.Errorf("boots after ReclaimFull = %v, want a wipe, then a boot from the new snapshot", l)
	}
	if got := packages(t, d, ready.Address); len(got) != 0 {
		t.Errorf("packages after the full clean = %v", got)
	}

	// A device that stopped during its lease is clean at its next boot,
	// which restores the snapshot.
	install(t, d, ready.Address, "com.example.three")
	if err := d.Shutdown(ctx, ready); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	if err := d.Shutdown(ctx, ready); err != nil {
		t.Errorf("Shutdown of a stopped device: %v", err)
	}
	res, err = d.Reclaim(ctx, ready)
	if err != nil || res != (driver.ReclaimResult{State: contract.DeviceShutdown, Strategy: "snapshot"}) {
		t.Fatalf("Reclaim of a stopped device = %+v, %v; want shutdown by snapshot", res, err)
	}
	if ready, err = d.MakeReady(ctx, ready); err != nil {
		t.Fatal(err)
	}
	if l := mode(launches()); !slices.Equal(l, []string{"snapshot"}) {
		t.Errorf("boots of a stopped, clean device = %v, want one from the clean snapshot", l)
	}
	if got := packages(t, d, ready.Address); len(got) != 0 {
		t.Errorf("packages after a snapshot boot = %v", got)
	}
	if err := d.Destroy(ctx, ready); err != nil {
		t.Fatal(err)
	}
}

func TestBootTimeout(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.opts.BootTimeout = 300 * time.Millisecond
	d := newDriver(t, f.opts)
	ctx := t.Context()
	dev := provision(t, ctx, d, driver.Request{Model: "Pixel 8"})
	f.shims.FailNext(t, "emulator", "boot-hang", 0, "")
	_, err := d.MakeReady(ctx, dev)
	var timeout *driver.BootTimeoutError
	if !errors.As(err, &timeout) || timeout.DeviceID != dev.ID {
		t.Fatalf("MakeReady of an emulator that never boots = %v, want *driver.BootTimeoutError for %s", err, dev.ID)
	}
	if ems := liveEmulators(t, f.shims); len(ems) != 0 {
		t.Errorf("the stuck emulator was left running: %+v", ems)
	}
}

func TestEmulatorCrashFailsBoot(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.opts.BootTimeout = time.Minute
	d := newDriver(t, f.opts)
	ctx := ctxTimeout(t, 30*time.Second)
	dev := provision(t, ctx, d, driver.Request{Model: "Pixel 8"})
	f.shims.FailNext(t, "emulator", "boot", 1, "PANIC: Missing emulator engine program for 'x86_64' CPU.\n")
	_, err := d.MakeReady(ctx, dev)
	var crash *driver.CrashError
	var timeout *driver.BootTimeoutError
	if !errors.As(err, &crash) || errors.As(err, &timeout) || !strings.Contains(err.Error(), "PANIC: Missing emulator engine") {
		t.Fatalf("MakeReady with a crashing emulator = %v, want a *driver.CrashError quoting its log", err)
	}
	// The next boot works.
	if ready, err := d.MakeReady(ctx, dev); err != nil {
		t.Fatalf("MakeReady after a crash: %v", err)
	} else if err := d.Destroy(ctx, ready); err != nil {
		t.Fatal(err)
	}
}

// TestReadinessChecksIdentity boots a device whose console answers for
// another AVD, as when a stranger holds the console port: the device must
// not be reported ready, and the emulator simlock started is stopped.
func TestReadinessChecksIdentity(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	d := newDriver(t, f.opts)
	ctx := t.Context()
	dev := provision(t, ctx, d, driver.Request{Model: "Pixel 8"})
	f.shims.FailNext(t, "adb", "emu-avd-path", 0, "/home/someone/.android/avd/Pixel_8.avd\r\nOK\r\n")
	ready, err := d.MakeReady(ctx, dev)
	var crash *driver.CrashError
	if !errors.As(err, &crash) || !strings.Contains(err.Error(), "Pixel_8.avd") {
		t.Fatalf("MakeReady with a console naming another AVD = %+v, %v; want a *driver.CrashError", ready, err)
	}
	if ems := liveEmulators(t, f.shims); len(ems) != 0 {
		t.Errorf("the emulator of the refused boot still runs: %+v", ems)
	}
}

// TestForeignAVDUntouched checks that an AVD outside the root, even one
// named like simlock's and running on simlock's adb server, is never
// stopped, deleted or reported.
func TestForeignAVDUntouched(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	d := newDriver(t, f.opts)
	ctx := t.Context()
	userHome := t.TempDir()
	const foreign = "simlock_0123456789ab"
	res := runCommand(t, driver.Command{Path: f.tool("avdmanager"),
		Args: []string{"create", "avd", "-n", foreign, "-k", "system-images;android-35;google_apis;" + hostABI(), "-d", "pixel_8"},
		Env:  append(f.shimEnv(), "ANDROID_AVD_HOME="+userHome)})
	if res.ExitCode != 0 {
		t.Fatalf("creating the user's AVD: %s", res.Stderr)
	}
	port := freeConsolePort(t)
	emu := startForeignEmulator(t, f, userHome, foreign, port, f.port)
	foreignDir := filepath.Join(userHome, foreign+".avd")
	// A stray .ini in the root that points at the user's AVD must not
	// make it simlock's either.
	const stray = "simlock_stray0000000"
	if err := os.WriteFile(filepath.Join(f.root, stray+".ini"), []byte("path="+foreignDir+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}

	for _, id := range []string{foreign, stray} {
		dev := driver.Device{ID: id, Address: "emulator-" + strconv.Itoa(port)}
		if _, err := d.MakeReady(ctx, dev); err == nil {
			t.Errorf("MakeReady(%s) succeeded", id)
		}
		if _, err := d.Reclaim(ctx, dev); err == nil {
			t.Errorf("Reclaim(%s) succeeded", id)
		}
		d.Shutdown(ctx, dev)
		d.Destroy(ctx, dev)
	}
	if err := d.Destroy(ctx, driver.Device{ID: foreign}); err != nil {
		t.Errorf("Destroy of an AVD not in the root = %v, want nil: there is nothing of simlock's to delete", err)
	}
	if err := d.Destroy(ctx, driver.Device{ID: "../" + foreign}); err == nil {
		t.Error("Destroy accepted a path as an AVD name")
	}
	r, err := d.ListManaged(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range r.Devices {
		if o.RunState == driver.Running || o.ID == foreign {
			t.Errorf("ListManaged reports %+v, which is the user's", o)
		}
	}

	if len(findCalls(t, f.shims, "adb", "emu", "kill")) != 0 || len(findCalls(t, f.shims, "avdmanager", "delete")) != 0 ||
		len(findCalls(t, f.shims, "emulator", "-avd", foreign)) != 1 {
		t.Error("the driver ran a destructive command on the user's AVD")
	}
	if _, err := os.Stat(filepath.Join(foreignDir, "config.ini")); err != nil {
		t.Errorf("the user's AVD was touched: %v", err)
	}
	if _, err := os.Stat(filepath.Join(userHome, foreign+".ini")); err != nil {
		t.Errorf("the user's AVD was touched: %v", err)
	}
	if ems := liveEmulators(t, f.shims); len(ems) != 1 || ems[0].Pid != emu.Process.Pid {
		t.Errorf("running emulators = %+v, want only the user's", ems)
	}
}

// TestNonEmptyRootRefused checks that a root holding files but no marker is
// never adopted, and that nothing starts.
func TestNonEmptyRootRefused(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	if err := os.MkdirAll(filepath.Join(f.root, "someone.avd"), 0o700); err != nil {
		t.Fatal(err)
	}
	os.Chmod(f.root, 0o700)
	err := newRefused(t, f.opts)
	var rootErr *ownership.RootError
	if !errors.As(err, &rootErr) || rootErr.Reason != ownership.ReasonNonEmptyUnownedRoot {
		t.Fatalf("New on a non-empty unmarked root = %v, want *ownership.RootError non-empty-unowned-root", err)
	}
	if len(calls(t, f.shims, "adb")) != 0 || listening(f.port) {
		t.Error("New started an adb server for a refused root")
	}
	if _, err := os.Stat(filepath.Join(f.root, "someone.avd")); err != nil {
		t.Errorf("the root's content was touched: %v", err)
	}
}

// A device that crashed under a lease comes back as it was: Recover cold
// boots it without the clean snapshot or a wipe, so the app the holder
// installed is still there; the reclaim that ends the lease still restores
// the baseline.
func TestRecoveryKeepsTheHoldersWorkAndTheReclaimStillCleans(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	d := newDriver(t, f.opts)
	ctx := ctxTimeout(t, 60*time.Second)
	dev := provision(t, ctx, d, driver.Request{Model: "Pixel 8"})
	ready, err := d.MakeReady(ctx, dev)
	if err != nil {
		t.Fatal(err)
	}
	install(t, d, ready.Address, "com.example.work")

	// The emulator dies.
	ems := liveEmulators(t, f.shims)
	if len(ems) != 1 {
		t.Fatalf("running emulators = %+v, want one", ems)
	}
	killAndReap(t, ctx, ems[0].Pid, "the emulator")
	boots := len(findCalls(t, f.shims, "emulator", "-avd", dev.ID))

	recovered, err := d.Recover(ctx, ready)
	if err != nil {
		t.Fatalf("Recover: %v", err)
	}
	launches := findCalls(t, f.shims, "emulator", "-avd", dev.ID)[boots:]
	if len(launches) != 1 || !has(launches[0].Args, "-no-snapshot-load") || has(launches[0].Args, "-wipe-data") || has(launches[0].Args, "-snapshot") {
		t.Fatalf("Recover launched %v, want one cold boot with no snapshot and no wipe", launches)
	}
	if got := packages(t, d, recovered.Address); !slices.Equal(got, []string{"com.example.work"}) {
		t.Fatalf("packages after recovery = %v, want the holder's app kept", got)
	}

	res, err := d.Reclaim(ctx, recovered)
	if err != nil {
		t.Fatalf("Reclaim: %v", err)
	}
	if res.State != contract.DeviceReady {
		t.Errorf("Reclaim = %+v, want ready", res)
	}
	if got := packages(t, d, recovered.Address); len(got) != 0 {
		t.Errorf("packages after the reclaim = %v, want the baseline's none", got)
	}
}

// TestEmulatorLaunchOptions: the emulator gets the flags its options ask
// for; an unknown GPU mode is refused; and a new window or GPU mode, which a
// snapshot depends on, makes the next boot capture a new clean snapshot,
// while audio and the boot animation do not.
func TestEmulatorLaunchOptions(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		opts android.EmulatorOptions
		want [][]string
		not  []string
	}{
		{"defaults", android.EmulatorOptions{},
			[][]string{{"-no-window"}, {"-no-audio"}, {"-no-boot-anim"}}, []string{"-gpu"}},
		{"window, host GPU, audio and boot animation", android.EmulatorOptions{Window: true, GPU: "host", Audio: true, BootAnimation: true},
			[][]string{{"-gpu", "host"}}, []string{"-no-window", "-no-audio", "-no-boot-anim"}},
		{"auto GPU", android.EmulatorOptions{GPU: "auto"},
			[][]string{{"-no-window"}}, []string{"-gpu"}},
		{"software GPU", android.EmulatorOptions{GPU: "swiftshader_indirect", Audio: true},
			[][]string{{"-no-window"}, {"-gpu", "swiftshader_indirect"}, {"-no-boot-anim"}}, []string{"-no-audio"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t)
			f.opts.Emulator = c.opts
			d := newDriver(t, f.opts)
			ctx := ctxTimeout(t, 60*time.Second)
			dev := provision(t, ctx, d, driver.Request{Model: "Pixel 8"})
			if _, err := d.MakeReady(ctx, dev); err != nil {
				t.Fatal(err)
			}
			launches := findCalls(t, f.shims, "emulator", "-avd", dev.ID)
			if len(launches) == 0 {
				t.Fatal("no emulator launch")
			}
			for _, l := range launches {
				for _, w := range c.want {
					if !has(l.Args, w...) {
						t.Errorf("emulator %v lacks %v", l.Args, w)
					}
				}
				for _, n := range c.not {
					if slices.Contains(l.Args, n) {
						t.Errorf("emulator %v has %s", l.Args, n)
					}
				}
			}
		})
	}

	t.Run("unknown GPU mode", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t)
		f.opts.Emulator.GPU = "vulkan"
		if err := newRefused(t, f.opts); err == nil || !strings.Contains(err.Error(), `"vulkan"`) {
			t.Errorf("New with GPU mode vulkan = %v, want it refused", err)
		}
		if _, err := os.Stat(f.root); !errors.Is(err, os.ErrNotExist) || len(calls(t, f.shims, "adb")) != 0 {
			t.Error("New claimed the root or started adb before refusing the GPU mode")
		}
	})

	t.Run("snapshot", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t)
		ctx := ctxTimeout(t, 60*time.Second)
		d := newDriver(t, f.opts)
		dev := provision(t, ctx, d, driver.Request{Model: "Pixel 8"})
		// bootWith boots dev under opts and returns the launches of that boot.
		bootWith := func(opts android.EmulatorOptions) [][]string {
			t.Helper()
			before := len(findCalls(t, f.shims, "emulator", "-avd", dev.ID))
			o := f.opts
			o.Emulator = opts
			under := newDriver(t, o)
			ready, err := under.MakeReady(ctx, dev)
			if err != nil {
				t.Fatal(err)
			}
			if err := under.Shutdown(ctx, ready); err != nil {
				t.Fatal(err)
			}
			dev = ready // its driver data, as the registry keeps it
			// A launch that lost its console port to a parallel test is
			// retried on another port with the same arguments; it counts
			// once.
			var out [][]string
			for _, c := range findCalls(t, f.shims, "emulator", "-avd", dev.ID)[before:] {
				if len(out) > 0 && slices.Equal(withoutPort(out[len(out)-1]), withoutPort(c.Args)) {
					continue
				}
				out = append(out, c.Args)
			}
			return out
		}
		bootWith(android.EmulatorOptions{}) // the first boot captures the snapshot
		if got := bootWith(android.EmulatorOptions{Audio: true, BootAnimation: true}); len(got) != 1 || !has(got[0], "-snapshot", "simlock_clean_baseline") {
			t.Errorf("with audio and the boot animation on, the emulator launched %v; want one restore of the clean snapshot", got)
		}
		got := bootWith(android.EmulatorOptions{GPU: "host"})
		if len(got) != 2 || !has(got[0], "-wipe-data") || !has(got[1], "-snapshot", "simlock_clean_baseline") {
			t.Errorf("with a new GPU mode, the emulator launched %v; want a wipe that captures a new snapshot, then a restore", got)
		}
		if got := bootWith(android.EmulatorOptions{GPU: "host", Window: true}); len(got) != 2 || !has(got[0], "-wipe-data") {
			t.Errorf("with a window, the emulator launched %v; want a wipe that captures a new snapshot, then a restore", got)
		}
	})
}

// withoutPort is an emulator command line without its -port value.
func withoutPort(args []string) []string {
	i := slices.Index(args, "-port")
	if i < 0 || i+1 == len(args) {
		return args
	}
	return slices.Concat(args[:i], args[i+2:])
}

// The clean snapshot is loaded only while it is the one simlock saved. A
// save over it (here through the emulator console directly, as a holder
// could before adb emu avd snapshot was refused) makes the next clean
// fail, so the device is quarantined, without loading it: the emulator is
// stopped and the clean after that wipes the device and saves a new one.
// A snapshot whose identity was never recorded is wiped, not trusted.
func TestAChangedCleanSnapshotIsNeverLoaded(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := ctxTimeout(t, 60*time.Second)
	d := newDriver(t, f.opts)
	dev := provision(t, ctx, d, driver.Request{Model: "Pixel 8"})
	ready, err := d.MakeReady(ctx, dev)
	if err != nil {
		t.Fatal(err)
	}
	if res, err := d.Reclaim(ctx, ready); err != nil || res.Strategy != "snapshot" {
		t.Fatalf("a clean of an untouched device: %+v, %v; want a snapshot load", res, err)
	}

	// The holder installs an implant and saves it as the clean snapshot.
	install(t, d, ready.Address, "com.evil.implant")
	poison := exec.Command(f.tool("adb"), "-P", strconv.Itoa(f.port), "-s", ready.Address, "emu", "avd", "snapshot", "save", "simlock_clean_baseline")
	poison.Env = append(os.Environ(), f.shimEnv()...)
	if out, err := poison.CombinedOutput(); err != nil || !strings.Contains(string(out), "OK") {
		t.Fatalf("the console's snapshot save: %v %s", err, out)
	}
	loadsBefore := len(findCalls(t, f.shims, "adb", "snapshot", "load"))
	res, err := d.Reclaim(ctx, ready)
	if err == nil || !strings.Contains(err.Error(), "not the one simlock saved") {
		t.Fatalf("the clean after the snapshot was saved over: %+v, %v; want an error saying the snapshot changed", res, err)
	}
	if n := len(findCalls(t, f.shims, "adb", "snapshot", "load")); n != loadsBefore {
		t.Errorf("the changed snapshot was loaded (%d loads after the check)", n-loadsBefore)
	}
	if running(t, f, ready.Address) {
		t.Errorf("the emulator still runs, implant and all, after the refused clean")
	}
	// The quarantine's retry: a wipe, then a boot that saves a new snapshot.
	if res, err := d.Reclaim(ctx, ready); err != nil || res.Strategy != "wipe" {
		t.Fatalf("the retried clean: %+v, %v; want a wipe", res, err)
	}
	again, err := d.MakeReady(ctx, ready)
	if err != nil {
		t.Fatal(err)
	}
	if slices.Contains(packages(t, d, again.Address), "com.evil.implant") {
		t.Errorf("the next tenant's device has the implant")
	}
	if res, err := d.Reclaim(ctx, again); err != nil || res.Strategy != "snapshot" {
		t.Errorf("a clean with the new snapshot: %+v, %v; want a snapshot load", res, err)
	}

	// A device whose data records no identity (saved before they were
	// recorded) is wiped rather than loaded.
	var data map[string]any
	if err := json.Unmarshal(again.Data, &data); err != nil || data["baselineId"] == nil {
		t.Fatalf("driver data %s records no baselineId", again.Data)
	}
	delete(data, "baselineId")
	legacy := again
	legacy.Data, _ = json.Marshal(data)
	if res, err := d.Reclaim(ctx, legacy); err != nil || res.Strategy != "wipe" {
		t.Errorf("a clean of a device with no recorded snapshot identity: %+v, %v; want a wipe", res, err)
	}
}

// running reports whether an emulator answers at serial.
func running(t *testing.T, f *fixture, serial string) bool {
	t.Helper()
	c := exec.Command(f.tool("adb"), "-P", strconv.Itoa(f.port), "-s", serial, "get-state")
	c.Env = append(os.Environ(), f.shimEnv()...)
	return c.Run() == nil
}
