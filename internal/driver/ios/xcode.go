package ios

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"regexp"

	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/driver"
	"github.com/simlock/simlock/internal/runner"
)

var (
	xcodeLine = regexp.MustCompile(`(?m)^Xcode (\S+)\s*$`)
	buildLine = regexp.MustCompile(`(?m)^Build version (\S+)\s*$`)
	// needsXcode is xcodebuild run from the command line tools alone, which
	// cannot run simulators.
	needsXcode = regexp.MustCompile(`requires Xcode`)
)

// selectXcode is the remedy when Xcode is installed but not selected.
const selectXcode = "sudo xcode-select -s /Applications/Xcode.app/Contents/Developer"

// xcodeVersion runs `xcodebuild -version`. ok is false, with no error, when
// only the command line tools are selected: there is no Xcode to report.
func xcodeVersion(ctx context.Context, r runner.Runner, log *slog.Logger, env []string, path string) (v driver.ToolVersion, ok bool, err error) {
	out, err := call(ctx, r, log, env, path, "xcodebuild", []string{"-version"}, xcodebuildTimeout, nil)
	if callErr := (*CallError)(nil); errors.As(err, &callErr) && callErr.Err == nil && needsXcode.MatchString(callErr.Stderr) {
		return driver.ToolVersion{}, false, nil
	}
	if err != nil {
		return driver.ToolVersion{}, false, err
	}
	m := xcodeLine.FindSubmatch(out)
	if m == nil {
		return driver.ToolVersion{}, false, fmt.Errorf("xcodebuild -version printed no Xcode version: %q", out)
	}
	v = driver.ToolVersion{Name: "xcode", Version: string(m[1])}
	if b := buildLine.FindSubmatch(out); b != nil {
		v.Build = string(b[1])
	}
	return v, true, nil
}

// ToolVersions reports the selected Xcode, or nothing when only the command
// line tools are selected.
func (d *Driver) ToolVersions(ctx context.Context) ([]driver.ToolVersion, error) {
	v, ok, err := xcodeVersion(ctx, d.run, d.log, d.env, d.xcodebuild)
	if err != nil {
		return nil, &driver.CrashError{Op: "tool-versions", Err: err}
	}
	if !ok {
		return nil, nil
	}
	return []driver.ToolVersion{v}, nil
}

// Prerequisites reports what this Mac lacks to run simulators, each with a
// command a person can run to fix it; none means ready. It needs no root
// and no Driver, so it answers where New fails. It runs `xcodebuild
// -version`, `-license check` and `-checkFirstLaunchStatus`, 15 s each;
// when Xcode itself is missing the later two are skipped, as they would
// only fail for the same reason.
func Prerequisites(ctx context.Context, opts Options) []driver.Missing {
	opts = opts.withDefaults()
	var out []driver.Missing
	missing := func(prerequisite, message, remedy string) {
		out = append(out, driver.Missing{Platform: contract.PlatformIOS, Prerequisite: prerequisite, Message: message, Remedy: remedy})
	}
	_, noXcrun := opts.LookPath("xcrun")
	_, noXcodebuild := opts.LookPath("xcodebuild")
	if opts.GOOS != "darwin" && noXcrun != nil && noXcodebuild != nil {
		// Nothing here can be installed: say what the platform needs.
		missing("macos", fmt.Sprintf("iOS simulators run only on macOS with Xcode; this host runs %s", opts.GOOS),
			"lease iOS devices from a simlock on a Mac (or use SIMLOCK_DRIVERS=demo for simulated ones)")
		return out
	}
	if noXcrun != nil {
		missing("xcrun", "xcrun is not on PATH; simlock runs every simulator command through `xcrun simctl`",
			"xcode-select --install")
	}
	xcodebuild, err := opts.LookPath("xcodebuild")
	if err != nil {
		missing("xcode", "xcodebuild is not on PATH: Xcode is not installed; install it from the App Store, then select it",
			"open 'macappstore://apps.apple.com/app/id497799835'")
		return out
	}
	run := func(args ...string) error {
		_, err := call(ctx, opts.Runner, opts.Logger, opts.Env, xcodebuild, "xcodebuild", args, xcodebuildTimeout, nil)
		return err
	}
	switch _, ok, err := xcodeVersion(ctx, opts.Runner, opts.Logger, opts.Env, xcodebuild); {
	case err != nil:
		missing("xcode", fmt.Sprintf("Xcode does not answer: %v", err), selectXcode)
		return out
	case !ok:
		missing("xcode", "only the command line tools are selected; simulators need Xcode", selectXcode)
		return out
	}
	if err := run("-license", "check"); err != nil {
		missing("xcode-license", fmt.Sprintf("the Xcode license is not accepted: %v", err), "sudo xcodebuild -license accept")
	}
	if err := run("-checkFirstLaunchStatus"); err != nil {
		missing("xcode-first-launch", fmt.Sprintf("Xcode's first-launch setup has not run: %v", err), "sudo xcodebuild -runFirstLaunch")
	}
	return out
}
