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
	for _, d := range h.e.Devices() {
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
		st := h.e.WarmPoolStatus()
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
		st := h.e.WarmPoolStatus()
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
