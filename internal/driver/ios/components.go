package ios

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/driver"
	"github.com/simlock/simlock/internal/driver/installproc"
	"github.com/simlock/simlock/internal/runner"
)

// The iOS driver's components are simulator runtimes. A component is what
// ResolveSpec names in a *driver.RuntimeMissingError: a version ("26.4"),
// a bare major ("26") or "latest".

var _ driver.Installer = (*Driver)(nil)

const (
	// componentFootprint is the free space a runtime download needs: an
	// iOS runtime image is 8-9 GB.
	componentFootprint = 8 << 30
	// removalTimeout bounds a runtime's removal, including the wait while
	// CoreSimulator deletes it in the background.
	removalTimeout = 5 * time.Minute
	// coreSimulatorDir is where CoreSimulator keeps runtime images.
	coreSimulatorDir = "/Library/Developer/CoreSimulator"
	// iphoneSimulator is the platform identifier of iOS runtime images;
	// the same list holds watchOS, tvOS and visionOS ones.
	iphoneSimulator = "com.apple.platform.iphonesimulator"
)

// notAvailable is xcodebuild refusing a -buildVersion Apple does not offer.
var notAvailable = regexp.MustCompile(`is not available for download`)

// componentDirOr applies ComponentDir's default.
func componentDirOr(dir string) string {
	if dir != "" {
		return dir
	}
	if fi, err := os.Stat(coreSimulatorDir); err == nil && fi.IsDir() {
		return coreSimulatorDir
	}
	if home, err := os.UserHomeDir(); err == nil {
		return home
	}
	return ""
}

// runtimeImage is a runtime disk image `simctl runtime list -j` lists.
type runtimeImage struct {
	id, runtimeID, build, state string
	sizeBytes                   int64
}

func (im runtimeImage) deleting() bool { return strings.EqualFold(im.state, "deleting") }

// parseRuntimeImages reads `simctl runtime list -j`, an object of images
// keyed by identifier. Only iOS images are kept.
func parseRuntimeImages(b []byte) ([]runtimeImage, error) {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(b, &top); err != nil {
		return nil, fmt.Errorf("not the JSON simctl prints: %w", err)
	}
	var out []runtimeImage
	for key, raw := range top {
		var o object
		if json.Unmarshal(raw, &o) != nil || o == nil {
			continue
		}
		if p, _ := field[string](o, "platformIdentifier"); p != iphoneSimulator {
			continue
		}
		im := runtimeImage{id: key}
		if id, ok := field[string](o, "identifier"); ok && id != "" {
			im.id = id
		}
		im.runtimeID, _ = field[string](o, "runtimeIdentifier")
		im.build, _ = field[string](o, "build")
		im.state, _ = field[string](o, "state")
		if n, ok := field[float64](o, "sizeBytes"); ok && n > 0 {
			im.sizeBytes = int64(n)
		}
		out = append(out, im)
	}
	slices.SortFunc(out, func(a, b runtimeImage) int { return strings.Compare(a.id, b.id) })
	return out, nil
}

// installedRuntime is an available iOS runtime and its disk image; image
// is nil for a runtime that comes inside Xcode.
type installedRuntime struct {
	rt    simRuntime
	image *runtimeImage
}

// receipt identifies this install of the runtime: its identifier and
// build, and the disk image's identifier, which is new at every download,
// so a reinstall by someone else never matches an older record.
func (ir installedRuntime) receipt() string {
	r := ir.rt.id + "@" + ir.rt.build
	if ir.image != nil {
		r += "#" + ir.image.id
	}
	return r
}

func (ir installedRuntime) name() string {
	if ir.rt.build == "" {
		return ir.rt.name
	}
	return ir.rt.name + " (" + ir.rt.build + ")"
}

// simctlMachine runs `xcrun simctl args…` without a device set. Only the
// calls that touch no device go through here: the runtime subcommands,
// which are machine-wide, and the read of the default set's device list.
func (d *Driver) simctlMachine(ctx context.Context, op string, timeout time.Duration, args ...string) ([]byte, error) {
	out, err := call(ctx, d.run, d.log, d.env, d.xcrun, "simctl", args, timeout, nil)
	if err != nil {
		return out, &driver.CrashError{Op: op, Err: err}
	}
	return out, nil
}

