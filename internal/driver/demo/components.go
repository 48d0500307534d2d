package demo

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/driver"
)

// opRemove is the Op of a failed RemoveComponent's *driver.CrashError. It
// cannot be injected: the core's removal has no failure path worth trying
// that a done context does not already take.
const opRemove = "remove"

// What a runtime takes on disk, about as much as a real one: an iOS
// simulator runtime, an Android system image.
const (
	iosRuntimeBytes     int64 = 8 << 30
	androidRuntimeBytes int64 = 2 << 30
)

// The stamps (last part) of receipts not made by an install in this run.
const (
	builtinStamp  = "builtin"
	restoredStamp = "restored"
)

// latest is the component that names the newest iOS runtime, installed or
// downloadable, as xcodebuild -downloadPlatform does without a version.
const latest = "latest"

// runtimeTable is what New learns about runtimes and never changes, so it is
// read without the lock.
type runtimeTable struct {
	// builtin maps each built-in runtime to the models it pairs with, so
	// one removed and installed again pairs as before.
	builtin map[string][]string
	// newest are the models of the newest built-in runtime, which any other
	// runtime pairs with once installed: a new runtime serves new models.
	newest []string
	// downloadable are Options.DownloadableRuntimes, newest first.
	downloadable []string
}

func newRuntimeTable(c driver.Catalog, downloadable []string) (runtimeTable, error) {
	t := runtimeTable{builtin: make(map[string][]string, len(c.Runtimes))}
	for _, v := range c.Runtimes {
		t.builtin[v] = nil
	}
	for _, m := range c.Models {
		for _, v := range c.ModelRuntimes[m] {
			t.builtin[v] = append(t.builtin[v], m)
		}
	}
	if len(c.Runtimes) > 0 {
		t.newest = t.builtin[c.Runtimes[0]] // Runtimes is newest first
	}
	for _, v := range downloadable {
		if err := checkVersion(v); err != nil {
			return runtimeTable{}, fmt.Errorf("demo: DownloadableRuntimes: %w", err)
		}
		t.downloadable = insertVersion(t.downloadable, v)
	}
	return t, nil
}

// pairs lists the models runtime v pairs with when installed.
func (t runtimeTable) pairs(v string) []string {
	if models, ok := t.builtin[v]; ok {
		return models
	}
	return t.newest
}

// checkVersion refuses what no request could name, and a colon, which would
// make a version look like a receipt.
func checkVersion(v string) error {
	if v == "" || v == latest || len(v) > contract.MaxComponentLen || strings.ContainsAny(v, ": \t\r\n") {
		return fmt.Errorf("%q is not a runtime version", v)
	}
	return nil
}

// insertVersion adds v to a list kept newest first, unless it is there.
func insertVersion(list []string, v string) []string {
	if slices.Contains(list, v) {
		return list
	}
	list = append(list, v)
	slices.SortStableFunc(list, func(a, b string) int { return contract.CompareVersions(b, a) })
	return list
}

func (d *Driver) receipt(v, stamp string) string {
	return fmt.Sprintf("demo:%s:%s:%s", d.platform, v, stamp)
}

// restore installs the runtimes of Options.Installed. A receipt's number
// also moves the install count past it, so no later install repeats it.
func (d *Driver) restore(installed []string) error {
	for _, entry := range installed {
		v, stamp, err := d.parseInstalled(entry)
		if err != nil {
			return fmt.Errorf("demo: Installed: %w", err)
		}
		if stamp == "" {
			// A receipt names the runtime more exactly, whatever the order.
			if _, ok := d.receipts[v]; ok {
				continue
			}
			stamp = restoredStamp
		}
		if n, err := strconv.Atoi(stamp); err == nil {
			d.installs = max(d.installs, n)
		}
		d.installLocked(v, d.receipt(v, stamp))
	}
	return nil
}

// parseInstalled reads a version, or a receipt "demo:<platform>:<version>:<stamp>"
// of this platform; the stamp is "" for a version.
func (d *Driver) parseInstalled(entry string) (version, stamp string, err error) {
	if !strings.HasPrefix(entry, "demo:") {
		return entry, "", checkVersion(entry)
	}
	parts := strings.Split(entry, ":")
	if len(parts) != 4 || parts[1] != string(d.platform) || checkVersion(parts[2]) != nil || parts[3] == "" {
		return "", "", fmt.Errorf("%q is not a version or a receipt demo:%s:<version>:<n>", entry, d.platform)
	}
	return parts[2], parts[3], nil
}

