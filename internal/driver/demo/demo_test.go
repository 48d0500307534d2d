package demo_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/driver"
	"github.com/simlock/simlock/internal/driver/demo"
)

const (
	provisionTime = 20 * time.Second
	bootTime      = 30 * time.Second
	reclaimTime   = 8 * time.Second
	stopTime      = reclaimTime / 4
)

var ops = []string{"provision", "boot", "reclaim", "shutdown", "destroy"}

func newDriver(t *testing.T, opts demo.Options) *demo.Driver {
	t.Helper()
	d, err := demo.New(opts)
	if err != nil {
		t.Fatalf("New(%+v): %v", opts, err)
	}
	return d
}

func timed(opts demo.Options) demo.Options {
	opts.ProvisionTime, opts.BootTime, opts.ReclaimTime = provisionTime, bootTime, reclaimTime
	return opts
}

func someSpec(p contract.Platform) contract.DeviceSpec {
	if p == contract.PlatformAndroid {
		return contract.DeviceSpec{Platform: p, Model: "Pixel 9", OSVersion: "36"}
	}
	return contract.DeviceSpec{Platform: p, Model: "iPhone 16", OSVersion: "18.6"}
}

func provision(t *testing.T, d *demo.Driver) driver.Device {
	t.Helper()
	dev, err := d.Provision(t.Context(), someSpec(d.Platform()))
	if err != nil {
		t.Fatalf("Provision: %v", err)
	}
	return dev
}

func boot(t *testing.T, d *demo.Driver, dev driver.Device) driver.Device {
	t.Helper()
	dev, err := d.MakeReady(t.Context(), dev)
	if err != nil {
		t.Fatalf("MakeReady(%s): %v", dev.ID, err)
	}
	return dev
}

// call runs op once, setting up what it needs with other operations, so that
// exactly one call of op is made.
func call(t *testing.T, d *demo.Driver, op string) error {
	t.Helper()
	ctx := t.Context()
	if op == "provision" {
		_, err := d.Provision(ctx, someSpec(d.Platform()))
		return err
	}
	dev := provision(t, d)
	switch op {
	case "boot":
		_, err := d.MakeReady(ctx, dev)
		return err
	case "reclaim":
		_, err := d.Reclaim(ctx, boot(t, d, dev))
		return err
	case "shutdown":
		return d.Shutdown(ctx, boot(t, d, dev))
	case "destroy":
		return d.Destroy(ctx, dev)
	}
	t.Fatalf("unknown op %q", op)
	return nil
}

func wantInjected(t *testing.T, err error, op string) {
	t.Helper()
	var crash *driver.CrashError
	if !errors.As(err, &crash) {
		t.Fatalf("%s: err = %v (%T), want *driver.CrashError", op, err, err)
	}
	if crash.Op != op {
		t.Errorf("%s: CrashError.Op = %q, want %q", op, crash.Op, op)
	}
	if !errors.Is(err, demo.ErrInjected) || crash.Err.Error() != "demo: injected failure" {
		t.Errorf("%s: CrashError.Err = %v, want the injected failure", op, crash.Err)
	}
}

func wantCrash(t *testing.T, err error, op string) {
	t.Helper()
	var crash *driver.CrashError
	if !errors.As(err, &crash) {
		t.Fatalf("%s: err = %v (%T), want *driver.CrashError", op, err, err)
	}
	if crash.Op != op {
		t.Errorf("%s: CrashError.Op = %q, want %q", op, crash.Op, op)
	}
	if errors.Is(err, demo.ErrInjected) {
		t.Errorf("%s: got an injected failure, want a real one: %v", op, err)
	}
}

