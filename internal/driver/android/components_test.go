package android_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/driver"
	"github.com/simlock/simlock/internal/driver/android"
)

// image is the package of the Google APIs image of level for this host.
func image(level string) string {
	return "system-images;android-" + level + ";google_apis;" + hostABI()
}

func (f *fixture) imageDir(pkg string) string {
	return filepath.Join(append([]string{f.shims.SDK}, strings.Split(pkg, ";")...)...)
}

func resolve(t *testing.T, d *android.Driver, model, level string) (contract.DeviceSpec, error) {
	t.Helper()
	return d.ResolveSpec(t.Context(), driver.Request{Platform: contract.PlatformAndroid, Model: model, OSVersion: level})
}

func TestInstallComponent(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	d := newDriver(t, f.opts)
	ctx := t.Context()
	var missing *driver.RuntimeMissingError
	if _, err := resolve(t, d, "Pixel 9", "37"); !errors.As(err, &missing) || missing.Component != "37" {
		t.Fatalf("before the install, ResolveSpec = %v; want a RuntimeMissingError for component 37", err)
	}
	if _, found, err := d.FindComponent(ctx, "37"); found || err != nil {
		t.Fatalf("FindComponent(37) before the install = %v, %v", found, err)
	}

	var got []float64
	res, err := d.InstallComponent(ctx, "37", func(p driver.InstallProgress) {
		if p.Step == driver.InstallFigures {
			got = append(got, p.Percent)
		}
	})
	if err != nil {
		t.Fatalf("InstallComponent: %v", err)
	}
	if want := []float64{0, 20, 45, 70, 100}; !slices.Equal(got, want) {
		t.Errorf("progress %v, want %v", got, want)
	}
	pkg := image("37")
	if res.AlreadyInstalled || res.Platform != contract.PlatformAndroid || res.Version != "37" || res.Name != pkg ||
		!strings.HasPrefix(res.Receipt, pkg+"@") || res.SizeBytes <= 4096 || res.ForeignDevices != 0 {
		t.Errorf("result = %+v", res)
	}
	if _, err := os.Stat(filepath.Join(f.imageDir(pkg), "source.properties")); err != nil {
		t.Errorf("the image is not in the SDK: %v", err)
	}
	if len(findCalls(t, f.shims, "sdkmanager", "--install", pkg)) != 1 {
		t.Errorf("sdkmanager calls = %v, want one --install %s", calls(t, f.shims, "sdkmanager"), pkg)
	}

	spec, err := resolve(t, d, "Pixel 9", "37")
	if err != nil || spec.OSVersion != "37" {
		t.Errorf("after the install, ResolveSpec = %+v, %v", spec, err)
	}
	cat, err := d.ListCatalog(ctx)
	if err != nil || cat.DefaultRuntime != "37" || !slices.Contains(cat.ModelRuntimes["Pixel 9"], "37") {
		t.Errorf("after the install, catalog default %q, Pixel 9 on %v, %v", cat.DefaultRuntime, cat.ModelRuntimes["Pixel 9"], err)
	}
	info, found, err := d.FindComponent(ctx, "37")
	if err != nil || !found || info != res.ComponentInfo {
		t.Errorf("FindComponent(37) = %+v, %v, %v; want %+v", info, found, err, res.ComponentInfo)
	}
	dev, err := d.Provision(ctx, spec)
	if err != nil {
		t.Fatalf("Provision on the new image: %v", err)
	}
	if len(findCalls(t, f.shims, "avdmanager", "-n", dev.ID, "-k", pkg)) != 1 {
		t.Errorf("the device was not created from %s", pkg)
	}
}

func TestInstallComponentAlreadyInstalled(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	d := newDriver(t, f.opts)
	// API 35 has a Wear OS image beside the Google APIs one: a phone's is
	// the one reported.
	res, err := d.InstallComponent(t.Context(), "35", func(driver.InstallProgress) { t.Error("progress without a download") })
	if err != nil || !res.AlreadyInstalled || res.Version != "35" || res.Name != image("35") {
		t.Errorf("InstallComponent(35) = %+v, %v; want %s already installed", res, err, image("35"))
	}
	if c := findCalls(t, f.shims, "sdkmanager", "--install"); len(c) != 0 {
		t.Errorf("sdkmanager ran: %v", c)
	}
	for _, bad := range []string{"", "android-35", "35;", "35;google apis", "google_apis;35", "latest"} {
		if _, err := d.InstallComponent(t.Context(), bad, nil); driver.ContractError(err).Code != contract.CodeBadRequest {
			t.Errorf("InstallComponent(%q) = %v, want BAD_REQUEST", bad, err)
		}
	}
}

