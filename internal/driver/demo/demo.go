// Package demo is the demo driver. It serves the ios or android platform with
// simulated devices, so that simlock runs on a machine without Xcode or the
// Android SDK, and so that end-to-end tests meet the behaviour of the real
// drivers: operations take time, iOS devices are erased and left shut down
// while Android devices are restored from a snapshot and left running, and a
// running Android device holds an emulator console port.
//
// The driver never runs a process or uses the network. By default a device is
// an entry in memory and is gone with the Driver; with Options.StateFile the
// simulated world (devices, their faults, installed runtimes) is also kept in
// files and outlives the process, as real simulators outlive simlock's
// daemon: a snapshot, and a journal to which each operation appends what it
// changed, at a cost that does not grow with the world. The journal is not
// synced, so the world survives the daemon being killed at any moment, but
// not a power cut (see stateFile in state.go).
//
// Runtimes can be downloaded too (see components.go): Options names versions
// that are downloadable but not installed, and InstallComponent installs one
// after a simulated download, after which the catalog offers it. Without a
// state file an install lives in memory like a device, so the daemon hands
// the runtimes simlock installed in earlier runs back through
// Options.Installed.
//
// Waits use time.NewTimer and end early when the context is done, so under
// testing/synctest they run on the bubble's fake clock. A call whose context
// is done fails with a *driver.CrashError that wraps the context's error, as a
// real driver's killed tool would.
//
// Failures can be injected per operation ("provision", "boot", "reclaim",
// "shutdown", "destroy", "install"): always, through Options.Fail, or once,
// through FailOn. An injected failure comes after the operation's usual wait
// and leaves the device as it was, or installs nothing. It is always a
// *driver.CrashError wrapping ErrInjected, boot included: the demo driver
// never returns *driver.BootTimeoutError, since that error means a device was
// slow, and a simulated device is exactly as slow as configured.
//
// A device can be given a fault through Inject (see faults.go): it crashes,
// vanishes, fails its next boot or reclaim, or is erased or replaced behind
// simlock's back, so that simlock's handling of sick devices can be seen
// without a real one. Its provenance marks are two tokens in its record,
// kept like the real drivers' files (see Provenance).
//
// A Driver is safe for concurrent use. Waits hold no lock, so operations on
// different devices overlap as they would on a real machine; one mutex guards
// all device state and the catalog, which installs and removals change. The
// driver contract lets the caller rely on never running two operations on the
// same device at once; if it does anyway, the driver still stays consistent:
// no console port is lost or given twice.
package demo

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/driver"
	"github.com/simlock/simlock/internal/ids"
)

var (
	_ driver.Driver           = (*Driver)(nil)
	_ driver.Installer        = (*Driver)(nil)
	_ driver.ProvenanceReader = (*Driver)(nil)
)

// ErrInjected is the cause of every injected failure, so a test can tell an
// injected failure from a real one with errors.Is.
var ErrInjected = errors.New("demo: injected failure")

// The operation names Options.Fail and FailOn accept. They match
// driver.Operation where the two overlap, and the Op of a *driver.CrashError.
const (
	opProvision = string(driver.OpProvision)
	opBoot      = string(driver.OpBoot)
	opReclaim   = string(driver.OpReclaim)
	opShutdown  = "shutdown"
	opDestroy   = "destroy"
	opInstall   = "install"
	// opSlim is a slim device's slim pass: failing it leaves the device
	// running full, as a failed pass of the iOS driver does.
	opSlim = "slim"
)

func knownOp(op string) bool {
	switch op {
	case opProvision, opBoot, opReclaim, opShutdown, opDestroy, opInstall, opSlim:
		return true
	}
	return false
}

// The emulator accepts even console ports from 5554 to 5682. Starting above
// 5584 keeps simlock's emulators out of the range adb scans by default, which
// a user's own emulators take; the demo driver hands out what the real one
// would.
const (
	firstPort = 5586
	lastPort  = 5682
)

