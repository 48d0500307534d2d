package ios

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/driver"
	"github.com/simlock/simlock/internal/ownership"
	"github.com/simlock/simlock/internal/runner"
)

// containsInOrder reports whether want appears in got in order, with other
// entries allowed between.
func containsInOrder(got, want []string) bool {
	i := 0
	for _, g := range got {
		if i < len(want) && g == want[i] {
			i++
		}
	}
	return i == len(want)
}

func TestLeaseCycle(t *testing.T) {
	h := newHarness(t)
	ctx := t.Context()

	dev := h.provision(t, "iPhone 16", "18.6")
	if !udidPattern.MatchString(dev.ID) || dev.Address != dev.ID {
		t.Fatalf("device = %+v, want a UDID as ID and address", dev)
	}
	var data deviceData
	if err := json.Unmarshal(dev.Data, &data); err != nil {
		t.Fatalf("Data: %v", err)
	}
	if data.UDID != dev.ID || data.DeviceTypeID != typeIPhone16 || data.RuntimeID != runtime186 || !strings.HasPrefix(data.Name, "simlock-") {
		t.Errorf("Data = %+v", data)
	}
	create := h.simctlCalls(t, 0)
	if got := create[len(create)-1].Args[3:]; !slices.Equal(got, []string{"create", data.Name, typeIPhone16, runtime186}) {
		t.Errorf("create call = %q", got)
	}
	if got := h.states(t)[dev.ID]; got != driver.Stopped {
		t.Errorf("after Provision: %s, want stopped", got)
	}

	ready := h.boot(t, dev)
	if ready.ID != dev.ID || ready.Address != dev.ID {
		t.Errorf("MakeReady = %+v, want the UDID as address", ready)
	}
	if got := h.states(t)[dev.ID]; got != driver.Running {
		t.Errorf("after MakeReady: %s, want running", got)
	}

	// The shim lays the device out in the set as CoreSimulator does; an
	// erase must empty its data.
	leftover := filepath.Join(h.root, dev.ID, "data", "left-by-the-agent")
	if err := os.WriteFile(leftover, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	res, err := h.d.Reclaim(ctx, ready)
	if err != nil {
		t.Fatalf("Reclaim: %v", err)
	}
	if res != (driver.ReclaimResult{State: contract.DeviceShutdown, Strategy: "erase"}) {
		t.Errorf("Reclaim = %+v", res)
	}
	if _, err := os.Stat(leftover); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("after Reclaim the data survived: %v", err)
	}
	if got := h.states(t)[dev.ID]; got != driver.Stopped {
		t.Errorf("after Reclaim: %s, want stopped", got)
	}

	if err := h.d.Destroy(ctx, ready); err != nil {
		t.Fatalf("Destroy: %v", err)
	}
	if states := h.states(t); len(states) != 0 {
		t.Errorf("after Destroy the root holds %v", states)
	}
	if _, err := os.Stat(filepath.Join(h.root, dev.ID)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("after Destroy the device directory remains: %v", err)
	}

	subs := subcommands(h.simctlCalls(t, 0)) // fails the test on any unscoped call
	want := []string{
		"list", "create", // Provision
		"boot", "bootstatus", // MakeReady
		"list", "shutdown", "erase", // Reclaim: check membership, then clean
		"list", "shutdown", "delete", // Destroy
	}
	if !containsInOrder(subs, want) {
		t.Errorf("simctl subcommands = %q, want %q in order", subs, want)
	}
	for _, c := range h.rec.commands() {
		wantTimeout := commandTimeout
		if subcommand(c.Args) == "bootstatus" {
			wantTimeout = bootstatusTimeout
			if !slices.Equal(c.Args[3:], []string{"bootstatus", dev.ID, "-b"}) {
				t.Errorf("bootstatus call = %q", c.Args)
			}
		}
		if c.Timeout != wantTimeout {
			t.Errorf("%q: timeout %s, want %s", c.Args, c.Timeout, wantTimeout)
		}
	}
}

