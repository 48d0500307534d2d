package demo_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/driver"
	"github.com/simlock/simlock/internal/driver/demo"
)

const downloadTime = 10 * time.Second

// newRuntime is each platform's downloadable runtime in these tests, and
// the model that asks for it.
var newRuntime = map[contract.Platform]struct{ version, model, name string }{
	contract.PlatformIOS:     {"26.4", "iPhone 17 Pro", "iOS 26.4 (demo)"},
	contract.PlatformAndroid: {"37", "Pixel 9", "Android API 37 (demo)"},
}

func downloading(p contract.Platform) demo.Options {
	return demo.Options{Platform: p, DownloadableRuntimes: []string{newRuntime[p].version}, DownloadTime: downloadTime}
}

func catalog(t *testing.T, d *demo.Driver) driver.Catalog {
	t.Helper()
	c, err := d.ListCatalog(t.Context())
	if err != nil {
		t.Fatalf("ListCatalog: %v", err)
	}
	return c
}

func find(t *testing.T, d *demo.Driver, component string) (driver.ComponentInfo, bool) {
	t.Helper()
	info, ok, err := d.FindComponent(t.Context(), component)
	if err != nil {
		t.Fatalf("FindComponent(%q): %v", component, err)
	}
	return info, ok
}

func install(t *testing.T, d *demo.Driver, component string) driver.InstallResult {
	t.Helper()
	res, err := d.InstallComponent(t.Context(), component, nil)
	if err != nil {
		t.Fatalf("InstallComponent(%q): %v", component, err)
	}
	return res
}

// wantMissing checks that asking for model on osVersion is a
// *driver.RuntimeMissingError saying a download of component would help, or
// ("" for component) that no download would.
func wantMissing(t *testing.T, d *demo.Driver, model, osVersion, component string) {
	t.Helper()
	spec, err := d.ResolveSpec(t.Context(), driver.Request{Platform: d.Platform(), Model: model, OSVersion: osVersion})
	var missing *driver.RuntimeMissingError
	if !errors.As(err, &missing) {
		t.Fatalf("ResolveSpec(%s, %q) = %+v, %v; want *RuntimeMissingError", model, osVersion, spec, err)
	}
	want := driver.RuntimeMissingError{Platform: d.Platform(), OSVersion: osVersion, Downloadable: component != "", Component: component}
	if *missing != want {
		t.Errorf("ResolveSpec(%s, %q) error = %+v, want %+v", model, osVersion, *missing, want)
	}
}

func resolve(t *testing.T, d *demo.Driver, model, osVersion string) contract.DeviceSpec {
	t.Helper()
	spec, err := d.ResolveSpec(t.Context(), driver.Request{Platform: d.Platform(), Model: model, OSVersion: osVersion})
	if err != nil {
		t.Fatalf("ResolveSpec(%s, %q): %v", model, osVersion, err)
	}
	return spec
}

func TestDownloadableRuntimeResolvesOnceInstalled(t *testing.T) {
	for _, p := range contract.Platforms() {
		t.Run(string(p), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				nr := newRuntime[p]
				d := newDriver(t, downloading(p))
				before := catalog(t, d)
				if !slices.Equal(before.Downloadable, []string{nr.version}) || slices.Contains(before.Runtimes, nr.version) {
					t.Errorf("before the install: Downloadable = %v, Runtimes = %v", before.Downloadable, before.Runtimes)
				}
				wantMissing(t, d, nr.model, nr.version, nr.version)
				if _, ok := find(t, d, nr.version); ok {
					t.Errorf("FindComponent(%s) found it before the install", nr.version)
				}

				res := install(t, d, nr.version)
				want := driver.ComponentInfo{Platform: p, Version: nr.version, Name: nr.name, Receipt: res.Receipt, SizeBytes: d.ComponentFootprint(nr.version)}
				if res.AlreadyInstalled || res.ComponentInfo != want || res.Receipt == "" {
					t.Errorf("InstallComponent = %+v, want %+v newly installed", res, want)
				}

				spec := resolve(t, d, nr.model, nr.version)
				if spec != (contract.DeviceSpec{Platform: p, Model: nr.model, OSVersion: nr.version}) {
					t.Errorf("ResolveSpec after the install = %+v", spec)
				}
				// The newest runtime is what a request without a version gets.
				if got := resolve(t, d, nr.model, "").OSVersion; got != nr.version {
					t.Errorf("ResolveSpec without a version = %s, want the new %s", got, nr.version)
				}
				if _, err := d.Provision(t.Context(), spec); err != nil {
					t.Errorf("Provision(%+v): %v", spec, err)
				}
				after := catalog(t, d)
				if after.Downloadable != nil || after.Runtimes[0] != nr.version || after.DefaultRuntime != nr.version {
					t.Errorf("after the install: Downloadable = %v, Runtimes = %v, default %q", after.Downloadable, after.Runtimes, after.DefaultRuntime)
				}
				// It pairs with the models of the newest built-in runtime, newest
				// first, and with no other.
				newest := before.Runtimes[0]
				for _, m := range after.Models {
					got := after.ModelRuntimes[m]
					if slices.Contains(before.ModelRuntimes[m], newest) {
						if want := append([]string{nr.version}, before.ModelRuntimes[m]...); !slices.Equal(got, want) {
							t.Errorf("ModelRuntimes[%q] = %v, want %v", m, got, want)
						}
					} else if !slices.Equal(got, before.ModelRuntimes[m]) {
						t.Errorf("ModelRuntimes[%q] = %v, want unchanged %v", m, got, before.ModelRuntimes[m])
					}
				}
				if info, ok := find(t, d, nr.version); !ok || info != res.ComponentInfo {
					t.Errorf("FindComponent after the install = %+v, %v; want %+v", info, ok, res.ComponentInfo)
				}
			})
		})
	}
}

