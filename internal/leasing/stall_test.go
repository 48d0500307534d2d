package leasing

import (
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/driver"
)

// optimist is a driver that expects everything to take a tenth of a
// second, whatever it really takes.
type optimist struct{ driver.Driver }

func (optimist) Estimate(driver.Operation, contract.DeviceSpec) time.Duration {
	return 100 * time.Millisecond
}

const stalledEvent = "device.stalled-transition-detected"

func TestASlowTransitionIsFlaggedStalledInStatusAndReportedOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// Provision (1 s) and boot (2 s) against an estimate of 0.1 s each:
		// 2 × 0.2 s is below the 0.5 s floor, so the device is stalled from
		// 0.5 s into its provisioning.
		h := build(t, newMemStore(), fixed(2), nil, nil, func(_ *harness, o *Options) {
			o.Drivers[contract.PlatformIOS] = optimist{o.Drivers[contract.PlatformIOS]}
			o.Stall = StallPolicy{Multiplier: 2, Minimum: 500 * time.Millisecond}
		})
		p := h.acquire("a", ios)
		time.Sleep(400 * time.Millisecond)
		synctest.Wait()
		devs := h.e.Snapshot(false).Devices
		if len(devs) != 1 || devs[0].State != contract.DeviceProvisioning {
			t.Fatalf("devices = %+v, want one provisioning", devs)
		}
		if devs[0].TransitionAgeMs != 400 || devs[0].Stalled {
			t.Errorf("at 0.4 s: transitionAgeMs %d stalled %v, want 400 and not stalled", devs[0].TransitionAgeMs, devs[0].Stalled)
		}
		if n := len(h.st.names(stalledEvent)); n != 0 {
			t.Errorf("%d %s before the threshold", n, stalledEvent)
		}

		time.Sleep(200 * time.Millisecond)
		synctest.Wait()
		if devs := h.e.Snapshot(false).Devices; !devs[0].Stalled || devs[0].TransitionAgeMs != 600 {
			t.Errorf("at 0.6 s: transitionAgeMs %d stalled %v, want 600 and stalled", devs[0].TransitionAgeMs, devs[0].Stalled)
		}
		if n := len(h.st.names(stalledEvent)); n != 1 {
			t.Errorf("%d %s past the threshold, want 1", n, stalledEvent)
		}
		// The provision is in flight, so doctor has nothing to fix.
		if s := h.e.Maintenance().Stalled(); len(s) != 0 {
			t.Errorf("doctor's stalled list = %+v, want none while work is in flight", s)
		}

		g := h.mustGrant(p)
		devs = h.e.Snapshot(false).Devices
		if devs[0].ID != g.Device.ID || devs[0].TransitionAgeMs != 0 || devs[0].Stalled {
			t.Errorf("leased device = %+v, want no transition fields", devs[0])
		}
		time.Sleep(time.Minute)
		if n := len(h.st.names(stalledEvent)); n != 1 {
			t.Errorf("%d %s in all, want 1: one per transition", n, stalledEvent)
		}
	})
}

func TestAnAgentsStatusShowsTheTransitionOfADeviceItDoesNotHold(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := build(t, newMemStore(), fixed(2), nil, nil, func(_ *harness, o *Options) {
			o.Stall = StallPolicy{Multiplier: 1, Minimum: 200 * time.Millisecond}
		})
		h.acquire("a", ios)
		time.Sleep(500 * time.Millisecond)
		synctest.Wait()
		b, _ := h.e.AppendLists(nil, Caller{Principal: "b"})
		// provision 1 s + boot 2 s is the estimate here: 0.5 s in, the
		// device is not stalled, and its age is the time now, not when the
		// device's view was last encoded.
		if want := `"state":"provisioning","createdAt":`; !strings.Contains(string(b), want) || !strings.Contains(string(b), `"transitionAgeMs":500`) || strings.Contains(string(b), `"stalled"`) {
			t.Errorf("agent's lists = %s, want a provisioning device aged 500 ms, not stalled", b)
		}
	})
}
