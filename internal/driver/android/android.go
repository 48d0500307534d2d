// Package android is simlock's Android driver. It creates, boots, cleans and
// deletes Android Virtual Devices (AVDs) with the SDK's own tools: avdmanager
// and sdkmanager from cmdline-tools, emulator and adb.
//
// Containment. Every AVD simlock owns lives in one device root, a directory
// that the ownership package proves is this instance's; every tool call runs
// with ANDROID_AVD_HOME pointing at it, so avdmanager and the emulator see
// nothing else. Emulators take console ports 5586–5682, above the range a
// default adb server scans, and report to a private adb server on their own
// port (5038 by default) that runs with USB, mDNS and the emulator scan off
// and refuses kill-server. The driver uses no adb server it did not start.
// Before each adb call it checks that its server still runs and listens, and
// starts another if not. An adb server that an adb client started on the
// port by itself, as adb does when no server answers, is stopped and
// replaced; a port held by anything else refuses the driver. Before an
// emulator is reported ready, its console must name an AVD directory in the
// root, so a stranger on a recorded console port is never mistaken for ours.
//
// Cleaning. The first boot of a device captures a clean snapshot
// (simlock_clean_baseline) and records its identity (baselineIdentity) in
// the driver data; reclaiming restores it in a few seconds and leaves the
// device running. When the snapshot is missing, stale (the image, emulator
// or hardware config changed) or fails to load, the device is shut down
// and its next boot wipes user data and captures a new one. A snapshot
// whose files changed since it was saved is never loaded: the reclaim
// stops the device, drops the snapshot and fails, which quarantines it.
// Lease holders cannot reach the snapshots (see Passthrough).
//
// Provenance. Each AVD carries one random token twice: a simlock.mark line
// in its config.ini, which a wipe keeps, and /data/local/tmp/simlock-mark.json
// in the guest, which a wipe takes and which can be read only while the
// emulator runs (see provenance.go). Reclaim, Destroy and a boot that wipes
// check the first against the token in the driver data before acting;
// simlock's own boots and snapshot loads write the second again.
//
// Components. The system images are read from the SDK's directories
// (system-images/android-<api>/<tag>/<abi>), by the catalog and the
// component operations alike; sdkmanager installs and uninstalls them, and
// the images a user's own AVDs name are reported as in use outside simlock.
// See InstallComponent.
//
// A Driver is safe for concurrent use. The core never runs two operations on
// one device at once; the driver's own shared state, the emulators it started
// and the console ports it reserved, is guarded by one mutex, and the
// private adb server by another.
package android

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/driver"
	"github.com/simlock/simlock/internal/ownership"
	"github.com/simlock/simlock/internal/runner"
)

var _ driver.Driver = (*Driver)(nil)

// DefaultAdbPort is the private adb server's port when Options.AdbPort is 0.
// It is one above the default server's 5037, which belongs to the user.
const DefaultAdbPort = 5038

// userAdbPort is the default adb server's port: the user's, never ours.
const userAdbPort = 5037

const (
	platformName = string(contract.PlatformAndroid)

	// defaultBootTimeout bounds a boot from spawn to ready, as the
	// reference's readinessTimeoutMs does.
	defaultBootTimeout = 180 * time.Second
	// callTimeout bounds one tool call.
	callTimeout = 30 * time.Second
	// pollCallTimeout bounds one readiness probe, so that a hung adb call
	// costs one poll and not the whole boot budget.
	pollCallTimeout = 10 * time.Second
	// snapshotTimeout bounds saving or loading a snapshot: the emulator
	// writes or reads the guest's whole RAM, which takes longer than a
	// console command.
	snapshotTimeout = 2 * time.Minute
	// stopTimeout is how long an emulator gets to exit after `emu kill`
	// before it is signalled.
	stopTimeout = 30 * time.Second

	// The emulator takes even console ports up to 5682; starting above
	// 5585 keeps simlock's emulators out of the range a default adb
	// server scans, which the user's own emulators use.
	firstConsolePort = 5586
	lastConsolePort  = 5682

	baselineSnapshot = "simlock_clean_baseline"
)

