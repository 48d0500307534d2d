package ios

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/driver"
)

// udidPattern is a UUID, which every simctl UDID is. Checking it keeps a
// malformed ID, or a simctl keyword such as "all" or "booted", from ever
// reaching simctl where a device is expected.
var udidPattern = regexp.MustCompile(`^[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12}$`)

func udidOf(op string, dev driver.Device) (string, error) {
	if !udidPattern.MatchString(dev.ID) {
		return "", crash(op, "device id %q is not a simulator UDID", dev.ID)
	}
	return dev.ID, nil
}

// NotInRootError is a device simlock refused to act on because its set does
// not list it: the UDID belongs to another set (the user's own simulators)
// or no longer exists. Drivers return it inside a *driver.CrashError.
type NotInRootError struct {
	UDID string
	Root string
}

func (e *NotInRootError) Error() string {
	return fmt.Sprintf("device %s is not in simlock's device set %s; simlock acts only on devices it created there", e.UDID, e.Root)
}

// deviceData is Device.Data: what simctl made, and the token of the
// device's provenance marks (see provenance.go), which the driver checks its
// marks against; a device made before marks has none. The rest is for
// people and tools reading the registry.
type deviceData struct {
	UDID         string `json:"udid"`
	Name         string `json:"name"`
	DeviceTypeID string `json:"deviceTypeId"`
	RuntimeID    string `json:"runtimeId"`
	MarkToken    string `json:"markToken,omitempty"`
	// Mode is slim for a device made slim (its spec's mode); its boots
	// for a lease run the slim pass. SlimSignature is the signature its
	// last boot found it slimmed to, for a person reading the registry;
	// the device's own slim mark is what counts.
	Mode          contract.DeviceMode `json:"mode,omitempty"`
	SlimSignature string              `json:"slimSignature,omitempty"`
}

