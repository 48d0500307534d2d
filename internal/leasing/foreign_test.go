package leasing

import (
	"context"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/driver"
	"github.com/simlock/simlock/internal/driver/demo"
	"github.com/simlock/simlock/internal/store"
)

// TestErasedLeasedDeviceEndsItsLeaseAsProvenanceDrift: the first probe that
// sees a running leased device erased outside simlock ends the lease as
// device-lost; the device is still simlock's, so its clean goes ahead and it
// serves again. A healthy lease beside it is kept.
func TestErasedLeasedDeviceEndsItsLeaseAsProvenanceDrift(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h, _ := startHealth(t)
		g := h.mustGrant(h.acquire("a", ios))
		healthy := h.mustGrant(h.acquire("b", android))
		if err := h.drivers[contract.PlatformIOS].Inject(g.Device.DriverDeviceID, demo.FaultErase); err != nil {
			t.Fatal(err)
		}
		// The grants took 3 s each; the first probe is at 10 s.
		time.Sleep(10*time.Second - 2*(provisionTime+bootTime) + time.Second)
		synctest.Wait()
		if got := h.lost; !slices.Equal(got, []string{g.Lease.ID + ":device-lost"}) {
			t.Fatalf("lease ends = %v, want only %s:device-lost at the first probe", got, g.Lease.ID)
		}
		p := payloads(t, h.st, "device.recovery-failed")
		if len(p) != 1 || p[0]["reason"] != "provenance-drift" || p[0]["detail"] != "erased" || p[0]["leaseId"] != g.Lease.ID {
			t.Errorf("device.recovery-failed = %v, want one with reason provenance-drift, detail erased", p)
		}
		if l := h.e.Leases(Caller{Admin: true}); len(l) != 1 || l[0].ID != healthy.Lease.ID {
			t.Errorf("leases = %+v, want the healthy one kept", l)
		}
		time.Sleep(reclaimTime + time.Second)
		synctest.Wait()
		if s := deviceState(h, g.Device.ID); s != contract.DeviceShutdown {
			t.Errorf("the erased device is %s after its clean, want shutdown (cleaned, back in service)", s)
		}
		// Many probes later the healthy lease is still there: intact marks
		// never end a lease.
		time.Sleep(time.Minute)
		synctest.Wait()
		if l := h.e.Leases(Caller{Admin: true}); len(l) != 1 || l[0].ID != healthy.Lease.ID {
			t.Errorf("after a minute of probes leases = %+v, want the healthy one kept", l)
		}
	})
}

// TestReplacedLeasedDeviceIsNeverHandedOutAgain: a device that is not
// simlock's any more loses its lease, its clean is refused, and the next
// request gets another device.
func TestReplacedLeasedDeviceIsNeverHandedOutAgain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h, _ := startHealth(t)
		g := h.mustGrant(h.acquire("a", android))
		if err := h.drivers[contract.PlatformAndroid].Inject(g.Device.DriverDeviceID, demo.FaultReplace); err != nil {
			t.Fatal(err)
		}
		time.Sleep(10*time.Second + reclaimTime)
		synctest.Wait()
		if got := h.lost; !slices.Equal(got, []string{g.Lease.ID + ":device-lost"}) {
			t.Fatalf("lease ends = %v, want %s:device-lost", got, g.Lease.ID)
		}
		if p := payloads(t, h.st, "device.recovery-failed"); len(p) != 1 || p[0]["detail"] != "mark-mismatch" {
			t.Errorf("device.recovery-failed = %v, want detail mark-mismatch", p)
		}
		if s := deviceState(h, g.Device.ID); s != contract.DeviceQuarantined {
			t.Fatalf("the replaced device is %s, want quarantined: its clean must be refused", s)
		}
		next := h.mustGrant(h.acquire("b", android))
		if next.Device.ID == g.Device.ID || next.Source != contract.SourceProvisioned {
			t.Errorf("the next grant = %s (%s), want a new device, not the replaced %s", next.Device.ID, next.Source, g.Device.ID)
		}
	})
}