func (d *Driver) runtimeImages(ctx context.Context, op string) ([]runtimeImage, error) {
	out, err := d.simctlMachine(ctx, op, commandTimeout, "runtime", "list", "-j")
	if err != nil {
		return nil, err
	}
	imgs, err := parseRuntimeImages(out)
	if err != nil {
		return nil, crash(op, "simctl runtime list -j: %w", err)
	}
	return imgs, nil
}

// installedRuntimes reads the available iOS runtimes, newest first, as
// ResolveSpec sees them, each with its disk image.
func (d *Driver) installedRuntimes(ctx context.Context, op string) ([]installedRuntime, error) {
	c, err := d.catalog(ctx, op)
	if err != nil {
		return nil, err
	}
	imgs, err := d.runtimeImages(ctx, op)
	if err != nil {
		return nil, err
	}
	out := make([]installedRuntime, 0, len(c.runtimes))
	for _, rt := range c.runtimes {
		ir := installedRuntime{rt: rt}
		i := slices.IndexFunc(imgs, func(im runtimeImage) bool {
			return im.runtimeID == rt.id && (rt.build == "" || im.build == "" || im.build == rt.build) && !im.deleting()
		})
		if i >= 0 {
			ir.image = &imgs[i]
		}
		out = append(out, ir)
	}
	return out, nil
}

// foreignUse counts, by runtime identifier, the simulators of the default
// device set that use a runtime: the ones that run now or have booted
// before. A simulator never booted holds nothing of anyone's; CoreSimulator
// makes a few by itself when a runtime arrives, and counting those would
// make every runtime look in use.
func (d *Driver) foreignUse(ctx context.Context, op string) (map[string]int, error) {
	out, err := d.simctlMachine(ctx, op, commandTimeout, "list", "-j", "devices")
	if err != nil {
		return nil, err
	}
	var top struct {
		Devices map[string][]json.RawMessage `json:"devices"`
	}
	if err := json.Unmarshal(out, &top); err != nil {
		return nil, crash(op, "simctl list -j devices (default set): not the JSON simctl prints: %w", err)
	}
	use := map[string]int{}
	for runtimeID, entries := range top.Devices {
		for _, o := range objects(entries) {
			booted, _ := field[string](o, "lastBootedAt")
			used, _ := field[string](o, "lastUsedAt")
			state, _ := field[string](o, "state")
			if booted != "" || used != "" || (state != "" && state != "Shutdown") {
				use[runtimeID]++
			}
		}
	}
	return use, nil
}

func (ir installedRuntime) info(foreign map[string]int) driver.ComponentInfo {
	info := driver.ComponentInfo{
		Platform:       contract.PlatformIOS,
		Version:        ir.rt.version,
		Name:           ir.name(),
		Receipt:        ir.receipt(),
		ForeignDevices: foreign[ir.rt.id],
	}
	if ir.image != nil {
		info.SizeBytes = ir.image.sizeBytes
	}
	return info
}

// parseComponent reads a component: "latest", or a version of one to three
// numbers.
func parseComponent(component string) (v version, latest bool, err error) {
	if component == "latest" {
		return version{}, true, nil
	}
	v, ok := parseVersion(component)
	if !ok {
		return version{}, false, contract.BadRequest("component", "%q is not an iOS component: name a version such as 26.4, a major such as 26, or latest", component)
	}
	return v, false, nil
}

// pickRuntime finds the runtime a component names, as ResolveSpec would
// for that version: the exact version first, else the newest that starts
// with it, so "26" is the newest 26.x and "26.4" may be a 26.4.1. "latest"
// is the newest. rts is newest first.
func pickRuntime(rts []installedRuntime, component string) (installedRuntime, bool) {
	if component == "latest" {
		if len(rts) == 0 {
			return installedRuntime{}, false
		}
		return rts[0], true
	}
	want, ok := parseVersion(component)
	if !ok {
		return installedRuntime{}, false
	}
	if i := slices.IndexFunc(rts, func(ir installedRuntime) bool { return ir.rt.version == component }); i >= 0 {
		return rts[i], true
	}
	if i := slices.IndexFunc(rts, func(ir installedRuntime) bool { return ir.rt.v.hasPrefix(want) }); i >= 0 {
		return rts[i], true
	}
	return installedRuntime{}, false
}