func TestListManaged(t *testing.T) {
	h := newHarness(t)
	a := h.provision(t, "iPhone 16", "")
	b := h.provision(t, "iPad Air 11-inch (M3)", "18")
	h.boot(t, b)
	r, err := h.d.ListManaged(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Devices) != 2 {
		t.Fatalf("devices = %+v, want 2", r.Devices)
	}
	for _, o := range r.Devices {
		want := driver.Stopped
		if o.ID == b.ID {
			want = driver.Running
		} else if o.ID != a.ID {
			t.Errorf("unexpected device %s", o.ID)
		}
		if o.RunState != want || o.Address != o.ID || !strings.HasPrefix(o.Name, "simlock-") {
			t.Errorf("%s: %+v, want %s with the UDID as address", o.ID, o, want)
		}
	}
	if r.Devices[0].ID > r.Devices[1].ID {
		t.Error("devices are not sorted by UDID")
	}
}

func TestParseDevices(t *testing.T) {
	const sample = `{"devices": {
	  "com.apple.CoreSimulator.SimRuntime.iOS-18-4": [
	    {"udid": "6F1C3E0A-9B7D-4C2E-8A51-2D4F9E0B7C11", "state": "Booted", "name": "simlock-a", "deviceTypeIdentifier": "t"},
	    {"udid": "00000000-0000-0000-0000-000000000104", "state": "Shutting Down", "name": "simlock-x", "isAvailable": true},
	    {"udid": "00000000-0000-0000-0000-000000000105", "state": "Shutdown", "name": "simlock-y"},
	    {"udid": "00000000-0000-0000-0000-000000000106", "state": "Booting", "name": "simlock-z"},
	    {"udid": "00000000-0000-0000-0000-000000000107", "state": "Shutdown"},
	    {"name": "no udid"}
	  ],
	  "com.apple.CoreSimulator.SimRuntime.iOS-26-1": []
	}}`
	got, err := parseDevices([]byte(sample))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]driver.RunState{
		"00000000-0000-0000-0000-000000000104": driver.Transitioning,
		"00000000-0000-0000-0000-000000000105": driver.Stopped,
		"00000000-0000-0000-0000-000000000106": driver.Transitioning,
		"6F1C3E0A-9B7D-4C2E-8A51-2D4F9E0B7C11": driver.Running,
	}
	if len(got) != len(want) {
		t.Fatalf("got %d devices, want %d: %+v", len(got), len(want), got)
	}
	for _, o := range got {
		if want[o.ID] != o.RunState {
			t.Errorf("%s: %s, want %s", o.ID, o.RunState, want[o.ID])
		}
	}
	if _, err := parseDevices([]byte(`{"devicetypes": []}`)); err == nil {
		t.Error("a list without devices parsed")
	}
}

// Booting a booted simulator and stopping a stopped one are no-ops simctl
// reports as failures (exit 149); the driver asks for a state, so they
// succeed.
func TestNoOpTransitionsTolerated(t *testing.T) {
	h := newHarness(t)
	ctx := t.Context()
	dev := h.provision(t, "iPhone 15", "17.5")

	// Never booted: the shutdown inside Reclaim meets "current state:
	// Shutdown".
	if _, err := h.d.Reclaim(ctx, dev); err != nil {
		t.Fatalf("Reclaim of a shut-down device: %v", err)
	}
	h.boot(t, dev)
	if _, err := h.d.MakeReady(ctx, dev); err != nil {
		t.Fatalf("MakeReady of a booted device: %v", err)
	}
	if err := h.d.Shutdown(ctx, dev); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	if err := h.d.Shutdown(ctx, dev); err != nil {
		t.Fatalf("Shutdown of a shut-down device: %v", err)
	}
	if got := h.states(t)[dev.ID]; got != driver.Stopped {
		t.Errorf("state = %s, want stopped", got)
	}
	subs := subcommands(h.simctlCalls(t, 0))
	if n := len(slices.DeleteFunc(slices.Clone(subs), func(s string) bool { return s != "boot" })); n != 2 {
		t.Errorf("boot calls = %d, want 2 (the second one a no-op): %q", n, subs)
	}
}

