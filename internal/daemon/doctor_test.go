package daemon

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/simlock/simlock/internal/config"
	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/driver"
	"github.com/simlock/simlock/internal/driver/demo"
)

// TestDoctorReportsAndFixesDevicesChangedOutsideSimlock: an idle device
// erased outside simlock, a leased one replaced and an idle one booted
// outside simlock are each reported with what to do; --fix quarantines the
// two idle ones and leaves the leased one alone.
func TestDoctorReportsAndFixesDevicesChangedOutsideSimlock(t *testing.T) {
	ios, err := demo.New(demo.Options{Platform: contract.PlatformIOS})
	if err != nil {
		t.Fatal(err)
	}
	android, err := demo.New(demo.Options{Platform: contract.PlatformAndroid})
	if err != nil {
		t.Fatal(err)
	}
	// With the warm pool off, a released device stays shut down, as the
	// device booted outside simlock below must be in the registry.
	cfg, err := config.Default().Override("warmPool.enabled", "false")
	if err != nil {
		t.Fatal(err)
	}
	_, home := startDaemonWith(t, cfg, map[contract.Platform]driver.Driver{contract.PlatformIOS: ios, contract.PlatformAndroid: android})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	admin := dial(t, home, "op", true)
	evs, _, err := admin.Subscribe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	lease := func(who string) contract.LeaseGrant {
		t.Helper()
		g, err := dial(t, home, who, false).RequestLease(ctx, contract.LeaseRequestInput{Platform: contract.PlatformIOS}, nil)
		if err != nil {
			t.Fatalf("lease for %s: %v", who, err)
		}
		return g
	}
	erased, replaced, booted := lease("a"), lease("b"), lease("c")
	for _, g := range []contract.LeaseGrant{erased, booted} {
		if _, err := admin.Release(ctx, g.Lease.ID); err != nil {
			t.Fatal(err)
		}
	}
	for cleaned := 0; cleaned < 2; {
		select {
		case ev := <-evs:
			if ev.Event == "device.reclaimed" {
				cleaned++
			}
		case <-ctx.Done():
			t.Fatal("the two released devices were not cleaned")
		}
	}
	inject := func(dev, fault string) {
		t.Helper()
		var res contract.DemoInjectResult
		if err := admin.Call(ctx, contract.OpDemoInject, contract.DemoInjectInput{DeviceID: dev, Fault: fault}, &res); err != nil || !res.Injected {
			t.Fatalf("inject %s into %s: %+v, %v", fault, dev, res, err)
		}
	}
	inject(erased.Device.ID, "erase")
	inject(replaced.Device.ID, "replace")
	if _, err := ios.MakeReady(ctx, driver.Device{ID: booted.Device.DriverDeviceID}); err != nil {
		t.Fatal(err)
	}

	doctor := func(fix bool) map[string]contract.Finding {
		t.Helper()
		var res contract.DoctorResult
		c := admin
		if !fix {
			c = dial(t, home, "x", false)
		}
		if err := c.Call(ctx, contract.OpDoctorRun, contract.DoctorInput{Fix: fix}, &res); err != nil {
			t.Fatalf("doctor (fix %v): %v", fix, err)
		}
		out := map[string]contract.Finding{}
		for _, f := range res.Findings {
			if f.DeviceID != "" {
				out[f.DeviceID] = f
			}
		}
		return out
	}
	found := doctor(false)
	if f := found[erased.Device.ID]; f.Kind != "foreign-provenance" || f.Reason != "erased" || f.Platform != contract.PlatformIOS ||
		f.Fixed || !strings.Contains(f.Remedy, "simlock doctor --fix quarantines it") {
		t.Errorf("the erased device's finding = %+v, want foreign-provenance, reason erased, with the fix as remedy", f)
	}
	if f := found[replaced.Device.ID]; f.Kind != "foreign-provenance" || f.Reason != "mark-mismatch" || f.Fixed ||
		!strings.Contains(f.Message, "it is leased, so doctor leaves it") {
		t.Errorf("the replaced device's finding = %+v, want foreign-provenance, reason mark-mismatch, left alone as leased", f)
	}
	if f := found[booted.Device.ID]; f.Kind != "foreign-state-change" || f.Fixed || !strings.Contains(f.Message, "booted outside simlock") ||
		!strings.Contains(f.Remedy, "simlock doctor --fix quarantines it") {
		t.Errorf("the booted device's finding = %+v, want foreign-state-change with the fix as remedy", f)
	}

	fixed := doctor(true)
	for _, id := range []string{erased.Device.ID, booted.Device.ID} {
		if f := fixed[id]; !f.Fixed || f.Remedy != "" {
			t.Errorf("with --fix %s's finding = %+v, want it fixed", id, f)
		}
	}
	if f := fixed[replaced.Device.ID]; f.Fixed {
		t.Errorf("with --fix the leased device's finding = %+v, want it left alone", f)
	}
	list, err := admin.List(ctx, contract.ListDevices)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]contract.DeviceState{erased.Device.ID: contract.DeviceQuarantined, booted.Device.ID: contract.DeviceQuarantined,
		replaced.Device.ID: contract.DeviceLeased}
	for _, d := range list.Devices {
		if w, ok := want[d.ID]; ok && d.State != w {
			t.Errorf("device %s is %s after --fix, want %s", d.ID, d.State, w)
		}
	}

	// Each run said what it found as events.
	hist, err := admin.Replay(ctx, contract.EventsReplayInput{})
	if err != nil {
		t.Fatal(err)
	}
	var details []string
	states := 0
	for _, ev := range hist {
		var p map[string]any
		json.Unmarshal(ev.Payload, &p)
		switch ev.Event {
		case "device.foreign-provenance-detected":
			details = append(details, p["deviceId"].(string)+":"+p["detail"].(string))
		case "device.foreign-state-detected":
			if p["deviceId"] == booted.Device.ID && p["expected"] == "shutdown" && p["observed"] == "running" && p["platform"] == "ios" {
				states++
			}
		}
	}
	if len(details) != 4 || states != 2 {
		t.Errorf("foreign-provenance events %v and %d foreign-state events, want 4 and 2 (two doctor runs)", details, states)
	}
}
