package android_test

import (
	"errors"
	"slices"
	"testing"

	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/driver"
)

// tagImage is the package of level's image of tag for this host.
func tagImage(level, tag string) string {
	return "system-images;android-" + level + ";" + tag + ";" + hostABI()
}

func TestImageTagProvisionsFromTheTagsImage(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.shims.AddAndroidImage(t, tagImage("36", "google_apis_playstore"))
	d := newDriver(t, f.opts)
	ctx := t.Context()

	spec, err := d.ResolveSpec(ctx, driver.Request{Platform: contract.PlatformAndroid, Model: "Pixel 9", OSVersion: "36", ImageTag: "google_apis_playstore"})
	if err != nil {
		t.Fatalf("ResolveSpec(36, google_apis_playstore): %v", err)
	}
	if want := (contract.DeviceSpec{Platform: contract.PlatformAndroid, Model: "Pixel 9", OSVersion: "36", ImageTag: "google_apis_playstore"}); spec != want {
		t.Fatalf("ResolveSpec = %+v, want %+v", spec, want)
	}
	dev, err := d.Provision(ctx, spec)
	if err != nil {
		t.Fatalf("Provision: %v", err)
	}
	pkg := tagImage("36", "google_apis_playstore")
	if c := findCalls(t, f.shims, "avdmanager", "-n", dev.ID, "-k", pkg); len(c) != 1 {
		t.Errorf("avdmanager calls = %v; want one create -k %s", calls(t, f.shims, "avdmanager"), pkg)
	}

	// Without a tag the default image serves, as before.
	plain, err := d.ResolveSpec(ctx, driver.Request{Platform: contract.PlatformAndroid, Model: "Pixel 9", OSVersion: "36"})
	if err != nil || plain.ImageTag != "google_apis" {
		t.Fatalf("ResolveSpec(36) = %+v, %v; want the google_apis image", plain, err)
	}
	other, err := d.Provision(ctx, plain)
	if err != nil {
		t.Fatalf("Provision(google_apis): %v", err)
	}
	if c := findCalls(t, f.shims, "avdmanager", "-n", other.ID, "-k", tagImage("36", "google_apis")); len(c) != 1 {
		t.Errorf("avdmanager calls = %v; want one create -k %s", calls(t, f.shims, "avdmanager"), tagImage("36", "google_apis"))
	}

	// A tag alone takes the newest level that has it.
	spec, err = d.ResolveSpec(ctx, driver.Request{Platform: contract.PlatformAndroid, Model: "Pixel 9", ImageTag: "google_apis_playstore"})
	if err != nil || spec.OSVersion != "36" || spec.ImageTag != "google_apis_playstore" {
		t.Errorf("ResolveSpec(tag only) = %+v, %v; want API 36 google_apis_playstore", spec, err)
	}
}

func TestImageTagNotInstalledIsDownloadable(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	d := newDriver(t, f.opts)
	ctx := t.Context()

	_, err := d.ResolveSpec(ctx, driver.Request{Platform: contract.PlatformAndroid, Model: "Pixel 9", OSVersion: "36", ImageTag: "google_apis_playstore"})
	var missing *driver.RuntimeMissingError
	if !errors.As(err, &missing) {
		t.Fatalf("ResolveSpec(36, google_apis_playstore) = %v; want a RuntimeMissingError", err)
	}
	const component = "36;google_apis_playstore"
	if !missing.Downloadable || missing.Component != component || missing.OSVersion != "36" || missing.ImageTag != "google_apis_playstore" {
		t.Errorf("missing = %+v; want downloadable component %s", missing, component)
	}
	cerr := driver.ContractError(err)
	if cerr.Code != contract.CodeRuntimeMissing || cerr.Details["component"] != component || cerr.Details["downloadable"] != true ||
		cerr.Details["imageTag"] != "google_apis_playstore" {
		t.Errorf("contract error = %+v", cerr)
	}
	// A level with no image of the tag: the newest level's image of it.
	if _, err := d.ResolveSpec(ctx, driver.Request{Platform: contract.PlatformAndroid, Model: "Pixel 9", ImageTag: "google_apis_playstore"}); !errors.As(err, &missing) ||
		!missing.Downloadable || missing.Component != component {
		t.Errorf("ResolveSpec(tag only) = %v (%+v); want downloadable component %s", err, missing, component)
	}

	if _, found, err := d.FindComponent(ctx, component); found || err != nil {
		t.Fatalf("FindComponent(%s) before the install = %v, %v", component, found, err)
	}
	res, err := d.InstallComponent(ctx, component, nil)
	if err != nil {
		t.Fatalf("InstallComponent(%s): %v", component, err)
	}
	pkg := tagImage("36", "google_apis_playstore")
	if res.AlreadyInstalled || res.Name != pkg || res.Version != "36" {
		t.Errorf("InstallComponent = %+v; want %s installed", res, pkg)
	}
	if c := findCalls(t, f.shims, "sdkmanager", "--install", pkg); len(c) != 1 {
		t.Errorf("sdkmanager calls = %v; want one --install %s", calls(t, f.shims, "sdkmanager"), pkg)
	}
	spec, err := d.ResolveSpec(ctx, driver.Request{Platform: contract.PlatformAndroid, Model: "Pixel 9", OSVersion: "36", ImageTag: "google_apis_playstore"})
	if err != nil || spec.ImageTag != "google_apis_playstore" {
		t.Errorf("after the install, ResolveSpec = %+v, %v", spec, err)
	}
	// The level's default component is unchanged: 36 is installed.
	if info, found, err := d.FindComponent(ctx, "36"); err != nil || !found || info.Name != image("36") {
		t.Errorf("FindComponent(36) = %+v, %v, %v; want %s", info, found, err, image("36"))
	}
}

func TestCatalogListsImagesWithTags(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.shims.AddAndroidImage(t, tagImage("36", "google_apis_playstore"))
	d := newDriver(t, f.opts)
	c, err := d.ListCatalog(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	abi := hostABI()
	want := []contract.CatalogImage{
		{Runtime: "36", Tag: "google_apis", ABI: abi},
		{Runtime: "36", Tag: "google_apis_playstore", ABI: abi},
		{Runtime: "35", Tag: "android-wear", ABI: abi},
		{Runtime: "35", Tag: "google_apis", ABI: abi},
		{Runtime: "34", Tag: "google_apis", ABI: abi},
	}
	if !slices.Equal(c.Images, want) {
		t.Errorf("Images = %+v, want %+v", c.Images, want)
	}
	if !c.HasImage("36", "google_apis_playstore") || c.HasImage("35", "google_apis_playstore") {
		t.Errorf("HasImage disagrees with Images %+v", c.Images)
	}
}