func TestResolveSpecNamesTheDownloadableRuntime(t *testing.T) {
	d := newDriver(t, demo.Options{Platform: contract.PlatformIOS, DownloadableRuntimes: []string{"27.1", "26.4", "27.0"}})
	wantMissing(t, d, "iPhone 17", "26.4", "26.4")
	// A major picks the newest downloadable runtime of it.
	wantMissing(t, d, "iPhone 17", "27", "27.1")
	wantMissing(t, d, "iPhone 17", "27.0", "27.0")
	// An installed runtime that fits wins over a download.
	if got := resolve(t, d, "iPhone 17", "26").OSVersion; got != "26.1" {
		t.Errorf(`ResolveSpec("26") = %s, want the installed 26.1`, got)
	}
	// Neither installed nor downloadable.
	wantMissing(t, d, "iPhone 17", "18", "")
	wantMissing(t, d, "iPhone 17", "26.5", "")
	wantMissing(t, d, "iPhone 17", "2", "")
	if c := catalog(t, d); !slices.Equal(c.Downloadable, []string{"27.1", "27.0", "26.4"}) {
		t.Errorf("Downloadable = %v, want newest first", c.Downloadable)
	}
	// A downloadable version that is built in is simply installed.
	d = newDriver(t, demo.Options{Platform: contract.PlatformAndroid, DownloadableRuntimes: []string{"35", "37"}})
	if c := catalog(t, d); !slices.Equal(c.Downloadable, []string{"37"}) {
		t.Errorf("Downloadable = %v, want only 37", c.Downloadable)
	}
	if res := install(t, d, "35"); !res.AlreadyInstalled {
		t.Errorf("InstallComponent(35) = %+v, want already installed", res)
	}
}

func TestInstallReportsRisingProgressOverDownloadTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := newDriver(t, downloading(contract.PlatformIOS))
		type step struct {
			at  time.Duration
			pct float64
		}
		var steps []step
		start := time.Now()
		_, err := d.InstallComponent(t.Context(), "26.4", func(pr driver.InstallProgress) {
			if pr.Step != driver.InstallFigures {
				return
			}
			pct := pr.Percent
			steps = append(steps, step{time.Since(start), pct})
			if _, ok := find(t, d, "26.4"); ok {
				t.Errorf("installed already at %v%%", pct)
			}
		})
		if err != nil {
			t.Fatal(err)
		}
		if got := time.Since(start); got != downloadTime {
			t.Errorf("install took %s, want %s", got, downloadTime)
		}
		if len(steps) < 4 || steps[0] != (step{0, 0}) || steps[len(steps)-1] != (step{downloadTime, 100}) {
			t.Fatalf("steps = %v, want 0%% at once, several steps, 100%% after %s", steps, downloadTime)
		}
		fractional := false
		for i, s := range steps[1:] {
			if prev := steps[i]; s.pct <= prev.pct || s.at <= prev.at {
				t.Errorf("step %v after %v: not rising", s, prev)
			}
			fractional = fractional || s.pct != math.Trunc(s.pct)
		}
		if !fractional {
			t.Errorf("steps = %v, want a fractional percentage among them", steps)
		}
		if _, ok := find(t, d, "26.4"); !ok {
			t.Error("not installed after the download")
		}
	})
}