// installLocked makes v installed with the given receipt; d.mu must be held
// (or d not yet shared).
func (d *Driver) installLocked(v, receipt string) {
	if _, ok := d.receipts[v]; !ok {
		d.catalog.Runtimes = insertVersion(d.catalog.Runtimes, v)
		for _, m := range d.runtimes.pairs(v) {
			d.catalog.ModelRuntimes[m] = insertVersion(d.catalog.ModelRuntimes[m], v)
		}
	}
	d.receipts[v] = receipt
	d.refreshLocked()
}

// removeLocked takes v out of the catalog; d.mu must be held.
func (d *Driver) removeLocked(v string) {
	isV := func(s string) bool { return s == v }
	d.catalog.Runtimes = slices.DeleteFunc(d.catalog.Runtimes, isV)
	for m, list := range d.catalog.ModelRuntimes {
		d.catalog.ModelRuntimes[m] = slices.DeleteFunc(list, isV)
	}
	delete(d.receipts, v)
	d.refreshLocked()
}

// refreshLocked derives the default runtime and the downloadable list from
// what is installed; d.mu must be held (or d not yet shared).
func (d *Driver) refreshLocked() {
	d.catalog.DefaultRuntime = ""
	if len(d.catalog.Runtimes) > 0 {
		d.catalog.DefaultRuntime = d.catalog.Runtimes[0]
	}
	d.catalog.Downloadable = nil
	for _, v := range d.runtimes.downloadable {
		if _, ok := d.receipts[v]; !ok {
			d.catalog.Downloadable = append(d.catalog.Downloadable, v)
		}
	}
}

// resolveComponentLocked says which runtime component names and whether it
// is installed; ok is false when it names neither an installed nor a
// downloadable runtime. An installed runtime wins over a newer downloadable
// one ("26" with 26.1 installed and 26.4 downloadable is 26.1), as it does
// in ResolveSpec. d.mu must be held.
func (d *Driver) resolveComponentLocked(component string) (version string, installed, ok bool) {
	if component == latest && d.platform == contract.PlatformIOS {
		all := slices.Concat(d.catalog.Runtimes, d.catalog.Downloadable)
		if len(all) == 0 {
			return "", false, false
		}
		v := slices.MaxFunc(all, contract.CompareVersions)
		_, installed := d.receipts[v]
		return v, installed, true
	}
	if component == "" {
		return "", false, false // pickRuntime would take "" for "any"
	}
	if v, ok := pickRuntime(d.catalog.Runtimes, component); ok {
		return v, true, true
	}
	if v, ok := pickRuntime(d.catalog.Downloadable, component); ok {
		return v, false, true
	}
	return "", false, false
}

// componentName is how the demo names runtime v.
func (d *Driver) componentName(v string) string {
	if d.platform == contract.PlatformAndroid {
		return fmt.Sprintf("Android API %s (demo)", v)
	}
	return fmt.Sprintf("iOS %s (demo)", v)
}

// decimalSize prints a size as installers do, in decimal units.
func decimalSize(b int64) string {
	if b >= 1e9 {
		return fmt.Sprintf("%.2f GB", float64(b)/1e9)
	}
	return fmt.Sprintf("%.1f MB", float64(b)/1e6)
}

// infoLocked describes installed runtime v; d.mu must be held.
func (d *Driver) infoLocked(v string) driver.ComponentInfo {
	return driver.ComponentInfo{
		Platform:  d.platform,
		Version:   v,
		Name:      d.componentName(v),
		Receipt:   d.receipts[v],
		SizeBytes: d.ComponentFootprint(v),
	}
}

// FindComponent reports the installed runtime that is component or, for a
// bare major such as "26", the newest that starts with "26.". On iOS,
// "latest" is the newest runtime installed or downloadable.
func (d *Driver) FindComponent(_ context.Context, component string) (driver.ComponentInfo, bool, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	v, installed, ok := d.resolveComponentLocked(component)
	if !ok || !installed {
		return driver.ComponentInfo{}, false, nil
	}
	return d.infoLocked(v), true, nil
}

