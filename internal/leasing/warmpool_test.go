package leasing

import (
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/simlock/simlock/internal/contract"
)

func startWarm(t *testing.T, limits int, wp WarmPoolPolicy) *harness {
	t.Helper()
	return build(t, newMemStore(), fixed(limits), nil, nil, func(_ *harness, o *Options) {
		o.DefaultTTL = time.Hour
		o.WarmPool = &wp
	})
}

func readyCount(h *harness) int {
	n := 0
	for _, d := range h.e.devices() {
		if d.State == contract.DeviceReady && d.LeaseID == "" {
			n++
		}
	}
	return n
}

func TestWarmPoolKeepsItsTargetAndRefillsAfterALease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		target := contract.WarmTarget{Platform: contract.PlatformIOS, Model: "iphone 17", Count: 2}
		h := startWarm(t, 4, WarmPoolPolicy{Enabled: true, MaxConcurrentBoots: 1, Targets: []contract.WarmTarget{target}, Interval: time.Second})
		time.Sleep(time.Minute)
		synctest.Wait()
		if n := readyCount(h); n != 2 {
			t.Fatalf("ready idle devices = %d, want the target's 2", n)
		}
		st := h.e.Maintenance().WarmPoolStatus()
		if len(st.Targets) != 1 || st.Targets[0].Ready != 2 || st.Targets[0].Short != 0 {
			t.Errorf("status = %+v", st)
		}
		g := h.mustGrant(h.acquire("a", contract.LeaseRequestInput{Platform: contract.PlatformIOS, Model: "iPhone 17"}))
		if g.Source != contract.SourceWarm {
			t.Errorf("lease source = %s, want warm", g.Source)
		}
		time.Sleep(time.Minute)
		synctest.Wait()
		if n := readyCount(h); n != 2 {
			t.Errorf("after a lease took one, ready idle devices = %d, want 2 again", n)
		}
	})
}

func TestWarmPoolMissesWhatItCannotHaveAndSaysWhy(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		targets := []contract.WarmTarget{
			{Platform: contract.PlatformIOS, Model: "iPhone 17", Count: 3},
			{Platform: contract.PlatformIOS, Model: "No Such Phone", Count: 1},
		}
		h := startWarm(t, 2, WarmPoolPolicy{Enabled: true, MaxConcurrentBoots: 2, Targets: targets, Interval: time.Second})
		time.Sleep(time.Minute)
		synctest.Wait()
		st := h.e.Maintenance().WarmPoolStatus()
		if st.Targets[0].Ready != 2 || st.Targets[0].Short != 1 || st.Targets[0].Reason != "running-limit" {
			t.Errorf("capped target = %+v, want 2 ready, 1 short for running-limit", st.Targets[0])
		}
		if st.Targets[1].Short != 1 || st.Targets[1].Reason == "" {
			t.Errorf("unknown model target = %+v, want short with a reason", st.Targets[1])
		}
		if got := h.st.names("warm-pool.target-missed"); len(got) == 0 {
			t.Error("no warm-pool.target-missed event")
		}
	})
}

func TestWarmPoolNeverStartsWhileARequestWaits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		target := contract.WarmTarget{Platform: contract.PlatformIOS, Model: "iPhone 16", Count: 1}
		h := startWarm(t, 1, WarmPoolPolicy{Enabled: true, Targets: []contract.WarmTarget{target}, Interval: time.Second})
		a := h.mustGrant(h.acquire("a", contract.LeaseRequestInput{Platform: contract.PlatformIOS, Model: "iPhone 17"}))
		b := h.acquire("b", contract.LeaseRequestInput{Platform: contract.PlatformIOS, Model: "iPhone 17"})
		time.Sleep(10 * time.Second)
		synctest.Wait()
		h.release("a", a.Lease.ID)
		g := h.mustGrant(b)
		if g.Device.Spec.Model != "iPhone 17" {
			t.Errorf("the waiter got %+v", g.Device.Spec)
		}
		provisioned := h.st.names("device.provisioned")
		if !slices.Equal(provisioned, []string{"device.provisioned"}) {
			t.Errorf("devices created = %d, want only the first lease's (the pool waits behind requests)", len(provisioned))
		}
	})
}

func TestDisabledWarmPoolShutsIdleDevicesDown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := startWarm(t, 2, WarmPoolPolicy{Enabled: false, Interval: time.Second})
		g := h.mustGrant(h.acquire("a", contract.LeaseRequestInput{Platform: contract.PlatformAndroid}))
		h.release("a", g.Lease.ID) // Android cleans leave it ready
		time.Sleep(reclaimTime + 2*time.Second)
		synctest.Wait()
		if n := readyCount(h); n != 0 {
			t.Errorf("ready idle devices with the pool off = %d, want 0", n)
		}
	})
}

func TestASlimWarmPoolTargetKeepsSlimDevicesThatOnlySlimRequestsTake(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		target := contract.WarmTarget{Platform: contract.PlatformIOS, Model: "iPhone 17", Mode: contract.DeviceModeSlim, Count: 1}
		h := startWarm(t, 4, WarmPoolPolicy{Enabled: true, MaxConcurrentBoots: 1, Targets: []contract.WarmTarget{target}, Interval: time.Second})
		time.Sleep(time.Minute)
		synctest.Wait()
		var warm []contract.Device
		for _, d := range h.e.devices() {
			if d.State == contract.DeviceReady && d.LeaseID == "" {
				warm = append(warm, d)
			}
		}
		if len(warm) != 1 || warm[0].Spec.Mode != contract.DeviceModeSlim || !warm[0].Slimmed {
			t.Fatalf("warm devices = %+v, want one slim device, slimmed", warm)
		}
		if st := h.e.Maintenance().WarmPoolStatus(); st.Targets[0].Ready != 1 {
			t.Errorf("target status = %+v, want its slim device counted ready", st.Targets[0])
		}
		full := h.mustGrant(h.acquire("a", contract.LeaseRequestInput{Platform: contract.PlatformIOS, Model: "iPhone 17", Mode: contract.DeviceModeFull}))
		if full.Device.ID == warm[0].ID || full.Source == contract.SourceWarm || full.Device.Mode != contract.DeviceModeFull {
			t.Errorf("a full request got %s from %s in mode %s, want a new full device, not the slim one", full.Device.ID, full.Source, full.Device.Mode)
		}
		slim := h.mustGrant(h.acquire("b", contract.LeaseRequestInput{Platform: contract.PlatformIOS, Model: "iPhone 17", Mode: contract.DeviceModeSlim}))
		if slim.Device.ID != warm[0].ID || slim.Source != contract.SourceWarm || slim.Device.Mode != contract.DeviceModeSlim {
			t.Errorf("a slim request got %s from %s in mode %s, want the warm slim device", slim.Device.ID, slim.Source, slim.Device.Mode)
		}
	})
}