// Options configures a Driver.
type Options struct {
	// Root is the absolute AVD root (drivers.android.deviceRoot). Every
	// call runs with ANDROID_AVD_HOME=<Root>.
	Root     string
	Instance ownership.Instance
	// SDKRoot is the Android SDK, usually from SDKRootFrom.
	SDKRoot string
	// AdbPort is the private adb server's port
	// (drivers.android.adbServerPort); 0 means DefaultAdbPort. 5037 and
	// ports outside 1024–65535 are refused.
	AdbPort int
	// Home is SIMLOCK_HOME. adb-server.json, the pid and command line of
	// the adb server simlock started, lives here, and so does its log.
	Home string
	// Runner runs the tools; nil means runner.OS{}.
	Runner runner.Runner
	// Env is extra environment for every tool call and started process.
	Env []string
	// Logger receives the driver's log; nil discards it.
	Logger *slog.Logger
	// BootTimeout bounds a boot from spawning the emulator to ready; 0
	// means 180 s.
	BootTimeout time.Duration
	// AcceptLicenses lets InstallComponent accept the SDK's licenses
	// (sdkmanager --licenses) when an install is refused for them
	// (downloads.acceptAndroidLicenses).
	AcceptLicenses bool
	// UserAVDHome is the user's own AVD directory, where the AVDs that
	// make a system image in use outside simlock live; "" means the
	// daemon's $ANDROID_AVD_HOME, else $ANDROID_USER_HOME/avd, else
	// ~/.android/avd.
	UserAVDHome string
	// Emulator is how emulators are launched (android.emulator.*). The
	// zero value is what a daemon wants: no window, no audio, no boot
	// animation, and the GPU mode left to the emulator.
	Emulator EmulatorOptions
}

// EmulatorOptions are the emulator launch options configuration may choose;
// no other flag of the configuration's reaches the emulator.
type EmulatorOptions struct {
	// Window shows the emulator's window (android.emulator.headless
	// false); without it the emulator gets -no-window.
	Window bool
	// GPU is the -gpu mode: auto, host, swiftshader_indirect,
	// angle_indirect or guest. "" and auto pass no -gpu, so the emulator
	// chooses; New refuses any other value.
	GPU string
	// Audio keeps the guest's audio (android.emulator.audio); without it,
	// -no-audio.
	Audio bool
	// BootAnimation plays the boot animation
	// (android.emulator.bootAnimation); without it, -no-boot-anim, which
	// makes a cold boot a little shorter.
	BootAnimation bool
}

// flags are the emulator options o asks for.
func (o EmulatorOptions) flags() []string {
	var out []string
	if !o.Window {
		out = append(out, "-no-window")
	}
	if o.GPU != "" && o.GPU != "auto" {
		out = append(out, "-gpu", o.GPU)
	}
	if !o.Audio {
		out = append(out, "-no-audio")
	}
	if !o.BootAnimation {
		out = append(out, "-no-boot-anim")
	}
	return out
}

// snapshotParts are the options a snapshot depends on, for the config hash:
// a snapshot saved with one renderer or display may not load under another.
// Default values add nothing, so that the snapshots of devices booted before
// these options existed, with the defaults, stay current. Audio and the
// boot animation are left out: neither changes the saved guest.
func (o EmulatorOptions) snapshotParts() []string {
	var out []string
	if o.Window {
		out = append(out, "headless=false")
	}
	if o.GPU != "" && o.GPU != "auto" {
		out = append(out, "gpu="+o.GPU)
	}
	return out
}

// Driver is the Android driver. Create it with New and stop it with Close.
type Driver struct {
	// The fields up to mu are set by New and never change.
	root        string
	instance    ownership.Instance
	sdk         sdkTools
	port        int
	home        string
	run         runner.Runner
	env         []string // every tool call's environment, scoping last
	adbEnv      []string // env plus the private server's isolation
	log         *slog.Logger
	bootTimeout time.Duration
	// acceptLicenses, userAVDHome and emulator are the Options of the
	// same names, with userAVDHome's default applied.
	acceptLicenses bool
	userAVDHome    string
	emulator       EmulatorOptions

	closeOnce sync.Once
	closeErr  error

	// srvMu guards the fields below. It is held while the private server
	// is checked, replaced or stopped, so that calls that find it gone at
	// once start one server between them.
	srvMu sync.Mutex
	// server is the adb server this driver started, or adopted the record
	// of the one an earlier simlock started that it uses instead; at most
	// one of them is set.
	server  *child
	adopted serverRecord
	// closed is set by Close; no server is started after it.
	closed bool

	// mu guards the fields below.
	mu sync.Mutex
	// running holds the emulators this driver started that have not
	// exited, by AVD name.
	running map[string]*child
	// ports holds the console ports reserved for a boot, by AVD name, so
	// that two boots at once never pick the same port.
	ports map[int]string
	// resolved remembers ResolveSpec's choice of device profile and
	// system image per spec, so Provision need not ask the tools again.
	resolved map[contract.DeviceSpec]resolvedSpec
}