// InstallComponent installs the downloadable runtime component names after
// a simulated download of DownloadTime. After DownloadQuietTime with no
// percentage (none by default), it reports 0, then a higher
// percentage at each tenth of DownloadTime, one of them fractional as real
// installers print, up to 100. A done context ends the download with a
// *driver.CrashError wrapping its error; an injected failure comes after
// the download. Either way nothing is installed. What is installed stays
// installed until RemoveComponent, with a receipt of its own.
func (d *Driver) InstallComponent(ctx context.Context, component string, progress func(driver.InstallProgress)) (driver.InstallResult, error) {
	fail := d.begin(opInstall)
	if progress == nil {
		progress = func(driver.InstallProgress) {}
	}
	d.mu.Lock()
	v, installed, ok := d.resolveComponentLocked(component)
	var info driver.ComponentInfo
	if installed {
		info = d.infoLocked(v)
	}
	downloadable := slices.Clone(d.catalog.Downloadable)
	d.mu.Unlock()

	if installed {
		if err := run(ctx, opInstall, 0, fail); err != nil {
			return driver.InstallResult{}, err
		}
		return driver.InstallResult{ComponentInfo: info, AlreadyInstalled: true}, nil
	}
	if !ok {
		reason := "the demo driver offers no downloadable runtime"
		if len(downloadable) > 0 {
			reason = "the demo driver can download only " + strings.Join(downloadable, ", ")
		}
		return driver.InstallResult{}, &driver.NotDownloadableError{Platform: d.platform, Component: component, Reason: reason, Offered: downloadable}
	}

	// The installer's quiet start: no percentage until it knows the size.
	if err := sleep(ctx, d.downloadQuiet); err != nil {
		return driver.InstallResult{}, crash(opInstall, err)
	}
	steps := []float64{0, 10, 20, 30, 41.7, 50, 60, 70, 80, 90, 100}
	name := d.componentName(component)
	var waited time.Duration
	for i, pct := range steps {
		// Each step ends at its share of the whole, so the steps add up to
		// DownloadTime exactly.
		at := d.downloadTime * time.Duration(i) / time.Duration(len(steps)-1)
		if err := sleep(ctx, at-waited); err != nil {
			return driver.InstallResult{}, crash(opInstall, err)
		}
		waited = at
		// As xcodebuild and sdkmanager print it: the share of the
		// download's size, which is the runtime's footprint.
		total := d.ComponentFootprint(component)
		done := int64(float64(total) * pct / 100)
		progress(driver.InstallProgress{Percent: pct, Bytes: done, Total: total, Stream: "stdout",
			Line: fmt.Sprintf("Downloading %s: %.1f%% (%s of %s)", name, pct, decimalSize(done), decimalSize(total))})
		// An injected failure breaks the download part way, as a lost
		// connection would.
		if fail && pct >= 40 {
			progress(driver.InstallProgress{Step: driver.InstallLine, Stream: "stderr", Line: "Download failed: the connection was lost (injected)"})
			return driver.InstallResult{}, crash(opInstall, ErrInjected)
		}
	}
	progress(driver.InstallProgress{Step: driver.InstallVerify})

	d.mu.Lock()
	// The core never runs two installs at once, but a caller that does
	// anyway gets the first one's install rather than a second receipt.
	if _, done := d.receipts[v]; !done {
		d.installs++
		d.installLocked(v, d.receipt(v, strconv.Itoa(d.installs)))
	}
	info = d.infoLocked(v)
	d.mu.Unlock()
	if err := d.saved(opInstall, nil); err != nil {
		return driver.InstallResult{}, err
	}
	return driver.InstallResult{ComponentInfo: info}, nil
}

// RemoveComponent uninstalls the runtime c.Version, built in or not; a
// downloadable one can then be downloaded again. One not installed is
// already what the caller wants. One whose receipt is not c.Receipt was
// reinstalled since c was read, and is left alone.
func (d *Driver) RemoveComponent(ctx context.Context, c driver.ComponentInfo) error {
	if err := run(ctx, opRemove, 0, false); err != nil {
		return err
	}
	if c.Platform != "" && c.Platform != d.platform {
		return crash(opRemove, fmt.Errorf("demo: driver serves %s, not %s", d.platform, c.Platform))
	}
	if err := d.removeUnlessReinstalled(c); err != nil {
		return err
	}
	return d.saved(opRemove, nil)
}

func (d *Driver) removeUnlessReinstalled(c driver.ComponentInfo) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	receipt, ok := d.receipts[c.Version]
	if !ok {
		return nil
	}
	if c.Receipt != "" && c.Receipt != receipt {
		return crash(opRemove, fmt.Errorf("demo: %s %s was reinstalled as %s; not removing it for %s", d.platform, c.Version, receipt, c.Receipt))
	}
	d.removeLocked(c.Version)
	return nil
}

// ListComponents lists every installed runtime, built-in ones included,
// newest first. No device outside simlock exists to use one.
func (d *Driver) ListComponents(context.Context) ([]driver.ComponentInfo, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make([]driver.ComponentInfo, 0, len(d.catalog.Runtimes))
	for _, v := range d.catalog.Runtimes {
		out = append(out, d.infoLocked(v))
	}
	return out, nil
}

// ComponentFootprint is what a real runtime of the platform takes, whatever
// the component, so the core's disk accounting sees realistic numbers.
func (d *Driver) ComponentFootprint(string) int64 {
	if d.platform == contract.PlatformAndroid {
		return androidRuntimeBytes
	}
	return iosRuntimeBytes
}

// ComponentDir is empty: a simulated install writes nothing to disk, so no
// free-space check applies.
func (d *Driver) ComponentDir() string { return "" }