func TestNew(t *testing.T) {
	for _, p := range contract.Platforms() {
		d := newDriver(t, demo.Options{Platform: p, Fail: ops})
		if d.Name() != "demo" {
			t.Errorf("Name() = %q, want demo", d.Name())
		}
		if d.Platform() != p {
			t.Errorf("Platform() = %q, want %q", d.Platform(), p)
		}
		var _ driver.Driver = d
	}
	bad := []struct {
		opts demo.Options
		want string // in the error
	}{
		{demo.Options{}, `""`},
		{demo.Options{Platform: "windows"}, `"windows"`},
		{demo.Options{Platform: "iOS"}, `"iOS"`},
		{demo.Options{Platform: contract.PlatformIOS, Fail: []string{"boot", "reboot"}}, `"reboot"`},
		{demo.Options{Platform: contract.PlatformIOS, Fail: []string{"Boot"}}, `"Boot"`},
		{demo.Options{Platform: contract.PlatformAndroid, BootTime: -time.Second}, "BootTime"},
		{demo.Options{Platform: contract.PlatformAndroid, ProvisionTime: -1}, "ProvisionTime"},
		{demo.Options{Platform: contract.PlatformAndroid, ReclaimTime: -1}, "ReclaimTime"},
	}
	for _, c := range bad {
		d, err := demo.New(c.opts)
		if err == nil || d != nil {
			t.Errorf("New(%+v) = %v, %v; want an error", c.opts, d, err)
			continue
		}
		if !strings.Contains(err.Error(), c.want) {
			t.Errorf("New(%+v) error %q does not name %s", c.opts, err, c.want)
		}
	}
}

func TestFailOnRejectsBadArguments(t *testing.T) {
	d := newDriver(t, demo.Options{Platform: contract.PlatformIOS})
	for _, c := range []struct {
		op string
		n  int
	}{{"reboot", 1}, {"boot", 0}, {"boot", -1}} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("FailOn(%q, %d) did not panic", c.op, c.n)
				}
			}()
			d.FailOn(c.op, c.n)
		}()
	}
}

func TestOperationsTakeConfiguredTimes(t *testing.T) {
	for _, p := range contract.Platforms() {
		t.Run(string(p), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				d := newDriver(t, timed(demo.Options{Platform: p}))
				ctx := t.Context()
				step := func(name string, want time.Duration, f func() error) {
					t.Helper()
					start := time.Now()
					if err := f(); err != nil {
						t.Fatalf("%s: %v", name, err)
					}
					if got := time.Since(start); got != want {
						t.Errorf("%s took %s, want %s", name, got, want)
					}
				}
				var dev driver.Device
				step("Provision", provisionTime, func() (err error) {
					dev, err = d.Provision(ctx, someSpec(p))
					return err
				})
				step("MakeReady", bootTime, func() (err error) {
					dev, err = d.MakeReady(ctx, dev)
					return err
				})
				step("Reclaim", reclaimTime, func() error {
					_, err := d.Reclaim(ctx, dev)
					return err
				})
				// Booted again for iOS, where reclaim shuts down; instant for
				// Android, which is still running.
				wantBoot := bootTime
				if p == contract.PlatformAndroid {
					wantBoot = 0
				}
				step("MakeReady after Reclaim", wantBoot, func() (err error) {
					dev, err = d.MakeReady(ctx, dev)
					return err
				})
				step("Shutdown", stopTime, func() error { return d.Shutdown(ctx, dev) })
				step("Shutdown of a stopped device", 0, func() error { return d.Shutdown(ctx, dev) })
				step("Destroy", stopTime, func() error { return d.Destroy(ctx, dev) })
				step("Destroy of a deleted device", 0, func() error { return d.Destroy(ctx, dev) })

				for op, want := range map[driver.Operation]time.Duration{
					driver.OpProvision: provisionTime,
					driver.OpBoot:      bootTime,
					driver.OpReclaim:   reclaimTime,
					"other":            0,
				} {
					if got := d.Estimate(op, someSpec(p)); got != want {
						t.Errorf("Estimate(%s) = %s, want %s", op, got, want)
					}
				}
			})
		})
	}
}

func TestZeroTimesDoNotWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := newDriver(t, demo.Options{Platform: contract.PlatformAndroid})
		start := time.Now()
		for _, op := range ops {
			if err := call(t, d, op); err != nil {
				t.Fatalf("%s: %v", op, err)
			}
		}
		if got := time.Since(start); got != 0 {
			t.Errorf("operations with zero times took %s on the fake clock", got)
		}
	})
}