// A quiet start prints no percentage for DownloadQuietTime, then the
// percentages run over DownloadTime as without one.
func TestAQuietDownloadStartPrintsNoPercentageUntilItEnds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		opts := downloading(contract.PlatformIOS)
		opts.DownloadQuietTime = 2 * time.Second
		d := newDriver(t, opts)
		start := time.Now()
		var first time.Duration = -1
		_, err := d.InstallComponent(t.Context(), "26.4", func(driver.InstallProgress) {
			if first < 0 {
				first = time.Since(start)
			}
		})
		if err != nil {
			t.Fatal(err)
		}
		if first != 2*time.Second {
			t.Errorf("the first percentage came after %s, want after the quiet 2s", first)
		}
		if got := time.Since(start); got != 2*time.Second+downloadTime {
			t.Errorf("install took %s, want the quiet 2s and then %s", got, downloadTime)
		}
	})
}

func TestZeroDownloadTimeDoesNotWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		opts := downloading(contract.PlatformAndroid)
		opts.DownloadTime = 0
		d := newDriver(t, opts)
		var last float64
		start := time.Now()
		if _, err := d.InstallComponent(t.Context(), "37", func(p driver.InstallProgress) {
			if p.Step == driver.InstallFigures {
				last = p.Percent
			}
		}); err != nil {
			t.Fatal(err)
		}
		if got := time.Since(start); got != 0 || last != 100 {
			t.Errorf("instant install took %s and ended at %v%%", got, last)
		}
	})
}

func TestCancelledInstallInstallsNothing(t *testing.T) {
	t.Run("mid-way", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			d := newDriver(t, downloading(contract.PlatformIOS))
			ctx, cancel := context.WithCancel(t.Context())
			var last float64
			start := time.Now()
			errc := make(chan error, 1)
			time.AfterFunc(downloadTime/2, cancel)
			go func() {
				_, err := d.InstallComponent(ctx, "26.4", func(p driver.InstallProgress) { last = p.Percent })
				errc <- err
			}()
			err := <-errc
			if got := time.Since(start); got != downloadTime/2 {
				t.Errorf("cancelled install returned after %s, want at once", got)
			}
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("err = %v, want context.Canceled", err)
			}
			wantCrash(t, err, "install")
			if last <= 0 || last >= 100 {
				t.Errorf("last progress = %v%%, want some but not all", last)
			}
			if _, ok := find(t, d, "26.4"); ok {
				t.Error("a cancelled install installed the runtime")
			}
			wantMissing(t, d, "iPhone 17", "26.4", "26.4")
			if c := catalog(t, d); !slices.Equal(c.Downloadable, []string{"26.4"}) || slices.Contains(c.Runtimes, "26.4") {
				t.Errorf("after a cancelled install: Downloadable = %v, Runtimes = %v", c.Downloadable, c.Runtimes)
			}
			// A later install still works, and takes the whole time.
			start = time.Now()
			install(t, d, "26.4")
			if got := time.Since(start); got != downloadTime {
				t.Errorf("install after a cancelled one took %s, want %s", got, downloadTime)
			}
		})
	})
	t.Run("already done", func(t *testing.T) {
		d := newDriver(t, downloading(contract.PlatformAndroid))
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		called := false
		_, err := d.InstallComponent(ctx, "37", func(driver.InstallProgress) { called = true })
		if !errors.Is(err, context.Canceled) || called {
			t.Errorf("install with a done context: err = %v, progress called = %v", err, called)
		}
		if _, ok := find(t, d, "37"); ok {
			t.Error("an install with a done context installed the runtime")
		}
	})
}

