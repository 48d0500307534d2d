package ios

import (
	"context"
	"errors"
	"io"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/driver"
	"github.com/simlock/simlock/internal/driver/installproc"
	"github.com/simlock/simlock/internal/runner"
)

// Stream lets the recorder run installers, recording them like any call.
func (r *recorder) Stream(ctx context.Context, c runner.Cmd, stdout, stderr io.Writer) (int, error) {
	r.mu.Lock()
	r.cmds = append(r.cmds, c)
	r.mu.Unlock()
	return r.inner.(installproc.Streamer).Stream(ctx, c, stdout, stderr)
}

// The shim's iOS 26.4, which is downloadable but not installed.
const (
	runtime264 = "com.apple.CoreSimulator.SimRuntime.iOS-26-4"
	imageSize  = 8_859_345_289
)

// xcodebuildCalls returns the arguments of every xcodebuild call so far.
func (h *harness) xcodebuildCalls(t *testing.T) [][]string {
	t.Helper()
	var out [][]string
	for _, c := range h.env.Calls(t) {
		if c.Tool == "xcodebuild" {
			out = append(out, c.Args)
		}
	}
	return out
}

func (h *harness) resolve(t *testing.T, model, osVersion string) (contract.DeviceSpec, error) {
	t.Helper()
	return h.d.ResolveSpec(t.Context(), driver.Request{Platform: contract.PlatformIOS, Model: model, OSVersion: osVersion})
}

func TestInstallComponentDownloadsAndResolves(t *testing.T) {
	h := newHarness(t)
	ctx := t.Context()
	_, err := h.resolve(t, "iPhone 16", "26.4")
	var missing *driver.RuntimeMissingError
	if !errors.As(err, &missing) || missing.Component != "26.4" {
		t.Fatalf("before the install, ResolveSpec = %v; want a RuntimeMissingError for component 26.4", err)
	}
	if _, found, err := h.d.FindComponent(ctx, "26.4"); found || err != nil {
		t.Fatalf("FindComponent(26.4) before the install = %v, %v", found, err)
	}

	var got []float64
	var sizes [][2]int64
	res, err := h.d.InstallComponent(ctx, "26.4", func(p driver.InstallProgress) {
		if p.Step != driver.InstallFigures {
			return
		}
		got = append(got, p.Percent)
		sizes = append(sizes, [2]int64{p.Bytes, p.Total})
	})
	if err != nil {
		t.Fatalf("InstallComponent: %v", err)
	}
	if want := []float64{0, 0.4, 2.7, 9.7, 38.5, 71.2, 100}; !slices.Equal(got, want) {
		t.Errorf("progress %v, want %v", got, want)
	}
	// xcodebuild prints the sizes beside the percentage ("38,5% (3,41 GB
	// of 8,86 GB)"): they come along.
	if len(sizes) != len(got) || sizes[4] != [2]int64{3_410_000_000, 8_860_000_000} || sizes[0] != [2]int64{73_000, 8_860_000_000} {
		t.Errorf("sizes %v, want 73 kB of 8.86 GB first and 3.41 GB of 8.86 GB at 38.5%%", sizes)
	}
	if res.AlreadyInstalled || res.Platform != contract.PlatformIOS || res.Version != "26.4" ||
		res.Name != "iOS 26.4 (23E244)" || res.SizeBytes != imageSize ||
		!strings.HasPrefix(res.Receipt, runtime264+"@23E244#") {
		t.Errorf("result = %+v", res)
	}
	if calls := h.xcodebuildCalls(t); !slices.EqualFunc(calls, [][]string{{"-downloadPlatform", "iOS", "-buildVersion", "26.4"}}, slices.Equal) {
		t.Errorf("xcodebuild calls = %q", calls)
	}
	for _, c := range h.rec.commands() {
		if strings.HasSuffix(c.Path, "xcodebuild") && c.Timeout != 0 {
			t.Errorf("xcodebuild ran with a timeout of %s; only ctx may bound a download", c.Timeout)
		}
	}

	spec, err := h.resolve(t, "iPhone 16", "26.4")
	if err != nil || spec.OSVersion != "26.4" {
		t.Errorf("after the install, ResolveSpec = %+v, %v", spec, err)
	}
	cat, err := h.d.ListCatalog(ctx)
	if err != nil || cat.DefaultRuntime != "26.4" || !slices.Contains(cat.ModelRuntimes["iPhone 17"], "26.4") {
		t.Errorf("after the install, catalog default %q, iPhone 17 on %v, %v", cat.DefaultRuntime, cat.ModelRuntimes["iPhone 17"], err)
	}
	info, found, err := h.d.FindComponent(ctx, "26.4")
	if err != nil || !found || info != res.ComponentInfo {
		t.Errorf("FindComponent(26.4) = %+v, %v, %v; want %+v", info, found, err, res.ComponentInfo)
	}
	dev := h.provision(t, "iPhone 16", "26.4")
	h.boot(t, dev)
}

