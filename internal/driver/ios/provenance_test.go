package ios

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/simlock/simlock/internal/driver"
)

// marks reads the token of each of dev's mark files; "" for one missing.
func (h *harness) marks(t *testing.T, udid string) (durable, erasable string) {
	t.Helper()
	read := func(path string) string {
		b, err := os.ReadFile(path)
		if errors.Is(err, os.ErrNotExist) {
			return ""
		}
		if err != nil {
			t.Fatal(err)
		}
		var m markRecord
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if m.UDID != udid || m.WrittenAt == "" {
			t.Errorf("%s = %+v, want the UDID and a time", path, m)
		}
		return m.Token
	}
	return read(filepath.Join(h.root, udid, "simlock-mark.json")), read(filepath.Join(h.root, udid, "data", "simlock-mark.json"))
}

func (h *harness) drift(t *testing.T, dev driver.Device) driver.Drift {
	t.Helper()
	p, err := h.d.Provenance(t.Context(), dev)
	if err != nil {
		t.Fatalf("Provenance: %v", err)
	}
	return p.Drift()
}

// refusedFor checks err is op refused with a *driver.ProvenanceError for
// drift want.
func refusedFor(t *testing.T, err error, op string, want driver.Drift) {
	t.Helper()
	crashOf(t, err, op)
	var pe *driver.ProvenanceError
	if !errors.As(err, &pe) || pe.Drift != want {
		t.Errorf("%s: err = %v, want a *driver.ProvenanceError for %s", op, err, want)
	}
}

func TestProvisionWritesBothMarks(t *testing.T) {
	h := newHarness(t)
	dev := h.provision(t, "iPhone 16", "18.6")
	token := tokenOf(dev)
	if len(token) != 32 {
		t.Fatalf("driver data token = %q, want a new 32-digit token", token)
	}
	if durable, erasable := h.marks(t, dev.ID); durable != token || erasable != token {
		t.Errorf("marks = %q (durable), %q (erasable), want both %q", durable, erasable, token)
	}
	if got := h.drift(t, dev); got != driver.DriftNone {
		t.Errorf("a new device: drift %q, want none", got)
	}
	if other := h.provision(t, "iPhone 16", "18.6"); tokenOf(other) == token {
		t.Errorf("two devices share the token %q", token)
	}
}

// TestEraseOutsideSimlockIsDetectedAndSimlocksCleanIsNot: someone shuts the
// simulator down and erases it with simctl in simlock's set; simlock's own
// reclaims, one after another, never look like that.
func TestEraseOutsideSimlockIsDetectedAndSimlocksCleanIsNot(t *testing.T) {
	h := newHarness(t)
	ctx := t.Context()
	dev := h.boot(t, h.provision(t, "iPhone 16", "18.6"))
	for i := range 2 {
		if _, err := h.d.Reclaim(ctx, dev); err != nil {
			t.Fatalf("Reclaim %d: %v", i+1, err)
		}
		if got := h.drift(t, dev); got != driver.DriftNone {
			t.Fatalf("after simlock's reclaim %d: drift %q, want none", i+1, got)
		}
		dev = h.boot(t, dev)
	}

	h.xcrun(t, "simctl", "--set", h.root, "shutdown", dev.ID)
	h.xcrun(t, "simctl", "--set", h.root, "erase", dev.ID)
	if got := h.drift(t, dev); got != driver.DriftErased {
		t.Errorf("after an erase outside simlock: drift %q, want erased", got)
	}
	if durable, _ := h.marks(t, dev.ID); durable != tokenOf(dev) {
		t.Errorf("the erase took the durable mark too: %q", durable)
	}
	// Still simlock's device: its clean goes ahead and marks it again.
	if _, err := h.d.Reclaim(ctx, dev); err != nil {
		t.Fatalf("Reclaim of the erased device: %v", err)
	}
	if got := h.drift(t, dev); got != driver.DriftNone {
		t.Errorf("after simlock's clean of the erased device: drift %q, want none", got)
	}
}

