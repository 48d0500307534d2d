package e2e

import (
	"runtime"
	"slices"
	"testing"

	"github.com/simlock/simlock/internal/shimtest"
)

// avdImage is the system image package avdmanager created AVD avd from,
// or "".
func avdImage(t *testing.T, e shimtest.Env, avd string) string {
	t.Helper()
	for _, c := range e.Calls(t) {
		if c.Tool != "avdmanager" || !slices.Contains(c.Args, "create") {
			continue
		}
		n, k := slices.Index(c.Args, "-n"), slices.Index(c.Args, "-k")
		if n >= 0 && k >= 0 && n+1 < len(c.Args) && k+1 < len(c.Args) && c.Args[n+1] == avd {
			return c.Args[k+1]
		}
	}
	return ""
}

// lease --image-tag makes the device from the tag's system image; an idle
// device of another tag never serves it; a tag not installed is
// RUNTIME_MISSING naming the <level>;<tag> component, which --allow-download
// installs; on iOS the flag is refused.
// hostABI is the ABI of the system images the SDK shims lay out here.
func hostABI() string {
	if runtime.GOARCH == "arm64" {
		return "arm64-v8a"
	}
	return "x86_64"
}

// sdkInstalled reports whether sdkmanager --install ran for pkg.
func sdkInstalled(t *testing.T, e shimtest.Env, pkg string) bool {
	t.Helper()
	return slices.ContainsFunc(e.Calls(t), func(c shimtest.Call) bool {
		return c.Tool == "sdkmanager" && slices.Contains(c.Args, "--install") && slices.Contains(c.Args, pkg)
	})
}

func TestLeaseByImageTag(t *testing.T) {
	t.Parallel()
	abi := hostABI()
	e := shimtest.Build(t)
	e.AddAndroidImage(t, "system-images;android-36;google_apis_playstore;"+abi)
	h := newHome(t, "capacity.strategy", "fixed", "capacity.config.maxRunning", "3")
	h.withShims(e, "android")
	f := h.follow()

	// A plain lease gets the default image; released, the device is idle.
	plain := h.leaseDetached("a", "android", "--os", "36")
	if plain.Device.Spec.ImageTag != "google_apis" {
		t.Errorf("a lease without --image-tag got spec %+v, want the google_apis image", plain.Device.Spec)
	}
	if r := h.run("release", plain.Lease.ID); r.code != 0 {
		t.Fatalf("release\n%s", r)
	}
	f.find("device.reclaimed", isEvent("device.reclaimed", "deviceId", plain.Device.ID))

	g := h.leaseDetached("a", "android", "--os", "36", "--image-tag", "google_apis_playstore")
	if g.Device.ID == plain.Device.ID {
		t.Errorf("the idle google_apis device %s served a request for google_apis_playstore", plain.Device.ID)
	}
	if g.Device.Spec.ImageTag != "google_apis_playstore" || g.Device.Spec.OSVersion != "36" {
		t.Errorf("grant spec = %+v, want API 36 google_apis_playstore", g.Device.Spec)
	}
	if want, got := "system-images;android-36;google_apis_playstore;"+abi, avdImage(t, e, g.Device.DriverDeviceID); got != want {
		t.Errorf("AVD %s was created from %q, want %q", g.Device.DriverDeviceID, got, want)
	}

	// API 35 has no Play Store image: refused, then downloaded.
	r := h.run("lease", "--platform", "android", "--os", "35", "--image-tag", "google_apis_playstore", "--agent-id", "b", "--detach")
	er := expectFailure(t, r, 12, "RUNTIME_MISSING")
	if er["component"] != "35;google_apis_playstore" || er["downloadable"] != true || er["imageTag"] != "google_apis_playstore" {
		t.Errorf("RUNTIME_MISSING = %v, want downloadable component 35;google_apis_playstore", er)
	}
	dl := h.leaseDetached("b", "android", "--os", "35", "--image-tag", "google_apis_playstore", "--allow-download")
	pkg := "system-images;android-35;google_apis_playstore;" + abi
	if !sdkInstalled(t, e, pkg) {
		t.Errorf("sdkmanager --install %s never ran", pkg)
	}
	if got := avdImage(t, e, dl.Device.DriverDeviceID); got != pkg || dl.Device.Spec.ImageTag != "google_apis_playstore" {
		t.Errorf("downloaded lease: AVD from %q, spec %+v; want %s", got, dl.Device.Spec, pkg)
	}

	r = h.run("lease", "--platform", "ios", "--image-tag", "google_apis", "--agent-id", "c", "--detach")
	if er := expectFailure(t, r, 2, "BAD_REQUEST"); er["flag"] != "--image-tag" {
		t.Errorf("iOS --image-tag refusal = %v, want it to name --image-tag", er)
	}
}

// A tag's image installs with component install as the component a lease's
// RUNTIME_MISSING names, and a lease of that tag then needs no download.
func TestComponentInstallInstallsAnImageTagsSystemImage(t *testing.T) {
	t.Parallel()
	abi := hostABI()
	e := shimtest.Build(t)
	h := newHome(t)
	h.withShims(e, "android")
	if r := h.run("component", "install", "android", "35;google_apis_playstore"); r.code != 0 {
		t.Fatalf("component install android 35;google_apis_playstore\n%s", r)
	}
	pkg := "system-images;android-35;google_apis_playstore;" + abi
	if !sdkInstalled(t, e, pkg) {
		t.Fatalf("sdkmanager --install %s never ran", pkg)
	}
	g := h.leaseDetached("a", "android", "--os", "35", "--image-tag", "google_apis_playstore")
	if got := avdImage(t, e, g.Device.DriverDeviceID); got != pkg {
		t.Errorf("the lease's AVD was made from %q, want %s", got, pkg)
	}
	expectFailure(t, h.run("component", "install", "ios", "26.4;google_apis"), 2, "BAD_REQUEST")
}

// A warm-pool target of an image tag keeps a device of that tag booted,
// and a lease of the tag takes it warm.
func TestAWarmPoolTargetOfAnImageTagKeepsThatTagsDeviceWarm(t *testing.T) {
	t.Parallel()
	abi := hostABI()
	e := shimtest.Build(t)
	e.AddAndroidImage(t, "system-images;android-36;google_apis_playstore;"+abi)
	h := newHome(t,
		"warmPool.targets", `[{"platform":"android","model":"Pixel 9","osVersion":"36","imageTag":"google_apis_playstore","count":1}]`)
	h.withShims(e, "android")
	f := h.follow()
	ready := f.find("the target's device ready", isEvent("device.ready", "initiator", "warm-pool"))
	g := h.leaseDetached("a", "android", "--os", "36", "--image-tag", "google_apis_playstore")
	if g.Source != "warm" || g.Device.ID != ready.str("deviceId") || g.Device.Spec.ImageTag != "google_apis_playstore" {
		t.Errorf("a lease of the tag got %s (%s, spec %+v), want the warm device %s", g.Device.ID, g.Source, g.Device.Spec, ready.str("deviceId"))
	}
	if got := avdImage(t, e, g.Device.DriverDeviceID); got != "system-images;android-36;google_apis_playstore;"+abi {
		t.Errorf("the warm device's AVD was made from %q", got)
	}
}