func TestInstallComponentLicenses(t *testing.T) {
	t.Parallel()
	t.Run("refused", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t)
		f.shims.RefuseAndroidLicenses(t)
		d := newDriver(t, f.opts)
		_, err := d.InstallComponent(t.Context(), "37", nil)
		var lic *driver.LicenseNotAcceptedError
		if !errors.As(err, &lic) || lic.ComponentName != image("37") || lic.Platform != contract.PlatformAndroid {
			t.Fatalf("InstallComponent = %v (%T); want a *driver.LicenseNotAcceptedError for %s", err, err, image("37"))
		}
		if code := driver.ContractError(err).Code; code != contract.CodeLicenseNotAccepted {
			t.Errorf("contract code %s", code)
		}
		if c := findCalls(t, f.shims, "sdkmanager", "--licenses"); len(c) != 0 {
			t.Error("the driver accepted the licenses without leave")
		}
		if _, found, _ := d.FindComponent(t.Context(), "37"); found {
			t.Error("the refused image is installed")
		}
	})
	t.Run("accepted", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t)
		f.shims.RefuseAndroidLicenses(t)
		opts := f.opts
		opts.AcceptLicenses = true
		d := newDriver(t, opts)
		var got []float64
		res, err := d.InstallComponent(t.Context(), "37", func(p driver.InstallProgress) {
			if p.Step == driver.InstallFigures {
				got = append(got, p.Percent)
			}
		})
		if err != nil || res.Name != image("37") {
			t.Fatalf("InstallComponent = %+v, %v", res, err)
		}
		var verbs []string
		for _, c := range calls(t, f.shims, "sdkmanager") {
			verbs = append(verbs, c.Args[0])
		}
		if want := []string{"--install", "--licenses", "--install"}; !slices.Equal(verbs, want) {
			t.Errorf("sdkmanager calls %v, want %v", verbs, want)
		}
		if len(got) == 0 || got[len(got)-1] != 100 {
			t.Errorf("progress %v", got)
		}
	})
}

func TestInstallComponentStoppedByContext(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	d := newDriver(t, f.opts)
	f.shims.HangNext(t, "sdkmanager", "install")
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var got []float64
	// The hung install draws its first bar and nothing more.
	_, err := d.InstallComponent(ctx, "37", func(pr driver.InstallProgress) {
		p := pr.Percent
		got = append(got, p)
		cancel()
	})
	var ce *driver.CrashError
	if !errors.As(err, &ce) || !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "was ended before it finished") {
		t.Errorf("err = %v; want a *driver.CrashError saying it was ended, wrapping context.Canceled", err)
	}
	if !slices.Equal(got, []float64{0}) {
		t.Errorf("progress %v, want [0]", got)
	}
	if _, found, _ := d.FindComponent(t.Context(), "37"); found {
		t.Error("the stopped image is installed")
	}
}

func TestInstallComponentFailures(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	d := newDriver(t, f.opts)
	crash := func(err error, want string) {
		t.Helper()
		var ce *driver.CrashError
		if !errors.As(err, &ce) || ce.Op != "install-component" || !strings.Contains(err.Error(), want) {
			t.Errorf("err = %v; want an install-component *driver.CrashError saying %q", err, want)
		}
	}
	f.shims.FailNext(t, "sdkmanager", "install", 1, "Error: Failed to download package system-images;android-37: Connection reset\n")
	_, err := d.InstallComponent(t.Context(), "37", nil)
	crash(err, "exited with code 1: Error: Failed to download package")
	// A level the repository does not have.
	_, err = d.InstallComponent(t.Context(), "99", nil)
	crash(err, "Failed to find package '"+image("99")+"'")
	// sdkmanager saying it did, while nothing arrived.
	f.shims.FailNext(t, "sdkmanager", "install", 0, "")
	_, err = d.InstallComponent(t.Context(), "37", nil)
	crash(err, "sdkmanager reported success but "+image("37")+" is still not installed")
}