func TestContextEndsWait(t *testing.T) {
	t.Run("deadline", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			d := newDriver(t, timed(demo.Options{Platform: contract.PlatformAndroid}))
			dev := provision(t, d)
			ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
			defer cancel()
			start := time.Now()
			_, err := d.MakeReady(ctx, dev)
			if got := time.Since(start); got != 5*time.Second {
				t.Errorf("MakeReady returned after %s, want the 5s deadline", got)
			}
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("MakeReady err = %v, want context.DeadlineExceeded", err)
			}
			wantCrash(t, err, "boot")

			// The aborted boot left the device stopped and gave its port back.
			start = time.Now()
			dev = boot(t, d, dev)
			if got := time.Since(start); got != bootTime {
				t.Errorf("boot after an aborted boot took %s, want %s", got, bootTime)
			}
			if dev.Address != "emulator-5586" {
				t.Errorf("address after an aborted boot = %q, want emulator-5586", dev.Address)
			}
		})
	})
	t.Run("cancel", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			d := newDriver(t, timed(demo.Options{Platform: contract.PlatformIOS}))
			ctx, cancel := context.WithCancel(t.Context())
			start := time.Now()
			errc := make(chan error, 1)
			go func() {
				_, err := d.Provision(ctx, someSpec(contract.PlatformIOS))
				errc <- err
			}()
			synctest.Wait() // Provision is waiting on its timer
			cancel()
			err := <-errc
			if got := time.Since(start); got != 0 {
				t.Errorf("cancelled Provision returned after %s, want at once", got)
			}
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("Provision err = %v, want context.Canceled", err)
			}
			wantCrash(t, err, "provision")
		})
	})
	t.Run("already done", func(t *testing.T) {
		d := newDriver(t, demo.Options{Platform: contract.PlatformIOS})
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		if _, err := d.Provision(ctx, someSpec(contract.PlatformIOS)); !errors.Is(err, context.Canceled) {
			t.Errorf("Provision with a done context: err = %v, want context.Canceled", err)
		}
	})
}

func TestFailOnFailsExactlyTheNthCall(t *testing.T) {
	for _, op := range ops {
		t.Run(op, func(t *testing.T) {
			d := newDriver(t, demo.Options{Platform: contract.PlatformAndroid})
			d.FailOn(op, 3)
			for i := 1; i <= 5; i++ {
				err := call(t, d, op)
				if i == 3 {
					wantInjected(t, err, op)
				} else if err != nil {
					t.Errorf("call %d: %v, want success", i, err)
				}
			}
			// n counts from the FailOn call, not from the driver's start.
			d.FailOn(op, 1)
			d.FailOn(op, 2)
			wantInjected(t, call(t, d, op), op)
			wantInjected(t, call(t, d, op), op)
			if err := call(t, d, op); err != nil {
				t.Errorf("call after the injected ones: %v", err)
			}
		})
	}
}

func TestFailOnCountsOnlyItsOperation(t *testing.T) {
	d := newDriver(t, demo.Options{Platform: contract.PlatformIOS})
	d.FailOn("boot", 2)
	dev := provision(t, d)
	dev = boot(t, d, dev) // boot call 1
	// Calls of other operations must not move the count.
	if err := d.Shutdown(t.Context(), dev); err != nil {
		t.Fatal(err)
	}
	provision(t, d)
	_, err := d.MakeReady(t.Context(), dev) // boot call 2
	wantInjected(t, err, "boot")
}

func TestAlwaysFail(t *testing.T) {
	for _, op := range ops {
		t.Run(op, func(t *testing.T) {
			d := newDriver(t, demo.Options{Platform: contract.PlatformAndroid, Fail: []string{op}})
			for range 3 {
				wantInjected(t, call(t, d, op), op)
			}
			// Every other operation works, unless call needs op to set it up.
			needs := map[string][]string{
				"boot": {"provision"}, "destroy": {"provision"},
				"reclaim": {"provision", "boot"}, "shutdown": {"provision", "boot"},
			}
			for _, other := range ops {
				if other != op && !slices.Contains(needs[other], op) {
					if err := call(t, d, other); err != nil {
						t.Errorf("%s with only %s failing: %v", other, op, err)
					}
				}
			}
		})
	}
}

