package demo_test

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/driver"
	"github.com/simlock/simlock/internal/driver/demo"
)

// observe is what ListManaged says about device id; ok is false when it is
// not listed.
func observe(t *testing.T, d *demo.Driver, id string) (obs driver.Observed, ok bool) {
	t.Helper()
	r, err := d.ListManaged(t.Context())
	if err != nil {
		t.Fatalf("ListManaged: %v", err)
	}
	for _, o := range r.Devices {
		if o.ID == id {
			if ok {
				t.Fatalf("ListManaged lists %s twice", id)
			}
			obs, ok = o, true
		}
	}
	return obs, ok
}

func wantRunState(t *testing.T, d *demo.Driver, id string, want driver.RunState) {
	t.Helper()
	obs, ok := observe(t, d, id)
	if !ok {
		t.Fatalf("ListManaged does not list %s, want it %s", id, want)
	}
	if obs.RunState != want {
		t.Errorf("ListManaged: %s is %s, want %s", id, obs.RunState, want)
	}
}

func inject(t *testing.T, d *demo.Driver, id string, f demo.Fault) {
	t.Helper()
	if err := d.Inject(id, f); err != nil {
		t.Fatalf("Inject(%s, %s): %v", id, f, err)
	}
}

// timedOp runs f and checks it took want on the bubble's clock.
func timedOp(t *testing.T, name string, want time.Duration, f func() error) error {
	t.Helper()
	start := time.Now()
	err := f()
	if got := time.Since(start); got != want {
		t.Errorf("%s took %s, want %s", name, got, want)
	}
	return err
}

// wantAbsent checks err is op's failure on a device that does not exist, not
// an injected one.
func wantAbsent(t *testing.T, err error, op string) {
	t.Helper()
	wantCrash(t, err, op)
	if err != nil && !strings.Contains(err.Error(), "does not exist") {
		t.Errorf("%s: err = %v, want it to say the device does not exist", op, err)
	}
}

func TestParseFault(t *testing.T) {
	want := []demo.Fault{demo.FaultCrash, demo.FaultVanish, demo.FaultBootFail, demo.FaultReclaimFail, demo.FaultErase, demo.FaultReplace}
	if got := demo.Faults(); !slices.Equal(got, want) {
		t.Errorf("Faults() = %v, want %v", got, want)
	}
	for _, f := range want {
		got, err := demo.ParseFault(string(f))
		if err != nil || got != f {
			t.Errorf("ParseFault(%q) = %q, %v; want %q", f, got, err, f)
		}
	}
	for _, s := range []string{"", "Crash", " crash", "bootfail", "explode"} {
		got, err := demo.ParseFault(s)
		if err == nil {
			t.Errorf("ParseFault(%q) = %q, want an error", s, got)
			continue
		}
		if !errors.Is(err, demo.ErrUnknownFault) {
			t.Errorf("ParseFault(%q) error %v does not wrap ErrUnknownFault", s, err)
		}
		msg := err.Error()
		if !strings.Contains(msg, fmt.Sprintf("%q", s)) {
			t.Errorf("ParseFault(%q) error %q does not name the input", s, msg)
		}
		for _, f := range want {
			if !strings.Contains(msg, string(f)) {
				t.Errorf("ParseFault(%q) error %q does not list %s", s, msg, f)
			}
		}
	}
}

func TestInjectRefusesUnknownDevicesAndFaults(t *testing.T) {
	for _, p := range contract.Platforms() {
		t.Run(string(p), func(t *testing.T) {
			d := newDriver(t, demo.Options{Platform: p})
			ctx := t.Context()
			dev := boot(t, d, provision(t, d))

			err := d.Inject(dev.ID, "explode")
			if !errors.Is(err, demo.ErrUnknownFault) || !strings.Contains(err.Error(), "reclaim-fail") {
				t.Errorf("Inject of an unknown fault: err = %v, want ErrUnknownFault listing the faults", err)
			}
			// The refused fault did nothing.
			wantRunState(t, d, dev.ID, driver.Running)

			destroyedDev := provision(t, d)
			if err := d.Destroy(ctx, destroyedDev); err != nil {
				t.Fatal(err)
			}
			vanishedDev := provision(t, d)
			inject(t, d, vanishedDev.ID, demo.FaultVanish)
			for name, id := range map[string]string{
				"never provisioned": "no-such-device",
				"empty":             "",
				"destroyed":         destroyedDev.ID,
				"vanished":          vanishedDev.ID,
			} {
				for _, f := range demo.Faults() {
					err := d.Inject(id, f)
					if !errors.Is(err, demo.ErrUnknownDevice) {
						t.Errorf("Inject(%s device, %s): err = %v, want ErrUnknownDevice", name, f, err)
					} else if !strings.Contains(err.Error(), fmt.Sprintf("%q", id)) {
						t.Errorf("Inject(%s device, %s): err %q does not name the device", name, f, err)
					}
				}
			}
			// Refusing a fault for an id adopted nothing.
			if _, ok := observe(t, d, "no-such-device"); ok {
				t.Error("Inject of an unknown device made it listed")
			}
		})
	}
}

