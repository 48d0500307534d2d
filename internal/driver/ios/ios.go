// Package ios is the iOS simulator driver. It runs `xcrun simctl` and
// `xcodebuild` through a runner.Runner and nothing else.
//
// Containment: simlock owns one device set, the root (drivers.ios.deviceRoot,
// claimed with the ownership package), and every simctl call the driver
// makes about devices names it with `--set <root>`. A UDID does not resolve
// outside its set, so the user's own simulators in the default set are out
// of reach by construction. Before anything destructive (shutdown, erase,
// delete) the driver checks again that the root is still ours and that the
// UDID is listed in it, so that a damaged registry or a typo cannot turn
// into someone else's device being wiped. Device names (simlock-<uuid>) are
// cosmetic and prove nothing. The calls without a set touch no device:
// runtimes are machine-wide, so `simctl runtime list` and `runtime delete`
// name none, and counting the simulators outside simlock that use a runtime
// reads the default set's list.
//
// Provenance: what tells a device simlock left alone from one erased or
// replaced outside it is its marks (see provenance.go), one token in
// <root>/<UDID>/simlock-mark.json, which an erase keeps, and in
// <root>/<UDID>/data/simlock-mark.json, which an erase takes. Reclaim and
// Destroy check the first against the token in the driver data before they
// act, and Reclaim writes the second again after its own erase.
//
// Components (runtimes) are downloaded with `xcodebuild -downloadPlatform`;
// see InstallComponent.
//
// The driver keeps no cache and no mutable state: each call reads what it
// needs from simctl, so it always acts on what is installed now, and a
// Driver is safe for concurrent use. The core never runs two operations on
// the same device at once; simctl itself serialises what must be.
//
// Prerequisites is a separate function because it must answer when New
// cannot: on a machine without Xcode, it says what to install.
package ios

import (
	"context"
	"fmt"
	"log/slog"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/driver"
	"github.com/simlock/simlock/internal/ownership"
	"github.com/simlock/simlock/internal/runner"
)

var _ driver.Driver = (*Driver)(nil)

// Timeouts of the tool calls. A boot waits much longer than anything else:
// the first boot of a new runtime builds caches for minutes.
const (
	commandTimeout    = 30 * time.Second
	bootstatusTimeout = 120 * time.Second
	xcodebuildTimeout = 15 * time.Second
)

// The estimates the core shows as ETAs and uses for stall thresholds,
// measured on Apple silicon with a warm runtime.
const (
	provisionEstimate = 500 * time.Millisecond
	bootEstimate      = 60 * time.Second
	reclaimEstimate   = 34 * time.Second
)

// EnvDeviceSet is the variable a lease holder gets naming the device set.
const EnvDeviceSet = contract.EnvIOSDeviceSet

// Options configures a Driver.
type Options struct {
	// Root is the absolute path of the device set simlock owns
	// (drivers.ios.deviceRoot).
	Root string
	// Instance is this simlock home's identity; the root's marker must name
	// it.
	Instance ownership.Instance
	// Runner runs the tools; nil means runner.OS{}.
	Runner runner.Runner
	// Env is added to the environment of every tool call and passthrough.
	Env []string
	// LookPath finds "xcrun" and "xcodebuild"; nil means exec.LookPath.
	LookPath func(string) (string, error)
	// Logger receives a debug line per tool call; nil discards.
	Logger *slog.Logger
	// GOOS is the host's operating system, for what Prerequisites says
	// when the tools are missing; "" means runtime.GOOS.
	GOOS string
	// ComponentDir is a directory on the volume runtime downloads fill,
	// for the core's free-space check; "" means
	// /Library/Developer/CoreSimulator, where CoreSimulator keeps runtime
	// images, when it exists, else the user's home directory.
	ComponentDir string
	// Slim configures the slim pass of devices made slim.
	Slim SlimOptions
}