func TestInstallLatest(t *testing.T) {
	h := newHarness(t)
	ctx := t.Context()
	// latest is never found: only xcodebuild knows what it is.
	if _, found, err := h.d.FindComponent(ctx, "latest"); found || err != nil {
		t.Errorf("FindComponent(latest) = %v, %v; want not found", found, err)
	}
	res, err := h.d.InstallComponent(ctx, "latest", nil)
	if err != nil || res.AlreadyInstalled || res.Version != "26.4" {
		t.Fatalf("InstallComponent(latest) = %+v, %v; want 26.4 installed", res, err)
	}
	again, err := h.d.InstallComponent(ctx, "latest", nil)
	if err != nil || !again.AlreadyInstalled || again.Receipt != res.Receipt {
		t.Errorf("second InstallComponent(latest) = %+v, %v; want the same 26.4, already installed", again, err)
	}
	want := [][]string{{"-downloadPlatform", "iOS"}, {"-downloadPlatform", "iOS"}}
	if calls := h.xcodebuildCalls(t); !slices.EqualFunc(calls, want, slices.Equal) {
		t.Errorf("xcodebuild calls = %q, want %q", calls, want)
	}
}

func TestInstallAlreadyInstalled(t *testing.T) {
	h := newHarness(t)
	for component, version := range map[string]string{"18.6": "18.6", "26": "26.1", "17.5.0": "17.5"} {
		res, err := h.d.InstallComponent(t.Context(), component, func(driver.InstallProgress) { t.Error("progress without a download") })
		if err != nil || !res.AlreadyInstalled || res.Version != version {
			t.Errorf("InstallComponent(%s) = %+v, %v; want %s already installed", component, res, err, version)
		}
	}
	if calls := h.xcodebuildCalls(t); len(calls) != 0 {
		t.Errorf("xcodebuild ran for installed runtimes: %q", calls)
	}
}

func TestInstallNotDownloadable(t *testing.T) {
	h := newHarness(t)
	cases := []struct {
		component  string
		reason     string
		xcodebuild bool
	}{
		{"15.5", "older than iOS 16.0", false},
		{"26.9", "iOS 26.9 is not available for download", true},
		{"19", "ask for one (19.x) rather than the major 19", true},
	}
	for _, tc := range cases {
		before := len(h.xcodebuildCalls(t))
		_, err := h.d.InstallComponent(t.Context(), tc.component, nil)
		var nodl *driver.NotDownloadableError
		if !errors.As(err, &nodl) || nodl.Component != tc.component || nodl.Platform != contract.PlatformIOS {
			t.Errorf("InstallComponent(%s) = %v (%T); want a *driver.NotDownloadableError", tc.component, err, err)
			continue
		}
		if !strings.Contains(nodl.Reason, tc.reason) {
			t.Errorf("InstallComponent(%s) reason %q, want it to say %q", tc.component, nodl.Reason, tc.reason)
		}
		if ran := len(h.xcodebuildCalls(t)) > before; ran != tc.xcodebuild {
			t.Errorf("InstallComponent(%s): xcodebuild ran = %v, want %v", tc.component, ran, tc.xcodebuild)
		}
		if code := driver.ContractError(err).Code; code != contract.CodeRuntimeMissing {
			t.Errorf("contract code %s", code)
		}
	}
	if _, err := h.d.InstallComponent(t.Context(), "eighteen", nil); driver.ContractError(err).Code != contract.CodeBadRequest {
		t.Errorf("InstallComponent(eighteen) = %v, want BAD_REQUEST", err)
	}
}