func TestCrashStopsTheDeviceAndMakeReadyRecovers(t *testing.T) {
	for _, p := range contract.Platforms() {
		t.Run(string(p), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				d := newDriver(t, timed(demo.Options{Platform: p}))
				ctx := t.Context()
				dev := boot(t, d, provision(t, d))
				wantRunState(t, d, dev.ID, driver.Running)

				inject(t, d, dev.ID, demo.FaultCrash)
				wantRunState(t, d, dev.ID, driver.Stopped)
				// It stays stopped: nothing brings it back but a boot.
				time.Sleep(time.Hour)
				wantRunState(t, d, dev.ID, driver.Stopped)

				if p == contract.PlatformAndroid {
					// The dead emulator's console port is free again.
					other := boot(t, d, provision(t, d))
					if other.Address != dev.Address {
						t.Errorf("after the crash freed %s, the next boot got %s", dev.Address, other.Address)
					}
				}

				var again driver.Device
				err := timedOp(t, "MakeReady of a crashed device", bootTime, func() (err error) {
					again, err = d.MakeReady(ctx, dev)
					return err
				})
				if err != nil {
					t.Fatalf("MakeReady of a crashed device: %v", err)
				}
				wantRunState(t, d, dev.ID, driver.Running)
				want := dev.ID
				if p == contract.PlatformAndroid {
					want = "emulator-5588" // 5586 went to the other device
				}
				if again.Address != want {
					t.Errorf("address after recovering = %q, want %q", again.Address, want)
				}
				if obs, _ := observe(t, d, dev.ID); obs.Address != again.Address {
					t.Errorf("ListManaged address %q, MakeReady said %q", obs.Address, again.Address)
				}
			})
		})
	}
}

func TestCrashedDeviceShutdownAndReclaim(t *testing.T) {
	for _, p := range contract.Platforms() {
		t.Run(string(p), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				d := newDriver(t, timed(demo.Options{Platform: p}))
				ctx := t.Context()
				dev := boot(t, d, provision(t, d))
				inject(t, d, dev.ID, demo.FaultCrash)

				// Already stopped: nothing to wait for.
				if err := timedOp(t, "Shutdown of a crashed device", 0, func() error { return d.Shutdown(ctx, dev) }); err != nil {
					t.Errorf("Shutdown of a crashed device: %v", err)
				}

				inject(t, d, dev.ID, demo.FaultCrash) // a stopped device crashes to no effect
				var res driver.ReclaimResult
				err := timedOp(t, "Reclaim of a crashed device", reclaimTime, func() (err error) {
					res, err = d.Reclaim(ctx, dev)
					return err
				})
				// Both platforms leave a device that is not running shut
				// down, as they do one that was shut down cleanly.
				want := driver.ReclaimResult{State: contract.DeviceShutdown, Strategy: "erase"}
				if p == contract.PlatformAndroid {
					want.Strategy = "snapshot"
				}
				if err != nil || res != want {
					t.Errorf("Reclaim of a crashed device = %+v, %v; want %+v", res, err, want)
				}
				wantRunState(t, d, dev.ID, driver.Stopped)
				if err := timedOp(t, "Destroy of a crashed device", stopTime, func() error { return d.Destroy(ctx, dev) }); err != nil {
					t.Errorf("Destroy of a crashed device: %v", err)
				}
				if _, ok := observe(t, d, dev.ID); ok {
					t.Error("a destroyed device is still listed")
				}
			})
		})
	}
}