func TestInstallAlreadyInstalled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := newDriver(t, downloading(contract.PlatformIOS))
		for component, version := range map[string]string{"26.1": "26.1", "18": "18.6", "17.5": "17.5"} {
			start := time.Now()
			called := false
			res, err := d.InstallComponent(t.Context(), component, func(driver.InstallProgress) { called = true })
			want := driver.ComponentInfo{Platform: contract.PlatformIOS, Version: version, Name: "iOS " + version + " (demo)",
				Receipt: "demo:ios:" + version + ":builtin", SizeBytes: 8 << 30}
			if err != nil || !res.AlreadyInstalled || res.ComponentInfo != want {
				t.Errorf("InstallComponent(%s) = %+v, %v; want already installed %+v", component, res, err, want)
			}
			if called || time.Since(start) != 0 {
				t.Errorf("InstallComponent(%s) of an installed runtime reported progress or waited", component)
			}
		}
		first := install(t, d, "26.4")
		again := install(t, d, "26.4")
		if !again.AlreadyInstalled || again.ComponentInfo != first.ComponentInfo {
			t.Errorf("second install = %+v, want already installed %+v", again, first.ComponentInfo)
		}
		// "26" names the newest 26.x once installed.
		if res := install(t, d, "26"); !res.AlreadyInstalled || res.Version != "26.4" {
			t.Errorf(`InstallComponent("26") = %+v, want 26.4 already installed`, res)
		}
	})
}

func TestLatest(t *testing.T) {
	d := newDriver(t, demo.Options{Platform: contract.PlatformIOS, DownloadableRuntimes: []string{"26.4", "18.7"}})
	if _, ok := find(t, d, "latest"); ok {
		t.Error(`FindComponent("latest") found it while 26.4 is downloadable`)
	}
	if res := install(t, d, "latest"); res.AlreadyInstalled || res.Version != "26.4" {
		t.Errorf(`InstallComponent("latest") = %+v, want 26.4 installed`, res)
	}
	if info, ok := find(t, d, "latest"); !ok || info.Version != "26.4" {
		t.Errorf(`FindComponent("latest") = %+v, %v; want 26.4`, info, ok)
	}
	// Android names system images by API level only.
	a := newDriver(t, downloading(contract.PlatformAndroid))
	var nodl *driver.NotDownloadableError
	if _, err := a.InstallComponent(t.Context(), "latest", nil); !errors.As(err, &nodl) {
		t.Errorf(`Android InstallComponent("latest"): err = %v, want *NotDownloadableError`, err)
	}
}

func TestInstallNotDownloadable(t *testing.T) {
	for _, p := range contract.Platforms() {
		d := newDriver(t, downloading(p))
		for _, component := range []string{"16.4", "33", "3", "", "26.4.1", "370"} {
			called := false
			_, err := d.InstallComponent(t.Context(), component, func(driver.InstallProgress) { called = true })
			var nodl *driver.NotDownloadableError
			if !errors.As(err, &nodl) || nodl.Platform != p || nodl.Component != component || nodl.Reason == "" {
				t.Errorf("%s InstallComponent(%q): err = %#v, want *NotDownloadableError", p, component, err)
			}
			if called {
				t.Errorf("%s InstallComponent(%q) reported progress", p, component)
			}
			if ce := driver.ContractError(err); ce.Code != contract.CodeRuntimeMissing || ce.Details["downloadable"] != false {
				t.Errorf("%s InstallComponent(%q) maps to %+v", p, component, ce)
			}
		}
		if c := catalog(t, d); len(c.Runtimes) != 3 {
			t.Errorf("%s: failed installs changed Runtimes to %v", p, c.Runtimes)
		}
	}
}

func TestInjectedInstallFailure(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := newDriver(t, downloading(contract.PlatformAndroid))
		d.FailOn("install", 1)
		start := time.Now()
		var steps []driver.InstallProgress
		_, err := d.InstallComponent(t.Context(), "37", func(p driver.InstallProgress) { steps = append(steps, p) })
		wantInjected(t, err, "install")
		// It breaks the download part way, at its 41.7% step (the fifth
		// of ten equal shares in), never reaching the verification.
		if got := time.Since(start); got != downloadTime*4/10 {
			t.Errorf("injected failure came after %s, want after %s, part way through the %s download", got, downloadTime*4/10, downloadTime)
		}
		if i := slices.IndexFunc(steps, func(p driver.InstallProgress) bool { return p.Step == driver.InstallVerify }); i >= 0 {
			t.Errorf("a download that failed was verified: %+v", steps)
		}
		if last := steps[len(steps)-1]; last.Step != driver.InstallLine || !strings.Contains(last.Line, "Download failed") {
			t.Errorf("the installer's last line is %+v, want the line saying the download failed", last)
		}
		if _, ok := find(t, d, "37"); ok {
			t.Error("a failed install installed the runtime")
		}
		install(t, d, "37")

		always := newDriver(t, demo.Options{Platform: contract.PlatformIOS, DownloadableRuntimes: []string{"26.4"}, Fail: []string{"install"}})
		for range 2 {
			_, err := always.InstallComponent(t.Context(), "26.4", nil)
			wantInjected(t, err, "install")
		}
		if c := catalog(t, always); !slices.Equal(c.Downloadable, []string{"26.4"}) {
			t.Errorf("Downloadable after failed installs = %v", c.Downloadable)
		}
	})
}

