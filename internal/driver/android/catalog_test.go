package android_test

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/driver"
	"github.com/simlock/simlock/internal/driver/android"
)

func TestListCatalog(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	d := newDriver(t, f.opts)
	c, err := d.ListCatalog(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if c.Platform != contract.PlatformAndroid || !slices.Equal(c.Runtimes, []string{"36", "35", "34"}) || c.DefaultRuntime != "36" {
		t.Errorf("runtimes = %v default %q, want 36 35 34 default 36", c.Runtimes, c.DefaultRuntime)
	}
	for model, class := range map[string]contract.DeviceClass{
		"Pixel 8": contract.ClassPhone, "Medium Phone": contract.ClassPhone, "Pixel Fold": contract.ClassPhone,
		"Pixel Tablet": contract.ClassTablet, "Wear OS Large Round": contract.ClassWatch,
		"Television (1080p)": contract.ClassTV, "Automotive (1024p landscape)": contract.ClassAuto,
		"Medium Desktop": contract.ClassDesktop,
	} {
		if !slices.Contains(c.Models, model) || c.ModelClasses[model] != class {
			t.Errorf("%s: listed %v, class %q; want class %q", model, slices.Contains(c.Models, model), c.ModelClasses[model], class)
		}
		if !slices.Equal(c.ModelRuntimes[model], c.Runtimes) {
			t.Errorf("%s runs on %v, want every level", model, c.ModelRuntimes[model])
		}
	}
	if !slices.Equal(c.ModelAliases["Pixel 8"], []string{"pixel_8"}) {
		t.Errorf("aliases of Pixel 8 = %v", c.ModelAliases["Pixel 8"])
	}
	for class, want := range map[contract.DeviceClass][]string{
		contract.ClassPhone:   {"Pixel 9", "Pixel 8", "Pixel 7", "Pixel 6", "Medium Phone"},
		contract.ClassWatch:   {"Wear OS Large Round", "Wear OS Small Round"},
		contract.ClassTV:      {"Television (1080p)", "Television (4K)"},
		contract.ClassAuto:    {"Automotive (1080p landscape)", "Automotive (1024p landscape)"},
		contract.ClassDesktop: {"Medium Desktop", "Large Desktop"},
	} {
		if !slices.Equal(c.ClassDefaults[class], want) {
			t.Errorf("ClassDefaults[%s] = %v, want %v", class, c.ClassDefaults[class], want)
		}
	}
}

func TestResolveSpec(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	d := newDriver(t, f.opts)
	for _, c := range []struct {
		model, os string
		want      contract.DeviceSpec
		missing   *driver.RuntimeMissingError
		unknown   bool
	}{
		{model: "Pixel 9", want: contract.DeviceSpec{Platform: contract.PlatformAndroid, Model: "Pixel 9", OSVersion: "36", ImageTag: "google_apis"}},
		{model: "PIXEL_9", os: "35", want: contract.DeviceSpec{Platform: contract.PlatformAndroid, Model: "Pixel 9", OSVersion: "35", ImageTag: "google_apis"}},
		{model: "pixel 9", os: ">=34 <36", want: contract.DeviceSpec{Platform: contract.PlatformAndroid, Model: "Pixel 9", OSVersion: "35", ImageTag: "google_apis"}},
		{model: "Pixel 9", os: "33", missing: &driver.RuntimeMissingError{Platform: contract.PlatformAndroid, OSVersion: "33", Downloadable: true, Component: "33"}},
		{model: "Pixel 9", os: ">=40", missing: &driver.RuntimeMissingError{Platform: contract.PlatformAndroid, OSVersion: ">=40"}},
		{model: "Nokia 3310", unknown: true},
	} {
		got, err := d.ResolveSpec(t.Context(), driver.Request{Platform: contract.PlatformAndroid, Model: c.model, OSVersion: c.os})
		var missing *driver.RuntimeMissingError
		var unknown *driver.UnknownModelError
		switch {
		case c.missing != nil:
			if !errors.As(err, &missing) || *missing != *c.missing {
				t.Errorf("%s %q: %v, want %+v", c.model, c.os, err, c.missing)
			}
		case c.unknown:
			if !errors.As(err, &unknown) || unknown.Model != c.model {
				t.Errorf("%s: %v, want *driver.UnknownModelError", c.model, err)
			}
		case err != nil || got != c.want:
			t.Errorf("%s %q = %+v, %v; want %+v", c.model, c.os, got, err, c.want)
		}
	}
}

// TestProvisionPicksTheImageForTheClass checks that a watch gets a Wear OS
// image where one is installed, and the phone image elsewhere.
func TestProvisionPicksTheImageForTheClass(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	d := newDriver(t, f.opts)
	for level, image := range map[string]string{"35": "android-wear", "36": "google_apis"} {
		spec, err := d.ResolveSpec(t.Context(), driver.Request{Model: "wearos_large_round", OSVersion: level})
		if err != nil {
			t.Fatal(err)
		}
		dev, err := d.Provision(t.Context(), spec)
		if err != nil {
			t.Fatal(err)
		}
		want := "system-images;android-" + level + ";" + image + ";" + hostABI()
		if len(findCalls(t, f.shims, "avdmanager", "-n", dev.ID, "-k", want, "-d", "wearos_large_round")) != 1 {
			t.Errorf("API %s: the watch was not created from %s", level, want)
		}
	}
}

func TestPrerequisites(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := t.Context()
	missing := func(opts android.Options) []string {
		var out []string
		for _, m := range android.Prerequisites(ctx, opts) {
			if m.Platform != contract.PlatformAndroid || m.Message == "" || m.Remedy == "" {
				t.Errorf("incomplete finding %+v", m)
			}
			out = append(out, m.Prerequisite)
		}
		return out
	}
	noSDK := f.opts
	noSDK.SDKRoot = android.SDKRootFrom(func(string) string { return "" })
	if got := missing(noSDK); !slices.Equal(got, []string{"android-sdk"}) {
		t.Errorf("without an SDK: %v", got)
	}
	gone := f.opts
	gone.SDKRoot = filepath.Join(t.TempDir(), "nowhere")
	if got := missing(gone); !slices.Equal(got, []string{"android-sdk"}) {
		t.Errorf("with a missing SDK directory: %v", got)
	}
	empty := f.opts
	empty.SDKRoot = t.TempDir()
	if got := missing(empty); !slices.Equal(got, []string{"cmdline-tools", "emulator", "adb"}) {
		t.Errorf("with an empty SDK: %v", got)
	}
	if got := missing(f.opts); len(got) != 0 {
		t.Errorf("with every tool: %v", got)
	}
	f.shims.FailNext(t, "sdkmanager", "version", 1, "ERROR: JAVA_HOME is not set and no 'java' command could be found in your PATH.\n")
	if got := missing(f.opts); !slices.Equal(got, []string{"jdk"}) {
		t.Errorf("without a JDK: %v", got)
	}

	// New refuses the same SDKs, and starts nothing.
	for _, opts := range []android.Options{noSDK, empty} {
		err := newRefused(t, opts)
		var serr *android.SDKMissingError
		if !errors.As(err, &serr) || len(serr.Searched) == 0 {
			t.Errorf("New with SDK %q = %v, want *SDKMissingError", opts.SDKRoot, err)
		}
	}
	if len(calls(t, f.shims, "adb")) != 0 {
		t.Error("New started adb without an SDK")
	}
}

func TestSDKRootFrom(t *testing.T) {
	t.Parallel()
	// Without either variable, the SDK is found where Android Studio puts
	// it, when it is there.
	withSDK, withoutSDK := t.TempDir(), t.TempDir()
	if d := android.DefaultSDKRoot(runtime.GOOS, withSDK); d != "" {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	env := func(kv map[string]string) func(string) string { return func(k string) string { return kv[k] } }
	for _, c := range []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{"ANDROID_HOME": "/a", "ANDROID_SDK_ROOT": "/b"}, "/a"},
		{map[string]string{"ANDROID_SDK_ROOT": "/b"}, "/b"},
		{map[string]string{}, ""},
		{map[string]string{"HOME": withoutSDK}, ""},
		{map[string]string{"HOME": withSDK}, android.DefaultSDKRoot(runtime.GOOS, withSDK)},
		{map[string]string{"HOME": withSDK, "ANDROID_HOME": "/a"}, "/a"},
	} {
		if got := android.SDKRootFrom(env(c.env)); got != c.want {
			t.Errorf("SDKRootFrom(%v) = %q, want %q", c.env, got, c.want)
		}
	}
}