func TestCrashDuringBootFailsTheBoot(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := newDriver(t, timed(demo.Options{Platform: contract.PlatformAndroid}))
		ctx := t.Context()
		dev := provision(t, d)
		errc := make(chan error, 1)
		go func() {
			_, err := d.MakeReady(ctx, dev)
			errc <- err
		}()
		synctest.Wait() // MakeReady is waiting on its timer
		wantRunState(t, d, dev.ID, driver.Transitioning)
		inject(t, d, dev.ID, demo.FaultCrash)
		wantRunState(t, d, dev.ID, driver.Stopped)
		// The console port was freed at the crash, not at the boot's end.
		if got := boot(t, d, provision(t, d)).Address; got != "emulator-5586" {
			t.Errorf("a device booted after the crash got %s, want the freed emulator-5586", got)
		}
		err := <-errc
		wantCrash(t, err, "boot")
		wantRunState(t, d, dev.ID, driver.Stopped)

		dev, err = d.MakeReady(ctx, dev)
		if err != nil || dev.Address != "emulator-5588" {
			t.Errorf("MakeReady after a crashed boot = %q, %v; want emulator-5588", dev.Address, err)
		}
	})
}

func TestVanishForgetsTheDevice(t *testing.T) {
	for _, p := range contract.Platforms() {
		t.Run(string(p), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				d := newDriver(t, timed(demo.Options{Platform: p}))
				ctx := t.Context()
				dev := boot(t, d, provision(t, d))
				stays := boot(t, d, provision(t, d))

				inject(t, d, dev.ID, demo.FaultVanish)
				if _, ok := observe(t, d, dev.ID); ok {
					t.Error("ListManaged still lists a vanished device")
				}
				wantRunState(t, d, stays.ID, driver.Running)
				if p == contract.PlatformAndroid {
					if got := boot(t, d, provision(t, d)).Address; got != dev.Address {
						t.Errorf("after %s vanished, the next boot got %s", dev.Address, got)
					}
				}

				// Each fails at once: there is nothing to wait for.
				for range 2 {
					err := timedOp(t, "MakeReady of a vanished device", 0, func() error {
						_, err := d.MakeReady(ctx, dev)
						return err
					})
					wantAbsent(t, err, "boot")
					err = timedOp(t, "Reclaim of a vanished device", 0, func() error {
						_, err := d.Reclaim(ctx, dev)
						return err
					})
					wantAbsent(t, err, "reclaim")
					err = timedOp(t, "Shutdown of a vanished device", 0, func() error { return d.Shutdown(ctx, dev) })
					wantAbsent(t, err, "shutdown")
				}
				// Failed operations did not bring it back.
				if _, ok := observe(t, d, dev.ID); ok {
					t.Error("operations on a vanished device made it listed again")
				}

				if err := timedOp(t, "Destroy of a vanished device", 0, func() error { return d.Destroy(ctx, dev) }); err != nil {
					t.Errorf("Destroy of a vanished device: %v, want success", err)
				}
				_, err := d.MakeReady(ctx, dev)
				wantCrash(t, err, "boot")
				if _, ok := observe(t, d, dev.ID); ok {
					t.Error("a vanished, destroyed device is listed")
				}
				wantRunState(t, d, stays.ID, driver.Running)
			})
		})
	}
}

func TestVanishDuringOperations(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := newDriver(t, timed(demo.Options{Platform: contract.PlatformAndroid}))
		ctx := t.Context()
		booting := provision(t, d)
		reclaiming := boot(t, d, provision(t, d))
		stopping := boot(t, d, provision(t, d))

		var wg sync.WaitGroup
		var bootErr, reclaimErr, shutdownErr error
		wg.Go(func() { _, bootErr = d.MakeReady(ctx, booting) })
		wg.Go(func() { _, reclaimErr = d.Reclaim(ctx, reclaiming) })
		wg.Go(func() { shutdownErr = d.Shutdown(ctx, stopping) })
		synctest.Wait() // all three are waiting on their timers
		for _, dev := range []driver.Device{booting, reclaiming, stopping} {
			inject(t, d, dev.ID, demo.FaultVanish)
		}
		wg.Wait()
		wantAbsent(t, bootErr, "boot")
		wantAbsent(t, reclaimErr, "reclaim")
		wantAbsent(t, shutdownErr, "shutdown")

		r, err := d.ListManaged(ctx)
		if err != nil || len(r.Devices) != 0 {
			t.Errorf("ListManaged = %+v, %v; want nothing listed", r.Devices, err)
		}
		// All three ports are free: the lowest is handed out again.
		if got := boot(t, d, provision(t, d)).Address; got != "emulator-5586" {
			t.Errorf("the next boot got %s, want emulator-5586", got)
		}
	})
}