func TestToolFailuresAreCrashes(t *testing.T) {
	cases := []struct {
		sub, op, stderr string
		do              func(h *harness, dev driver.Device) error
	}{
		{"boot", "boot", "Unable to boot device in current state: Shutting Down", func(h *harness, dev driver.Device) error {
			_, err := h.d.MakeReady(t.Context(), dev)
			return err
		}},
		{"bootstatus", "boot", "Failed to monitor boot status", func(h *harness, dev driver.Device) error {
			_, err := h.d.MakeReady(t.Context(), dev)
			return err
		}},
		{"erase", "reclaim", "Unable to erase contents and settings", func(h *harness, dev driver.Device) error {
			_, err := h.d.Reclaim(t.Context(), dev)
			return err
		}},
		{"delete", "destroy", "Unable to delete", func(h *harness, dev driver.Device) error {
			return h.d.Destroy(t.Context(), dev)
		}},
		{"shutdown", "shutdown", "Unable to shutdown device in current state: Booting", func(h *harness, dev driver.Device) error {
			return h.d.Shutdown(t.Context(), dev)
		}},
	}
	for _, tc := range cases {
		t.Run(tc.sub, func(t *testing.T) {
			h := newHarness(t)
			dev := h.provision(t, "iPhone 16", "18.6")
			h.env.FailNext(t, "xcrun", tc.sub, 1, "An error was encountered processing the command (domain=com.apple.CoreSimulator.SimError, code=405):\n"+tc.stderr+"\n")
			err := tc.do(h, dev)
			ce := crashOf(t, err, tc.op)
			var callErr *CallError
			if !errors.As(ce, &callErr) || callErr.ExitCode != 1 {
				t.Fatalf("err = %v, want a CallError with exit code 1", err)
			}
			if !strings.Contains(err.Error(), "simctl --set "+h.root+" "+tc.sub+" "+dev.ID) ||
				!strings.Contains(err.Error(), "exited with code 1: ") || !strings.Contains(err.Error(), tc.stderr) {
				t.Errorf("message = %q", err)
			}
		})
	}
}

func TestProvisionFailures(t *testing.T) {
	h := newHarness(t)
	h.env.FailNext(t, "xcrun", "create", 148, "Invalid device type: x")
	_, err := h.d.Provision(t.Context(), contract.DeviceSpec{Platform: contract.PlatformIOS, Model: "iPhone 16", OSVersion: "18.6"})
	crashOf(t, err, "provision")

	// A spec whose runtime went away fails as ResolveSpec would.
	_, err = h.d.Provision(t.Context(), contract.DeviceSpec{Platform: contract.PlatformIOS, Model: "iPhone 16", OSVersion: "18.4"})
	var missing *driver.RuntimeMissingError
	if !errors.As(err, &missing) {
		t.Errorf("Provision of an uninstalled runtime: %v", err)
	}

	for name, stdout := range map[string]string{"empty": "\n", "not a udid": "Created.\n"} {
		h.rec.setFake(func(c runner.Cmd) (runner.Result, bool, error) {
			if subcommand(c.Args) == "create" {
				return runner.Result{Stdout: []byte(stdout)}, true, nil
			}
			return runner.Result{}, false, nil
		})
		_, err := h.d.Provision(t.Context(), contract.DeviceSpec{Platform: contract.PlatformIOS, Model: "iPhone 16", OSVersion: "18.6"})
		if ce := crashOf(t, err, "provision"); !strings.Contains(ce.Error(), "UDID") {
			t.Errorf("%s stdout: %v", name, err)
		}
	}
}