func TestInjectedFailureLeavesDeviceAsItWas(t *testing.T) {
	ctx := t.Context()
	t.Run("boot", func(t *testing.T) {
		d := newDriver(t, demo.Options{Platform: contract.PlatformAndroid})
		dev := provision(t, d)
		d.FailOn("boot", 1)
		_, err := d.MakeReady(ctx, dev)
		wantInjected(t, err, "boot")
		// The failed boot gave its port back.
		if got := boot(t, d, provision(t, d)).Address; got != "emulator-5586" {
			t.Errorf("port after a failed boot = %q, want emulator-5586", got)
		}
	})
	t.Run("shutdown", func(t *testing.T) {
		d := newDriver(t, demo.Options{Platform: contract.PlatformAndroid})
		dev := boot(t, d, provision(t, d))
		d.FailOn("shutdown", 1)
		wantInjected(t, d.Shutdown(ctx, dev), "shutdown")
		// Still running, so it still holds its port.
		if got := boot(t, d, provision(t, d)).Address; got != "emulator-5588" {
			t.Errorf("next device's port = %q, want emulator-5588", got)
		}
	})
	t.Run("destroy", func(t *testing.T) {
		d := newDriver(t, demo.Options{Platform: contract.PlatformIOS, Fail: []string{"destroy"}})
		dev := provision(t, d)
		wantInjected(t, d.Destroy(ctx, dev), "destroy")
		if _, err := d.MakeReady(ctx, dev); err != nil {
			t.Errorf("MakeReady after a failed destroy: %v, want the device still there", err)
		}
	})
}

func TestResolveSpec(t *testing.T) {
	cases := []struct {
		p     contract.Platform
		model string
		os    string
		want  contract.DeviceSpec // zero when an error is expected
		err   string              // "unknown" or "missing"
	}{
		{contract.PlatformIOS, "iPhone 17 Pro", "", contract.DeviceSpec{Model: "iPhone 17 Pro", OSVersion: "26.1"}, ""},
		{contract.PlatformIOS, "iphone-17-pro", "", contract.DeviceSpec{Model: "iPhone 17 Pro", OSVersion: "26.1"}, ""},
		{contract.PlatformIOS, "IPHONE-17-PRO", "26.1", contract.DeviceSpec{Model: "iPhone 17 Pro", OSVersion: "26.1"}, ""},
		{contract.PlatformIOS, "iPhone 15", "", contract.DeviceSpec{Model: "iPhone 15", OSVersion: "26.1"}, ""},
		{contract.PlatformIOS, "iPhone 15", "17.5", contract.DeviceSpec{Model: "iPhone 15", OSVersion: "17.5"}, ""},
		{contract.PlatformIOS, "iPhone 15", "18", contract.DeviceSpec{Model: "iPhone 15", OSVersion: "18.6"}, ""},
		{contract.PlatformIOS, "iPhone 15", "26", contract.DeviceSpec{Model: "iPhone 15", OSVersion: "26.1"}, ""},
		{contract.PlatformIOS, "Apple Watch Series 11 (46mm)", "", contract.DeviceSpec{Model: "Apple Watch Series 11 (46mm)", OSVersion: "26.1"}, ""},
		{contract.PlatformIOS, "iPhone 17", "18.6", contract.DeviceSpec{}, "missing"},
		{contract.PlatformIOS, "iPhone 17", "18", contract.DeviceSpec{}, "missing"},
		{contract.PlatformIOS, "iPhone 15", "1", contract.DeviceSpec{}, "missing"}, // "1" is not a prefix of "17.5"
		{contract.PlatformIOS, "iPhone 15", "18.6.1", contract.DeviceSpec{}, "missing"},
		{contract.PlatformIOS, "iPhone 15", "16.4", contract.DeviceSpec{}, "missing"},
		{contract.PlatformIOS, "iPhone 14", "", contract.DeviceSpec{}, "unknown"},
		{contract.PlatformIOS, "iphone 17", "", contract.DeviceSpec{}, "unknown"},
		{contract.PlatformIOS, "Pixel 9", "", contract.DeviceSpec{}, "unknown"},
		{contract.PlatformIOS, "", "", contract.DeviceSpec{}, "unknown"},
		{contract.PlatformAndroid, "Pixel 9", "", contract.DeviceSpec{Model: "Pixel 9", OSVersion: "36"}, ""},
		{contract.PlatformAndroid, "pixel_8", "34", contract.DeviceSpec{Model: "Pixel 8", OSVersion: "34"}, ""},
		{contract.PlatformAndroid, "Automotive (1080p landscape)", "35", contract.DeviceSpec{Model: "Automotive (1080p landscape)", OSVersion: "35"}, ""},
		{contract.PlatformAndroid, "Pixel 9", "3", contract.DeviceSpec{}, "missing"},
		{contract.PlatformAndroid, "Pixel 9", "33", contract.DeviceSpec{}, "missing"},
		{contract.PlatformAndroid, "Pixel 7", "", contract.DeviceSpec{}, "unknown"},
	}
	drivers := map[contract.Platform]*demo.Driver{}
	for _, p := range contract.Platforms() {
		drivers[p] = newDriver(t, demo.Options{Platform: p})
	}
	for _, c := range cases {
		name := fmt.Sprintf("%s/%s/%s", c.p, c.model, c.os)
		got, err := drivers[c.p].ResolveSpec(t.Context(), driver.Request{Platform: c.p, Model: c.model, OSVersion: c.os})
		switch c.err {
		case "":
			c.want.Platform = c.p
			if err != nil || got != c.want {
				t.Errorf("%s: got %+v, %v; want %+v", name, got, err, c.want)
			}
		case "unknown":
			var e *driver.UnknownModelError
			if !errors.As(err, &e) || e.Model != c.model || e.Platform != c.p {
				t.Errorf("%s: err = %#v, want *UnknownModelError for %q", name, err, c.model)
			}
		case "missing":
			var e *driver.RuntimeMissingError
			if !errors.As(err, &e) || e.OSVersion != c.os || e.Platform != c.p || e.Downloadable {
				t.Errorf("%s: err = %#v, want non-downloadable *RuntimeMissingError for %q", name, err, c.os)
			}
		}
	}
	if _, err := drivers[contract.PlatformIOS].ResolveSpec(t.Context(), driver.Request{Platform: contract.PlatformAndroid, Model: "Pixel 9"}); err == nil {
		t.Error("iOS driver resolved an Android request")
	}
}