// withDefaults fills in the nil fields, so New and Prerequisites agree.
func (o Options) withDefaults() Options {
	if o.Runner == nil {
		o.Runner = runner.OS{}
	}
	if o.LookPath == nil {
		o.LookPath = exec.LookPath
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.GOOS == "" {
		o.GOOS = runtime.GOOS
	}
	return o
}

// Driver is the iOS simulator driver. Create it with New. All its fields
// are set by New and never change.
type Driver struct {
	root       string
	instance   ownership.Instance
	run        runner.Runner
	env        []string
	xcrun      string
	xcodebuild string
	log        *slog.Logger
	// componentDir is Options.ComponentDir with its default applied.
	componentDir string
	slimOpts     SlimOptions
}

// New finds xcrun and xcodebuild, claims the root, checks that Xcode (not
// only the command line tools) is selected and returns the driver. A missing
// tool is a *ToolsMissingError naming each; the command line tools alone
// are *XcodeNotSelectedError, so the platform is off with the remedy rather
// than on and failing every lease; a root that is not ours (or cannot be
// made ours) is the *ownership.RootError from ownership.Claim, unwrapped, so
// the caller can report its reason. The one tool New runs is `xcodebuild
// -version`; an Xcode that does not answer it is left for Prerequisites and
// the first call to report.
func New(ctx context.Context, opts Options) (*Driver, error) {
	opts = opts.withDefaults()
	var missing []string
	xcrun, err := opts.LookPath("xcrun")
	if err != nil {
		missing = append(missing, "xcrun")
	}
	xcodebuild, err := opts.LookPath("xcodebuild")
	if err != nil {
		missing = append(missing, "xcodebuild")
	}
	if len(missing) > 0 {
		return nil, &ToolsMissingError{Tools: missing}
	}
	if err := ownership.Claim(opts.Root, string(contract.PlatformIOS), opts.Instance); err != nil {
		return nil, err
	}
	if _, ok, err := xcodeVersion(ctx, opts.Runner, opts.Logger, opts.Env, xcodebuild); err == nil && !ok {
		return nil, &XcodeNotSelectedError{}
	}
	opts.Logger.DebugContext(ctx, "ios driver ready", "root", opts.Root, "xcrun", xcrun, "xcodebuild", xcodebuild)
	return &Driver{
		root:         opts.Root,
		instance:     opts.Instance,
		run:          opts.Runner,
		env:          slices.Clone(opts.Env),
		xcrun:        xcrun,
		xcodebuild:   xcodebuild,
		log:          opts.Logger,
		componentDir: componentDirOr(opts.ComponentDir),
		slimOpts:     opts.Slim.withDefaults(),
	}, nil
}

// ToolsMissingError is New finding no xcrun or xcodebuild: Xcode is not
// installed or not selected.
type ToolsMissingError struct {
	// Tools names each tool not found, in the order looked for.
	Tools []string
}

func (e *ToolsMissingError) Error() string {
	return fmt.Sprintf("ios: %s not found; install Xcode and select it with `sudo xcode-select -s /Applications/Xcode.app/Contents/Developer`",
		strings.Join(e.Tools, " and "))
}

// XcodeNotSelectedError is New finding only the command line tools
// selected: they have xcrun and xcodebuild but cannot run simulators.
type XcodeNotSelectedError struct{}

func (e *XcodeNotSelectedError) Error() string {
	return "ios: only the command line tools are selected, and simulators need Xcode; install Xcode, then select it with `" + selectXcode + "`"
}

// Name returns "ios".
func (d *Driver) Name() string { return "ios" }

// Platform returns contract.PlatformIOS.
func (d *Driver) Platform() contract.Platform { return contract.PlatformIOS }

// Root is the device set every simctl call is scoped to.
func (d *Driver) Root() string { return d.root }

// RevalidateRoot checks the root's marker again without changing anything.
// It returns the *ownership.RootError as is.
func (d *Driver) RevalidateRoot() error {
	return ownership.Check(d.root, string(contract.PlatformIOS), d.instance)
}

// LeaseEnvironment names the device set, which a lease holder's own simctl
// calls need: the leased UDID exists only there.
func (d *Driver) LeaseEnvironment() map[string]string {
	return map[string]string{EnvDeviceSet: d.root}
}

// Estimate returns the usual duration of op; the spec makes no difference
// because a full boot dominates and is alike for every model. iOS has one
// reclaim, an erase.
func (d *Driver) Estimate(op driver.Operation, _ contract.DeviceSpec) time.Duration {
	switch op {
	case driver.OpProvision:
		return provisionEstimate
	case driver.OpBoot:
		return bootEstimate
	case driver.OpReclaim:
		return reclaimEstimate
	}
	return 0
}