func TestBootTimeout(t *testing.T) {
	h := newHarness(t)
	dev := h.provision(t, "iPhone 16", "18.6")
	// The real wait is two minutes; the runner reports it as runner.OS
	// would, without the shim being asked.
	h.rec.setFake(func(c runner.Cmd) (runner.Result, bool, error) {
		if subcommand(c.Args) == "bootstatus" {
			return runner.Result{ExitCode: -1}, true, &runner.TimeoutError{Cmd: c, After: c.Timeout}
		}
		return runner.Result{}, false, nil
	})
	_, err := h.d.MakeReady(t.Context(), dev)
	var bt *driver.BootTimeoutError
	if !errors.As(err, &bt) || bt.DeviceID != dev.ID || bt.After != "2m0s" {
		t.Fatalf("MakeReady = %v, want a BootTimeoutError for %s after 2m0s", err, dev.ID)
	}
	// The half-booted simulator was shut down.
	if got := h.states(t)[dev.ID]; got != driver.Stopped {
		t.Errorf("after the timeout: %s, want stopped", got)
	}
	if subs := subcommands(h.simctlCalls(t, 0)); !containsInOrder(subs, []string{"boot", "list", "shutdown"}) {
		t.Errorf("subcommands = %q, want a shutdown after the boot", subs)
	}
}

// The user's own simulators live in the default set. simlock must never
// stop, erase or delete one, even when asked for its UDID.
func TestDefaultSetIsNeverTouched(t *testing.T) {
	h := newHarness(t)
	ctx := t.Context()
	mine := h.provision(t, "iPhone 16", "18.6")
	theirs := h.xcrun(t, "simctl", "create", "My iPhone", typeIPhone16, runtime186)
	h.xcrun(t, "simctl", "boot", theirs)
	from := len(h.env.Calls(t))

	foreign := driver.Device{ID: theirs, Address: theirs}
	check := func(name string, err error) {
		t.Helper()
		var nir *NotInRootError
		if !errors.As(crashOf(t, err, name), &nir) || nir.UDID != theirs || nir.Root != h.root {
			t.Errorf("%s: err = %v, want a NotInRootError", name, err)
		}
	}
	// Destroy finds nothing of ours by that UDID: done, touching nothing.
	if err := h.d.Destroy(ctx, foreign); err != nil {
		t.Errorf("destroy of a UDID not in the root: %v, want nil (nothing of ours to delete)", err)
	}
	_, err := h.d.Reclaim(ctx, foreign)
	check("reclaim", err)
	check("shutdown", h.d.Shutdown(ctx, foreign))

	for _, c := range h.simctlCalls(t, from) {
		if slices.ContainsFunc(c.Args, func(a string) bool { return strings.EqualFold(a, theirs) }) {
			t.Errorf("a call named the foreign device: %q", c.Args)
		}
	}
	if got := h.xcrun(t, "simctl", "list", "devices"); !strings.Contains(got, theirs+") (Booted)") {
		t.Errorf("the default set's device changed: %s", got)
	}
	states := h.states(t)
	if _, ok := states[theirs]; ok || len(states) != 1 || states[mine.ID] != driver.Stopped {
		t.Errorf("ListManaged = %v, want only simlock's device", states)
	}
}

// A device ID that is not a UDID never reaches simctl: "all" or "booted"
// would mean every device in the set.
func TestDeviceIDMustBeUDID(t *testing.T) {
	h := newHarness(t)
	ctx := t.Context()
	for _, id := range []string{"all", "booted", "", "--set", "6F1C3E0A"} {
		dev := driver.Device{ID: id}
		errs := map[string]error{"destroy": h.d.Destroy(ctx, dev), "shutdown": h.d.Shutdown(ctx, dev)}
		_, errs["reclaim"] = h.d.Reclaim(ctx, dev)
		_, errs["boot"] = h.d.MakeReady(ctx, dev)
		for op, err := range errs {
			crashOf(t, err, op)
		}
	}
	if calls := h.env.Calls(t); len(calls) != 0 {
		t.Errorf("tool calls were made: %v", calls)
	}
}