func TestDevicesLookReal(t *testing.T) {
	patterns := map[contract.Platform]*regexp.Regexp{
		contract.PlatformIOS:     regexp.MustCompile(`^[0-9A-F]{8}-[0-9A-F]{4}-4[0-9A-F]{3}-[89AB][0-9A-F]{3}-[0-9A-F]{12}$`),
		contract.PlatformAndroid: regexp.MustCompile(`^simlock_[0-9a-f]{12}$`),
	}
	for _, p := range contract.Platforms() {
		d := newDriver(t, demo.Options{Platform: p})
		seen := map[string]bool{}
		for range 20 {
			dev := provision(t, d)
			if !patterns[p].MatchString(dev.ID) {
				t.Errorf("%s device ID %q does not match %s", p, dev.ID, patterns[p])
			}
			if seen[dev.ID] {
				t.Errorf("%s device ID %q given twice", p, dev.ID)
			}
			seen[dev.ID] = true
			if dev.Address != "" {
				t.Errorf("provisioned device has address %q before boot", dev.Address)
			}
			var data struct{ Model, OSVersion string }
			if err := json.Unmarshal(dev.Data, &data); err != nil || data.Model != someSpec(p).Model || data.OSVersion != someSpec(p).OSVersion {
				t.Errorf("Data = %s (%v), want model and osVersion of %+v", dev.Data, err, someSpec(p))
			}
		}
		if env := d.LeaseEnvironment(); !reflect.DeepEqual(env, map[string]string{"SIMLOCK_DEMO": "1"}) {
			t.Errorf("LeaseEnvironment() = %v", env)
		}
	}
}