func TestInstallFailures(t *testing.T) {
	h := newHarness(t)
	h.env.FailNext(t, "xcodebuild", "downloadPlatform", 70, "Finding content...\nxcodebuild: error: Unable to connect to the download server.\n")
	_, err := h.d.InstallComponent(t.Context(), "26.4", nil)
	ce := crashOf(t, err, "install-component")
	if !strings.Contains(ce.Error(), "exited with code 70") || !strings.Contains(ce.Error(), "Unable to connect to the download server") {
		t.Errorf("message %q", ce)
	}
	// A bare major failing for any reason gets the hint too.
	h.env.FailNext(t, "xcodebuild", "downloadPlatform", 70, "xcodebuild: error: Failed fetching catalogs.\n")
	_, err = h.d.InstallComponent(t.Context(), "19", nil)
	if ce := crashOf(t, err, "install-component"); !strings.Contains(ce.Error(), "rather than the major 19") {
		t.Errorf("message %q lacks the hint", ce)
	}
	// xcodebuild saying it did, while nothing arrived.
	h.env.FailNext(t, "xcodebuild", "downloadPlatform", 0, "")
	_, err = h.d.InstallComponent(t.Context(), "26.4", nil)
	if ce := crashOf(t, err, "install-component"); ce.Err.Error() != "xcodebuild reported success but iOS 26.4 is still not installed" {
		t.Errorf("message %q", ce.Err)
	}
}

func TestInstallStoppedByContext(t *testing.T) {
	h := newHarness(t)
	h.env.HangNext(t, "xcodebuild", "downloadPlatform")
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var got []float64
	// The hung download prints 0% and nothing more; ending ctx then is
	// the only way out.
	_, err := h.d.InstallComponent(ctx, "26.4", func(pr driver.InstallProgress) {
		if pr.Step != driver.InstallFigures {
			return
		}
		p := pr.Percent
		got = append(got, p)
		cancel()
	})
	ce := crashOf(t, err, "install-component")
	if !errors.Is(err, context.Canceled) || !strings.Contains(ce.Error(), "was ended before it finished") {
		t.Errorf("err = %v; want one saying it was ended, wrapping context.Canceled", err)
	}
	if !slices.Equal(got, []float64{0}) {
		t.Errorf("progress %v, want [0]", got)
	}
	if _, found, err := h.d.FindComponent(t.Context(), "26.4"); found || err != nil {
		t.Errorf("after the stop, FindComponent = %v, %v", found, err)
	}
}

