package android

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/driver"
	"github.com/simlock/simlock/internal/ids"
	"github.com/simlock/simlock/internal/runner"
)

// deviceData is what the driver keeps in driver.Device.Data. MarkToken is
// the token of the device's provenance marks (see provenance.go); a device
// made before marks has none.
type deviceData struct {
	AvdName    string `json:"avdName"`
	Model      string `json:"model,omitempty"`
	ProfileID  string `json:"profileId,omitempty"`
	Package    string `json:"package,omitempty"`
	OSVersion  string `json:"osVersion,omitempty"`
	ConfigHash string `json:"configHash,omitempty"`
	Port       int    `json:"port"`
	Serial     string `json:"serial"`
	MarkToken  string `json:"markToken,omitempty"`
	// BaselineID is the identity of the clean snapshot the driver saved
	// (baselineIdentity), recorded here, in the registry and out of the
	// AVD's directory, so a snapshot changed since is never loaded as
	// clean. "" for a device whose snapshot was saved before identities
	// were recorded.
	BaselineID string `json:"baselineId,omitempty"`
}

// baselineRecord is <avd>.avd/simlock-clean-baseline.json: the clean
// snapshot exists and was taken with this configuration.
type baselineRecord struct {
	ConfigHash string `json:"configHash"`
	Snapshot   string `json:"snapshot"`
}

const (
	baselineFile    = "simlock-clean-baseline.json"
	wipePendingFile = "simlock-wipe-pending"
	emulatorLogFile = "simlock-emulator.log"
	// registrationRetry is how long a booting emulator may stay unknown
	// to the adb server before the driver announces it again.
	registrationRetry = 5 * time.Second
	// portAttempts bounds how often a boot retries after losing its
	// console port to another emulator started at the same moment.
	portAttempts = 4
)