// TestLegacyLeasedDeviceIsNotDrift: a device whose registry record carries
// no mark token (made before marks) is never judged by its marks.
func TestLegacyLeasedDeviceIsNotDrift(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := newMemStore()
		drv, err := demo.New(demo.Options{Platform: contract.PlatformIOS})
		if err != nil {
			t.Fatal(err)
		}
		// Running before the daemon starts, as a device left by an older
		// simlock; its record's driver data has no token.
		if _, err := drv.MakeReady(context.Background(), driver.Device{ID: "legacy-udid"}); err != nil {
			t.Fatal(err)
		}
		t0 := time.Now().UnixMilli()
		st.put(store.Change{Devices: []store.Device{{ID: "dev_legacy", Platform: contract.PlatformIOS, Model: "iPhone 17", OSVersion: "26.1",
			Driver: "demo", State: contract.DeviceReady, DriverDeviceID: "legacy-udid", Address: "legacy-udid",
			DriverData: []byte(`{"model":"iPhone 17","osVersion":"26.1"}`), CreatedAt: t0, StateSince: t0, LastUsedAt: t0}}})
		h := build(t, st, fixed(2), nil, nil, func(_ *harness, o *Options) {
			o.DefaultTTL = time.Hour
			o.Drivers[contract.PlatformIOS] = drv
			o.Health = HealthPolicy{Enabled: true, ProbeInterval: 10 * time.Second}
		})
		g := h.mustGrant(h.acquire("a", contract.LeaseRequestInput{Platform: contract.PlatformIOS, Model: "iPhone 17"}))
		if g.Device.ID != "dev_legacy" {
			t.Fatalf("granted %s, want the legacy device", g.Device.ID)
		}
		time.Sleep(time.Minute)
		synctest.Wait()
		if len(h.lost) != 0 {
			t.Errorf("lease ends = %v, want the legacy device's lease kept", h.lost)
		}
	})
}

// foreignKinds names Foreign's findings as "deviceId:kind:detail:fixed".
func foreignKinds(fs []Foreign) []string {
	var out []string
	for _, f := range fs {
		detail := string(f.Drift)
		if f.Kind == ForeignState {
			detail = string(f.Expected) + "/" + string(f.Observed)
		}
		fixed := ""
		if f.Fixed {
			fixed = ":fixed"
		}
		out = append(out, f.Device.ID+":"+f.Kind+":"+detail+fixed)
	}
	slices.Sort(out)
	return out
}

// TestForeignFindsDriftAndFixQuarantinesOnlyIdleDevices: an idle device
// erased outside simlock, running or shut down, and a leased one replaced
// are found; fix quarantines the idle ones, leaves the leased one, and the
// quarantine retries clean the erased ones back into service.
func TestForeignFindsDriftAndFixQuarantinesOnlyIdleDevices(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := start(t, newMemStore(), fixed(4))
		ctx := context.Background()
		shut := h.mustGrant(h.acquire("a", ios))
		ready := h.mustGrant(h.acquire("b", android))
		leased := h.mustGrant(h.acquire("c", ios))
		h.release("a", shut.Lease.ID)
		h.release("b", ready.Lease.ID)
		time.Sleep(reclaimTime + time.Second)
		synctest.Wait()
		if a, b := deviceState(h, shut.Device.ID), deviceState(h, ready.Device.ID); a != contract.DeviceShutdown || b != contract.DeviceReady {
			t.Fatalf("after their cleans: %s and %s, want shutdown (iOS) and ready (Android)", a, b)
		}
		if got, err := h.e.Maintenance().Foreign(ctx, false); err != nil || len(got) != 0 {
			t.Fatalf("Foreign with every device intact = %v, %v; want nothing", foreignKinds(got), err)
		}
		h.drivers[contract.PlatformIOS].Inject(shut.Device.DriverDeviceID, demo.FaultErase)
		h.drivers[contract.PlatformAndroid].Inject(ready.Device.DriverDeviceID, demo.FaultErase)
		h.drivers[contract.PlatformIOS].Inject(leased.Device.DriverDeviceID, demo.FaultReplace)

		found, err := h.e.Maintenance().Foreign(ctx, false)
		want := []string{shut.Device.ID + ":foreign-provenance:erased", ready.Device.ID + ":foreign-provenance:erased",
			leased.Device.ID + ":foreign-provenance:mark-mismatch"}
		slices.Sort(want)
		if err != nil || !slices.Equal(foreignKinds(found), want) {
			t.Fatalf("Foreign = %v, %v; want %v", foreignKinds(found), err, want)
		}
		if a, b := deviceState(h, shut.Device.ID), deviceState(h, ready.Device.ID); a != contract.DeviceShutdown || b != contract.DeviceReady {
			t.Errorf("without fix the devices changed: %s, %s", a, b)
		}
		if n := len(payloads(t, h.st, "device.foreign-provenance-detected")); n != 3 {
			t.Errorf("device.foreign-provenance-detected events = %d, want 3", n)
		}

		found, err = h.e.Maintenance().Foreign(ctx, true)
		for i := range want {
			if want[i] != leased.Device.ID+":foreign-provenance:mark-mismatch" {
				want[i] += ":fixed"
			}
		}
		if err != nil || !slices.Equal(foreignKinds(found), want) {
			t.Fatalf("Foreign with fix = %v, %v; want %v", foreignKinds(found), err, want)
		}
		for _, id := range []string{shut.Device.ID, ready.Device.ID} {
			if s := deviceState(h, id); s != contract.DeviceQuarantined {
				t.Errorf("%s after fix: %s, want quarantined", id, s)
			}
		}
		if s := deviceState(h, leased.Device.ID); s != contract.DeviceLeased {
			t.Errorf("the leased device after fix: %s, want still leased", s)
		}
		if l := h.e.Leases(Caller{Admin: true}); len(l) != 1 || l[0].ID != leased.Lease.ID {
			t.Errorf("leases after fix = %+v, want the leased device's kept", l)
		}
		q := payloads(t, h.st, "device.quarantined")
		if len(q) != 2 || q[0]["reason"] != ForeignProvenance || q[0]["detail"] != "erased" {
			t.Errorf("device.quarantined = %v, want two for foreign-provenance (erased)", q)
		}

		// The first quarantine retry (30 s) cleans them, which marks them
		// again.
		time.Sleep(30*time.Second + reclaimTime + time.Second)
		synctest.Wait()
		found, err = h.e.Maintenance().Foreign(ctx, false)
		if want := []string{leased.Device.ID + ":foreign-provenance:mark-mismatch"}; err != nil || !slices.Equal(foreignKinds(found), want) {
			t.Errorf("Foreign after the retries = %v, %v; want only %v", foreignKinds(found), err, want)
		}
		if a, b := deviceState(h, shut.Device.ID), deviceState(h, ready.Device.ID); a == contract.DeviceQuarantined || b == contract.DeviceQuarantined {
			t.Errorf("after the retries: %s, %s; want both cleaned out of quarantine", a, b)
		}
	})
}