func TestInstalledOption(t *testing.T) {
	d := newDriver(t, demo.Options{Platform: contract.PlatformIOS, DownloadableRuntimes: []string{"26.4"}, Installed: []string{"26.4", "25.2"}})
	c := catalog(t, d)
	if c.Downloadable != nil || !slices.Equal(c.Runtimes, []string{"26.4", "26.1", "25.2", "18.6", "17.5"}) || c.DefaultRuntime != "26.4" {
		t.Errorf("catalog = Downloadable %v, Runtimes %v, default %q", c.Downloadable, c.Runtimes, c.DefaultRuntime)
	}
	if got := resolve(t, d, "iPhone 17", "26.4").OSVersion; got != "26.4" {
		t.Errorf("ResolveSpec(26.4) = %s", got)
	}
	// Not downloadable, but installed all the same.
	if got := resolve(t, d, "iPhone 17", "25").OSVersion; got != "25.2" {
		t.Errorf("ResolveSpec(25) = %s", got)
	}
	info, ok := find(t, d, "26.4")
	if !ok || info.Receipt != "demo:ios:26.4:restored" {
		t.Errorf("FindComponent(26.4) = %+v, %v; want the restored receipt", info, ok)
	}
	if res := install(t, d, "26.4"); !res.AlreadyInstalled {
		t.Errorf("InstallComponent(26.4) = %+v, want already installed", res)
	}

	// A receipt keeps the earlier install's, and later installs never
	// repeat its number.
	a := newDriver(t, demo.Options{Platform: contract.PlatformAndroid, DownloadableRuntimes: []string{"37"},
		Installed: []string{"37", "demo:android:37:7", "demo:android:38:2", "38"}})
	for v, want := range map[string]string{"37": "demo:android:37:7", "38": "demo:android:38:2"} {
		if info, ok := find(t, a, v); !ok || info.Receipt != want {
			t.Errorf("FindComponent(%s) = %+v, %v; want receipt %s", v, info, ok, want)
		}
	}
	if err := a.RemoveComponent(t.Context(), driver.ComponentInfo{Platform: contract.PlatformAndroid, Version: "37"}); err != nil {
		t.Fatal(err)
	}
	if res := install(t, a, "37"); res.Receipt != "demo:android:37:8" {
		t.Errorf("reinstall receipt = %q, want demo:android:37:8", res.Receipt)
	}

	for _, bad := range [][]string{{""}, {"latest"}, {"26 4"}, {"demo:android:37:1"}, {"demo:ios:26.4"}, {"demo:ios::1"}, {"demo:ios:26.4:"}} {
		if d, err := demo.New(demo.Options{Platform: contract.PlatformIOS, Installed: bad}); err == nil || d != nil {
			t.Errorf("New with Installed %q: %v, %v; want an error", bad, d, err)
		}
	}
	for _, bad := range [][]string{{""}, {"latest"}, {"demo:ios:26.4:1"}} {
		if d, err := demo.New(demo.Options{Platform: contract.PlatformIOS, DownloadableRuntimes: bad}); err == nil || d != nil {
			t.Errorf("New with DownloadableRuntimes %q: %v, %v; want an error", bad, d, err)
		}
	}
	if d, err := demo.New(demo.Options{Platform: contract.PlatformIOS, DownloadTime: -1}); err == nil || d != nil {
		t.Errorf("New with a negative DownloadTime: %v, %v; want an error", d, err)
	}
}