// newName names a simulator simlock-<uuid>. The name is cosmetic: it tells
// a person in Xcode's device list whose simulator it is, and proves nothing.
func newName() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("simlock-%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

// Provision creates a shut-down simulator for spec in the root and writes
// its provenance marks. It reads the catalog again rather than trusting a
// cache, so it creates on what is installed now; a spec that no longer
// resolves fails as ResolveSpec would. A simulator whose marks cannot be
// written is deleted again: unmarked, it could never be told from a
// stranger's.
func (d *Driver) Provision(ctx context.Context, spec contract.DeviceSpec) (driver.Device, error) {
	const op = string(driver.OpProvision)
	if spec.Platform != "" && spec.Platform != contract.PlatformIOS {
		return driver.Device{}, crash(op, "the ios driver cannot provision a %s device", spec.Platform)
	}
	c, err := d.catalog(ctx, op)
	if err != nil {
		return driver.Device{}, err
	}
	t, rt, err := c.resolve(spec.Model, spec.OSVersion)
	if err != nil {
		return driver.Device{}, err
	}
	name := newName()
	out, err := d.simctl(ctx, op, commandTimeout, nil, "create", name, t.id, rt.id)
	if err != nil {
		return driver.Device{}, err
	}
	udid := strings.TrimSpace(string(out))
	if udid == "" {
		return driver.Device{}, crash(op, "simctl create %s printed no UDID", name)
	}
	if !udidPattern.MatchString(udid) {
		return driver.Device{}, crash(op, "simctl create %s printed %q, not a UDID", name, udid)
	}
	token := driver.NewMarkToken()
	if err := d.writeMarks(op, udid, token); err != nil {
		if _, derr := d.simctl(ctx, op, commandTimeout, nil, "delete", udid); derr != nil {
			d.log.WarnContext(ctx, "could not delete a simulator left without marks", "udid", udid, "err", derr)
		}
		return driver.Device{}, err
	}
	dd := deviceData{UDID: udid, Name: name, DeviceTypeID: t.id, RuntimeID: rt.id, MarkToken: token}
	if spec.Mode == contract.DeviceModeSlim && slimmable(rt.v) {
		dd.Mode = contract.DeviceModeSlim
	}
	data, err := json.Marshal(dd)
	if err != nil {
		return driver.Device{}, crash(op, "%w", err)
	}
	return driver.Device{ID: udid, Address: udid, Data: data}, nil
}

// MakeReady boots the simulator and waits until it has finished booting.
// Booting a booted simulator is fine. A boot that is not done within two
// minutes is shut down, best effort, so it holds no memory, and is a
// *driver.BootTimeoutError. The address is the UDID, which never changes.
// A boot writes no mark, so an erase done outside simlock stays visible
// after it; only a device made before marks is brought under them here
// (adoptToken), its token returned in the driver data.
//
// A device made slim then gets its slim pass (slim.go), unless its slim
// mark says it is slimmed to the current signature already; the outcome is
// in the returned Device's Slim. A failed pass leaves the device running
// full and fails nothing; only the second boot's own failure is returned.
func (d *Driver) MakeReady(ctx context.Context, dev driver.Device) (driver.Device, error) {
	return d.bootDevice(ctx, dev, true)
}

// Recover boots a simulator that stopped under a lease. A simulator's boot
// never erases it (only Reclaim does), so what its holder did is still
// there, its slim pass included; Recover never runs the pass, it only says
// whether the device is still slimmed.
func (d *Driver) Recover(ctx context.Context, dev driver.Device) (driver.Device, error) {
	return d.bootDevice(ctx, dev, false)
}

// bootDevice is MakeReady (prepare set: a slim device gets its pass) and
// Recover.
func (d *Driver) bootDevice(ctx context.Context, dev driver.Device, prepare bool) (driver.Device, error) {
	const op = string(driver.OpBoot)
	udid, err := udidOf(op, dev)
	if err != nil {
		return driver.Device{}, err
	}
	dev = d.adoptToken(ctx, op, udid, dev)
	if err := d.boot(ctx, op, udid, bootstatusTimeout); err != nil {
		return driver.Device{}, err
	}
	dev.Address = udid
	var data deviceData
	if json.Unmarshal(dev.Data, &data) != nil || data.Mode != contract.DeviceModeSlim {
		return dev, nil
	}
	var out *driver.SlimOutcome
	if prepare {
		if out, err = d.slim(ctx, op, udid, data); err != nil {
			return driver.Device{}, err
		}
	} else {
		sig := d.slimOpts.signature(data.RuntimeID)
		out = &driver.SlimOutcome{Slimmed: d.slimmedTo(udid) == sig, Categories: d.slimOpts.Categories, Signature: sig}
	}
	data.SlimSignature = ""
	if out.Slimmed {
		data.SlimSignature = out.Signature
	}
	if b, err := json.Marshal(data); err == nil {
		dev.Data = b
	}
	dev.Slim = out
	return dev, nil
}

// boot boots the simulator and waits up to timeout for it to finish. A
// boot not done in time is shut down, best effort, so it holds no memory,
// and is a *driver.BootTimeoutError.
func (d *Driver) boot(ctx context.Context, op, udid string, timeout time.Duration) error {
	if _, err := d.simctl(ctx, op, commandTimeout, alreadyBooted, "boot", udid); err != nil {
		return err
	}
	_, err := d.simctl(ctx, op, timeout, nil, "bootstatus", udid, "-b")
	// Only bootstatus's own timeout is a slow boot; the caller's context
	// ending is the caller's doing and stays a crash.
	if callErr := (*CallError)(nil); errors.As(err, &callErr) && callErr.TimedOut() && ctx.Err() == nil {
		// The clean-up gets its own time, whatever is left of the caller's.
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), commandTimeout)
		defer cancel()
		if serr := d.shutdown(sctx, op, udid); serr != nil {
			d.log.WarnContext(ctx, "shut down after a boot timeout", "udid", udid, "err", serr)
		}
		return &driver.BootTimeoutError{DeviceID: udid, After: timeout.String()}
	}
	return err
}

// guard refuses to act on udid unless the root is still ours and lists it.
// simctl --set already keeps other sets out of reach; this catches a
// damaged registry, a swapped root, or a device gone from under us, before
// anything is stopped or wiped.
func (d *Driver) guard(ctx context.Context, op, udid string) error {
	if err := d.RevalidateRoot(); err != nil {
		return &driver.CrashError{Op: op, Err: err}
	}
	devs, err := d.listDevices(ctx, op)
	if err != nil {
		return err
	}
	if !slices.ContainsFunc(devs, func(o driver.Observed) bool { return strings.EqualFold(o.ID, udid) }) {
		return &driver.CrashError{Op: op, Err: &NotInRootError{UDID: udid, Root: d.root}}
	}
	return nil
}

// shutdown guards, then shuts the simulator down; one already shut down is
// fine.
func (d *Driver) shutdown(ctx context.Context, op, udid string) error {
	if err := d.guard(ctx, op, udid); err != nil {
		return err
	}
	return d.stop(ctx, op, udid)
}

// stop shuts a guarded simulator down.
func (d *Driver) stop(ctx context.Context, op, udid string) error {
	_, err := d.simctl(ctx, op, commandTimeout, alreadyShutdown, "shutdown", udid)
	return err
}