// Options configures a Driver.
type Options struct {
	// Platform is the platform served: contract.PlatformIOS or
	// contract.PlatformAndroid.
	Platform contract.Platform
	// ProvisionTime, BootTime and ReclaimTime are how long Provision,
	// MakeReady and Reclaim take. Shutdown and Destroy take ReclaimTime/4,
	// being a part of what a reclaim does. Zero means no wait at all.
	ProvisionTime, BootTime, ReclaimTime time.Duration
	// Fail names operations that always fail: any of "provision", "boot",
	// "reclaim", "shutdown", "destroy" and "install".
	Fail []string
	// DownloadableRuntimes are the versions InstallComponent can install
	// ("26.4" on iOS, API level "37" on Android). One that is installed
	// already (built in, or named in Installed) is simply installed; it
	// becomes downloadable when removed.
	DownloadableRuntimes []string
	// DownloadTime is how long InstallComponent takes. Zero means no wait.
	DownloadTime time.Duration
	// DownloadQuietTime is how long, at a download's start, it prints no
	// percentage (as an installer that has not learnt the size yet); the
	// percentages then run over DownloadTime. Zero: one at once.
	DownloadQuietTime time.Duration
	// Installed are runtimes installed from the start besides the built-in
	// ones: those simlock downloaded in earlier runs, since an install
	// lives only as long as the Driver. An entry is a version, or the
	// Receipt of an earlier install ("demo:ios:26.4:3"), which the runtime
	// then keeps so that simlock's record of that install still matches it.
	// A bare version gets the receipt "demo:<platform>:<version>:restored".
	// Installed is applied after the state file, so it has the last word.
	Installed []string
	// StateFile, when set, keeps the simulated world in the file
	// StatePath(StateFile, Platform), so that a Driver made after the
	// process died finds it as a real machine would. The two platforms'
	// drivers may be given the same StateFile: each has files of its own.
	//
	// The world is the snapshot StatePath(StateFile, Platform) and the
	// journal JournalPath(StateFile, Platform), both mode 0600.
	//
	// New loads the world from the snapshot, if it exists, and the journal
	// (an absent snapshot is an empty world, and a journal without one is
	// discarded), and fails, naming the file, if either cannot be read or
	// is corrupt; a last journal line cut short by a kill is ignored. New
	// then compacts: it writes the loaded world as the new snapshot,
	// atomically, and empties the journal. Each change is then appended to
	// the journal before the operation that made it returns, and is safe
	// from a kill of the process from then on; an operation that changes
	// nothing writes nothing. An operation whose change cannot be written
	// fails with a *driver.CrashError (Inject with the plain error), its
	// change made nonetheless, as a real tool that crashed after acting;
	// the next write records it. What a loaded device comes back as is
	// settled as described at settle in state.go: booted devices still
	// run, and booting ones go on booting until their boot time passes.
	//
	// The files hold the whole world, so a Driver with a StateFile adopts
	// no device it does not know: an operation on one fails saying it does
	// not exist, as for a vanished device, except Destroy, which succeeds.
	// The configuration (times, Fail, FailOn) is not part of the world and
	// is not kept. Only one Driver at a time may use a platform's files.
	StateFile string
}

type devState int

const (
	stateCreated devState = iota // provisioned, never booted
	stateBooting
	stateBooted
	stateShutdown
)

type device struct {
	// spec is what the device was provisioned as; zero for one adopted.
	spec  deviceData
	state devState
	// port is the console port an Android device holds while booting or
	// booted; 0 otherwise.
	port int
	// bootFails and reclaimFails count the injected faults that fail the
	// device's next boots and reclaims.
	bootFails, reclaimFails int
	// durable and erasable are the tokens of the device's provenance
	// marks, as the real drivers keep them beside the device and in its
	// user data; "" for a mark that is gone. FaultErase takes the
	// erasable one, FaultReplace changes both, and a reclaim writes the
	// erasable one again.
	durable, erasable string
	// bootDoneAt is when a boot that is under way comes up (epoch ms): a
	// device boots on its own, as a simulator does once asked, so a boot
	// outlives the daemon that asked for it. bootingHere is whether a
	// MakeReady of this process waits for it (the one that ends it).
	bootDoneAt  int64
	bootingHere bool
	// slimmed is whether a slim device's pass is in effect: from the boot
	// that ran it until a clean erases it.
	slimmed bool
	// files and apps are what a lease holder put on the device (see
	// files.go), until a clean wipes them.
	files map[string][]byte
	apps  map[string]contract.AppKind
	// tools is what the device tools changed (see devicetools.go), until
	// a clean wipes it.
	tools *tools
}

// upLocked ends, for rec, a boot that came up on its own: one no MakeReady
// of this process waits for (a daemon that asked for it went away), whose
// time has passed. d.mu must be held.
func (d *Driver) upLocked(rec *device) {
	if rec.state == stateBooting && !rec.bootingHere && rec.bootDoneAt > 0 && time.Now().UnixMilli() >= rec.bootDoneAt {
		rec.state, rec.bootDoneAt = stateBooted, 0
	}
}

// absence says why a device this driver knew is no longer there, so that an
// operation on it can say so.
type absence int

const (
	destroyed absence = iota + 1
	vanished
)

// Driver is the demo driver. Create it with New.
type Driver struct {
	platform contract.Platform
	// alwaysFail, the times and runtimes are set by New and never changed,
	// so they are read without the lock.
	alwaysFail                                                        map[string]bool
	provisionTime, bootTime, reclaimTime, downloadTime, downloadQuiet time.Duration
	runtimes                                                          runtimeTable
	// file is where the world is kept, nil without Options.StateFile. It
	// has a lock of its own.
	file *stateFile

	// mu guards the fields below.
	mu sync.Mutex
	// catalog is what is installed now. Its Runtimes and every
	// ModelRuntimes list are kept newest first, which ResolveSpec relies
	// on, and Downloadable lists the downloadable runtimes not installed.
	catalog driver.Catalog
	// receipts holds the receipt of every installed runtime.
	receipts map[string]string
	// installs counts installs, so that each gets a receipt of its own.
	installs int
	devices  map[string]*device
	// ports maps a console port to the ID of the device holding it. The
	// holder is checked before a port is freed, so a late release cannot
	// free a port already handed to another device.
	ports map[int]string
	// gone holds the ids of devices this driver destroyed or made vanish,
	// which are never adopted again.
	gone map[string]absence
	// calls counts calls per operation, whatever their outcome.
	calls map[string]int
	// failAt holds, per operation, call numbers that fail once.
	failAt map[string]map[int]bool
}