func TestToolVersions(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	for dir, rev := range map[string]string{"emulator": "36.1.9", "platform-tools": "36.0.0", "cmdline-tools/latest": "19.0"} {
		body := "Pkg.Desc=whatever\nPkg.Revision=" + rev + "\n"
		if err := os.WriteFile(filepath.Join(f.shims.SDK, dir, "source.properties"), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	d := newDriver(t, f.opts)
	got, err := d.ToolVersions(t.Context())
	want := []driver.ToolVersion{{Name: "emulator", Version: "36.1.9"}, {Name: "platform-tools", Version: "36.0.0"}, {Name: "cmdline-tools", Version: "19.0"}}
	if err != nil || !slices.Equal(got, want) {
		t.Errorf("ToolVersions = %v, %v; want %v", got, err, want)
	}
	for op, want := range map[driver.Operation]time.Duration{driver.OpProvision: time.Second, driver.OpBoot: 70 * time.Second, driver.OpReclaim: 6 * time.Second} {
		if got := d.Estimate(op, contract.DeviceSpec{}); got != want {
			t.Errorf("Estimate(%s) = %s, want %s", op, got, want)
		}
	}
}

func TestDefaultSDKRootIsWhereAndroidStudioPutsIt(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ goos, home, want string }{
		{"darwin", "/Users/ann", "/Users/ann/Library/Android/sdk"},
		{"linux", "/home/ann", "/home/ann/Android/Sdk"},
		{"windows", "C:/Users/ann", ""},
		{"linux", "", ""},
	} {
		if got := android.DefaultSDKRoot(c.goos, c.home); got != c.want {
			t.Errorf("DefaultSDKRoot(%s, %q) = %q, want %q", c.goos, c.home, got, c.want)
		}
	}
}

// TestCatalogReadsTheImageDirectories: the installed images are what the
// SDK's system-images directories hold, read afresh at every call, and
// neither ListCatalog nor ResolveSpec runs sdkmanager, a JVM start.
func TestCatalogReadsTheImageDirectories(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	d := newDriver(t, f.opts)
	ctx := t.Context()
	images := filepath.Join(f.shims.SDK, "system-images")
	layOut := func(rel string, finished bool) {
		t.Helper()
		dir := filepath.Join(images, filepath.FromSlash(rel))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if finished {
			if err := os.WriteFile(filepath.Join(dir, "source.properties"), []byte("Pkg.Revision=3\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	layOut("android-37/google_apis/"+hostABI(), true)
	layOut("android-38/google_apis/"+hostABI(), false) // still unpacking
	layOut("android-39/.partial/"+hostABI(), true)     // dot entries are not images
	if err := os.Remove(filepath.Join(images, "android-34", "google_apis", hostABI(), "source.properties")); err != nil {
		t.Fatal(err)
	}
	f.shims.ForgetCalls(t)

	c, err := d.ListCatalog(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"37", "36", "35"}; !slices.Equal(c.Runtimes, want) || c.DefaultRuntime != "37" {
		t.Errorf("runtimes = %v default %q, want %v default 37, as the directories say", c.Runtimes, c.DefaultRuntime, want)
	}
	spec, err := d.ResolveSpec(ctx, driver.Request{Model: "Pixel 8", OSVersion: "37"})
	if err != nil {
		t.Fatalf("ResolveSpec on the new level: %v", err)
	}
	for _, level := range []string{"38", "34"} {
		_, err := d.ResolveSpec(ctx, driver.Request{Model: "Pixel 8", OSVersion: level})
		var missing *driver.RuntimeMissingError
		if !errors.As(err, &missing) || missing.Component != level {
			t.Errorf("ResolveSpec on API %s, whose image has no source.properties = %v, want *RuntimeMissingError", level, err)
		}
	}
	dev, err := d.Provision(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	if pkg := "system-images;android-37;google_apis;" + hostABI(); len(findCalls(t, f.shims, "avdmanager", "-n", dev.ID, "-k", pkg)) != 1 {
		t.Errorf("the device was not created from %s", pkg)
	}
	if sdk := calls(t, f.shims, "sdkmanager"); len(sdk) != 0 {
		t.Errorf("the catalog and ResolveSpec ran sdkmanager %d times (%v); the images come from the SDK's directories", len(sdk), sdk[0].Args)
	}
}
