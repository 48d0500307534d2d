package demo

import (
	"errors"
	"fmt"
	"strings"

	"github.com/simlock/simlock/internal/driver"
)

// Fault is a misbehaviour a simulated device can be given.
type Fault string

// The faults. Each describes what the device does from the moment Inject
// returns.
const (
	// FaultCrash stops the device as if its simulator or emulator process
	// died: ListManaged reports it stopped until it is booted again, and
	// MakeReady boots it as usual. A crashed Android device gives its
	// console port back and takes the lowest free one when booted again. A
	// boot in progress fails; a device that was not running is unchanged.
	FaultCrash Fault = "crash"
	// FaultVanish makes the device disappear, as if someone deleted it
	// behind simlock's back: ListManaged no longer lists it, its console
	// port is freed, and every operation on it fails with a
	// *driver.CrashError saying it does not exist, except Destroy, which
	// succeeds since there is nothing left to delete.
	FaultVanish Fault = "vanish"
	// FaultBootFail fails the device's next MakeReady, after the usual
	// wait, leaving the device as it was.
	FaultBootFail Fault = "boot-fail"
	// FaultReclaimFail fails the device's next Reclaim, after the usual
	// wait, leaving the device as it was: a booted device stays booted and
	// is not cleaned.
	FaultReclaimFail Fault = "reclaim-fail"
	// FaultErase erases the device as someone running simctl erase or
	// emulator -wipe-data outside simlock would: its erasable provenance
	// mark is gone (Provenance reports driver.DriftErased), its durable
	// one stays, and it keeps running or not as it was. simlock's next
	// clean of the device writes the mark again.
	FaultErase Fault = "erase"
	// FaultReplace puts another device in its place under the same id, as
	// if someone deleted it and made one with marks of their own: both
	// marks hold a token simlock never wrote (driver.DriftMarkMismatch),
	// so Reclaim and Destroy refuse it with a *driver.ProvenanceError.
	FaultReplace Fault = "replace"
)

// ErrUnknownDevice is wrapped by Inject's error when the driver knows no
// such device, so a caller can tell a wrong id from a wrong fault.
var ErrUnknownDevice = errors.New("demo: unknown device")

// ErrUnknownFault is wrapped by ParseFault's and Inject's error for a name
// that is not a fault.
var ErrUnknownFault = errors.New("demo: unknown fault")

// Faults lists every fault, in the order help text should show them.
func Faults() []Fault {
	return []Fault{FaultCrash, FaultVanish, FaultBootFail, FaultReclaimFail, FaultErase, FaultReplace}
}

// ParseFault checks a fault name (for the CLI and the daemon op). Names are
// exact, as Options.Fail's are: a near miss is more likely a typo than a
// request.
func ParseFault(s string) (Fault, error) {
	names := make([]string, 0, len(Faults()))
	for _, f := range Faults() {
		if s == string(f) {
			return f, nil
		}
		names = append(names, string(f))
	}
	return "", fmt.Errorf("%w %q: want one of %s", ErrUnknownFault, s, strings.Join(names, ", "))
}

// Inject gives the device with this driver device id (driver.Device.ID, as
// Provision returned it) a fault. It fails for an unknown fault, and for a
// device this driver does not know: one never provisioned or adopted by an
// operation, one destroyed, or one already vanished. Faults take effect at
// the next observation (ListManaged) or operation; boot-fail and
// reclaim-fail add up, each failing one call.
//
// Inject changes the device at once rather than at the next observation, so
// an operation in progress meets the fault as it would on a real machine: a
// boot under way when the device crashes or vanishes fails. With a state
// file, the fault is recorded before Inject returns, and a pending boot-fail
// or reclaim-fail outlives the process.
func (d *Driver) Inject(deviceID string, f Fault) error {
	if _, err := ParseFault(string(f)); err != nil {
		return err
	}
	if err := d.applyFault(deviceID, f); err != nil {
		return err
	}
	return d.save(deviceID)
}

func (d *Driver) applyFault(deviceID string, f Fault) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	rec, ok := d.devices[deviceID]
	if !ok {
		why := "it was never provisioned or used"
		if d.file != nil {
			// It may have been, before the process died; the world
			// does not remember.
			why = "it does not exist"
		}
		switch d.gone[deviceID] {
		case destroyed:
			why = "it was destroyed"
		case vanished:
			why = "it vanished"
		}
		return fmt.Errorf("%w %q: %s", ErrUnknownDevice, deviceID, why)
	}
	switch f {
	case FaultCrash:
		if rec.state == stateBooted || rec.state == stateBooting {
			d.freePort(deviceID, rec)
			rec.state = stateShutdown
		}
	case FaultVanish:
		d.freePort(deviceID, rec)
		delete(d.devices, deviceID)
		d.gone[deviceID] = vanished
	case FaultBootFail:
		rec.bootFails++
	case FaultReclaimFail:
		rec.reclaimFails++
	case FaultErase:
		rec.erasable = ""
		rec.files, rec.apps, rec.tools = nil, nil, nil
	case FaultReplace:
		token := driver.NewMarkToken()
		rec.durable, rec.erasable = token, token
		rec.files, rec.apps, rec.tools = nil, nil, nil
	}
	return nil
}

// takeFault uses up one of the faults *n counts and says whether there was
// one. The counts live in device records, so the caller holds d.mu.
func takeFault(n *int) bool {
	if *n == 0 {
		return false
	}
	*n--
	return true
}

var _ driver.FaultInjector = (*Driver)(nil)

// InjectFault is Inject for a fault named as text (the daemon's
// demo.inject): ParseFault's error for an unknown name, else Inject's.
func (d *Driver) InjectFault(deviceID, fault string) error {
	f, err := ParseFault(fault)
	if err != nil {
		return err
	}
	return d.Inject(deviceID, f)
}