// FindComponent reads the installed runtimes afresh and reports the one a
// version names: "26.4" exactly (or its newest patch), "26" the newest
// 26.x, as ResolveSpec matches them. "latest" is never found: only
// xcodebuild knows which runtime is the newest Apple offers, and ResolveSpec
// asks for latest precisely when no installed runtime serves a model, so
// an install of it must run.
func (d *Driver) FindComponent(ctx context.Context, component string) (driver.ComponentInfo, bool, error) {
	const op = "find-component"
	if _, latest, err := parseComponent(component); err != nil || latest {
		return driver.ComponentInfo{}, false, err
	}
	rts, err := d.installedRuntimes(ctx, op)
	if err != nil {
		return driver.ComponentInfo{}, false, err
	}
	ir, ok := pickRuntime(rts, component)
	if !ok {
		return driver.ComponentInfo{}, false, nil
	}
	foreign, err := d.foreignUse(ctx, op)
	if err != nil {
		return driver.ComponentInfo{}, false, err
	}
	return ir.info(foreign), true, nil
}

// InstallComponent downloads a runtime with `xcodebuild -downloadPlatform
// iOS`, adding `-buildVersion <component>` unless it is "latest". It runs
// as long as ctx lets it, reporting the percentages xcodebuild prints.
//
// A version below iOS 16, which xcodebuild cannot download, and a version
// xcodebuild says is not available, are *driver.NotDownloadableError; a
// version already installed is reported without a download. Any other
// failure, the run being stopped by ctx included, is a *driver.CrashError.
// Success means a fresh read finds the runtime, so the next ListCatalog
// and ResolveSpec, which read afresh too, offer it.
func (d *Driver) InstallComponent(ctx context.Context, component string, progress func(driver.InstallProgress)) (driver.InstallResult, error) {
	const op = "install-component"
	v, latest, err := parseComponent(component)
	if err != nil {
		return driver.InstallResult{}, err
	}
	if !latest && v.parts[0] < downloadFloor {
		return driver.InstallResult{}, &driver.NotDownloadableError{Platform: contract.PlatformIOS, Component: component,
			Reason: fmt.Sprintf("runtimes older than iOS %d.0 cannot be downloaded; install it from Xcode > Settings > Components", downloadFloor)}
	}
	before, err := d.installedRuntimes(ctx, op)
	if err != nil {
		return driver.InstallResult{}, err
	}
	if !latest {
		if ir, ok := pickRuntime(before, component); ok {
			foreign, err := d.foreignUse(ctx, op)
			if err != nil {
				return driver.InstallResult{}, err
			}
			return driver.InstallResult{ComponentInfo: ir.info(foreign), AlreadyInstalled: true}, nil
		}
	}
	stream, ok := d.run.(installproc.Streamer)
	if !ok {
		return driver.InstallResult{}, crash(op, "the runner cannot stream xcodebuild's progress")
	}
	args := []string{"-downloadPlatform", "iOS"}
	if !latest {
		args = append(args, "-buildVersion", component)
	}
	// No timeout of its own: a download of 8 GB takes what it takes, and
	// the caller's ctx says how long that may be.
	cmd := runner.Cmd{Path: d.xcodebuild, Args: args, Env: d.env}
	start := time.Now()
	res, err := installproc.Run(ctx, stream, cmd, progress)
	d.log.DebugContext(ctx, "tool call", "tool", "xcodebuild", "args", args, "exit", res.ExitCode, "err", err, "took", time.Since(start))
	if err != nil {
		return driver.InstallResult{}, &driver.CrashError{Op: op, Err: err}
	}
	// A bare major is what xcodebuild most often refuses: it downloads
	// exact versions.
	hint := ""
	if !latest && v.n == 1 {
		hint = fmt.Sprintf("; xcodebuild downloads exact versions, so ask for one (%d.x) rather than the major %s", v.parts[0], component)
	}
	if res.ExitCode != 0 {
		if !latest && notAvailable.MatchString(res.Output) {
			return driver.InstallResult{}, &driver.NotDownloadableError{Platform: contract.PlatformIOS, Component: component,
				Reason: strings.TrimSuffix(matchingLine(res.Output, notAvailable), ".") + hint}
		}
		return driver.InstallResult{}, crash(op, "xcodebuild %s exited with code %d: %s%s", strings.Join(args, " "), res.ExitCode, lastLines(res.Output, 5), hint)
	}
	if progress != nil {
		progress(driver.InstallProgress{Step: driver.InstallVerify})
	}
	after, err := d.installedRuntimes(ctx, op)
	if err != nil {
		return driver.InstallResult{}, err
	}
	ir, ok := pickRuntime(after, component)
	if !ok {
		return driver.InstallResult{}, crash(op, "xcodebuild reported success but iOS %s is still not installed", component)
	}
	foreign, err := d.foreignUse(ctx, op)
	if err != nil {
		return driver.InstallResult{}, err
	}
	info := ir.info(foreign)
	// For latest, xcodebuild may have found the newest installed already.
	already := slices.ContainsFunc(before, func(b installedRuntime) bool { return b.receipt() == info.Receipt })
	return driver.InstallResult{ComponentInfo: info, AlreadyInstalled: already}, nil
}