// New returns a driver for opts.Platform. It rejects an invalid platform, a
// negative time, an unknown operation name in opts.Fail and a runtime in
// opts.DownloadableRuntimes or opts.Installed that is not a version (or, in
// Installed, a receipt of this platform).
func New(opts Options) (*Driver, error) {
	if !opts.Platform.Valid() {
		return nil, fmt.Errorf("demo: invalid platform %q: want %q or %q",
			opts.Platform, contract.PlatformIOS, contract.PlatformAndroid)
	}
	for name, d := range map[string]time.Duration{
		"ProvisionTime": opts.ProvisionTime,
		"BootTime":      opts.BootTime,
		"ReclaimTime":   opts.ReclaimTime,
		"DownloadTime":  opts.DownloadTime,
		"DownloadQuiet": opts.DownloadQuietTime,
	} {
		if d < 0 {
			return nil, fmt.Errorf("demo: %s is negative: %s", name, d)
		}
	}
	always := make(map[string]bool, len(opts.Fail))
	for _, op := range opts.Fail {
		if !knownOp(op) {
			return nil, fmt.Errorf("demo: unknown operation %q in Fail: want one of provision, boot, reclaim, shutdown, destroy, install", op)
		}
		always[op] = true
	}
	catalog := catalogFor(opts.Platform)
	runtimes, err := newRuntimeTable(catalog, opts.DownloadableRuntimes)
	if err != nil {
		return nil, err
	}
	d := &Driver{
		platform:      opts.Platform,
		alwaysFail:    always,
		provisionTime: opts.ProvisionTime,
		bootTime:      opts.BootTime,
		reclaimTime:   opts.ReclaimTime,
		downloadTime:  opts.DownloadTime,
		downloadQuiet: opts.DownloadQuietTime,
		runtimes:      runtimes,
		catalog:       catalog,
		receipts:      make(map[string]string, len(catalog.Runtimes)),
		devices:       make(map[string]*device),
		ports:         make(map[int]string),
		gone:          make(map[string]absence),
		calls:         make(map[string]int),
		failAt:        make(map[string]map[int]bool),
	}
	for _, v := range catalog.Runtimes {
		d.receipts[v] = d.receipt(v, builtinStamp)
	}
	if opts.StateFile != "" {
		d.file = &stateFile{
			path:    StatePath(opts.StateFile, opts.Platform),
			journal: JournalPath(opts.StateFile, opts.Platform),
		}
		if err := d.load(); err != nil {
			return nil, err
		}
	}
	if err := d.restore(opts.Installed); err != nil {
		return nil, err
	}
	d.refreshLocked()
	// Compacted at once, so that the settled world is what the snapshot
	// says, the journal starts empty (without a line a killed daemon left
	// half written), and files that cannot be written show now rather than
	// at the first operation.
	if d.file != nil {
		if err := d.compact(); err != nil {
			return nil, err
		}
	}
	return d, nil
}

