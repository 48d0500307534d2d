package android_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/driver"
	"github.com/simlock/simlock/internal/driver/android"
)

// tokenOf is the mark token a device's driver data records.
func tokenOf(t *testing.T, dev driver.Device) string {
	t.Helper()
	var data struct {
		MarkToken string `json:"markToken"`
	}
	if len(dev.Data) > 0 {
		if err := json.Unmarshal(dev.Data, &data); err != nil {
			t.Fatalf("driver data %s: %v", dev.Data, err)
		}
	}
	return data.MarkToken
}

// durableLines are the simlock.mark lines of an AVD's config.ini.
func durableLines(t *testing.T, f *fixture, avd string) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(f.root, avd+".avd", "config.ini"))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "simlock.mark=") {
			out = append(out, line)
		}
	}
	return out
}

// setDurable replaces the simlock.mark line of an AVD's config.ini, as
// someone editing the file would; "" removes it.
func setDurable(t *testing.T, f *fixture, avd, token string) {
	t.Helper()
	path := filepath.Join(f.root, avd+".avd", "config.ini")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var kept []string
	for _, line := range strings.Split(strings.TrimRight(string(b), "\n"), "\n") {
		if !strings.HasPrefix(line, "simlock.mark=") {
			kept = append(kept, line)
		}
	}
	if token != "" {
		kept = append(kept, "simlock.mark="+token)
	}
	if err := os.WriteFile(path, []byte(strings.Join(kept, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
}

func provenanceOf(t *testing.T, d *android.Driver, dev driver.Device) driver.Provenance {
	t.Helper()
	p, err := d.Provenance(t.Context(), dev)
	if err != nil {
		t.Fatalf("Provenance(%s at %q): %v", dev.ID, dev.Address, err)
	}
	return p
}

// refusedFor checks err is a CrashError of op holding a
// *driver.ProvenanceError for drift want.
func refusedFor(t *testing.T, err error, op string, want driver.Drift) {
	t.Helper()
	var ce *driver.CrashError
	var pe *driver.ProvenanceError
	if !errors.As(err, &ce) || ce.Op != op || !errors.As(err, &pe) || pe.Drift != want {
		t.Errorf("%s: err = %v, want a *driver.CrashError of %s holding a *driver.ProvenanceError for %s", op, err, op, want)
	}
}

// TestMarksAtProvisionAndAfterSimlocksOwnBootsAndCleans: the durable mark
// is in config.ini from the start, the erasable one on the guest once it
// runs, and neither a boot, nor a snapshot clean, nor a wipe clean of
// simlock's own ever looks like drift.
func TestMarksAtProvisionAndAfterSimlocksOwnBootsAndCleans(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	d := newDriver(t, f.opts)
	ctx := ctxTimeout(t, 60*time.Second)
	dev := provision(t, ctx, d, driver.Request{Model: "Pixel 8"})
	token := tokenOf(t, dev)
	if len(token) != 32 {
		t.Fatalf("driver data token = %q, want a new 32-digit token", token)
	}
	if got := durableLines(t, f, dev.ID); len(got) != 1 || got[0] != "simlock.mark="+token {
		t.Errorf("config.ini mark lines = %q, want simlock.mark=%s", got, token)
	}
	if p := provenanceOf(t, d, dev); p.Durable != token || p.ErasableReadable || p.Drift() != driver.DriftNone {
		t.Errorf("a new, stopped device: %+v, want the durable mark, the erasable one unreadable, no drift", p)
	}

	ready, err := d.MakeReady(ctx, dev)
	if err != nil {
		t.Fatal(err)
	}
	if tokenOf(t, ready) != token {
		t.Errorf("MakeReady changed the token to %q", tokenOf(t, ready))
	}
	if p := provenanceOf(t, d, ready); p.Erasable != token || !p.ErasableReadable || p.Drift() != driver.DriftNone {
		t.Errorf("after simlock's boot: %+v, want the erasable mark %s read from the guest", p, token)
	}
	if calls := findCalls(t, f.shims, "adb", "shell", `echo '{"token":"`+token+`"}' > /data/local/tmp/simlock-mark.json`); len(calls) == 0 {
		t.Error("no adb shell call wrote the erasable mark")
	}

	// A snapshot clean restores a snapshot, which must not lose the mark,
	// even one captured before marks existed, with no mark in it. (Such a
	// snapshot is the one simlock saved: its files keep the size and time
	// the driver recorded, or the driver would refuse to load it.)
	before := filepath.Join(f.root, dev.ID+".avd", "snapshots", "simlock_clean_baseline", "shim-userdata.json")
	saved, err := os.Stat(before)
	if err != nil {
		t.Fatal(err)
	}
	unmarked := []byte(`{"packages":[]}`)
	unmarked = append(unmarked, bytes.Repeat([]byte(" "), int(saved.Size())-len(unmarked))...)
	if err := os.WriteFile(before, unmarked, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(before, saved.ModTime(), saved.ModTime()); err != nil {
		t.Fatal(err)
	}
	res, err := d.Reclaim(ctx, ready)
	if err != nil || res.Strategy != "snapshot" {
		t.Fatalf("Reclaim = %+v, %v; want a snapshot clean", res, err)
	}
	if p := provenanceOf(t, d, ready); p.Drift() != driver.DriftNone || !p.ErasableReadable {
		t.Errorf("after simlock's snapshot clean: %+v, want no drift", p)
	}
	// A wipe clean takes the guest's data; the boot after it marks it again.
	if _, err := d.ReclaimFull(ctx, ready); err != nil {
		t.Fatal(err)
	}
	if ready, err = d.MakeReady(ctx, ready); err != nil {
		t.Fatal(err)
	}
	if p := provenanceOf(t, d, ready); p.Drift() != driver.DriftNone || p.Erasable != token {
		t.Errorf("after simlock's wipe clean and boot: %+v, want no drift", p)
	}
	if got := durableLines(t, f, dev.ID); len(got) != 1 {
		t.Errorf("config.ini mark lines = %q, want exactly one", got)
	}
	if err := d.Destroy(ctx, ready); err != nil {
		t.Errorf("Destroy: %v", err)
	}
}

// TestWipeOutsideSimlockIsDetected: the device is booted with -wipe-data by
// someone else in simlock's root; its erasable mark is gone while the
// durable one stays, and simlock's own clean then marks it again.
func TestWipeOutsideSimlockIsDetected(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	d := newDriver(t, f.opts)
	ctx := ctxTimeout(t, 60*time.Second)
	dev := provision(t, ctx, d, driver.Request{Model: "Pixel 8"})
	ready, err := d.MakeReady(ctx, dev)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Shutdown(ctx, ready); err != nil {
		t.Fatal(err)
	}
	port := freeConsolePort(t)
	startForeignEmulator(t, f, f.root, dev.ID, port, f.port, "-wipe-data")
	outside := ready
	outside.Address = "emulator-" + strconv.Itoa(port)

	// The guest answers once it is online; wait for that, bounded.
	var p driver.Provenance
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for p = provenanceOf(t, d, outside); !p.ErasableReadable; p = provenanceOf(t, d, outside) {
		select {
		case <-ctx.Done():
			t.Fatalf("the emulator booted outside simlock never answered for its mark: %+v", p)
		case <-tick.C:
		}
	}
	if got := p.Drift(); got != driver.DriftErased {
		t.Errorf("after a wipe outside simlock: %+v, drift %q, want erased", p, got)
	}
	if p.Durable != tokenOf(t, ready) {
		t.Errorf("the wipe took the durable mark too: %+v", p)
	}

	// Still simlock's: its clean goes ahead and marks the guest again.
	res, err := d.Reclaim(ctx, outside)
	if err != nil || res.State != contract.DeviceReady {
		t.Fatalf("Reclaim of the wiped device = %+v, %v; want it cleaned and running", res, err)
	}
	if got := provenanceOf(t, d, outside).Drift(); got != driver.DriftNone {
		t.Errorf("after simlock's clean of the wiped device: drift %q, want none", got)
	}
}

// TestDeviceNotProvablySimlocksIsNeverWipedOrDeleted: another token in
// config.ini, or none, refuses Reclaim, Destroy and a boot that would wipe,
// before any of them changes the device.
func TestDeviceNotProvablySimlocksIsNeverWipedOrDeleted(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	d := newDriver(t, f.opts)
	ctx := ctxTimeout(t, 60*time.Second)
	dev := provision(t, ctx, d, driver.Request{Model: "Pixel 8"})
	ready, err := d.MakeReady(ctx, dev)
	if err != nil {
		t.Fatal(err)
	}

	destructive := func() int {
		return len(findCalls(t, f.shims, "adb", "emu", "avd", "snapshot", "load")) + len(findCalls(t, f.shims, "adb", "emu", "kill")) +
			len(findCalls(t, f.shims, "avdmanager", "delete"))
	}
	before := destructive()
	setDurable(t, f, dev.ID, driver.NewMarkToken())
	if got := provenanceOf(t, d, ready).Drift(); got != driver.DriftMarkMismatch {
		t.Errorf("with another token in config.ini: drift %q, want mark-mismatch", got)
	}
	_, err = d.Reclaim(ctx, ready)
	refusedFor(t, err, "reclaim", driver.DriftMarkMismatch)
	refusedFor(t, d.Destroy(ctx, ready), "destroy", driver.DriftMarkMismatch)
	if n := destructive() - before; n != 0 {
		t.Errorf("refused calls still ran %d snapshot loads, kills or deletes", n)
	}
	if ems := liveEmulators(t, f.shims); len(ems) != 1 {
		t.Errorf("running emulators = %+v, want the refused device still running", ems)
	}

	// Stopping loses nothing and is allowed; the boot after a full clean
	// of a device that is not provably simlock's would wipe it, and is not.
	if err := d.Shutdown(ctx, ready); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	setDurable(t, f, dev.ID, "")
	if got := provenanceOf(t, d, dev).Drift(); got != driver.DriftDurableMissing {
		t.Errorf("without the mark line: drift %q, want durable-mark-missing", got)
	}
	if err := os.Remove(filepath.Join(f.root, dev.ID+".avd", "simlock-clean-baseline.json")); err != nil {
		t.Fatal(err)
	}
	boots := len(findCalls(t, f.shims, "emulator", "-avd", dev.ID))
	_, err = d.MakeReady(ctx, ready)
	refusedFor(t, err, "boot", driver.DriftDurableMissing)
	if n := len(findCalls(t, f.shims, "emulator", "-avd", dev.ID)); n != boots {
		t.Errorf("a refused boot launched the emulator")
	}
	if _, err := os.Stat(filepath.Join(f.root, dev.ID+".avd", "snapshots")); err != nil {
		t.Errorf("a refused boot dropped the snapshots: %v", err)
	}
}

// TestDeviceFromBeforeMarksIsMigrated: an AVD with no mark line and no
// token is never taken for drift; its next boot marks it in config.ini and
// on the guest, and records the token in the driver data.
func TestDeviceFromBeforeMarksIsMigrated(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	d := newDriver(t, f.opts)
	ctx := ctxTimeout(t, 60*time.Second)
	made := provision(t, ctx, d, driver.Request{Model: "Pixel 8"})
	setDurable(t, f, made.ID, "")
	legacy := driver.Device{ID: made.ID}
	if p := provenanceOf(t, d, legacy); p.Drift() != driver.DriftNone || p.Durable != "" {
		t.Fatalf("an unmarked legacy device: %+v, want no marks and no drift", p)
	}
	ready, err := d.MakeReady(ctx, legacy)
	if err != nil {
		t.Fatalf("MakeReady of a legacy device: %v", err)
	}
	token := tokenOf(t, ready)
	if token == "" || token == tokenOf(t, made) {
		t.Fatalf("after its first boot the driver data records %q, want a new token", token)
	}
	if p := provenanceOf(t, d, ready); p.Durable != token || p.Erasable != token || p.Drift() != driver.DriftNone {
		t.Errorf("the migrated device: %+v, want both marks %s", p, token)
	}
	// A legacy device's clean is never refused.
	if _, err := d.Reclaim(ctx, driver.Device{ID: made.ID, Address: ready.Address}); err != nil {
		t.Errorf("Reclaim of a legacy device: %v", err)
	}
}