func TestBootFailFailsTheNextBootOnce(t *testing.T) {
	for _, p := range contract.Platforms() {
		t.Run(string(p), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				d := newDriver(t, timed(demo.Options{Platform: p}))
				ctx := t.Context()
				dev := provision(t, d)
				other := provision(t, d)

				inject(t, d, dev.ID, demo.FaultBootFail)
				// Nothing shows until the device is booted.
				wantRunState(t, d, dev.ID, driver.Stopped)
				// The fault is the device's: another boots.
				other = boot(t, d, other)

				err := timedOp(t, "failing MakeReady", bootTime, func() error {
					_, err := d.MakeReady(ctx, dev)
					return err
				})
				wantInjected(t, err, "boot")
				wantRunState(t, d, dev.ID, driver.Stopped)
				if p == contract.PlatformAndroid {
					// The failed boot gave its port back.
					if got := boot(t, d, provision(t, d)).Address; got != "emulator-5588" {
						t.Errorf("after a failed boot, the next boot got %s, want emulator-5588", got)
					}
				}

				// Once only.
				dev = boot(t, d, dev)
				wantRunState(t, d, dev.ID, driver.Running)

				// A booted device's MakeReady fails at once and leaves it
				// running where it was; two faults fail two calls.
				inject(t, d, dev.ID, demo.FaultBootFail)
				inject(t, d, dev.ID, demo.FaultBootFail)
				for i := range 2 {
					err := timedOp(t, "failing MakeReady of a booted device", 0, func() error {
						_, err := d.MakeReady(ctx, dev)
						return err
					})
					wantInjected(t, err, "boot")
					if obs, _ := observe(t, d, dev.ID); obs.RunState != driver.Running || obs.Address != dev.Address {
						t.Errorf("after failed boot %d: %s at %q, want running at %q", i+1, obs.RunState, obs.Address, dev.Address)
					}
				}
				if again := boot(t, d, dev); again.Address != dev.Address {
					t.Errorf("MakeReady after the faults = %q, want %q", again.Address, dev.Address)
				}
				if _, err := d.MakeReady(ctx, other); err != nil {
					t.Errorf("the other device: %v", err)
				}
			})
		})
	}
}

func TestReclaimFailFailsTheNextReclaimOnce(t *testing.T) {
	for _, p := range contract.Platforms() {
		t.Run(string(p), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				d := newDriver(t, timed(demo.Options{Platform: p}))
				ctx := t.Context()
				dev := boot(t, d, provision(t, d))
				other := boot(t, d, provision(t, d))

				inject(t, d, dev.ID, demo.FaultReclaimFail)
				wantRunState(t, d, dev.ID, driver.Running)
				if _, err := d.Reclaim(ctx, other); err != nil {
					t.Errorf("Reclaim of another device: %v", err)
				}

				err := timedOp(t, "failing Reclaim", reclaimTime, func() error {
					_, err := d.Reclaim(ctx, dev)
					return err
				})
				wantInjected(t, err, "reclaim")
				// Still booted, even on iOS where a reclaim shuts down, and
				// still on its port.
				if obs, _ := observe(t, d, dev.ID); obs.RunState != driver.Running || obs.Address != dev.Address {
					t.Errorf("after the failed reclaim: %s at %q, want running at %q", obs.RunState, obs.Address, dev.Address)
				}
				if err := timedOp(t, "MakeReady after a failed reclaim", 0, func() error {
					_, err := d.MakeReady(ctx, dev)
					return err
				}); err != nil {
					t.Errorf("MakeReady after a failed reclaim: %v", err)
				}

				// Once only.
				res, err := d.Reclaim(ctx, dev)
				want := driver.ReclaimResult{State: contract.DeviceShutdown, Strategy: "erase"}
				if p == contract.PlatformAndroid {
					want = driver.ReclaimResult{State: contract.DeviceReady, Strategy: "snapshot"}
				}
				if err != nil || res != want {
					t.Errorf("second Reclaim = %+v, %v; want %+v", res, err, want)
				}
			})
		})
	}
}