func TestRemoveComponent(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	d := newDriver(t, f.opts)
	ctx := t.Context()
	first, err := d.InstallComponent(ctx, "37", nil)
	if err != nil {
		t.Fatal(err)
	}
	spec, err := resolve(t, d, "Pixel 9", "37")
	if err != nil {
		t.Fatal(err)
	}
	if err := d.RemoveComponent(ctx, first.ComponentInfo); err != nil {
		t.Fatalf("RemoveComponent: %v", err)
	}
	if _, found, err := d.FindComponent(ctx, "37"); found || err != nil {
		t.Errorf("after the removal, FindComponent = %v, %v", found, err)
	}
	if len(findCalls(t, f.shims, "sdkmanager", "--uninstall", image("37"))) != 1 {
		t.Errorf("no sdkmanager --uninstall %s", image("37"))
	}
	cat, err := d.ListCatalog(ctx)
	if err != nil || slices.Contains(cat.Runtimes, "37") {
		t.Errorf("after the removal, catalog runtimes %v, %v", cat.Runtimes, err)
	}
	// A spec resolved before the removal no longer provisions.
	var missing *driver.RuntimeMissingError
	if _, err := d.Provision(ctx, spec); !errors.As(err, &missing) {
		t.Errorf("Provision of a spec on the removed image = %v, want a RuntimeMissingError", err)
	}

	// Installed again, it is another install that the old record does not
	// match.
	second, err := d.InstallComponent(ctx, "37", nil)
	if err != nil {
		t.Fatal(err)
	}
	if second.Receipt == first.Receipt {
		t.Errorf("a reinstall kept the receipt %s", first.Receipt)
	}
	if err := d.RemoveComponent(ctx, first.ComponentInfo); err == nil {
		t.Error("RemoveComponent with the first install's receipt removed the second")
	}
	if _, found, _ := d.FindComponent(ctx, "37"); !found {
		t.Error("the second install is gone")
	}

	f.shims.FailNext(t, "sdkmanager", "uninstall", 0, "")
	err = d.RemoveComponent(ctx, second.ComponentInfo)
	var ce *driver.CrashError
	if !errors.As(err, &ce) || !strings.Contains(err.Error(), "still installed") {
		t.Errorf("RemoveComponent whose uninstall did nothing = %v", err)
	}
}

func TestListComponents(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	userHome := t.TempDir()
	opts := f.opts
	opts.UserAVDHome = userHome
	d := newDriver(t, opts)
	ctx := t.Context()
	// The user's own AVDs: one made by avdmanager on API 35 (relative
	// sysdir), one naming API 36's directory by its absolute path.
	res := runCommand(t, driver.Command{Path: f.tool("avdmanager"),
		Args: []string{"create", "avd", "-n", "Pixel_8_API_35", "-k", image("35"), "-d", "pixel_8"},
		Env:  append(f.shimEnv(), "ANDROID_AVD_HOME="+userHome)})
	if res.ExitCode != 0 {
		t.Fatalf("creating the user's AVD: %s", res.Stderr)
	}
	abs := filepath.Join(userHome, "Elsewhere.avd")
	if err := os.MkdirAll(abs, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(abs, "config.ini"), []byte("image.sysdir.1="+f.imageDir(image("36"))+"/\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// simlock's own devices are not foreign.
	spec, err := resolve(t, d, "Pixel 9", "34")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.Provision(ctx, spec); err != nil {
		t.Fatal(err)
	}

	got, err := d.ListComponents(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		name    string
		foreign int
	}{
		{image("36"), 1},
		{"system-images;android-35;android-wear;" + hostABI(), 0},
		{image("35"), 1},
		{image("34"), 0},
	}
	if len(got) != len(want) {
		t.Fatalf("ListComponents = %+v, want %d images", got, len(want))
	}
	for i, w := range want {
		c := got[i]
		level := strings.TrimPrefix(strings.Split(w.name, ";")[1], "android-")
		fi, err := os.Stat(filepath.Join(f.imageDir(w.name), "source.properties"))
		if err != nil {
			t.Fatal(err)
		}
		if c.Platform != contract.PlatformAndroid || c.Name != w.name || c.Version != level || c.ForeignDevices != w.foreign ||
			c.SizeBytes != 8192+fi.Size() || !strings.HasPrefix(c.Receipt, w.name+"@") {
			t.Errorf("component %d = %+v, want %s with %d foreign devices", i, c, w.name, w.foreign)
		}
	}
	if d.ComponentDir() != f.shims.SDK || d.ComponentFootprint("36") != 4<<30 {
		t.Errorf("ComponentDir %q, footprint %d", d.ComponentDir(), d.ComponentFootprint("36"))
	}
}