func TestUnownedRootIsRefused(t *testing.T) {
	opts, e, _ := newOptions(t)
	if err := os.MkdirAll(opts.Root, 0o700); err != nil {
		t.Fatal(err)
	}
	// A directory with devices but no marker: someone else's set.
	if err := os.WriteFile(filepath.Join(opts.Root, "device_set.plist"), []byte("<plist/>"), 0o600); err != nil {
		t.Fatal(err)
	}
	d, err := New(t.Context(), opts)
	var re *ownership.RootError
	if !errors.As(err, &re) || re.Reason != ownership.ReasonNonEmptyUnownedRoot || d != nil {
		t.Fatalf("New = %v, %v; want a RootError %s", d, err, ownership.ReasonNonEmptyUnownedRoot)
	}
	if _, err := os.Stat(filepath.Join(opts.Root, ownership.MarkerName)); !errors.Is(err, os.ErrNotExist) {
		t.Error("New marked a root it refused")
	}
	if calls := e.Calls(t); len(calls) != 0 {
		t.Errorf("New ran tools: %v", calls)
	}
}

// A root that stops being ours after New (its marker replaced) makes every
// destructive call refuse before it runs anything.
func TestLostRootRefusesDestruction(t *testing.T) {
	h := newHarness(t)
	dev := h.provision(t, "iPhone 16", "18.6")
	marker := filepath.Join(h.root, ownership.MarkerName)
	if err := os.WriteFile(marker, []byte(`{"instanceId":"ins_other","platform":"ios"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	var re *ownership.RootError
	if err := h.d.RevalidateRoot(); !errors.As(err, &re) || re.Reason != ownership.ReasonWrongInstance {
		t.Fatalf("RevalidateRoot = %v, want %s", err, ownership.ReasonWrongInstance)
	}
	from := len(h.env.Calls(t))
	if err := h.d.Destroy(t.Context(), dev); !errors.As(crashOf(t, err, "destroy"), &re) {
		t.Errorf("Destroy = %v, want the RootError inside", err)
	}
	if _, err := h.d.Reclaim(t.Context(), dev); !errors.As(crashOf(t, err, "reclaim"), &re) {
		t.Errorf("Reclaim = %v, want the RootError inside", err)
	}
	if calls := h.env.Calls(t)[from:]; len(calls) != 0 {
		t.Errorf("tools ran on a lost root: %v", calls)
	}
}

func TestNewToolsMissing(t *testing.T) {
	opts, e, _ := newOptions(t)
	opts.LookPath = noTools
	_, err := New(t.Context(), opts)
	var tm *ToolsMissingError
	if !errors.As(err, &tm) || !slices.Equal(tm.Tools, []string{"xcrun", "xcodebuild"}) {
		t.Fatalf("New = %v, want ToolsMissingError for xcrun and xcodebuild", err)
	}
	if _, err := os.Stat(opts.Root); !errors.Is(err, os.ErrNotExist) {
		t.Error("New claimed the root without the tools")
	}
	opts.LookPath = func(name string) (string, error) {
		if name == "xcrun" {
			return noTools(name)
		}
		return lookIn(e.Bin)(name)
	}
	if _, err := New(t.Context(), opts); !errors.As(err, &tm) || !slices.Equal(tm.Tools, []string{"xcrun"}) {
		t.Errorf("New without xcrun = %v", err)
	}
}

func TestDriverFacts(t *testing.T) {
	h := newHarness(t)
	if h.d.Name() != "ios" || h.d.Platform() != contract.PlatformIOS || h.d.Root() != h.root {
		t.Errorf("Name, Platform, Root = %s, %s, %s", h.d.Name(), h.d.Platform(), h.d.Root())
	}
	if env := h.d.LeaseEnvironment(); len(env) != 1 || env["SIMLOCK_IOS_DEVICE_SET"] != h.root {
		t.Errorf("LeaseEnvironment = %v", env)
	}
	spec := contract.DeviceSpec{Platform: contract.PlatformIOS, Model: "iPhone 16", OSVersion: "18.6"}
	for op, want := range map[driver.Operation]time.Duration{
		driver.OpProvision: 500 * time.Millisecond,
		driver.OpBoot:      60 * time.Second,
		driver.OpReclaim:   34 * time.Second,
		"other":            0,
	} {
		if got := h.d.Estimate(op, spec); got != want {
			t.Errorf("Estimate(%s) = %s, want %s", op, got, want)
		}
	}
	if err := h.d.RevalidateRoot(); err != nil {
		t.Errorf("RevalidateRoot: %v", err)
	}
}