// New checks the SDK's tools, claims the root and starts or adopts the
// private adb server. A missing SDK or tool is *SDKMissingError, a refused
// root *ownership.RootError and a refused adb server *AdbServerError.
func New(ctx context.Context, opts Options) (*Driver, error) {
	port := opts.AdbPort
	if port == 0 {
		port = DefaultAdbPort
	}
	if port == userAdbPort || port < 1024 || port > 65535 {
		return nil, &AdbServerError{Reason: AdbInvalidPort, Port: port,
			Detail: "the port must be within 1024-65535 and not 5037, the default adb server's"}
	}
	if g := opts.Emulator.GPU; g != "" && !slices.Contains(contract.EmulatorGPUModes(), g) {
		return nil, fmt.Errorf("android: %q is not an emulator GPU mode (%s)", g, strings.Join(contract.EmulatorGPUModes(), ", "))
	}
	sdk, missing := findTools(opts.SDKRoot)
	if len(missing) > 0 {
		return nil, &SDKMissingError{Searched: missing}
	}
	if opts.Home == "" || !filepath.IsAbs(opts.Home) {
		return nil, fmt.Errorf("android: SIMLOCK_HOME %q is not an absolute path", opts.Home)
	}
	if err := ownership.Claim(opts.Root, platformName, opts.Instance); err != nil {
		return nil, err
	}
	d := &Driver{
		root:           filepath.Clean(opts.Root),
		instance:       opts.Instance,
		sdk:            sdk,
		port:           port,
		home:           opts.Home,
		run:            opts.Runner,
		log:            opts.Logger,
		bootTimeout:    opts.BootTimeout,
		acceptLicenses: opts.AcceptLicenses,
		userAVDHome:    userAVDHomeOr(opts.UserAVDHome, os.Getenv),
		emulator:       opts.Emulator,
		running:        make(map[string]*child),
		ports:          make(map[int]string),
		resolved:       make(map[contract.DeviceSpec]resolvedSpec),
	}
	if d.run == nil {
		d.run = runner.OS{}
	}
	if d.log == nil {
		d.log = slog.New(slog.DiscardHandler)
	}
	if d.bootTimeout <= 0 {
		d.bootTimeout = defaultBootTimeout
	}
	d.env = scopedEnv(opts.Env, sdk.root, d.root, port)
	d.adbEnv = append(append([]string(nil), d.env...), serverIsolation(port)...)
	d.srvMu.Lock()
	err := d.ensureServerLocked(ctx)
	d.srvMu.Unlock()
	if err != nil {
		return nil, err
	}
	return d, nil
}

// scopedEnv is base plus the variables that confine every tool to the SDK,
// the root and the private adb server. They come last so they win over
// anything in base.
func scopedEnv(base []string, sdk, root string, port int) []string {
	env := append([]string(nil), base...)
	return append(env,
		"ANDROID_HOME="+sdk,
		"ANDROID_SDK_ROOT="+sdk,
		"ANDROID_AVD_HOME="+root,
		"ANDROID_ADB_SERVER_PORT="+strconv.Itoa(port),
	)
}

// Close stops the adb server this driver started, and nothing else: the
// emulators keep running, and a server adopted from an earlier simlock is
// left for the next one to adopt. Close is idempotent; an adb call after it
// fails rather than start a server nobody would stop.
func (d *Driver) Close() error {
	d.closeOnce.Do(func() { d.closeErr = d.stopServer() })
	return d.closeErr
}

// Name returns "android".
func (d *Driver) Name() string { return platformName }

// Platform returns contract.PlatformAndroid.
func (d *Driver) Platform() contract.Platform { return contract.PlatformAndroid }

// Root is the AVD root.
func (d *Driver) Root() string { return d.root }

// RevalidateRoot checks again that the root is this instance's.
func (d *Driver) RevalidateRoot() error {
	return ownership.Check(d.root, platformName, d.instance)
}

// LeaseEnvironment points a lease holder's adb at the private server.
func (d *Driver) LeaseEnvironment() map[string]string {
	return map[string]string{contract.EnvAndroidADBPort: strconv.Itoa(d.port)}
}

// Estimate returns the reference's typical durations: a cold boot is the
// long one; a reclaim restores a snapshot.
func (d *Driver) Estimate(op driver.Operation, _ contract.DeviceSpec) time.Duration {
	switch op {
	case driver.OpProvision:
		return time.Second
	case driver.OpBoot:
		return 70 * time.Second
	case driver.OpReclaim:
		return 6 * time.Second
	}
	return 0
}

func crash(op string, err error) error { return &driver.CrashError{Op: op, Err: err} }

func crashf(op, format string, args ...any) error {
	return crash(op, fmt.Errorf(format, args...))
}
