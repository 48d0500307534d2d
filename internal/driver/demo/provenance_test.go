package demo_test

import (
	"errors"
	"path/filepath"
	"testing"

	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/driver"
	"github.com/simlock/simlock/internal/driver/demo"
)

// drift reads dev's provenance and classifies it.
func drift(t *testing.T, d *demo.Driver, dev driver.Device) driver.Drift {
	t.Helper()
	p, err := d.Provenance(t.Context(), dev)
	if err != nil {
		t.Fatalf("Provenance(%s): %v", dev.ID, err)
	}
	return p.Drift()
}

// wantRefused checks err is op refused for provenance drift want.
func wantRefused(t *testing.T, err error, op string, want driver.Drift) {
	t.Helper()
	wantCrash(t, err, op)
	var pe *driver.ProvenanceError
	if !errors.As(err, &pe) || pe.Drift != want {
		t.Errorf("%s: err = %v, want a *driver.ProvenanceError for %s", op, err, want)
	}
}

func TestEraseAndReplaceFaultsShowInTheMarks(t *testing.T) {
	for _, p := range contract.Platforms() {
		t.Run(string(p), func(t *testing.T) {
			d := newDriver(t, demo.Options{Platform: p})
			ctx := t.Context()
			dev := boot(t, d, provision(t, d))
			if got := drift(t, d, dev); got != driver.DriftNone {
				t.Fatalf("a new device: drift %q, want none", got)
			}

			inject(t, d, dev.ID, demo.FaultErase)
			if got := drift(t, d, dev); got != driver.DriftErased {
				t.Errorf("after an erase outside simlock: drift %q, want erased", got)
			}
			// simlock's own clean marks the device again.
			if _, err := d.Reclaim(ctx, dev); err != nil {
				t.Fatalf("Reclaim of an erased device: %v", err)
			}
			dev = boot(t, d, dev)
			if got := drift(t, d, dev); got != driver.DriftNone {
				t.Errorf("after simlock's clean: drift %q, want none", got)
			}

			inject(t, d, dev.ID, demo.FaultReplace)
			if got := drift(t, d, dev); got != driver.DriftMarkMismatch {
				t.Errorf("after a replacement: drift %q, want mark-mismatch", got)
			}
			_, err := d.Reclaim(ctx, dev)
			wantRefused(t, err, "reclaim", driver.DriftMarkMismatch)
			wantRefused(t, d.Destroy(ctx, dev), "destroy", driver.DriftMarkMismatch)
			wantRunState(t, d, dev.ID, driver.Running)
		})
	}
}

// TestAndroidErasableMarkIsReadOnlyWhileRunning: a stopped emulator's user
// data cannot be read, so an erase says nothing until it runs again.
func TestAndroidErasableMarkIsReadOnlyWhileRunning(t *testing.T) {
	d := newDriver(t, demo.Options{Platform: contract.PlatformAndroid})
	dev := provision(t, d)
	inject(t, d, dev.ID, demo.FaultErase)
	if p, err := d.Provenance(t.Context(), dev); err != nil || p.ErasableReadable || p.Drift() != driver.DriftNone {
		t.Errorf("a stopped erased device: %+v (%v), want the erasable mark unreadable and no drift", p, err)
	}
	dev = boot(t, d, dev)
	if got := drift(t, d, dev); got != driver.DriftErased {
		t.Errorf("the erased device running: drift %q, want erased", got)
	}
}

// TestDeviceFromBeforeMarksIsBroughtUnderThem: a device whose driver data
// has no token and that has no marks says nothing and is not refused; its
// next clean marks it and its next boot records the token.
func TestDeviceFromBeforeMarksIsBroughtUnderThem(t *testing.T) {
	for _, p := range contract.Platforms() {
		t.Run(string(p), func(t *testing.T) {
			// A fresh driver adopts a device the registry names, as after a
			// daemon restart; with no token in its data it has no marks.
			d := newDriver(t, demo.Options{Platform: p})
			ctx := t.Context()
			old := driver.Device{ID: "legacy-device"}
			if err := d.Shutdown(ctx, old); err != nil {
				t.Fatalf("Shutdown: %v", err)
			}
			if pr, err := d.Provenance(ctx, old); err != nil || pr.Drift() != driver.DriftNone || pr.Durable != "" {
				t.Fatalf("an unmarked legacy device: %+v (%v), want no marks and no drift", pr, err)
			}
			ready := boot(t, d, old)
			pr, err := d.Provenance(ctx, ready)
			if err != nil || pr.Token == "" || pr.Durable != pr.Token || pr.Drift() != driver.DriftNone {
				t.Fatalf("after its first boot: %+v (%v), want its new token recorded and in both marks", pr, err)
			}
			if _, err := d.Reclaim(ctx, ready); err != nil {
				t.Errorf("Reclaim of the migrated device: %v", err)
			}
			if got := drift(t, d, boot(t, d, ready)); got != driver.DriftNone {
				t.Errorf("after its clean: drift %q, want none", got)
			}
		})
	}
}

// TestMarksOutliveTheProcess: with a state file, a device erased before the
// process ended still shows it to the next driver.
func TestMarksOutliveTheProcess(t *testing.T) {
	opts := demo.Options{Platform: contract.PlatformIOS, StateFile: filepath.Join(t.TempDir(), "world")}
	d := newDriver(t, opts)
	dev := provision(t, d)
	inject(t, d, dev.ID, demo.FaultErase)
	again := newDriver(t, opts)
	if got := drift(t, again, dev); got != driver.DriftErased {
		t.Errorf("after a restart: drift %q, want erased", got)
	}
}