// avdNamePattern is what avdmanager allows in an AVD name, minus a leading
// dot, so a name can never climb out of the root.
var avdNamePattern = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9._-]*$`)

// errPortTaken says a new emulator exited because another process took its
// console port first; the boot retries on another port.
var errPortTaken = errors.New("the console port was taken")

func (d *Driver) avdDir(name string) string { return filepath.Join(d.root, name+".avd") }
func (d *Driver) avdIni(name string) string { return filepath.Join(d.root, name+".ini") }

// lookupAVD reports whether AVD name is in the root. It refuses a name that
// could point elsewhere: an invalid name, a symlinked AVD directory, or an
// .ini whose path leads out of the root. Nothing outside the root is ever
// touched on a device's behalf.
func (d *Driver) lookupAVD(op, name string) (bool, error) {
	if !avdNamePattern.MatchString(name) {
		return false, crashf(op, "%q is not an AVD name", name)
	}
	dir, ini := d.avdDir(name), d.avdIni(name)
	dirFI, dirErr := os.Lstat(dir)
	iniFI, iniErr := os.Lstat(ini)
	if errNotExist(dirErr) && errNotExist(iniErr) {
		return false, nil
	}
	for _, err := range []error{dirErr, iniErr} {
		if err != nil && !errNotExist(err) {
			return false, crash(op, err)
		}
	}
	if dirErr == nil && (dirFI.Mode()&os.ModeSymlink != 0 || !dirFI.IsDir()) {
		return false, crashf(op, "%s is not a directory; refusing to touch it", dir)
	}
	if iniErr == nil {
		if iniFI.Mode()&os.ModeSymlink != 0 {
			return false, crashf(op, "%s is a symbolic link; refusing to touch it", ini)
		}
		props, err := readProperties(ini)
		if err != nil {
			return false, crash(op, err)
		}
		if p := props["path"]; p != "" && filepath.Clean(p) != dir && !sameFile(p, dir) {
			return false, crashf(op, "%s points at %s, outside the device root %s; refusing to touch it", ini, p, d.root)
		}
	}
	return true, nil
}

func sameFile(a, b string) bool {
	fa, errA := os.Stat(a)
	fb, errB := os.Stat(b)
	return errA == nil && errB == nil && os.SameFile(fa, fb)
}

// avdNameAt maps an AVD directory an emulator reports to the name of an AVD
// in the root; "" when it is anywhere else.
func (d *Driver) avdNameAt(path string) string {
	path = filepath.Clean(strings.TrimSuffix(path, "/"))
	name, ok := strings.CutSuffix(filepath.Base(path), ".avd")
	if !ok || !avdNamePattern.MatchString(name) {
		return ""
	}
	if filepath.Dir(path) == d.root || sameFile(path, d.avdDir(name)) {
		return name
	}
	return ""
}

func newAVDName() string {
	return ids.New("simlock_", 6)
}

// Provision creates an AVD in the root with avdmanager, from the device
// profile and system image ResolveSpec chose, and writes its durable
// provenance mark; the erasable one needs the emulator running and is
// written by MakeReady. It is not booted.
func (d *Driver) Provision(ctx context.Context, spec contract.DeviceSpec) (driver.Device, error) {
	const op = "provision"
	if spec.Platform != contract.PlatformAndroid {
		return driver.Device{}, crashf(op, "the android driver cannot provision %s", spec.Platform)
	}
	d.mu.Lock()
	r, known := d.resolved[spec]
	d.mu.Unlock()
	if !known {
		got, err := d.ResolveSpec(ctx, driver.Request{Platform: spec.Platform, Model: spec.Model, OSVersion: spec.OSVersion, ImageTag: spec.ImageTag})
		if err != nil {
			return driver.Device{}, err
		}
		// A spec without a tag (a device recorded before tags) takes the
		// image ResolveSpec chooses.
		if got.Model != spec.Model || got.OSVersion != spec.OSVersion || (spec.ImageTag != "" && got.ImageTag != spec.ImageTag) {
			return driver.Device{}, crashf(op, "%s on API %s resolves to %s on API %s", spec.Model, spec.OSVersion, got.Model, got.OSVersion)
		}
		d.mu.Lock()
		r = d.resolved[got]
		d.mu.Unlock()
	}
	if err := d.RevalidateRoot(); err != nil {
		return driver.Device{}, err
	}
	name := newAVDName()
	// avdmanager asks whether to create a custom hardware profile.
	res, err := d.call(ctx, op, d.sdk.avdmanager, callTimeout, []byte("no\n"),
		"create", "avd", "-n", name, "-k", r.pkg, "-d", r.profileID)
	if err := succeeded(res, err, op, "avdmanager create avd"); err != nil {
		d.removeAVDFiles(name)
		return driver.Device{}, err
	}
	if _, err := os.Stat(filepath.Join(d.avdDir(name), "config.ini")); err != nil {
		d.removeAVDFiles(name)
		return driver.Device{}, crashf(op, "avdmanager reported success but created no %s", filepath.Join(d.avdDir(name), "config.ini"))
	}
	token := driver.NewMarkToken()
	if err := d.writeDurable(name, token); err != nil {
		d.removeAVDFiles(name)
		return driver.Device{}, crash(op, fmt.Errorf("write the provenance mark: %w", err))
	}
	data, err := json.Marshal(deviceData{AvdName: name, Model: spec.Model, ProfileID: r.profileID, Package: r.pkg, OSVersion: spec.OSVersion, MarkToken: token})
	if err != nil {
		return driver.Device{}, crash(op, err)
	}
	return driver.Device{ID: name, Data: data}, nil
}

// removeAVDFiles removes what there is of AVD name in the root. Only call
// it for a name known to be simlock's (lookupAVD, or just created).
func (d *Driver) removeAVDFiles(name string) {
	os.RemoveAll(d.avdDir(name))
	os.Remove(d.avdIni(name))
}

// running is an emulator that runs one of the root's AVDs.
type running struct {
	port int
	// emu is the process when this driver started it; nil when the
	// emulator was found through adb, e.g. after a daemon restart.
	emu *child
}

// findRunning finds the emulator running AVD name: one this driver started,
// else one whose console names the AVD's directory.
func (d *Driver) findRunning(ctx context.Context, op, name string) (*running, error) {
	d.mu.Lock()
	e := d.running[name]
	d.mu.Unlock()
	if e != nil && !e.exited() {
		return &running{port: e.port, emu: e}, nil
	}
	devs, err := d.devices(ctx, op)
	if err != nil {
		return nil, err
	}
	for _, dv := range devs {
		if dv.state != "device" {
			continue
		}
		if at, _ := d.avdOf(ctx, op, dv.serial); at == name {
			return &running{port: dv.port}, nil
		}
	}
	return nil, nil
}

// adbDevice is one line of `adb devices`.
type adbDevice struct {
	serial string
	port   int
	state  string
}

var devicesLine = regexp.MustCompile(`(?m)^(emulator-(\d+))\s+(\S+)\s*$`)

// devices lists the emulators the private server knows.
func (d *Driver) devices(ctx context.Context, op string) ([]adbDevice, error) {
	res, err := d.adb(ctx, op, callTimeout, "devices")
	if err := succeeded(res, err, op, "adb devices"); err != nil {
		return nil, err
	}
	var out []adbDevice
	for _, m := range devicesLine.FindAllStringSubmatch(string(res.Stdout), -1) {
		port, _ := strconv.Atoi(m[2])
		out = append(out, adbDevice{serial: m[1], port: port, state: m[3]})
	}
	return out, nil
}

// avdOf asks the emulator behind serial for its AVD directory and names
// the root's AVD it is; "" for any other. answered is false when the
// console did not answer.
func (d *Driver) avdOf(ctx context.Context, op, serial string) (name string, answered bool) {
	res, err := d.serialAdb(ctx, op, pollCallTimeout, serial, "emu", "avd", "path")
	if err != nil || res.ExitCode != 0 {
		return "", false
	}
	p := consoleAnswer(res)
	if p == "" {
		return "", false
	}
	return d.avdNameAt(p), true
}

// consoleAnswer is the first line of an emulator console reply, without the
// console's \r and a trailing "OK"; "" for a KO.
func consoleAnswer(res runner.Result) string {
	line := firstLine(strings.ReplaceAll(string(res.Stdout), "\r", ""))
	if line == "OK" || strings.HasPrefix(line, "KO") {
		return ""
	}
	return line
}

// consoleFailed says why an emulator console command failed; nil when it
// succeeded.
func consoleFailed(res runner.Result, err error, what string) error {
	if err != nil {
		return err
	}
	out := strings.ReplaceAll(string(res.Stdout)+"\n"+string(res.Stderr), "\r", "")
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "KO") {
			return fmt.Errorf("%s: %s", what, strings.TrimSpace(line))
		}
	}
	if res.ExitCode != 0 {
		return fmt.Errorf("%s exited with code %d: %s", what, res.ExitCode, outputOf(res))
	}
	return nil
}

var loadedPattern = regexp.MustCompile(`(?i)OK|loaded|success`)

// reservePort reserves a console port for AVD name: even, in simlock's
// range, unknown to the adb server, not reserved by another boot, and with
// neither it nor its adb port (one above) listening.
func (d *Driver) reservePort(ctx context.Context, op, name string, avoid map[int]bool) (int, error) {
	devs, err := d.devices(ctx, op)
	if err != nil {
		return 0, err
	}
	known := map[int]bool{}
	for _, dv := range devs {
		known[dv.port] = true
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	for p := firstConsolePort; p <= lastConsolePort; p += 2 {
		if _, held := d.ports[p]; held || known[p] || avoid[p] {
			continue
		}
		if listening(ctx, p) || listening(ctx, p+1) {
			continue
		}
		d.ports[p] = name
		return p, nil
	}
	return 0, crashf(op, "no Android emulator console port is free in %d-%d", firstConsolePort, lastConsolePort)
}

func (d *Driver) releasePortLocked(port int, name string) {
	if d.ports[port] == name {
		delete(d.ports, port)
	}
}

// startEmulator spawns the emulator for AVD name on a reserved port, with
// its log in the AVD's directory. The emulator holds the port until it
// exits.
func (d *Driver) startEmulator(op, name string, port int, launch []string) (*child, error) {
	logPath := filepath.Join(d.avdDir(name), emulatorLogFile)
	os.Remove(logPath) // one boot's log at a time
	args := append([]string{"-avd", name, "-port", strconv.Itoa(port)}, d.emulator.flags()...)
	args = append(append(args, "-no-snapshot-save"), launch...)
	p, err := d.run.Start(runner.Cmd{Path: d.sdk.emulator, Args: args, Env: d.env}, logPath)
	if err != nil {
		d.mu.Lock()
		d.releasePortLocked(port, name)
		d.mu.Unlock()
		return nil, crash(op, err)
	}
	e := newChild(p, port, logPath)
	d.mu.Lock()
	d.running[name] = e
	d.mu.Unlock()
	e.watch(func() {
		d.mu.Lock()
		defer d.mu.Unlock()
		if d.running[name] == e {
			delete(d.running, name)
		}
		d.releasePortLocked(port, name)
	})
	d.log.Info("started an emulator", "avd", name, "port", port, "pid", p.Pid(), "args", strings.Join(launch, " "))
	return e, nil
}

// boot starts the emulator for AVD name and waits until it is ready. A boot
// that fails for any reason other than a lost port race leaves no emulator
// behind.
func (d *Driver) boot(ctx context.Context, op, name string, launch []string) (*child, error) {
	avoid := map[int]bool{}
	for attempt := 1; ; attempt++ {
		port, err := d.reservePort(ctx, op, name, avoid)
		if err != nil {
			return nil, err
		}
		e, err := d.startEmulator(op, name, port, launch)
		if err != nil {
			return nil, err
		}
		err = d.waitReady(ctx, op, name, port, e)
		if err == nil {
			return e, nil
		}
		e.stop(syscall.SIGTERM, 10*time.Second)
		if !errors.Is(err, errPortTaken) {
			return nil, err
		}
		if attempt == portAttempts {
			return nil, crashf(op, "the emulator for %s lost its console port to another process %d times", name, attempt)
		}
		d.log.Info("an emulator lost its console port; trying another", "avd", name, "port", port)
		avoid[port] = true
	}
}

type probeState int

const (
	probeNoAnswer  probeState = iota // the serial does not answer yet
	probeBooting                     // it answers but sys.boot_completed is not 1
	probeAnimating                   // boot completed; the boot animation still runs
	probeConsole                     // the animation stopped; its console is checked
	probeReady
)

// step is the boot step a probe state is, as the requester reads it.
func (s probeState) step() string {
	switch s {
	case probeNoAnswer:
		return "waiting for the emulator to answer adb"
	case probeBooting:
		return "waiting for sys.boot_completed"
	case probeAnimating:
		return "boot completed; waiting for the boot animation to stop"
	}
	return "boot animation stopped; checking the emulator's console"
}

// waitReady polls until the emulator on port is ready: sys.boot_completed is
// 1, the boot animation has stopped, and its console names AVD name. The
// poll starts fast, as an emulator restored from a snapshot is ready within
// seconds, and slows down to every 2 s. On timeout an emulator this driver
// started is killed and the error is *driver.BootTimeoutError.
func (d *Driver) waitReady(ctx context.Context, op, name string, port int, e *child) error {
	serial := serialOf(port)
	start := time.Now()
	deadline := start.Add(d.bootTimeout)
	lastAnnounce := start
	lastStep := ""
	interval := 50 * time.Millisecond
	var exited <-chan struct{}
	if e != nil {
		exited = e.done
	}
	for {
		if e != nil && e.exited() {
			return d.exitedEarly(ctx, op, name, e)
		}
		state, err := d.probe(ctx, op, name, serial, deadline)
		if err != nil {
			return err
		}
		if step := state.step(); state != probeReady && step != lastStep {
			driver.BootStep(ctx, step)
			lastStep = step
		}
		if state == probeReady {
			return nil
		}
		now := time.Now()
		if state == probeNoAnswer && now.Sub(lastAnnounce) >= registrationRetry {
			// The server may have restarted since the emulator
			// announced itself.
			if err := d.register(ctx, port); err != nil {
				d.log.Debug("could not announce an emulator to the adb server", "serial", serial, "err", err)
			}
			lastAnnounce = now
		}
		if !now.Before(deadline) {
			if e != nil {
				e.stop(syscall.SIGKILL, 5*time.Second)
			}
			return &driver.BootTimeoutError{DeviceID: name, After: d.bootTimeout.String()}
		}
		t := time.NewTimer(min(interval, time.Until(deadline)))
		select {
		case <-ctx.Done():
			t.Stop()
			return crash(op, ctx.Err())
		case <-exited:
		case <-t.C:
		}
		t.Stop()
		interval = min(interval*2, 2*time.Second)
	}
}

// probe asks the emulator once how far its boot is.
func (d *Driver) probe(ctx context.Context, op, name, serial string, deadline time.Time) (probeState, error) {
	timeout := max(min(pollCallTimeout, time.Until(deadline)), time.Second)
	shell := func(args ...string) (string, bool, error) {
		res, err := d.serialAdb(ctx, op, timeout, serial, args...)
		if ctx.Err() != nil {
			return "", false, crash(op, ctx.Err())
		}
		// A timed-out probe is a slow emulator, not a failed boot.
		if err != nil || res.ExitCode != 0 {
			return "", false, nil
		}
		return strings.TrimSpace(string(res.Stdout)), true, nil
	}
	completed, answered, err := shell("shell", "getprop", "sys.boot_completed")
	if err != nil || !answered {
		return probeNoAnswer, err
	}
	if completed != "1" {
		return probeBooting, nil
	}
	anim, answered, err := shell("shell", "getprop", "init.svc.bootanim")
	if err != nil || !answered || (anim != "" && anim != "stopped") {
		return probeAnimating, err
	}
	res, err := d.serialAdb(ctx, op, timeout, serial, "emu", "avd", "path")
	if ctx.Err() != nil {
		return probeConsole, crash(op, ctx.Err())
	}
	if err != nil || res.ExitCode != 0 {
		return probeConsole, nil
	}
	path := consoleAnswer(res)
	if path == "" {
		return probeConsole, nil
	}
	if d.avdNameAt(path) != name {
		return probeConsole, crashf(op, "refusing to ready %s: %s answers for %s; another emulator holds its console port", name, serial, path)
	}
	return probeReady, nil
}

// exitedEarly explains an emulator that exited before it was ready. It lost
// a port race when its log names its port and something else now listens
// there.
func (d *Driver) exitedEarly(ctx context.Context, op, name string, e *child) error {
	log := tail(e.log, 2048)
	for _, p := range []int{e.port, e.port + 1} {
		if strings.Contains(log, strconv.Itoa(p)) && listening(ctx, p) {
			return fmt.Errorf("%w: %d", errPortTaken, p)
		}
	}
	return crashf(op, "the emulator for %s exited before it was ready: %s", name, lastLines(log))
}

// stopEmulator stops the emulator r runs, with `emu kill` first so the
// emulator shuts down cleanly. One this driver started is signalled if it
// does not exit; one found through adb is only asked, since its pid is not
// known to be the emulator's.
func (d *Driver) stopEmulator(ctx context.Context, op, name string, r *running) error {
	serial := serialOf(r.port)
	res, err := d.serialAdb(ctx, op, callTimeout, serial, "emu", "kill")
	asked := err == nil && res.ExitCode == 0
	if r.emu != nil {
		if asked {
			t := time.NewTimer(stopTimeout)
			select {
			case <-r.emu.done:
			case <-t.C:
			case <-ctx.Done():
			}
			t.Stop()
		}
		r.emu.stop(syscall.SIGTERM, 10*time.Second)
		d.log.Info("stopped an emulator", "avd", name, "serial", serial)
		return nil
	}
	if !asked {
		if err != nil {
			return err
		}
		return crashf(op, "adb emu kill for %s exited with code %d: %s", serial, res.ExitCode, outputOf(res))
	}
	interval := 100 * time.Millisecond
	for deadline := time.Now().Add(stopTimeout); time.Now().Before(deadline); {
		devs, err := d.devices(ctx, op)
		if err != nil {
			return err
		}
		if !slices.ContainsFunc(devs, func(dv adbDevice) bool { return dv.serial == serial }) {
			d.log.Info("stopped an emulator", "avd", name, "serial", serial)
			return nil
		}
		if !pause(ctx, interval) {
			return crash(op, ctx.Err())
		}
		interval = min(interval*2, time.Second)
	}
	return crashf(op, "%s still runs %s after adb emu kill", serial, stopTimeout)
}

// MakeReady boots the AVD and waits until it is ready. A device that already
// runs is only waited for. The first boot captures the clean snapshot and
// then boots once more from it, so every lease, the first included, starts
// from the same state; later boots start from the snapshot, or wipe user
// data when it is missing or stale, which it does only for a device whose
// durable provenance mark is the token simlock recorded. Each boot of its
// own writes the erasable mark, before a clean snapshot is captured, so the
// snapshot carries it too; a device simlock did not boot keeps what it has,
// so an erase done outside simlock stays visible. A device made before
// marks is brought under them here (adoptToken).
func (d *Driver) MakeReady(ctx context.Context, dev driver.Device) (driver.Device, error) {
	const op = "boot"
	name := dev.ID
	dev = d.adoptToken(ctx, op, dev)
	if up, ok, err := d.alreadyUp(ctx, op, dev); err != nil || ok {
		return up, err
	}
	token := tokenOf(dev)
	hash, err := d.configHash(ctx, op, name)
	if err != nil {
		return driver.Device{}, err
	}
	clean := d.hasBaseline(name, hash)
	if clean && d.baselineState(name, dev) != baselineIntact {
		// Not the snapshot simlock saved, or one it cannot tell: the
		// device holds no lease now, so it is wiped rather than loaded.
		d.log.Warn("the clean snapshot is not the one simlock saved; wiping the device instead of loading it", "avd", name)
		clean = false
	}
	launch := []string{"-snapshot", baselineSnapshot}
	if !clean {
		if err := d.RevalidateRoot(); err != nil {
			return driver.Device{}, err
		}
		if err := d.checkDurable(op, dev); err != nil {
			return driver.Device{}, err
		}
		// A baseline that no longer fits means the device ran with
		// another configuration: its data cannot be trusted either.
		wipe := d.wipePending(name) || d.baselineRecorded(name)
		if err := d.dropBaseline(name); err != nil {
			return driver.Device{}, crash(op, err)
		}
		launch = []string{"-no-snapshot-load"}
		if wipe {
			launch = []string{"-wipe-data", "-no-snapshot-load"}
		}
	}
	e, err := d.boot(ctx, op, name, launch)
	if err != nil {
		return driver.Device{}, err
	}
	if err := d.markBooted(ctx, op, name, e, token); err != nil {
		return driver.Device{}, err
	}
	if clean {
		return readyDevice(dev, e.port, hash), nil
	}
	os.Remove(filepath.Join(d.avdDir(name), wipePendingFile)) // the boot wiped
	baseline, err := d.captureBaseline(ctx, op, name, e.port, hash)
	if err != nil {
		// The device is ready, only not cheap to clean: its next
		// reclaim finds no baseline and wipes it instead.
		d.log.Warn("could not capture the clean snapshot", "avd", name, "err", err)
		return withBaseline(readyDevice(dev, e.port, hash), ""), nil
	}
	if err := d.stopEmulator(ctx, op, name, &running{port: e.port, emu: e}); err != nil {
		return driver.Device{}, err
	}
	e, err = d.boot(ctx, op, name, []string{"-snapshot", baselineSnapshot})
	if err != nil {
		return driver.Device{}, err
	}
	if err := d.markBooted(ctx, op, name, e, token); err != nil {
		return driver.Device{}, err
	}
	return withBaseline(readyDevice(dev, e.port, hash), baseline), nil
}

// markBooted writes the erasable mark on the emulator e that MakeReady just
// booted; a device without a token (adoptToken failed) is left unmarked. A
// device whose mark cannot be written is stopped and the boot fails: it
// would otherwise look erased outside simlock at the first check.
func (d *Driver) markBooted(ctx context.Context, op, name string, e *child, token string) error {
	if token == "" {
		return nil
	}
	err := d.writeErasable(ctx, op, e.port, token)
	if err == nil {
		return nil
	}
	if serr := d.stopEmulator(ctx, op, name, &running{port: e.port, emu: e}); serr != nil {
		d.log.Warn("could not stop an emulator left without its mark", "avd", name, "err", serr)
	}
	return err
}

// Recover boots an AVD that stopped under a lease as it is: a cold boot that
// loads no snapshot and wipes nothing, so the holder's apps and data are
// still there. The clean snapshot and the wipe bookkeeping are left for the
// reclaim that ends the lease. A device that runs is only waited for. No
// mark is written: the one the lease began with survives a cold boot, and
// one gone means the device was erased outside simlock while it was down.
func (d *Driver) Recover(ctx context.Context, dev driver.Device) (driver.Device, error) {
	const op = "boot"
	name := dev.ID
	if up, ok, err := d.alreadyUp(ctx, op, dev); err != nil || ok {
		return up, err
	}
	e, err := d.boot(ctx, op, name, []string{"-no-snapshot-load"})
	if err != nil {
		return driver.Device{}, err
	}
	return readyDevice(dev, e.port, ""), nil
}

// alreadyUp checks that dev's AVD is in the root and, when its emulator
// already runs, waits until it is ready: ok then, with the device at its
// address.
func (d *Driver) alreadyUp(ctx context.Context, op string, dev driver.Device) (up driver.Device, ok bool, err error) {
	present, err := d.lookupAVD(op, dev.ID)
	if err != nil {
		return driver.Device{}, false, err
	}
	if !present {
		return driver.Device{}, false, crashf(op, "AVD %s is not in the device root %s", dev.ID, d.root)
	}
	r, err := d.findRunning(ctx, op, dev.ID)
	if err != nil || r == nil {
		return driver.Device{}, false, err
	}
	if err := d.waitReady(ctx, op, dev.ID, r.port, r.emu); err != nil {
		return driver.Device{}, false, err
	}
	return readyDevice(dev, r.port, ""), true, nil
}

// readyDevice is dev at its new address.
func readyDevice(dev driver.Device, port int, hash string) driver.Device {
	var data deviceData
	_ = json.Unmarshal(dev.Data, &data) // data from an older driver is rebuilt
	data.AvdName = dev.ID
	data.Port = port
	data.Serial = serialOf(port)
	if hash != "" {
		data.ConfigHash = hash
	}
	if b, err := json.Marshal(data); err == nil {
		dev.Data = b
	}
	dev.Address = serialOf(port)
	return dev
}

// withBaseline is dev with id recorded as the identity of its clean
// snapshot ("" for none).
func withBaseline(dev driver.Device, id string) driver.Device {
	var data deviceData
	_ = json.Unmarshal(dev.Data, &data) // readyDevice wrote it
	data.BaselineID = id
	if b, err := json.Marshal(data); err == nil {
		dev.Data = b
	}
	return dev
}

// baselineCheck is what the clean snapshot on disk is, against the
// identity dev's driver data recorded when simlock saved it.
type baselineCheck int

const (
	baselineIntact     baselineCheck = iota
	baselineUnrecorded               // saved before identities were recorded
	baselineChanged                  // written since, by something other than simlock's own save
)

// baselineState compares the clean snapshot of AVD name with the identity
// dev's driver data recorded.
func (d *Driver) baselineState(name string, dev driver.Device) baselineCheck {
	var data deviceData
	_ = json.Unmarshal(dev.Data, &data)
	if data.BaselineID == "" {
		return baselineUnrecorded
	}
	id, err := baselineIdentity(filepath.Join(d.avdDir(name), "snapshots", baselineSnapshot))
	if err != nil || id != data.BaselineID {
		return baselineChanged
	}
	return baselineIntact
}

// baselineIdentity fingerprints a snapshot directory cheaply: the path,
// type, size and modification time of each of its files, never their
// contents (a RAM image is gigabytes). A save over it (the emulator
// console's avd snapshot save, or any write) rewrites its files, so their
// times or sizes change. snapshot.pb is left out: it holds the emulator's
// own bookkeeping of loads, which it may rewrite when simlock loads the
// snapshot, and the files it describes are counted anyway.
func baselineIdentity(dir string) (string, error) {
	h := sha256.New()
	files := 0
	err := filepath.WalkDir(dir, func(path string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		if rel == "." || rel == "snapshot.pb" {
			return nil
		}
		fi, err := e.Info()
		if err != nil {
			return err
		}
		files++
		fmt.Fprintf(h, "%q %s %d %d\n", rel, fi.Mode().Type(), fi.Size(), fi.ModTime().UnixNano())
		return nil
	})
	if err != nil {
		return "", err
	}
	if files == 0 {
		return "", fmt.Errorf("snapshot %s holds no files", dir)
	}
	return hex.EncodeToString(h.Sum(nil)[:16]), nil
}

// configHash fingerprints what a snapshot depends on: the system image and
// its revision, the emulator's version, the AVD's hardware config, and the
// window and GPU options the emulator is launched with. A
// snapshot taken under another fingerprint may not load, or may load into a
// device that is not what the AVD now describes.
func (d *Driver) configHash(ctx context.Context, op, name string) (string, error) {
	props, err := readProperties(filepath.Join(d.avdDir(name), "config.ini"))
	if err != nil {
		return "", crash(op, err)
	}
	img := filepath.Join(d.sdk.root, props["image.sysdir.1"])
	rev := pkgRevision(img)
	if rev == "" {
		rev = "unknown"
	}
	res, err := d.call(ctx, op, d.sdk.emulator, callTimeout, nil, "-version")
	if err := succeeded(res, err, op, "emulator -version"); err != nil {
		return "", err
	}
	var hw []string
	for k, v := range props {
		if k == "image.sysdir.1" || strings.HasPrefix(k, "hw.") || strings.HasPrefix(k, "disk.dataPartition.") {
			hw = append(hw, k+"="+v)
		}
	}
	slices.Sort(hw)
	h := fnv.New32a()
	parts := append([]string{img + "@" + rev, strings.TrimSpace(string(res.Stdout))}, hw...)
	parts = append(parts, d.emulator.snapshotParts()...)
	h.Write([]byte(strings.Join(parts, "\x00")))
	return fmt.Sprintf("%08x", h.Sum32()), nil
}

// hasBaseline reports whether AVD name has a clean snapshot taken under
// hash and no wipe is pending.
func (d *Driver) hasBaseline(name, hash string) bool {
	if d.wipePending(name) {
		return false
	}
	b, err := os.ReadFile(filepath.Join(d.avdDir(name), baselineFile))
	if err != nil {
		return false
	}
	var rec baselineRecord
	if json.Unmarshal(b, &rec) != nil || rec.ConfigHash != hash || rec.Snapshot != baselineSnapshot {
		return false
	}
	fi, err := os.Stat(filepath.Join(d.avdDir(name), "snapshots", baselineSnapshot))
	return err == nil && fi.IsDir()
}

func (d *Driver) baselineRecorded(name string) bool {
	_, err := os.Stat(filepath.Join(d.avdDir(name), baselineFile))
	return err == nil
}

func (d *Driver) wipePending(name string) bool {
	_, err := os.Stat(filepath.Join(d.avdDir(name), wipePendingFile))
	return err == nil
}

// dropBaseline forgets the clean snapshot and removes the AVD's snapshots,
// so a stale one is never loaded.
func (d *Driver) dropBaseline(name string) error {
	if err := os.RemoveAll(filepath.Join(d.avdDir(name), "snapshots")); err != nil {
		return err
	}
	if err := os.Remove(filepath.Join(d.avdDir(name), baselineFile)); err != nil && !errNotExist(err) {
		return err
	}
	return nil
}

// captureBaseline saves the running emulator as the clean snapshot,
// records it once the emulator lists it, and returns its identity
// (baselineIdentity) for the driver data.
func (d *Driver) captureBaseline(ctx context.Context, op, name string, port int, hash string) (string, error) {
	serial := serialOf(port)
	res, err := d.serialAdb(ctx, op, snapshotTimeout, serial, "emu", "avd", "snapshot", "save", baselineSnapshot)
	if err := consoleFailed(res, err, "snapshot save"); err != nil {
		return "", err
	}
	res, err = d.serialAdb(ctx, op, callTimeout, serial, "emu", "avd", "snapshot", "list")
	if err := consoleFailed(res, err, "snapshot list"); err != nil {
		return "", err
	}
	if !strings.Contains(string(res.Stdout), baselineSnapshot) {
		return "", fmt.Errorf("the emulator does not list %s after saving it", baselineSnapshot)
	}
	id, err := baselineIdentity(filepath.Join(d.avdDir(name), "snapshots", baselineSnapshot))
	if err != nil {
		return "", err
	}
	b, _ := json.Marshal(baselineRecord{ConfigHash: hash, Snapshot: baselineSnapshot})
	return id, os.WriteFile(filepath.Join(d.avdDir(name), baselineFile), b, 0o600)
}

// Reclaim cleans a device after a lease by loading its clean snapshot, which
// restores memory and disks in seconds; the device is left running. A device
// that is not running is left stopped, as its next boot starts from the
// snapshot. Without a current snapshot, or when loading it fails, the device
// is shut down and its next boot wipes user data. A device whose durable
// provenance mark is not the token simlock recorded is refused before
// anything is touched; after a snapshot load the erasable mark is written
// again.
func (d *Driver) Reclaim(ctx context.Context, dev driver.Device) (driver.ReclaimResult, error) {
	return d.reclaim(ctx, dev, false)
}

// ReclaimFull cleans a device thoroughly: it is shut down, its snapshots are
// dropped and its next boot wipes user data and captures a new snapshot.
func (d *Driver) ReclaimFull(ctx context.Context, dev driver.Device) (driver.ReclaimResult, error) {
	return d.reclaim(ctx, dev, true)
}

func (d *Driver) reclaim(ctx context.Context, dev driver.Device, full bool) (driver.ReclaimResult, error) {
	const op = "reclaim"
	name := dev.ID
	present, err := d.lookupAVD(op, name)
	if err != nil {
		return driver.ReclaimResult{}, err
	}
	if !present {
		return driver.ReclaimResult{}, crashf(op, "AVD %s is not in the device root %s", name, d.root)
	}
	if err := d.RevalidateRoot(); err != nil {
		return driver.ReclaimResult{}, err
	}
	if err := d.checkDurable(op, dev); err != nil {
		return driver.ReclaimResult{}, err
	}
	r, err := d.findRunning(ctx, op, name)
	if err != nil {
		return driver.ReclaimResult{}, err
	}
	wipe := func(why string) (driver.ReclaimResult, error) {
		if r != nil {
			if err := d.stopEmulator(ctx, op, name, r); err != nil {
				return driver.ReclaimResult{}, err
			}
		}
		if err := d.dropBaseline(name); err != nil {
			return driver.ReclaimResult{}, crash(op, err)
		}
		if err := os.WriteFile(filepath.Join(d.avdDir(name), wipePendingFile), nil, 0o600); err != nil {
			return driver.ReclaimResult{}, crash(op, err)
		}
		d.log.Info("the device's next boot wipes its data", "avd", name, "why", why)
		return driver.ReclaimResult{State: contract.DeviceShutdown, Strategy: "wipe"}, nil
	}
	if full {
		return wipe("a full clean was asked for")
	}
	hash, err := d.configHash(ctx, op, name)
	if err != nil {
		return driver.ReclaimResult{}, err
	}
	if !d.hasBaseline(name, hash) {
		return wipe("it has no current clean snapshot")
	}
	switch d.baselineState(name, dev) {
	case baselineUnrecorded:
		return wipe("its clean snapshot was saved before simlock recorded their identity")
	case baselineChanged:
		// Written since simlock saved it: a holder's doing, or another's
		// behind simlock's back. It is never loaded; the device is
		// stopped and its next boot wipes it, and the error quarantines
		// it so the change is seen.
		if _, err := wipe("its clean snapshot changed since simlock saved it"); err != nil {
			return driver.ReclaimResult{}, err
		}
		return driver.ReclaimResult{}, crashf(op, "the clean snapshot %s of %s is not the one simlock saved (its files changed since); it was not loaded, and the device's next clean wipes it", baselineSnapshot, name)
	}
	if r == nil {
		return driver.ReclaimResult{State: contract.DeviceShutdown, Strategy: "snapshot"}, nil
	}
	res, err := d.serialAdb(ctx, op, snapshotTimeout, serialOf(r.port), "emu", "avd", "snapshot", "load", baselineSnapshot)
	if ctx.Err() != nil {
		return driver.ReclaimResult{}, crash(op, ctx.Err())
	}
	if err := consoleFailed(res, err, "snapshot load"); err != nil {
		return wipe(err.Error())
	}
	if !loadedPattern.Match(append(res.Stdout, res.Stderr...)) {
		return wipe("snapshot load did not confirm: " + outputOf(res))
	}
	if err := d.waitReady(ctx, op, name, r.port, r.emu); err != nil {
		return driver.ReclaimResult{}, err
	}
	// The snapshot holds the mark of the boot that captured it, or none
	// if it was captured before marks: written again, so simlock's own
	// clean never looks like an erase.
	if token := d.cleanToken(dev); token != "" {
		if err := d.writeErasable(ctx, op, r.port, token); err != nil {
			return wipe("could not write the provenance mark: " + err.Error())
		}
	}
	return driver.ReclaimResult{State: contract.DeviceReady, Strategy: "snapshot"}, nil
}

// Shutdown stops the AVD's emulator. A device that is not running, or not in
// the root at all, is left alone.
func (d *Driver) Shutdown(ctx context.Context, dev driver.Device) error {
	const op = "shutdown"
	present, err := d.lookupAVD(op, dev.ID)
	if err != nil || !present {
		return err
	}
	if err := d.RevalidateRoot(); err != nil {
		return err
	}
	r, err := d.findRunning(ctx, op, dev.ID)
	if err != nil || r == nil {
		return err
	}
	return d.stopEmulator(ctx, op, dev.ID, r)
}

// Destroy stops the AVD's emulator and deletes the AVD with avdmanager. An
// AVD that is not in the root is already gone as far as simlock is
// concerned, so that is not an error, and nothing elsewhere is touched. One
// whose durable provenance mark is not the token simlock recorded is
// refused with a *driver.ProvenanceError.
func (d *Driver) Destroy(ctx context.Context, dev driver.Device) error {
	const op = "destroy"
	name := dev.ID
	present, err := d.lookupAVD(op, name)
	if err != nil || !present {
		return err
	}
	if err := d.RevalidateRoot(); err != nil {
		return err
	}
	if err := d.checkDurable(op, dev); err != nil {
		return err
	}
	if r, err := d.findRunning(ctx, op, name); err != nil {
		return err
	} else if r != nil {
		if err := d.stopEmulator(ctx, op, name, r); err != nil {
			return err
		}
	}
	res, err := d.call(ctx, op, d.sdk.avdmanager, callTimeout, nil, "delete", "avd", "-n", name)
	if err != nil {
		return err
	}
	if res.ExitCode != 0 {
		// avdmanager knows an AVD by its .ini; a directory left without
		// one is ours to remove.
		if _, statErr := os.Lstat(d.avdIni(name)); !errNotExist(statErr) {
			return crashf(op, "avdmanager delete avd exited with code %d: %s", res.ExitCode, outputOf(res))
		}
	}
	d.removeAVDFiles(name)
	d.log.Info("deleted an AVD", "avd", name)
	return nil
}
