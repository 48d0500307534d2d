package demo_test

import (
	"slices"
	"testing"

	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/driver"
	"github.com/simlock/simlock/internal/driver/demo"
)

func TestADemoSlimDeviceIsSlimmedOncePerCleanAndNeverOnRecover(t *testing.T) {
	ctx := t.Context()
	d := newDriver(t, demo.Options{Platform: contract.PlatformIOS})
	spec, err := d.ResolveSpec(ctx, driver.Request{Platform: contract.PlatformIOS, Model: "iPhone 16", OSVersion: "18.6", Mode: contract.DeviceModeSlim})
	if err != nil || spec.Mode != contract.DeviceModeSlim {
		t.Fatalf("ResolveSpec(slim, 18.6) = %+v, %v; want a slim spec", spec, err)
	}
	if old, _ := d.ResolveSpec(ctx, driver.Request{Platform: contract.PlatformIOS, Model: "iPhone 15", OSVersion: "17.5", Mode: contract.DeviceModeSlim}); old.Mode != "" {
		t.Errorf("ResolveSpec(slim, 17.5).Mode = %q, want full", old.Mode)
	}
	dev, err := d.Provision(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	ready, err := d.MakeReady(ctx, dev)
	if err != nil || ready.Slim == nil || !ready.Slim.Applied || !ready.Slim.Slimmed {
		t.Fatalf("first MakeReady = %+v, %v; want the pass applied", ready.Slim, err)
	}
	again, err := d.MakeReady(ctx, ready)
	if err != nil || again.Slim == nil || again.Slim.Applied || !again.Slim.Slimmed {
		t.Errorf("MakeReady of a slimmed device = %+v, %v; want slimmed, not applied again", again.Slim, err)
	}
	if _, err := d.Reclaim(ctx, again); err != nil {
		t.Fatal(err)
	}
	recovered, err := d.Recover(ctx, again)
	if err != nil || recovered.Slim == nil || recovered.Slim.Slimmed || recovered.Slim.Applied {
		t.Errorf("Recover after a clean = %+v, %v; want not slimmed, no pass", recovered.Slim, err)
	}
	if err := d.Shutdown(ctx, recovered); err != nil {
		t.Fatal(err)
	}
	third, err := d.MakeReady(ctx, recovered)
	if err != nil || third.Slim == nil || !third.Slim.Applied {
		t.Errorf("MakeReady after the clean = %+v, %v; want the pass applied again", third.Slim, err)
	}
	cat, _ := d.ListCatalog(ctx)
	if len(cat.SlimRuntimes) == 0 || slices.Contains(cat.SlimRuntimes, "17.5") || !slices.Contains(cat.SlimRuntimes, "18.6") {
		t.Errorf("SlimRuntimes = %q, want 18.6 and newer only", cat.SlimRuntimes)
	}
}

func TestAFailedDemoSlimPassServesTheDeviceFull(t *testing.T) {
	ctx := t.Context()
	d := newDriver(t, demo.Options{Platform: contract.PlatformIOS, Fail: []string{"slim"}})
	spec, _ := d.ResolveSpec(ctx, driver.Request{Platform: contract.PlatformIOS, Model: "iPhone 16", OSVersion: "18.6", Mode: contract.DeviceModeSlim})
	dev, err := d.Provision(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	ready, err := d.MakeReady(ctx, dev)
	if err != nil || ready.Slim == nil || ready.Slim.Slimmed || ready.Slim.Err == nil {
		t.Errorf("MakeReady with the pass failing = %+v, %v; want served, not slimmed, with the error", ready.Slim, err)
	}
}