// Reclaim shuts the simulator down and erases it, which is the only clean
// iOS has, rewrites its provenance marks (the erase took the erasable one),
// and leaves it shut down: the warm pool decides whether to boot it again.
// A device whose durable mark is not the token simlock recorded is refused
// before anything is stopped or erased.
func (d *Driver) Reclaim(ctx context.Context, dev driver.Device) (driver.ReclaimResult, error) {
	const op = string(driver.OpReclaim)
	udid, err := udidOf(op, dev)
	if err != nil {
		return driver.ReclaimResult{}, err
	}
	if err := d.guard(ctx, op, udid); err != nil {
		return driver.ReclaimResult{}, err
	}
	if err := d.checkDurable(op, udid, dev); err != nil {
		return driver.ReclaimResult{}, err
	}
	if err := d.stop(ctx, op, udid); err != nil {
		return driver.ReclaimResult{}, err
	}
	if _, err := d.simctl(ctx, op, commandTimeout, nil, "erase", udid); err != nil {
		return driver.ReclaimResult{}, err
	}
	if err := d.writeMarks(op, udid, d.cleanToken(udid, dev)); err != nil {
		return driver.ReclaimResult{}, err
	}
	return driver.ReclaimResult{State: contract.DeviceShutdown, Strategy: "erase"}, nil
}

// Shutdown stops the simulator; a stopped one is not an error.
func (d *Driver) Shutdown(ctx context.Context, dev driver.Device) error {
	const op = "shutdown"
	udid, err := udidOf(op, dev)
	if err != nil {
		return err
	}
	return d.shutdown(ctx, op, udid)
}

// Destroy shuts the simulator down and deletes it. A UDID the root does not
// list is refused with a *NotInRootError, like every destructive call, and
// so is a device whose durable mark is not the token simlock recorded, with
// a *driver.ProvenanceError.
func (d *Driver) Destroy(ctx context.Context, dev driver.Device) error {
	const op = "destroy"
	udid, err := udidOf(op, dev)
	if err != nil {
		return err
	}
	if err := d.guard(ctx, op, udid); err != nil {
		var gone *NotInRootError
		if errors.As(err, &gone) {
			// Nothing of ours by that UDID: what Destroy wants is already
			// so, and a simulator of the same UDID elsewhere is not ours to
			// touch. Reporting success stops the core retrying forever.
			return nil
		}
		return err
	}
	if err := d.checkDurable(op, udid, dev); err != nil {
		return err
	}
	if err := d.stop(ctx, op, udid); err != nil {
		return err
	}
	_, err = d.simctl(ctx, op, commandTimeout, nil, "delete", udid)
	return err
}

// ListManaged reports every simulator in the root, sorted by UDID.
func (d *Driver) ListManaged(ctx context.Context) (driver.Reality, error) {
	devs, err := d.listDevices(ctx, "list")
	if err != nil {
		return driver.Reality{}, err
	}
	return driver.Reality{Devices: devs}, nil
}

// listDevices runs `list -j devices` in the root. Entries without a string
// name and udid are skipped, as nothing could be done with them.
func (d *Driver) listDevices(ctx context.Context, op string) ([]driver.Observed, error) {
	out, err := d.simctl(ctx, op, commandTimeout, nil, "list", "-j", "devices")
	if err != nil {
		return nil, err
	}
	devs, err := parseDevices(out)
	if err != nil {
		return nil, crash(op, "simctl list -j devices: %w", err)
	}
	return devs, nil
}

func parseDevices(b []byte) ([]driver.Observed, error) {
	var top struct {
		Devices map[string][]json.RawMessage `json:"devices"`
	}
	if err := json.Unmarshal(b, &top); err != nil {
		return nil, fmt.Errorf("not the JSON simctl prints: %w", err)
	}
	if top.Devices == nil {
		return nil, errors.New(`no "devices" object`)
	}
	out := []driver.Observed{}
	for runtimeID, entries := range top.Devices {
		for _, o := range objects(entries) {
			name, _ := field[string](o, "name")
			udid, _ := field[string](o, "udid")
			if name == "" || udid == "" {
				continue
			}
			state, _ := field[string](o, "state")
			typeID, _ := field[string](o, "deviceTypeIdentifier")
			data, err := json.Marshal(deviceData{UDID: udid, Name: name, DeviceTypeID: typeID, RuntimeID: runtimeID})
			if err != nil {
				return nil, err
			}
			out = append(out, driver.Observed{
				Device:   driver.Device{ID: udid, Address: udid, Data: data},
				Name:     name,
				RunState: runState(state),
			})
		}
	}
	slices.SortFunc(out, func(a, b driver.Observed) int { return cmp.Compare(a.ID, b.ID) })
	return out, nil
}

// runState maps CoreSimulator's state. "Booting" and "Shutting Down" are
// transitions, which never count as a crash.
func runState(s string) driver.RunState {
	switch s {
	case "Booted":
		return driver.Running
	case "Shutdown":
		return driver.Stopped
	}
	return driver.Transitioning
}