// RemoveComponent deletes the runtime whose receipt c carries with `simctl
// runtime delete <image>`, waits while CoreSimulator deletes it in the
// background, and checks it is gone; five minutes in all. A runtime
// installed again since (another receipt) is not touched, nor is one that
// comes inside Xcode and has no image of its own.
func (d *Driver) RemoveComponent(ctx context.Context, c driver.ComponentInfo) error {
	const op = "remove-component"
	ctx, cancel := context.WithTimeout(ctx, removalTimeout)
	defer cancel()
	rts, err := d.installedRuntimes(ctx, op)
	if err != nil {
		return err
	}
	i := slices.IndexFunc(rts, func(ir installedRuntime) bool { return ir.receipt() == c.Receipt })
	if i < 0 {
		return crash(op, "no installed iOS runtime has the receipt %s: %s is gone, or was installed again since", c.Receipt, c.Name)
	}
	ir := rts[i]
	if ir.image == nil {
		return crash(op, "%s has no runtime image of its own: it comes with Xcode, and only removing that Xcode removes it", ir.name())
	}
	if _, err := d.simctlMachine(ctx, op, removalTimeout, "runtime", "delete", ir.image.id); err != nil {
		return err
	}
	for wait := 50 * time.Millisecond; ; wait = min(2*wait, time.Second) {
		imgs, err := d.runtimeImages(ctx, op)
		if err != nil {
			return err
		}
		if !slices.ContainsFunc(imgs, func(im runtimeImage) bool { return im.id == ir.image.id && im.deleting() }) {
			break
		}
		if !pause(ctx, wait) {
			return crash(op, "%s was still being deleted when time ran out: %w", ir.name(), context.Cause(ctx))
		}
	}
	rts, err = d.installedRuntimes(ctx, op)
	if err != nil {
		return err
	}
	if slices.ContainsFunc(rts, func(o installedRuntime) bool { return o.rt.id == ir.rt.id && o.rt.build == ir.rt.build }) {
		return crash(op, "simctl runtime delete reported success but %s is still installed", ir.name())
	}
	return nil
}

// ListComponents lists the available iOS runtimes, newest first, with the
// simulators of the default set that use each.
func (d *Driver) ListComponents(ctx context.Context) ([]driver.ComponentInfo, error) {
	const op = "list-components"
	rts, err := d.installedRuntimes(ctx, op)
	if err != nil {
		return nil, err
	}
	foreign, err := d.foreignUse(ctx, op)
	if err != nil {
		return nil, err
	}
	out := make([]driver.ComponentInfo, 0, len(rts))
	for _, ir := range rts {
		out = append(out, ir.info(foreign))
	}
	return out, nil
}

// ComponentFootprint is 8 GiB, an iOS runtime image, whatever the version.
func (d *Driver) ComponentFootprint(string) int64 { return componentFootprint }

// ComponentDir is Options.ComponentDir: CoreSimulator's directory, where
// downloads land, or the home directory on a Mac without one yet.
func (d *Driver) ComponentDir() string { return d.componentDir }

// pause waits d, or less if ctx ends; it reports whether ctx is still live.
func pause(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// lastLines is the end of an installer's output for an error message: its
// last n non-empty lines, bounded like a tool's stderr.
func lastLines(out string, n int) string {
	var lines []string
	for _, l := range strings.Split(out, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			lines = append(lines, l)
		}
	}
	s := strings.Join(lines[max(len(lines)-n, 0):], "\n")
	if len(s) > maxStderr {
		s = "…" + s[len(s)-maxStderr:]
	}
	return s
}

// matchingLine is the first line of out that re matches, trimmed.
func matchingLine(out string, re *regexp.Regexp) string {
	for _, l := range strings.Split(out, "\n") {
		if re.MatchString(l) {
			return strings.TrimSpace(l)
		}
	}
	return ""
}