func TestLifecycle(t *testing.T) {
	ctx := t.Context()
	t.Run("ios", func(t *testing.T) {
		d := newDriver(t, demo.Options{Platform: contract.PlatformIOS})
		dev := boot(t, d, provision(t, d))
		if dev.Address != dev.ID {
			t.Errorf("iOS address = %q, want the UDID %q", dev.Address, dev.ID)
		}
		res, err := d.Reclaim(ctx, dev)
		if err != nil || res != (driver.ReclaimResult{State: contract.DeviceShutdown, Strategy: "erase"}) {
			t.Errorf("Reclaim = %+v, %v; want shutdown by erase", res, err)
		}
	})
	t.Run("android", func(t *testing.T) {
		d := newDriver(t, demo.Options{Platform: contract.PlatformAndroid})
		dev := boot(t, d, provision(t, d))
		res, err := d.Reclaim(ctx, dev)
		if err != nil || res != (driver.ReclaimResult{State: contract.DeviceReady, Strategy: "snapshot"}) {
			t.Errorf("Reclaim = %+v, %v; want ready by snapshot", res, err)
		}
		// A device that is not running cannot be left ready.
		res, err = d.Reclaim(ctx, provision(t, d))
		if err != nil || res.State != contract.DeviceShutdown {
			t.Errorf("Reclaim of a stopped device = %+v, %v; want shutdown", res, err)
		}
	})
	for _, p := range contract.Platforms() {
		t.Run(string(p)+"/unknown and deleted devices", func(t *testing.T) {
			d := newDriver(t, demo.Options{Platform: p})
			// A device this instance never created (the registry kept it
			// across a daemon restart) is adopted, not refused.
			stranger := driver.Device{ID: "from-before-a-restart"}
			if _, err := d.Reclaim(ctx, stranger); err != nil {
				t.Errorf("Reclaim of an adopted device: %v", err)
			}
			if err := d.Shutdown(ctx, stranger); err != nil {
				t.Errorf("Shutdown of an adopted device: %v", err)
			}
			booted, err := d.MakeReady(ctx, driver.Device{ID: "also-from-before"})
			if err != nil || booted.Address == "" {
				t.Errorf("MakeReady of an adopted device = %+v, %v; want booted with an address", booted, err)
			}
			_, err = d.MakeReady(ctx, driver.Device{})
			wantCrash(t, err, "boot")

			dev := provision(t, d)
			for range 2 {
				if err := d.Shutdown(ctx, dev); err != nil {
					t.Errorf("Shutdown of a stopped device: %v", err)
				}
			}
			dev = boot(t, d, dev)
			for range 2 {
				if err := d.Destroy(ctx, dev); err != nil {
					t.Errorf("Destroy: %v", err)
				}
			}
			_, err = d.MakeReady(ctx, dev)
			wantCrash(t, err, "boot")

			bad := someSpec(p)
			bad.OSVersion = "1.0"
			_, err = d.Provision(ctx, bad)
			wantCrash(t, err, "provision")
		})
	}
}

func TestAndroidPorts(t *testing.T) {
	ctx := t.Context()
	d := newDriver(t, demo.Options{Platform: contract.PlatformAndroid})
	a := boot(t, d, provision(t, d))
	b := boot(t, d, provision(t, d))
	c := boot(t, d, provision(t, d))
	for dev, want := range map[*driver.Device]string{&a: "emulator-5586", &b: "emulator-5588", &c: "emulator-5590"} {
		if dev.Address != want {
			t.Errorf("address = %q, want %q", dev.Address, want)
		}
	}

	if err := d.Shutdown(ctx, b); err != nil {
		t.Fatal(err)
	}
	if got := boot(t, d, provision(t, d)).Address; got != "emulator-5588" {
		t.Errorf("after shutdown freed 5588, next boot got %q", got)
	}
	if err := d.Destroy(ctx, a); err != nil {
		t.Fatal(err)
	}
	if got := boot(t, d, provision(t, d)).Address; got != "emulator-5586" {
		t.Errorf("after destroy freed 5586, next boot got %q", got)
	}
	// A snapshot reclaim keeps the emulator running on its port.
	if _, err := d.Reclaim(ctx, c); err != nil {
		t.Fatal(err)
	}
	if got := boot(t, d, c).Address; got != c.Address {
		t.Errorf("after reclaim, address = %q, want %q kept", got, c.Address)
	}

	// Fill the range: every port even, in range and held once.
	held := map[int]driver.Device{}
	for _, dev := range []driver.Device{a, b, c} {
		_ = d.Destroy(ctx, dev)
	}
	for {
		dev, err := d.MakeReady(ctx, provision(t, d))
		if err != nil {
			wantCrash(t, err, "boot")
			break
		}
		var port int
		if _, err := fmt.Sscanf(dev.Address, "emulator-%d", &port); err != nil {
			t.Fatalf("address %q is not emulator-<port>", dev.Address)
		}
		if port%2 != 0 || port < 5586 || port > 5682 {
			t.Errorf("port %d is not even in 5586-5682", port)
		}
		if _, dup := held[port]; dup {
			t.Fatalf("port %d given twice", port)
		}
		held[port] = dev
		if len(held) > 100 {
			t.Fatal("ports never ran out")
		}
	}
	// The two devices booted after the shutdown and the destroy still hold
	// 5586 and 5588.
	if want := (5682-5586)/2 + 1; len(held) != want-2 {
		t.Errorf("booted %d more devices, want %d free ports", len(held), want-2)
	}
	if err := d.Shutdown(ctx, held[5600]); err != nil {
		t.Fatal(err)
	}
	if got := boot(t, d, provision(t, d)).Address; got != "emulator-5600" {
		t.Errorf("with only 5600 free, boot got %q", got)
	}
}