// FailOn makes the n-th call of op from now on (1 is the next call) fail
// once. op is one of "provision", "boot", "reclaim", "shutdown", "destroy"
// and "install". Every call counts, whatever its outcome. An unknown op or an
// n below 1 is a programming error and panics.
func (d *Driver) FailOn(op string, n int) {
	if !knownOp(op) {
		panic(fmt.Sprintf("demo: FailOn: unknown operation %q", op))
	}
	if n < 1 {
		panic(fmt.Sprintf("demo: FailOn: n is %d, want 1 or more", n))
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.failAt[op] == nil {
		d.failAt[op] = make(map[int]bool)
	}
	d.failAt[op][d.calls[op]+n] = true
}

// Name returns "demo".
func (d *Driver) Name() string { return "demo" }

// Platform returns the platform served.
func (d *Driver) Platform() contract.Platform { return d.platform }

// ResolveSpec matches the model by its name or, ignoring case, an alias. An
// empty OS version picks the newest installed runtime paired with the model;
// a version such as "18" picks the newest paired runtime that is "18" or
// starts with "18.". When no installed runtime fits but a downloadable one
// would, and would pair with the model once installed, the
// *driver.RuntimeMissingError is Downloadable and names it as its Component.
func (d *Driver) ResolveSpec(_ context.Context, req driver.Request) (contract.DeviceSpec, error) {
	if req.Platform != "" && req.Platform != d.platform {
		return contract.DeviceSpec{}, fmt.Errorf("demo: driver serves %s, not %s", d.platform, req.Platform)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	model, ok := d.canonicalModelLocked(req.Model)
	if !ok {
		return contract.DeviceSpec{}, &driver.UnknownModelError{Platform: d.platform, Model: req.Model}
	}
	version, ok := pickRuntime(d.catalog.ModelRuntimes[model], req.OSVersion)
	if !ok {
		missing := &driver.RuntimeMissingError{Platform: d.platform, OSVersion: req.OSVersion}
		// Downloadable is newest first, like the installed runtimes.
		for _, v := range d.catalog.Downloadable {
			if _, fits := pickRuntime([]string{v}, req.OSVersion); fits && slices.Contains(d.runtimes.pairs(v), model) {
				missing.Downloadable, missing.Component = true, v
				break
			}
		}
		return contract.DeviceSpec{}, missing
	}
	spec := contract.DeviceSpec{Platform: d.platform, Model: model, OSVersion: version}
	if req.Mode == contract.DeviceModeSlim && slimmable(d.platform, version) {
		spec.Mode = contract.DeviceModeSlim
	}
	return spec, nil
}

// canonicalModelLocked needs d.mu held, as the catalog is read.
func (d *Driver) canonicalModelLocked(name string) (string, bool) {
	if _, ok := d.catalog.ModelClasses[name]; ok {
		return name, true
	}
	for model, aliases := range d.catalog.ModelAliases {
		for _, a := range aliases {
			if strings.EqualFold(a, name) {
				return model, true
			}
		}
	}
	return "", false
}

// pickRuntime relies on paired being ordered newest first.
func pickRuntime(paired []string, want string) (string, bool) {
	for _, v := range paired {
		if want == "" || v == want || strings.HasPrefix(v, want+".") {
			return v, true
		}
	}
	return "", false
}

// deviceData is what Provision puts in Device.Data: the spec, so the core
// stores realistic driver data, and the token of the provenance marks,
// which the driver checks the marks against (none for a device from before
// marks).
type deviceData struct {
	Model     string              `json:"model"`
	OSVersion string              `json:"osVersion"`
	Mode      contract.DeviceMode `json:"mode,omitempty"`
	MarkToken string              `json:"markToken,omitempty"`
}

// tokenOf is the mark token dev's driver data records.
func tokenOf(dev driver.Device) string {
	var data deviceData
	_ = json.Unmarshal(dev.Data, &data) // no data, no token
	return data.MarkToken
}

// withToken is dev with token recorded in its driver data.
func withToken(dev driver.Device, token string) driver.Device {
	var data deviceData
	_ = json.Unmarshal(dev.Data, &data)
	data.MarkToken = token
	if b, err := json.Marshal(data); err == nil {
		dev.Data = b
	}
	return dev
}

// Provision creates a device after ProvisionTime. The spec must come from
// ResolveSpec; one outside the catalog fails as a real tool would.
func (d *Driver) Provision(ctx context.Context, spec contract.DeviceSpec) (driver.Device, error) {
	fail := d.begin(opProvision)
	d.mu.Lock()
	offered := slices.Contains(d.catalog.ModelRuntimes[spec.Model], spec.OSVersion)
	d.mu.Unlock()
	if spec.Platform != d.platform || !offered {
		return driver.Device{}, crash(opProvision, fmt.Errorf("demo: %s %s %s is not in the catalog", spec.Platform, spec.Model, spec.OSVersion))
	}
	if err := run(ctx, opProvision, d.provisionTime, fail); err != nil {
		return driver.Device{}, err
	}
	token := driver.NewMarkToken()
	mode := spec.Mode
	if mode != contract.DeviceModeSlim || !slimmable(d.platform, spec.OSVersion) {
		mode = ""
	}
	data, err := json.Marshal(deviceData{Model: spec.Model, OSVersion: spec.OSVersion, Mode: mode, MarkToken: token})
	if err != nil {
		return driver.Device{}, crash(opProvision, err)
	}
	d.mu.Lock()
	id := d.newIDLocked()
	d.devices[id] = &device{spec: deviceData{Model: spec.Model, OSVersion: spec.OSVersion, Mode: mode}, state: stateCreated, durable: token, erasable: token}
	d.mu.Unlock()
	if err := d.saved(opProvision, nil, id); err != nil {
		return driver.Device{}, err
	}
	return driver.Device{ID: id, Data: data}, nil
}

// newIDLocked returns a random id that no device this driver knows, or
// knew, has: a map lookup or two, whatever the number of devices. d.mu must
// be held.
func (d *Driver) newIDLocked() string {
	for {
		id := d.randomID()
		if _, taken := d.devices[id]; !taken && d.gone[id] == 0 {
			return id
		}
	}
}

func (d *Driver) randomID() string {
	if d.platform == contract.PlatformAndroid {
		return ids.New("simlock_", 6) // an AVD name, as the Android driver makes
	}
	var b [16]byte
	_, _ = rand.Read(b[:])
	// Version 4 and the RFC 4122 variant, so the UDID is a valid UUID like
	// the ones simctl makes.
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%X-%X-%X-%X-%X", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

// Recover boots a device that stopped under a lease; a demo boot keeps the
// device as it was, its slim pass included, so this is MakeReady without
// the pass.
func (d *Driver) Recover(ctx context.Context, dev driver.Device) (driver.Device, error) {
	dev, err := d.boot(ctx, dev)
	if err != nil {
		return driver.Device{}, err
	}
	return d.slim(ctx, dev, false)
}

// MakeReady boots the device after BootTime; a booted device is returned at
// once. An Android device takes the lowest free console port when the boot
// starts and keeps it until it stops. A boot writes no mark, so an erase
// stays visible until simlock's next clean; a device made before marks is
// brought under them (adoptMarksLocked), its token returned in the driver
// data. A slim device not slimmed since its last clean then gets its slim
// pass, which takes a second BootTime, as the iOS driver's second boot.
func (d *Driver) MakeReady(ctx context.Context, dev driver.Device) (driver.Device, error) {
	dev, err := d.boot(ctx, dev)
	if err != nil {
		return driver.Device{}, err
	}
	return d.slim(ctx, dev, true)
}

// slimmable reports whether a device of platform p and this version can be
// slimmed, as the iOS driver decides: iOS 18.5 and later.
func slimmable(p contract.Platform, version string) bool {
	return p == contract.PlatformIOS && contract.CompareVersions(version, "18.5") >= 0
}

// The slim pass the demo driver simulates: every category, and as many
// services as the iOS driver's table disables.
const (
	demoSlimLabels    = 44
	demoSlimSignature = "demo-slim-1"
)

// slim runs the slim pass of a booted slim device that its last clean left
// full, when prepare is set; otherwise, or on a full device, it only says
// where the device is. A failed pass (Fail or FailOn "slim") leaves the
// device running full and fails nothing.
func (d *Driver) slim(ctx context.Context, dev driver.Device, prepare bool) (driver.Device, error) {
	d.mu.Lock()
	rec := d.devices[dev.ID]
	if rec == nil || rec.spec.Mode != contract.DeviceModeSlim {
		d.mu.Unlock()
		return dev, nil
	}
	out := &driver.SlimOutcome{Slimmed: rec.slimmed, Categories: contract.SlimCategories(), Labels: demoSlimLabels, Signature: demoSlimSignature}
	dev.Slim = out
	if rec.slimmed || !prepare {
		d.mu.Unlock()
		return dev, nil
	}
	d.mu.Unlock()
	if d.begin(opSlim) {
		out.Err = ErrInjected
		return dev, nil
	}
	start := time.Now()
	driver.BootStep(ctx, fmt.Sprintf("slim: disabling %d background services", demoSlimLabels))
	driver.BootStep(ctx, "slim: booting again without them")
	if err := sleep(ctx, d.bootTime); err != nil {
		return driver.Device{}, crash(opBoot, err)
	}
	d.mu.Lock()
	if d.devices[dev.ID] != rec || rec.state != stateBooted {
		d.mu.Unlock()
		return driver.Device{}, crash(opBoot, fmt.Errorf("demo: device %s stopped during its slim pass", dev.ID))
	}
	rec.slimmed = true
	d.mu.Unlock()
	if err := d.saved(opBoot, nil, dev.ID); err != nil {
		return driver.Device{}, err
	}
	out.Slimmed, out.Applied, out.Duration = true, true, time.Since(start)
	return dev, nil
}

// boot is MakeReady and Recover up to the slim pass.
func (d *Driver) boot(ctx context.Context, dev driver.Device) (driver.Device, error) {
	fail := d.begin(opBoot)

	if dev.ID == "" {
		return driver.Device{}, crash(opBoot, fmt.Errorf("demo: no device id"))
	}
	d.mu.Lock()
	rec := d.adoptLocked(dev, stateShutdown)
	if rec == nil {
		err := d.absentLocked(opBoot, dev.ID, "")
		d.mu.Unlock()
		return driver.Device{}, err
	}
	dev = adoptMarksLocked(dev, rec)
	d.upLocked(rec)
	switch rec.state {
	case stateBooted:
		fail = takeFault(&rec.bootFails) || fail
		addr := d.address(dev.ID, rec)
		d.mu.Unlock()
		if err := d.saved(opBoot, run(ctx, opBoot, 0, fail), dev.ID); err != nil {
			return driver.Device{}, err
		}
		dev.Address = addr
		return dev, nil
	case stateBooting:
		if rec.bootingHere || rec.bootDoneAt == 0 {
			d.mu.Unlock()
			return driver.Device{}, crash(opBoot, fmt.Errorf("demo: device %s is already booting", dev.ID))
		}
		// A boot a previous daemon asked for, still under way: wait for it
		// to come up, as a real driver waits for a boot in progress.
		rec.bootingHere = true
		left := time.Until(time.UnixMilli(rec.bootDoneAt))
		d.mu.Unlock()
		booted, err := d.endBoot(dev, rec, stateShutdown, run(ctx, opBoot, left, false))
		if err := d.saved(opBoot, err, dev.ID); err != nil {
			return driver.Device{}, err
		}
		return booted, nil
	}
	prev := rec.state
	if d.platform == contract.PlatformAndroid {
		port, ok := d.takePort(dev.ID)
		if !ok {
			d.mu.Unlock()
			return driver.Device{}, crash(opBoot, fmt.Errorf("demo: no free emulator console port in %d-%d", firstPort, lastPort))
		}
		rec.port = port
	}
	fail = takeFault(&rec.bootFails) || fail
	rec.state, rec.bootingHere = stateBooting, true
	if !fail {
		rec.bootDoneAt = time.Now().Add(d.bootTime).UnixMilli()
	}
	d.mu.Unlock()
	// Recorded before the wait, so that a daemon killed during the boot
	// leaves a booting device for the next one to settle. A failure is not
	// reported here: the save at the end writes this change too, or says
	// it could not.
	_ = d.save(dev.ID)

	driver.BootStep(ctx, bootStep(d.platform))
	booted, err := d.endBoot(dev, rec, prev, run(ctx, opBoot, d.bootTime, fail))
	if err := d.saved(opBoot, err, dev.ID); err != nil {
		return driver.Device{}, err
	}
	return booted, nil
}

// bootStep is the step a simulated boot reports, as the real driver of the
// platform would.
func bootStep(p contract.Platform) string {
	if p == contract.PlatformAndroid {
		return "waiting for sys.boot_completed"
	}
	return "waiting for the simulator to finish booting"
}

// endBoot settles the boot of rec, which started in state prev, once its
// wait ended with err.
func (d *Driver) endBoot(dev driver.Device, rec *device, prev devState, err error) (driver.Device, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	// Destroy, Shutdown and Inject free the port themselves, so a device
	// they took away or stopped mid-boot needs no cleanup here.
	rec.bootingHere = false
	if d.devices[dev.ID] != rec {
		return driver.Device{}, d.absentLocked(opBoot, dev.ID, "booting")
	}
	if rec.state != stateBooting {
		return driver.Device{}, crash(opBoot, fmt.Errorf("demo: device %s stopped while booting", dev.ID))
	}
	rec.bootDoneAt = 0
	if err != nil {
		d.freePort(dev.ID, rec)
		rec.state = prev
		return driver.Device{}, err
	}
	rec.state = stateBooted
	dev.Address = d.address(dev.ID, rec)
	return dev, nil
}

// address is the UDID on iOS, where simctl takes it, and the adb serial on
// Android. d.mu must be held.
func (d *Driver) address(id string, rec *device) string {
	if d.platform == contract.PlatformAndroid {
		return fmt.Sprintf("emulator-%d", rec.port)
	}
	return id
}

// takePort gives id the lowest free port; d.mu must be held.
func (d *Driver) takePort(id string) (int, bool) {
	for p := firstPort; p <= lastPort; p += 2 {
		if _, taken := d.ports[p]; !taken {
			d.ports[p] = id
			return p, true
		}
	}
	return 0, false
}

// freePort releases the port rec holds, if any; d.mu must be held.
func (d *Driver) freePort(id string, rec *device) {
	if rec.port != 0 && d.ports[rec.port] == id {
		delete(d.ports, rec.port)
	}
	rec.port = 0
}

// Reclaim cleans the device after ReclaimTime, as the real drivers do: an iOS
// device is erased, which needs it shut down, and is left shut down; an
// Android device is restored from its snapshot and is left running, or left
// stopped if it was not running.
func (d *Driver) Reclaim(ctx context.Context, dev driver.Device) (driver.ReclaimResult, error) {
	fail := d.begin(opReclaim)
	if dev.ID == "" {
		return driver.ReclaimResult{}, crash(opReclaim, fmt.Errorf("demo: no device id"))
	}
	d.mu.Lock()
	adopted := d.adoptLocked(dev, stateBooted)
	if adopted == nil {
		err := d.absentLocked(opReclaim, dev.ID, "")
		d.mu.Unlock()
		return driver.ReclaimResult{}, err
	}
	if err := driver.CheckDurable(dev.ID, tokenOf(dev), adopted.durable); err != nil {
		d.mu.Unlock()
		return driver.ReclaimResult{}, crash(opReclaim, err)
	}
	fail = takeFault(&adopted.reclaimFails) || fail
	d.mu.Unlock()
	// The fault is used up even if the daemon dies during the wait; as in
	// MakeReady, the save at the end reports a failure.
	_ = d.save(dev.ID)
	if err := run(ctx, opReclaim, d.reclaimTime, fail); err != nil {
		return driver.ReclaimResult{}, d.saved(opReclaim, err, dev.ID)
	}
	res, err := d.endReclaim(dev)
	if err := d.saved(opReclaim, err, dev.ID); err != nil {
		return driver.ReclaimResult{}, err
	}
	return res, nil
}

// endReclaim leaves device dev as a reclaim does once its wait is over,
// its marks written again: the clean took the erasable one, as the real
// drivers' do.
func (d *Driver) endReclaim(dev driver.Device) (driver.ReclaimResult, error) {
	id := dev.ID
	d.mu.Lock()
	defer d.mu.Unlock()
	rec, ok := d.devices[id]
	if !ok {
		return driver.ReclaimResult{}, d.absentLocked(opReclaim, id, "reclaiming")
	}
	token := tokenOf(dev)
	switch {
	case token != "":
	case rec.durable != "":
		token = rec.durable
	default:
		token = driver.NewMarkToken()
	}
	rec.durable, rec.erasable = token, token
	// An erase and a snapshot restore alike take what the lease holder
	// put on the device.
	rec.files, rec.apps, rec.tools = nil, nil, nil
	if d.platform == contract.PlatformIOS {
		d.freePort(id, rec)
		rec.state = stateShutdown
		rec.slimmed = false // the erase undoes the slim pass
		return driver.ReclaimResult{State: contract.DeviceShutdown, Strategy: "erase"}, nil
	}
	if rec.state == stateBooted {
		return driver.ReclaimResult{State: contract.DeviceReady, Strategy: "snapshot"}, nil
	}
	return driver.ReclaimResult{State: contract.DeviceShutdown, Strategy: "snapshot"}, nil
}

// Shutdown stops a running device after ReclaimTime/4; a stopped device is
// left as it is at once.
func (d *Driver) Shutdown(ctx context.Context, dev driver.Device) error {
	fail := d.begin(opShutdown)
	if dev.ID == "" {
		return crash(opShutdown, fmt.Errorf("demo: no device id"))
	}
	d.mu.Lock()
	rec := d.adoptLocked(dev, stateBooted)
	if rec == nil {
		err := d.absentLocked(opShutdown, dev.ID, "")
		d.mu.Unlock()
		return err
	}
	running := rec.state == stateBooted || rec.state == stateBooting
	d.mu.Unlock()
	wait := time.Duration(0)
	if running {
		wait = d.stopTime()
	}
	if err := run(ctx, opShutdown, wait, fail); err != nil {
		return err
	}
	d.mu.Lock()
	rec, ok := d.devices[dev.ID]
	if !ok && d.gone[dev.ID] == vanished {
		// A destroyed device is stopped indeed; a vanished one is not
		// there to have stopped.
		err := d.absentLocked(opShutdown, dev.ID, "shutting down")
		d.mu.Unlock()
		return err
	}
	if ok && running {
		d.freePort(dev.ID, rec)
		rec.state = stateShutdown
	}
	d.mu.Unlock()
	return d.saved(opShutdown, nil, dev.ID)
}

// Destroy deletes the device after ReclaimTime/4, stopping it first if it
// runs. A device that does not exist is already what the caller wants, so it
// is not an error, a vanished one included; that lets the core retry a
// destroy that failed half way. One whose durable mark is not the token its
// driver data records is refused at once with a *driver.ProvenanceError.
func (d *Driver) Destroy(ctx context.Context, dev driver.Device) error {
	fail := d.begin(opDestroy)
	wait := time.Duration(0)
	d.mu.Lock()
	rec, exists := d.devices[dev.ID]
	var refused error
	if exists {
		refused = driver.CheckDurable(dev.ID, tokenOf(dev), rec.durable)
	}
	d.mu.Unlock()
	if refused != nil {
		return crash(opDestroy, refused)
	}
	if exists {
		wait = d.stopTime()
	}
	if err := run(ctx, opDestroy, wait, fail); err != nil {
		return err
	}
	d.mu.Lock()
	if rec, ok := d.devices[dev.ID]; ok {
		d.freePort(dev.ID, rec)
		delete(d.devices, dev.ID)
	}
	d.gone[dev.ID] = destroyed
	d.mu.Unlock()
	return d.saved(opDestroy, nil, dev.ID)
}

// adoptLocked returns the record of device dev, creating it in state s when
// this driver has never seen it. Demo devices live only in memory, so after
// a daemon restart the registry names devices this driver instance never
// created; like a real simulator that survived the restart, they exist,
// with the marks simlock wrote on them (the token dev's data records).
// An adopted Android device that is running gets a console port.
// A device this driver destroyed stays gone, and a driver with a state file
// adopts nothing: the file is the whole world, as a real machine's is.
func (d *Driver) adoptLocked(dev driver.Device, s devState) *device {
	id := dev.ID
	if rec, ok := d.devices[id]; ok {
		return rec
	}
	if d.gone[id] != 0 || d.file != nil {
		return nil
	}
	token := tokenOf(dev)
	var data deviceData
	_ = json.Unmarshal(dev.Data, &data) // no data: a full device of no spec
	rec := &device{spec: data, state: s, durable: token, erasable: token}
	rec.spec.MarkToken = ""
	d.devices[id] = rec
	if s == stateBooted && d.platform == contract.PlatformAndroid {
		if port, ok := d.takePort(id); ok {
			rec.port = port
		}
	}
	return rec
}

// absentLocked is the error of op on device id, which adoptLocked refused or
// which went away during the operation's wait (during names what op was
// doing then). A destroyed device was deleted; a vanished one, or one a
// driver with a state file never knew, does not exist, as far as anyone can
// tell. d.mu must be held.
func (d *Driver) absentLocked(op, id, during string) error {
	var err error
	switch {
	case d.gone[id] == destroyed && during != "":
		err = fmt.Errorf("demo: device %s was deleted while %s", id, during)
	case d.gone[id] == destroyed:
		err = fmt.Errorf("demo: device %s was deleted", id)
	case during != "":
		err = fmt.Errorf("demo: device %s vanished while %s: it does not exist", id, during)
	default:
		err = fmt.Errorf("demo: device %s does not exist", id)
	}
	return crash(op, err)
}

func (d *Driver) stopTime() time.Duration { return d.reclaimTime / 4 }

// adoptMarksLocked brings rec, a device made before marks, under them: dev
// gets the token of its durable mark, or, when it has no mark at all, a new
// token both marks then hold. A device that kept only its erasable mark is
// left as it is, for Provenance to report. d.mu must be held.
func adoptMarksLocked(dev driver.Device, rec *device) driver.Device {
	if tokenOf(dev) != "" {
		return dev
	}
	if rec.durable == "" {
		if rec.erasable != "" {
			return dev
		}
		token := driver.NewMarkToken()
		rec.durable, rec.erasable = token, token
	}
	return withToken(dev, rec.durable)
}

// Provenance reports the device's marks beside the token dev's driver data
// records. An Android device's erasable mark is inside the running guest,
// so it is readable only while the device is booted, as on a real one.
func (d *Driver) Provenance(_ context.Context, dev driver.Device) (driver.Provenance, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	rec, ok := d.devices[dev.ID]
	if !ok {
		return driver.Provenance{}, d.absentLocked("provenance", dev.ID, "")
	}
	p := driver.Provenance{Token: tokenOf(dev), Durable: rec.durable,
		ErasableReadable: d.platform == contract.PlatformIOS || rec.state == stateBooted}
	if p.ErasableReadable {
		p.Erasable = rec.erasable
	}
	return p, nil
}

// Estimate returns the configured time of op; the spec makes no difference.
func (d *Driver) Estimate(op driver.Operation, _ contract.DeviceSpec) time.Duration {
	switch op {
	case driver.OpProvision:
		return d.provisionTime
	case driver.OpBoot:
		return d.bootTime
	case driver.OpReclaim:
		return d.reclaimTime
	}
	return 0
}

// ListCatalog returns a deep copy of the catalog, so a caller that changes it
// changes neither the driver nor later answers.
func (d *Driver) ListCatalog(context.Context) (driver.Catalog, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	cat := cloneCatalog(d.catalog)
	cat.SlimRuntimes = nil
	for _, v := range cat.Runtimes {
		if slimmable(d.platform, v) {
			cat.SlimRuntimes = append(cat.SlimRuntimes, v)
		}
	}
	return cat, nil
}

// LeaseEnvironment marks the lease as served by the demo driver. A real
// driver gives the environment its platform tools need; simulated devices
// need no tools.
func (d *Driver) LeaseEnvironment() map[string]string {
	return map[string]string{contract.EnvDemo: "1"}
}

// begin counts a call of op and says whether that call is to fail.
func (d *Driver) begin(op string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.calls[op]++
	n := d.calls[op]
	if d.failAt[op][n] {
		delete(d.failAt[op], n)
		return true
	}
	return d.alwaysFail[op]
}

// run waits dur as op and then fails if the call was picked to fail.
func run(ctx context.Context, op string, dur time.Duration, fail bool) error {
	if err := sleep(ctx, dur); err != nil {
		return crash(op, err)
	}
	if fail {
		return crash(op, ErrInjected)
	}
	return nil
}

// sleep uses a timer rather than time.Sleep so that a done context ends the
// wait, and so that testing/synctest sees a durably blocked goroutine.
func sleep(ctx context.Context, dur time.Duration) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	if dur <= 0 {
		return nil
	}
	t := time.NewTimer(dur)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("demo: %w", ctx.Err())
	}
}

func crash(op string, err error) error { return &driver.CrashError{Op: op, Err: err} }

func cloneCatalog(c driver.Catalog) driver.Catalog {
	cloneLists := func(m map[string][]string) map[string][]string {
		out := make(map[string][]string, len(m))
		for k, v := range m {
			out[k] = slices.Clone(v)
		}
		return out
	}
	defaults := make(map[contract.DeviceClass][]string, len(c.ClassDefaults))
	for k, v := range c.ClassDefaults {
		defaults[k] = slices.Clone(v)
	}
	return driver.Catalog{
		Platform:       c.Platform,
		Models:         slices.Clone(c.Models),
		Runtimes:       slices.Clone(c.Runtimes),
		DefaultRuntime: c.DefaultRuntime,
		ModelRuntimes:  cloneLists(c.ModelRuntimes),
		ModelAliases:   cloneLists(c.ModelAliases),
		ModelClasses:   maps.Clone(c.ModelClasses),
		ClassDefaults:  defaults,
		Downloadable:   slices.Clone(c.Downloadable),
		Images:         slices.Clone(c.Images),
		SlimRuntimes:   slices.Clone(c.SlimRuntimes),
	}
}

// Root is empty: demo devices have no files.
func (d *Driver) Root() string { return "" }

// RevalidateRoot always passes: there is no root to lose.
func (d *Driver) RevalidateRoot() error { return nil }

// ListManaged reports the devices this driver knows, booted ones running.
func (d *Driver) ListManaged(context.Context) (driver.Reality, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	var r driver.Reality
	for id, rec := range d.devices {
		d.upLocked(rec)
		state := driver.Stopped
		switch rec.state {
		case stateBooted:
			state = driver.Running
		case stateBooting:
			state = driver.Transitioning
		}
		r.Devices = append(r.Devices, driver.Observed{Device: driver.Device{ID: id, Address: d.address(id, rec)}, RunState: state})
	}
	return r, nil
}

// Passthrough refuses: simulated devices have no tool to run.
func (d *Driver) Passthrough(driver.Target, []string) (driver.Command, error) {
	tool := "simctl"
	if d.platform == contract.PlatformAndroid {
		tool = "adb"
	}
	return driver.Command{}, &driver.PassthroughRefusedError{Tool: tool, Message: "the demo driver's devices are simulated; there is no " + tool + " to run"}
}

// ToolVersions reports none: the demo driver runs no tools.
func (d *Driver) ToolVersions(context.Context) ([]driver.ToolVersion, error) { return nil, nil }