// TestFaultsUnderConcurrency injects faults and observes while every device
// runs its own lease cycle, one operation at a time as the core does. Run
// with -race; it also checks that no console port is given twice or lost.
func TestFaultsUnderConcurrency(t *testing.T) {
	for _, p := range contract.Platforms() {
		t.Run(string(p), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				d := newDriver(t, timed(demo.Options{Platform: p}))
				ctx := t.Context()
				const n = 12
				devs := make([]driver.Device, n)
				for i := range devs {
					devs[i] = provision(t, d)
				}

				// The test must meet every fault, or it proves nothing.
				var bootFails, reclaimFails, absent atomic.Int32
				tally := func(err error) {
					switch {
					case err == nil:
					case errors.Is(err, demo.ErrInjected):
						var crash *driver.CrashError
						if errors.As(err, &crash) && crash.Op == "boot" {
							bootFails.Add(1)
						} else {
							reclaimFails.Add(1)
						}
					case strings.Contains(err.Error(), "does not exist"):
						absent.Add(1)
					}
				}
				var workers sync.WaitGroup
				for _, dev := range devs {
					workers.Go(func() {
						for range 6 {
							booted, err := d.MakeReady(ctx, dev)
							if err == nil {
								dev = booted
							}
							tally(err)
							_, err = d.Reclaim(ctx, dev)
							tally(err)
							_ = d.Shutdown(ctx, dev)
						}
					})
				}

				done := make(chan struct{})
				var side sync.WaitGroup
				// The injector cycles through the faults and devices,
				// letting one device vanish now and then.
				side.Go(func() {
					tick := time.NewTicker(7 * time.Second)
					defer tick.Stop()
					faults := []demo.Fault{demo.FaultCrash, demo.FaultBootFail, demo.FaultReclaimFail}
					for i := 0; ; i++ {
						select {
						case <-done:
							return
						case <-tick.C:
						}
						id := devs[(i*5)%n].ID
						f := faults[i%len(faults)]
						if i%17 == 16 {
							f = demo.FaultVanish
						}
						err := d.Inject(id, f)
						if err != nil && !errors.Is(err, demo.ErrUnknownDevice) {
							t.Errorf("Inject(%s, %s): %v", id, f, err)
						}
						if f == demo.FaultVanish {
							if _, ok := observe(t, d, id); ok {
								t.Errorf("%s is listed after vanishing", id)
							}
						}
					}
				})
				// The observer checks that running devices never share an
				// address.
				side.Go(func() {
					tick := time.NewTicker(3 * time.Second)
					defer tick.Stop()
					for {
						select {
						case <-done:
							return
						case <-tick.C:
						}
						r, err := d.ListManaged(ctx)
						if err != nil {
							t.Errorf("ListManaged: %v", err)
							return
						}
						seen := map[string]bool{}
						for _, o := range r.Devices {
							if o.RunState == driver.Stopped {
								continue
							}
							if seen[o.Address] {
								t.Errorf("address %s held twice: %+v", o.Address, r.Devices)
							}
							seen[o.Address] = true
						}
					}
				})
				workers.Wait()
				close(done)
				side.Wait()
				if bootFails.Load() == 0 || reclaimFails.Load() == 0 || absent.Load() == 0 {
					t.Errorf("the workers met %d boot faults, %d reclaim faults and %d vanished devices; want some of each",
						bootFails.Load(), reclaimFails.Load(), absent.Load())
				}

				for _, dev := range devs {
					if err := d.Destroy(ctx, dev); err != nil {
						t.Errorf("Destroy(%s): %v", dev.ID, err)
					}
				}
				r, err := d.ListManaged(ctx)
				if err != nil || len(r.Devices) != 0 {
					t.Fatalf("after destroying all: ListManaged = %+v, %v", r.Devices, err)
				}
				if p == contract.PlatformAndroid {
					// Every console port came back: the whole range boots.
					const ports = (5682-5586)/2 + 1
					for i := range ports {
						if _, err := d.MakeReady(ctx, provision(t, d)); err != nil {
							t.Fatalf("boot %d of %d after the faults: %v (a port was lost)", i+1, ports, err)
						}
					}
				}
			})
		})
	}
}

// The daemon's demo.inject reaches the demo driver through the
// driver.FaultInjector capability: a fault named as text is parsed, then
// injected, with ParseFault's and Inject's errors as they are.
func TestInjectFaultIsParseFaultThenInject(t *testing.T) {
	var fi driver.FaultInjector = newDriver(t, demo.Options{Platform: contract.PlatformIOS})
	d := fi.(*demo.Driver)
	dev := boot(t, d, provision(t, d))

	if err := fi.InjectFault(dev.ID, "explode"); !errors.Is(err, demo.ErrUnknownFault) {
		t.Errorf("InjectFault of an unknown fault: err = %v, want ErrUnknownFault", err)
	}
	wantRunState(t, d, dev.ID, driver.Running)
	if err := fi.InjectFault("no-such-device", string(demo.FaultCrash)); !errors.Is(err, demo.ErrUnknownDevice) {
		t.Errorf("InjectFault of an unknown device: err = %v, want ErrUnknownDevice", err)
	}
	if err := fi.InjectFault(dev.ID, string(demo.FaultCrash)); err != nil {
		t.Fatalf("InjectFault(crash): %v", err)
	}
	wantRunState(t, d, dev.ID, driver.Stopped)
}