func TestConcurrentDevicesOverlap(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := newDriver(t, timed(demo.Options{Platform: contract.PlatformAndroid}))
		const n = 20
		start := time.Now()
		var wg sync.WaitGroup
		addrs := make([]string, n)
		for i := range n {
			wg.Go(func() {
				dev, err := d.Provision(t.Context(), someSpec(contract.PlatformAndroid))
				if err == nil {
					dev, err = d.MakeReady(t.Context(), dev)
				}
				if err != nil {
					t.Errorf("device %d: %v", i, err)
				}
				addrs[i] = dev.Address
			})
		}
		wg.Wait()
		// Waits must not hold the lock: twenty devices take as long as one.
		if got := time.Since(start); got != provisionTime+bootTime {
			t.Errorf("%d parallel provision+boot took %s, want %s", n, got, provisionTime+bootTime)
		}
		slices.Sort(addrs)
		if len(slices.Compact(addrs)) != n {
			t.Errorf("ports given twice: %v", addrs)
		}
	})
}

func TestCatalog(t *testing.T) {
	ios := newDriver(t, demo.Options{Platform: contract.PlatformIOS})
	c, err := ios.ListCatalog(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	all := []string{"26.1", "18.6", "17.5"}
	if c.Platform != contract.PlatformIOS || c.DefaultRuntime != "26.1" || !slices.Equal(c.Runtimes, all) {
		t.Errorf("iOS catalog header = %s %q %v", c.Platform, c.DefaultRuntime, c.Runtimes)
	}
	for model, want := range map[string][]string{
		"iPhone 17 Pro": {"26.1"}, "iPhone 17": {"26.1"}, "Apple Watch Series 11 (46mm)": {"26.1"},
		"iPhone 16 Pro": all, "iPhone 16": all, "iPhone 15": all, "iPad Pro 11-inch (M5)": all,
		"iPad Air 11-inch (M3)": all, "Apple TV 4K (3rd generation)": all,
	} {
		if got := c.ModelRuntimes[model]; !slices.Equal(got, want) {
			t.Errorf("iOS ModelRuntimes[%q] = %v, want %v", model, got, want)
		}
	}
	wantIOSDefaults := map[contract.DeviceClass][]string{
		contract.ClassPhone:  {"iPhone 17", "iPhone 16", "iPhone 15", "iPhone 14", "iPhone 13"},
		contract.ClassTablet: {"iPad Pro 11-inch (M5)", "iPad Pro 11-inch (M4)", "iPad Air 11-inch (M3)"},
		contract.ClassWatch:  {"Apple Watch Series 11 (46mm)"},
		contract.ClassTV:     {"Apple TV 4K (3rd generation)"},
	}
	if !reflect.DeepEqual(c.ClassDefaults, wantIOSDefaults) {
		t.Errorf("iOS ClassDefaults = %v", c.ClassDefaults)
	}
	if c.ModelClasses["iPad Air 11-inch (M3)"] != contract.ClassTablet || c.ModelClasses["Apple TV 4K (3rd generation)"] != contract.ClassTV {
		t.Errorf("iOS ModelClasses = %v", c.ModelClasses)
	}
	if !slices.Contains(c.ModelAliases["iPhone 17 Pro"], "iphone-17-pro") {
		t.Errorf("iOS ModelAliases = %v", c.ModelAliases)
	}

	android := newDriver(t, demo.Options{Platform: contract.PlatformAndroid})
	a, err := android.ListCatalog(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if a.DefaultRuntime != "36" || !slices.Equal(a.Runtimes, []string{"36", "35", "34"}) || len(a.Models) != 7 {
		t.Errorf("Android catalog header = %q %v %v", a.DefaultRuntime, a.Runtimes, a.Models)
	}
	for _, m := range a.Models {
		if !slices.Equal(a.ModelRuntimes[m], a.Runtimes) {
			t.Errorf("Android ModelRuntimes[%q] = %v, want all runtimes", m, a.ModelRuntimes[m])
		}
	}
	if a.ModelClasses["Automotive (1080p landscape)"] != contract.ClassAuto ||
		!slices.Equal(a.ClassDefaults[contract.ClassPhone], []string{"Pixel 9", "Pixel 8", "Pixel 7", "Pixel 6", "Medium Phone"}) {
		t.Errorf("Android classes = %v, defaults = %v", a.ModelClasses, a.ClassDefaults)
	}

	// Every model is whole, and every class default the platform offers
	// resolves.
	for _, cat := range []driver.Catalog{c, a} {
		if len(cat.ModelClasses) != len(cat.Models) || len(cat.ModelRuntimes) != len(cat.Models) {
			t.Errorf("%s: %d models, %d classes, %d runtime lists", cat.Platform, len(cat.Models), len(cat.ModelClasses), len(cat.ModelRuntimes))
		}
		for _, m := range cat.Models {
			if !cat.ModelClasses[m].Valid() {
				t.Errorf("%s %q: class %q", cat.Platform, m, cat.ModelClasses[m])
			}
			for _, v := range cat.ModelRuntimes[m] {
				if !slices.Contains(cat.Runtimes, v) {
					t.Errorf("%s %q pairs with %q, not in Runtimes", cat.Platform, m, v)
				}
			}
		}
		if !slices.Contains(cat.Runtimes, cat.DefaultRuntime) {
			t.Errorf("%s: default runtime %q not in Runtimes", cat.Platform, cat.DefaultRuntime)
		}
	}
}

func TestCatalogCopyIsIndependent(t *testing.T) {
	for _, p := range contract.Platforms() {
		d := newDriver(t, demo.Options{Platform: p})
		pristine, _ := newDriver(t, demo.Options{Platform: p}).ListCatalog(t.Context())
		c, _ := d.ListCatalog(t.Context())
		model := c.Models[0]

		c.Models[0] = "mutated"
		c.Runtimes[0] = "mutated"
		c.ModelRuntimes[model][0] = "mutated"
		c.ModelAliases[model][0] = "mutated"
		c.ModelAliases["x"] = []string{"y"}
		c.ModelClasses[model] = "mutated"
		delete(c.ModelClasses, c.Models[1])
		c.ClassDefaults[contract.ClassPhone][0] = "mutated"
		c.ClassDefaults[contract.ClassVision] = []string{"mutated"}

		again, _ := d.ListCatalog(t.Context())
		if !reflect.DeepEqual(again, pristine) {
			t.Errorf("%s: changing a returned catalog changed the next one:\n got %+v\nwant %+v", p, again, pristine)
		}
		if _, err := d.ResolveSpec(t.Context(), driver.Request{Platform: p, Model: model}); err != nil {
			t.Errorf("%s: changing a returned catalog broke ResolveSpec(%q): %v", p, model, err)
		}
		// Two drivers of one platform must not share tables either.
		other, _ := newDriver(t, demo.Options{Platform: p}).ListCatalog(t.Context())
		if !reflect.DeepEqual(other, pristine) {
			t.Errorf("%s: a new driver sees another's changes", p)
		}
	}
}