func TestRemoveComponent(t *testing.T) {
	ctx := t.Context()
	t.Run("downloaded", func(t *testing.T) {
		d := newDriver(t, demo.Options{Platform: contract.PlatformIOS, DownloadableRuntimes: []string{"26.4"}})
		before := catalog(t, d)
		res := install(t, d, "26.4")
		if err := d.RemoveComponent(ctx, res.ComponentInfo); err != nil {
			t.Fatal(err)
		}
		if _, ok := find(t, d, "26.4"); ok {
			t.Error("FindComponent found a removed runtime")
		}
		if after := catalog(t, d); !reflect.DeepEqual(after, before) {
			t.Errorf("catalog after install and remove:\n got %+v\nwant %+v", after, before)
		}
		wantMissing(t, d, "iPhone 17", "26.4", "26.4")
		if _, err := d.Provision(ctx, contract.DeviceSpec{Platform: contract.PlatformIOS, Model: "iPhone 17", OSVersion: "26.4"}); err == nil {
			t.Error("Provision on a removed runtime worked")
		}
		// Removed is already gone.
		if err := d.RemoveComponent(ctx, res.ComponentInfo); err != nil {
			t.Errorf("second RemoveComponent: %v", err)
		}
		// A reinstall is a new install, with a new receipt; the old one
		// no longer removes it.
		again := install(t, d, "26.4")
		if again.AlreadyInstalled || again.Receipt == res.Receipt {
			t.Errorf("reinstall = %+v, want a new install with a receipt other than %s", again, res.Receipt)
		}
		if err := d.RemoveComponent(ctx, res.ComponentInfo); err == nil {
			t.Error("RemoveComponent with a stale receipt worked")
		}
		if _, ok := find(t, d, "26.4"); !ok {
			t.Error("RemoveComponent with a stale receipt removed the reinstall")
		}
	})
	t.Run("built in", func(t *testing.T) {
		d := newDriver(t, demo.Options{Platform: contract.PlatformIOS, DownloadableRuntimes: []string{"18.6"}})
		info, ok := find(t, d, "18.6")
		if !ok {
			t.Fatal("18.6 is not installed")
		}
		if err := d.RemoveComponent(ctx, info); err != nil {
			t.Fatal(err)
		}
		c := catalog(t, d)
		if !slices.Equal(c.Runtimes, []string{"26.1", "17.5"}) || !slices.Equal(c.Downloadable, []string{"18.6"}) {
			t.Errorf("after removing 18.6: Runtimes = %v, Downloadable = %v", c.Runtimes, c.Downloadable)
		}
		for m, list := range c.ModelRuntimes {
			if slices.Contains(list, "18.6") {
				t.Errorf("ModelRuntimes[%q] = %v still holds 18.6", m, list)
			}
		}
		// A download helps only models that 18.6 serves.
		wantMissing(t, d, "iPhone 15", "18", "18.6")
		wantMissing(t, d, "iPhone 17", "18.6", "")
		install(t, d, "18.6")
		if got := resolve(t, d, "iPhone 15", "18").OSVersion; got != "18.6" {
			t.Errorf("ResolveSpec(iPhone 15, 18) = %s after the reinstall", got)
		}
		wantMissing(t, d, "iPhone 17", "18.6", "")

		// Removing what is not downloadable leaves it missing for good.
		info, _ = find(t, d, "17.5")
		if err := d.RemoveComponent(ctx, info); err != nil {
			t.Fatal(err)
		}
		wantMissing(t, d, "iPhone 15", "17.5", "")
	})
	t.Run("every runtime", func(t *testing.T) {
		d := newDriver(t, demo.Options{Platform: contract.PlatformAndroid, DownloadableRuntimes: []string{"37"}})
		for _, v := range []string{"36", "35", "34"} {
			if err := d.RemoveComponent(ctx, driver.ComponentInfo{Platform: contract.PlatformAndroid, Version: v}); err != nil {
				t.Fatal(err)
			}
		}
		if c := catalog(t, d); len(c.Runtimes) != 0 || c.DefaultRuntime != "" {
			t.Errorf("with nothing installed: Runtimes = %v, default %q", c.Runtimes, c.DefaultRuntime)
		}
		// Any version will do, and only a download gives one.
		wantMissing(t, d, "Pixel 9", "", "37")
	})
	t.Run("wrong platform or done context", func(t *testing.T) {
		d := newDriver(t, demo.Options{Platform: contract.PlatformAndroid})
		err := d.RemoveComponent(ctx, driver.ComponentInfo{Platform: contract.PlatformIOS, Version: "36"})
		wantCrash(t, err, "remove")
		done, cancel := context.WithCancel(ctx)
		cancel()
		err = d.RemoveComponent(done, driver.ComponentInfo{Platform: contract.PlatformAndroid, Version: "36"})
		wantCrash(t, err, "remove")
		if _, ok := find(t, d, "36"); !ok {
			t.Error("a refused RemoveComponent removed the runtime")
		}
	})
}