// TestDeviceNotProvablySimlocksIsNeverWipedOrDeleted: a durable mark with
// another token, or none, stops Reclaim and Destroy before any simctl call
// that would change the device.
func TestDeviceNotProvablySimlocksIsNeverWipedOrDeleted(t *testing.T) {
	h := newHarness(t)
	ctx := t.Context()
	dev := h.boot(t, h.provision(t, "iPhone 16", "18.6"))
	durable := filepath.Join(h.root, dev.ID, "simlock-mark.json")
	leftover := filepath.Join(h.root, dev.ID, "data", "left-by-the-agent")
	if err := os.WriteFile(leftover, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}

	// Someone put another device's marks in its place.
	if err := writeMark(durable, dev.ID, driver.NewMarkToken()); err != nil {
		t.Fatal(err)
	}
	if got := h.drift(t, dev); got != driver.DriftMarkMismatch {
		t.Errorf("with another token: drift %q, want mark-mismatch", got)
	}
	from := len(h.env.Calls(t))
	_, err := h.d.Reclaim(ctx, dev)
	refusedFor(t, err, "reclaim", driver.DriftMarkMismatch)
	refusedFor(t, h.d.Destroy(ctx, dev), "destroy", driver.DriftMarkMismatch)
	for _, sub := range subcommands(h.simctlCalls(t, from)) {
		if slices.Contains([]string{"shutdown", "erase", "delete"}, sub) {
			t.Errorf("a refused call still ran simctl %s", sub)
		}
	}
	if _, err := os.Stat(leftover); err != nil {
		t.Errorf("the refused device's data was touched: %v", err)
	}
	if got := h.states(t)[dev.ID]; got != driver.Running {
		t.Errorf("the refused device is %s, want it still running", got)
	}

	// Its durable mark gone: nothing proves it is simlock's.
	if err := os.Remove(durable); err != nil {
		t.Fatal(err)
	}
	if got := h.drift(t, dev); got != driver.DriftDurableMissing {
		t.Errorf("without the durable mark: drift %q, want durable-mark-missing", got)
	}
	_, err = h.d.Reclaim(ctx, dev)
	refusedFor(t, err, "reclaim", driver.DriftDurableMissing)
	refusedFor(t, h.d.Destroy(ctx, dev), "destroy", driver.DriftDurableMissing)
	// Stopping loses nothing and is not refused.
	if err := h.d.Shutdown(ctx, dev); err != nil {
		t.Errorf("Shutdown of the unproven device: %v", err)
	}
}

// TestDeviceFromBeforeMarksIsMigrated: a device whose driver data has no
// token is never taken for drift; its next boot marks it and records the
// token, and a legacy device an earlier clean marked keeps that token.
func TestDeviceFromBeforeMarksIsMigrated(t *testing.T) {
	h := newHarness(t)
	ctx := t.Context()
	made := h.provision(t, "iPhone 16", "18.6")
	// As a driver before marks left it: no files, no token.
	for _, p := range []string{filepath.Join(h.root, made.ID, "simlock-mark.json"), filepath.Join(h.root, made.ID, "data", "simlock-mark.json")} {
		if err := os.Remove(p); err != nil {
			t.Fatal(err)
		}
	}
	legacy := driver.Device{ID: made.ID, Address: made.Address}
	if got := h.drift(t, legacy); got != driver.DriftNone {
		t.Fatalf("an unmarked legacy device: drift %q, want none", got)
	}
	// A clean of a legacy device is never refused, and marks it.
	if _, err := h.d.Reclaim(ctx, legacy); err != nil {
		t.Fatalf("Reclaim of a legacy device: %v", err)
	}
	written, erasable := h.marks(t, made.ID)
	if written == "" || erasable != written {
		t.Fatalf("after its clean: marks %q, %q, want one new token in both", written, erasable)
	}
	// Its next boot records the token its clean wrote.
	ready := h.boot(t, legacy)
	if got := tokenOf(ready); got != written {
		t.Errorf("after its boot the driver data records %q, want the token its clean wrote, %q", got, written)
	}
	if got := h.drift(t, ready); got != driver.DriftNone {
		t.Errorf("the migrated device: drift %q, want none", got)
	}

	// A legacy device never cleaned since gets marks at its first boot.
	other := h.provision(t, "iPhone 16", "18.6")
	os.Remove(filepath.Join(h.root, other.ID, "simlock-mark.json"))
	os.Remove(filepath.Join(h.root, other.ID, "data", "simlock-mark.json"))
	booted := h.boot(t, driver.Device{ID: other.ID})
	token := tokenOf(booted)
	if durable, erasable := h.marks(t, other.ID); token == "" || durable != token || erasable != token {
		t.Errorf("after its first boot: token %q, marks %q, %q; want one new token in all three", token, durable, erasable)
	}
}