// TestForeignStateChangeIsFoundAndQuarantined: a device simlock shut down
// that someone booted is found; fix quarantines it, and its retried clean
// stops it again.
func TestForeignStateChangeIsFoundAndQuarantined(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := start(t, newMemStore(), fixed(2))
		ctx := context.Background()
		g := h.mustGrant(h.acquire("a", ios))
		h.release("a", g.Lease.ID)
		time.Sleep(reclaimTime + time.Second)
		synctest.Wait()
		if _, err := h.drivers[contract.PlatformIOS].MakeReady(ctx, driver.Device{ID: g.Device.DriverDeviceID}); err != nil {
			t.Fatal(err)
		}
		want := []string{g.Device.ID + ":foreign-state-change:shutdown/running"}
		if found, err := h.e.Maintenance().Foreign(ctx, false); err != nil || !slices.Equal(foreignKinds(found), want) {
			t.Fatalf("Foreign = %v, %v; want %v", foreignKinds(found), err, want)
		}
		p := payloads(t, h.st, "device.foreign-state-detected")
		if len(p) != 1 || p[0]["expected"] != "shutdown" || p[0]["observed"] != "running" || p[0]["platform"] != "ios" {
			t.Errorf("device.foreign-state-detected = %v, want expected shutdown, observed running", p)
		}
		if found, err := h.e.Maintenance().Foreign(ctx, true); err != nil || len(found) != 1 || !found[0].Fixed {
			t.Fatalf("Foreign with fix = %v, %v; want it fixed", foreignKinds(found), err)
		}
		if s := deviceState(h, g.Device.ID); s != contract.DeviceQuarantined {
			t.Errorf("after fix: %s, want quarantined", s)
		}
		time.Sleep(30*time.Second + reclaimTime + time.Second)
		synctest.Wait()
		if s := deviceState(h, g.Device.ID); s != contract.DeviceShutdown {
			t.Errorf("after its retried clean: %s, want shutdown", s)
		}
		if found, err := h.e.Maintenance().Foreign(ctx, false); err != nil || len(found) != 0 {
			t.Errorf("Foreign after the clean = %v, %v; want nothing", foreignKinds(found), err)
		}
	})
}