func TestListComponents(t *testing.T) {
	for _, p := range contract.Platforms() {
		opts := downloading(p)
		opts.DownloadTime = 0
		d := newDriver(t, opts)
		res := install(t, d, newRuntime[p].version)
		list, err := d.ListComponents(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		c := catalog(t, d)
		var versions []string
		for _, info := range list {
			versions = append(versions, info.Version)
			if info.Platform != p || info.Name == "" || info.Receipt == "" || info.SizeBytes != d.ComponentFootprint(info.Version) || info.ForeignDevices != 0 {
				t.Errorf("%s component %+v", p, info)
			}
		}
		if !slices.Equal(versions, c.Runtimes) || list[0] != res.ComponentInfo {
			t.Errorf("%s ListComponents = %+v, want the runtimes %v, the installed one first", p, list, c.Runtimes)
		}
		want := int64(8 << 30)
		if p == contract.PlatformAndroid {
			want = 2 << 30
		}
		if got := d.ComponentFootprint("anything"); got != want {
			t.Errorf("%s ComponentFootprint = %d, want %d", p, got, want)
		}
		if dir := d.ComponentDir(); dir != "" {
			t.Errorf("%s ComponentDir = %q, want none", p, dir)
		}
	}
}

func TestCatalogCopyIsIndependentOfInstalls(t *testing.T) {
	for _, p := range contract.Platforms() {
		opts := downloading(p)
		opts.DownloadTime = 0
		d := newDriver(t, opts)
		pristine := catalog(t, newDriver(t, opts))
		c := catalog(t, d)
		c.Downloadable[0] = "mutated"
		c.Downloadable = append(c.Downloadable, "mutated")
		if again := catalog(t, d); !reflect.DeepEqual(again, pristine) {
			t.Errorf("%s: changing a returned catalog's Downloadable changed the next one: %v", p, again.Downloadable)
		}
		// An install or removal leaves an earlier answer as it was.
		before := catalog(t, d)
		install(t, d, newRuntime[p].version)
		info, _ := find(t, d, before.Runtimes[1])
		if err := d.RemoveComponent(t.Context(), info); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(before, pristine) {
			t.Errorf("%s: an install and a removal changed an earlier catalog:\n got %+v\nwant %+v", p, before, pristine)
		}
	}
}

// TestCatalogChangesAreSafeForConcurrentUse is for the race detector: reads
// of the catalog meet installs and removals.
func TestCatalogChangesAreSafeForConcurrentUse(t *testing.T) {
	d := newDriver(t, demo.Options{Platform: contract.PlatformIOS, DownloadableRuntimes: []string{"26.4"}})
	ctx := t.Context()
	var wg sync.WaitGroup
	wg.Go(func() {
		for range 50 {
			res, err := d.InstallComponent(ctx, "26.4", nil)
			if err == nil {
				err = d.RemoveComponent(ctx, res.ComponentInfo)
			}
			if err != nil {
				t.Error(err)
				return
			}
		}
	})
	for range 3 {
		wg.Go(func() {
			for range 50 {
				_, _ = d.ResolveSpec(ctx, driver.Request{Platform: contract.PlatformIOS, Model: "iphone-17", OSVersion: "26.4"})
				_, _ = d.ListCatalog(ctx)
				_, _, _ = d.FindComponent(ctx, "26")
				_, _ = d.ListComponents(ctx)
				_, _ = d.Provision(ctx, contract.DeviceSpec{Platform: contract.PlatformIOS, Model: "iPhone 17", OSVersion: "26.1"})
			}
		})
	}
	wg.Wait()
}

func TestADownloadPrintsItsLinesAndEndsInTheVerification(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := newDriver(t, downloading(contract.PlatformIOS))
		var steps []driver.InstallProgress
		if _, err := d.InstallComponent(t.Context(), "26.4", func(p driver.InstallProgress) { steps = append(steps, p) }); err != nil {
			t.Fatal(err)
		}
		last := steps[len(steps)-1]
		if last.Step != driver.InstallVerify {
			t.Fatalf("the last step is %+v, want the verification", last)
		}
		for _, p := range steps[:len(steps)-1] {
			if p.Step != driver.InstallFigures || p.Stream != "stdout" || !strings.Contains(p.Line, fmt.Sprintf("%.1f%%", p.Percent)) {
				t.Fatalf("a download step %+v does not carry the installer line its figures came from", p)
			}
		}
	})
}