func TestRemoveComponent(t *testing.T) {
	h := newHarness(t)
	ctx := t.Context()
	first, err := h.d.InstallComponent(ctx, "26.4", nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := h.d.RemoveComponent(ctx, first.ComponentInfo); err != nil {
		t.Fatalf("RemoveComponent: %v", err)
	}
	if _, found, err := h.d.FindComponent(ctx, "26.4"); found || err != nil {
		t.Errorf("after the removal, FindComponent = %v, %v", found, err)
	}
	var missing *driver.RuntimeMissingError
	if _, err := h.resolve(t, "iPhone 16", "26.4"); !errors.As(err, &missing) {
		t.Errorf("after the removal, ResolveSpec = %v", err)
	}
	image := first.Receipt[strings.Index(first.Receipt, "#")+1:]
	var deletes [][]string
	for _, c := range h.env.Calls(t) {
		if c.Tool == "xcrun" && slices.Contains(c.Args, "delete") {
			deletes = append(deletes, c.Args)
		}
	}
	if !slices.EqualFunc(deletes, [][]string{{"simctl", "runtime", "delete", image}}, slices.Equal) {
		t.Errorf("delete calls = %q, want one runtime delete of image %s", deletes, image)
	}

	// Installed again, it is another install: the old record does not
	// match it, and removing by the old one touches nothing.
	second, err := h.d.InstallComponent(ctx, "26.4", nil)
	if err != nil {
		t.Fatal(err)
	}
	if second.Receipt == first.Receipt {
		t.Errorf("a reinstall kept the receipt %s", first.Receipt)
	}
	if err := h.d.RemoveComponent(ctx, first.ComponentInfo); err == nil {
		t.Error("RemoveComponent with the first install's receipt removed the second")
	}
	if _, found, _ := h.d.FindComponent(ctx, "26.4"); !found {
		t.Error("the second install is gone")
	}
}

func TestRemoveComponentThatStays(t *testing.T) {
	h := newHarness(t)
	info, found, err := h.d.FindComponent(t.Context(), "18.6")
	if err != nil || !found {
		t.Fatal(found, err)
	}
	h.env.FailNext(t, "xcrun", "runtime-delete", 0, "")
	err = h.d.RemoveComponent(t.Context(), info)
	if ce := crashOf(t, err, "remove-component"); !strings.Contains(ce.Error(), "still installed") {
		t.Errorf("message %q", ce)
	}
}

func TestListComponents(t *testing.T) {
	h := newHarness(t)
	// The user's own simulators on 18.6, in the default set: one booted
	// once, one never booted (as CoreSimulator makes them by itself).
	used := h.xcrun(t, "simctl", "create", "Mine", typeIPhone16, runtime186)
	h.xcrun(t, "simctl", "boot", used)
	h.xcrun(t, "simctl", "shutdown", used)
	h.xcrun(t, "simctl", "create", "Untouched", typeIPhone16, runtime186)
	// simlock's own devices are not foreign.
	h.boot(t, h.provision(t, "iPhone 16", "26.1"))

	got, err := h.d.ListComponents(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		version, name, runtime string
		foreign                int
	}{
		{"26.1", "iOS 26.1 (23B86)", "com.apple.CoreSimulator.SimRuntime.iOS-26-1", 0},
		{"18.6", "iOS 18.6 (22G86)", runtime186, 1},
		{"17.5", "iOS 17.5 (21F79)", "com.apple.CoreSimulator.SimRuntime.iOS-17-5", 0},
	}
	if len(got) != len(want) {
		t.Fatalf("ListComponents = %+v, want %d runtimes", got, len(want))
	}
	for i, w := range want {
		c := got[i]
		if c.Platform != contract.PlatformIOS || c.Version != w.version || c.Name != w.name || c.SizeBytes != imageSize ||
			c.ForeignDevices != w.foreign || !strings.HasPrefix(c.Receipt, w.runtime+"@") || !strings.Contains(c.Receipt, "#") {
			t.Errorf("component %d = %+v, want %s (%s) with %d foreign devices", i, c, w.name, w.runtime, w.foreign)
		}
	}
	info, _, err := h.d.FindComponent(t.Context(), "18.6")
	if err != nil || info.ForeignDevices != 1 {
		t.Errorf("FindComponent(18.6) = %+v, %v; want 1 foreign device", info, err)
	}
}

func TestComponentDirAndFootprint(t *testing.T) {
	opts, _, _ := newOptions(t)
	opts.ComponentDir = t.TempDir()
	d, err := New(t.Context(), opts)
	if err != nil {
		t.Fatal(err)
	}
	if d.ComponentDir() != opts.ComponentDir {
		t.Errorf("ComponentDir = %q, want %q", d.ComponentDir(), opts.ComponentDir)
	}
	if d.ComponentFootprint("26.4") != 8<<30 {
		t.Errorf("ComponentFootprint = %d", d.ComponentFootprint("26.4"))
	}
	home, _ := os.UserHomeDir()
	if def := componentDirOr(""); def != coreSimulatorDir && def != home {
		t.Errorf("default ComponentDir = %q", def)
	}
}

// noStream is a runner that can only run programs to completion.
type noStream struct{ runner.Runner }

func TestInstallNeedsAStreamingRunner(t *testing.T) {
	opts, _, rec := newOptions(t)
	opts.Runner = noStream{rec}
	d, err := New(t.Context(), opts)
	if err != nil {
		t.Fatal(err)
	}
	_, err = d.InstallComponent(t.Context(), "26.4", nil)
	crashOf(t, err, "install-component")
}
