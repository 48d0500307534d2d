package leasing

import (
	"context"
	"encoding/json"
	"slices"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/core"
	"github.com/simlock/simlock/internal/driver"
	"github.com/simlock/simlock/internal/driver/demo"
)

// bootCounter counts the boots asked of a demo driver.
type bootCounter struct {
	*demo.Driver
	n *atomic.Int32
}

func (b bootCounter) MakeReady(ctx context.Context, dev driver.Device) (driver.Device, error) {
	b.n.Add(1)
	return b.Driver.MakeReady(ctx, dev)
}

// withRewarm is a configure for build: the warm pool on with no targets,
// re-warming as on says, its tick a minute (so a pass right after a clean
// is the kick's), and the iOS driver's boots counted in boots.
func withRewarm(on bool, boots *atomic.Int32, also func(o *Options)) func(h *harness, o *Options) {
	return func(h *harness, o *Options) {
		o.DefaultTTL = time.Hour
		o.WarmPool = &WarmPoolPolicy{Enabled: true, RewarmReleased: on, MaxConcurrentBoots: 2, Interval: time.Minute}
		o.Drivers[contract.PlatformIOS] = bootCounter{h.drivers[contract.PlatformIOS], boots}
		if also != nil {
			also(o)
		}
	}
}

func startRewarm(t *testing.T, limits core.Limits, on bool) (*harness, *atomic.Int32) {
	t.Helper()
	boots := &atomic.Int32{}
	return build(t, newMemStore(), limits, nil, nil, withRewarm(on, boots, nil)), boots
}

// readyBy lists the devices of the device.ready events with initiator, in
// order.
func readyBy(t *testing.T, h *harness, initiator string) []string {
	t.Helper()
	h.st.mu.Lock()
	defer h.st.mu.Unlock()
	var out []string
	for _, ev := range h.st.storedEvents() {
		if ev.Event != "device.ready" {
			continue
		}
		var p struct {
			DeviceID  string `json:"deviceId"`
			Initiator string `json:"initiator"`
		}
		if err := json.Unmarshal(ev.Payload, &p); err != nil {
			t.Fatal(err)
		}
		if p.Initiator == initiator {
			out = append(out, p.DeviceID)
		}
	}
	return out
}

func TestAReleasedIOSDeviceIsBootedAgainAndLeasedWarm(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h, boots := startRewarm(t, fixed(2), true)
		a := h.mustGrant(h.acquire("a", ios))
		h.release("a", a.Lease.ID)
		time.Sleep(reclaimTime) // the erase leaves it shut down
		synctest.Wait()
		if st := h.e.Maintenance().WarmPoolStatus(); !st.RewarmReleased || st.Rewarming != 1 {
			t.Fatalf("as the clean ends, warm pool = %+v, want the device re-warming at once", st)
		}
		time.Sleep(bootTime)
		synctest.Wait()
		if got := readyBy(t, h, "rewarm"); !slices.Equal(got, []string{a.Device.ID}) {
			t.Fatalf("re-warmed devices = %v, want %s", got, a.Device.ID)
		}
		booted := boots.Load()
		t0 := time.Now()
		p := h.acquire("b", ios)
		g := h.mustGrant(p)
		if g.Source != contract.SourceWarm || g.Device.ID != a.Device.ID {
			t.Errorf("next lease got %s with source %s, want %s warm", g.Device.ID, g.Source, a.Device.ID)
		}
		if took := time.Since(t0); took != 0 {
			t.Errorf("next lease took %s, want it at once", took)
		}
		if n := boots.Load() - booted; n != 0 {
			t.Errorf("%d boots on the grant path, want none", n)
		}
		for _, s := range p.stages() {
			if s.Stage == contract.StageBooting {
				t.Errorf("the warm lease was told %+v", s)
			}
		}
	})
}

func TestWithRewarmOffAReleasedIOSDeviceStaysShutDown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h, _ := startRewarm(t, fixed(2), false)
		a := h.mustGrant(h.acquire("a", ios))
		h.release("a", a.Lease.ID)
		time.Sleep(reclaimTime + 3*time.Minute) // the clean's kick and three ticks
		synctest.Wait()
		if s := deviceState(h, a.Device.ID); s != contract.DeviceShutdown {
			t.Fatalf("released device is %s, want shutdown", s)
		}
		if got := readyBy(t, h, "rewarm"); len(got) != 0 {
			t.Errorf("re-warmed %v with the switch off", got)
		}
		t0 := time.Now()
		g := h.mustGrant(h.acquire("b", ios))
		if g.Source != contract.SourceBooted || time.Since(t0) != bootTime {
			t.Errorf("next lease: source %s after %s, want booted after %s", g.Source, time.Since(t0), bootTime)
		}
		if st := h.e.Maintenance().WarmPoolStatus(); st.RewarmReleased {
			t.Errorf("status says re-warming is on: %+v", st)
		}
	})
}

func TestOnlyADeviceUsedWithinTheIdleShutdownAgeIsRewarmed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := newMemStore()
		boots := &atomic.Int32{}
		h := build(t, st, fixed(2), nil, nil, withRewarm(false, boots, nil))
		old := h.mustGrant(h.acquire("a", ios))
		recent := h.mustGrant(h.acquire("b", ios))
		h.release("a", old.Lease.ID)
		time.Sleep(reclaimTime + 9*time.Minute)
		h.release("b", recent.Lease.ID)
		time.Sleep(reclaimTime + 2*time.Minute)
		synctest.Wait()
		// Last used 11 and 2 minutes ago; idle.shutdownAfterMs is 10.
		crashAll(h)
		h2 := build(t, st, fixed(2), h, nil, withRewarm(true, boots, nil))
		time.Sleep(time.Minute + bootTime) // the first tick, then a boot
		synctest.Wait()
		if got := readyBy(t, h2, "rewarm"); !slices.Equal(got, []string{recent.Device.ID}) {
			t.Errorf("re-warmed %v, want only %s, used 2 min ago", got, recent.Device.ID)
		}
		if s := deviceState(h2, old.Device.ID); s != contract.DeviceShutdown {
			t.Errorf("the device used 11 min ago is %s, want shutdown", s)
		}
	})
}

func TestARewarmedDeviceNobodyLeasesStopsAtTheIdleAgeOfItsLastUse(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const shutdownAfter = 20 * time.Second // the idle rules look every 5 s
		const slowBoot = 8 * time.Second       // longer than a look, so counting from the boot would be seen
		boots := &atomic.Int32{}
		h := build(t, newMemStore(), fixed(2), nil, func(o *demo.Options) { o.BootTime = slowBoot },
			withRewarm(true, boots, func(o *Options) { o.Idle = IdlePolicy{Enabled: true, ShutdownAfter: shutdownAfter} }))
		a := h.mustGrant(h.acquire("a", ios))
		h.release("a", a.Lease.ID)
		time.Sleep(reclaimTime)
		lastUse := time.Now()
		time.Sleep(slowBoot)
		synctest.Wait()
		if got := readyBy(t, h, "rewarm"); !slices.Equal(got, []string{a.Device.ID}) {
			t.Fatalf("re-warmed devices = %v, want %s", got, a.Device.ID)
		}
		time.Sleep(time.Until(lastUse.Add(shutdownAfter - time.Second)))
		synctest.Wait()
		if s := deviceState(h, a.Device.ID); s != contract.DeviceReady {
			t.Fatalf("just short of the idle age, the re-warmed device is %s, want ready", s)
		}
		// The first look after the age, not the age after the boot.
		time.Sleep(time.Until(lastUse.Add(shutdownAfter + 5*time.Second)))
		synctest.Wait()
		if s := deviceState(h, a.Device.ID); s != contract.DeviceShutdown {
			t.Fatalf("%s after its last use, the re-warmed device is %s, want shutdown", shutdownAfter+5*time.Second, s)
		}
		time.Sleep(2 * time.Minute)
		synctest.Wait()
		if got := readyBy(t, h, "rewarm"); len(got) != 1 {
			t.Errorf("re-warmed again after the idle rule stopped it: %v", got)
		}
	})
}

func TestAWaitingRequestGetsTheSlotAndNoRewarmStarts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h, _ := startRewarm(t, fixed(1), true)
		a := h.mustGrant(h.acquire("a", ios))
		b := h.acquire("b", ios)
		synctest.Wait()
		h.release("a", a.Lease.ID)
		t0 := time.Now()
		g := h.mustGrant(b)
		if g.Device.ID != a.Device.ID || g.Source != contract.SourceBooted || time.Since(t0) != reclaimTime+bootTime {
			t.Errorf("the waiter got %s (%s) after %s, want %s booted for it after %s",
				g.Device.ID, g.Source, time.Since(t0), a.Device.ID, reclaimTime+bootTime)
		}
		time.Sleep(2 * time.Minute)
		synctest.Wait()
		if got := readyBy(t, h, "rewarm"); len(got) != 0 {
			t.Errorf("re-warmed %v while a request waited for the device", got)
		}
	})
}

// rewarming releases a's device and returns once the clean is done and its
// re-warm boot has run for half a second.
func rewarming(t *testing.T, h *harness) contract.LeaseGrant {
	t.Helper()
	a := h.mustGrant(h.acquire("a", contract.LeaseRequestInput{Platform: contract.PlatformIOS, Model: "iPhone 17"}))
	h.release("a", a.Lease.ID)
	time.Sleep(reclaimTime + 500*time.Millisecond)
	synctest.Wait()
	if n := h.e.Maintenance().WarmPoolStatus().Rewarming; n != 1 {
		t.Fatalf("%d re-warm boots half a second after the clean, want 1", n)
	}
	return a
}

func TestARequestTheRewarmingDeviceFitsTakesTheBootOver(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h, boots := startRewarm(t, fixed(1), true)
		a := rewarming(t, h)
		t0 := time.Now()
		p := h.acquire("b", contract.LeaseRequestInput{Platform: contract.PlatformIOS, Model: "iPhone 17"})
		g := h.mustGrant(p)
		left := bootTime - 500*time.Millisecond
		if g.Device.ID != a.Device.ID || time.Since(t0) != left {
			t.Errorf("b got %s after %s, want the re-warming %s when its boot ends, after %s", g.Device.ID, time.Since(t0), a.Device.ID, left)
		}
		if g.Source != contract.SourceBooted {
			t.Errorf("b's source = %s, want booted (it waited for the boot)", g.Source)
		}
		if want := []contract.LeaseProgress{{Stage: contract.StageBooting, EtaMs: left.Milliseconds()}}; !slices.Equal(p.stages(), want) {
			t.Errorf("b was told %+v, want %+v", p.stages(), want)
		}
		if n := boots.Load(); n != 2 {
			t.Errorf("%d boots, want 2: a's and the re-warm b took over", n)
		}
	})
}

func TestARequestThatNeedsTheRewarmSlotTakesItAtOnce(t *testing.T) {
	for _, c := range []struct {
		name   string
		limits core.Limits
		// cost is what making room costs b: nothing to shut down a device
		// whose boot was cut short; deleting one takes the demo's
		// ReclaimTime/4.
		cost time.Duration
		gone contract.DeviceState
	}{
		{"running slot", func() core.Limits {
			l := fixed(1)
			l.Platforms[contract.PlatformIOS] = core.PlatformLimits{MaxRunning: 1, MaxDevices: 2}
			return l
		}(), 0, contract.DeviceShutdown},
		{"device limit", fixed(1), reclaimTime / 4, contract.DeviceDeleted},
	} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				h, _ := startRewarm(t, c.limits, true)
				a := rewarming(t, h)
				t0 := time.Now()
				g := h.mustGrant(h.acquire("b", contract.LeaseRequestInput{Platform: contract.PlatformIOS, Model: "iPhone 16"}))
				if want := c.cost + provisionTime + bootTime; time.Since(t0) != want {
					t.Errorf("b waited %s, want %s: the re-warm gives way at once", time.Since(t0), want)
				}
				if g.Device.Spec.Model != "iPhone 16" || g.Source != contract.SourceProvisioned {
					t.Errorf("b got %+v (%s)", g.Device.Spec, g.Source)
				}
				if s := deviceState(h, a.Device.ID); s != c.gone {
					t.Errorf("the re-warming device is %s, want %s", s, c.gone)
				}
				if got := readyBy(t, h, "rewarm"); len(got) != 0 {
					t.Errorf("the cancelled re-warm still made %v ready", got)
				}
			})
		})
	}
}

func TestStatusCountsGrantsBySource(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h, _ := startRewarm(t, fixed(2), false)
		and := contract.LeaseRequestInput{Platform: contract.PlatformAndroid}
		a := h.mustGrant(h.acquire("a", ios)) // provisioned
		h.release("a", a.Lease.ID)
		c := h.mustGrant(h.acquire("c", and)) // provisioned
		h.release("c", c.Lease.ID)
		time.Sleep(reclaimTime)
		synctest.Wait()
		h.mustGrant(h.acquire("b", ios)) // booted: the erase shut it down
		h.mustGrant(h.acquire("d", and)) // warm: Android's clean leaves it running
		st := h.e.Maintenance().WarmPoolStatus()
		if want := (contract.GrantCounts{Warm: 1, Booted: 1, Provisioned: 2, WarmRate: 0.25}); st.Grants != want {
			t.Errorf("grants = %+v, want %+v", st.Grants, want)
		}
		want := map[contract.Platform]contract.GrantCounts{
			contract.PlatformIOS:     {Booted: 1, Provisioned: 1},
			contract.PlatformAndroid: {Warm: 1, Provisioned: 1, WarmRate: 0.5},
		}
		for p, w := range want {
			if got := st.GrantsByPlatform[p]; got != w {
				t.Errorf("%s grants = %+v, want %+v", p, got, w)
			}
		}
	})
}

func TestAFailedRewarmIsNotTriedAgainUntilTheDeviceIsUsed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h, boots := startRewarm(t, fixed(2), true)
		a := h.mustGrant(h.acquire("a", ios))
		if err := h.drivers[contract.PlatformIOS].Inject(a.Device.DriverDeviceID, demo.FaultBootFail); err != nil {
			t.Fatal(err)
		}
		h.release("a", a.Lease.ID)
		time.Sleep(reclaimTime + 3*time.Minute) // the clean's kick and three ticks
		synctest.Wait()
		if n := boots.Load(); n != 2 {
			t.Errorf("%d boots, want 2: the lease's and one re-warm that failed", n)
		}
		if s := deviceState(h, a.Device.ID); s != contract.DeviceShutdown {
			t.Errorf("after a failed re-warm the device is %s, want shutdown", s)
		}
		if g := h.mustGrant(h.acquire("b", ios)); g.Device.ID != a.Device.ID || g.Source != contract.SourceBooted {
			t.Errorf("next lease got %s (%s), want %s booted", g.Device.ID, g.Source, a.Device.ID)
		}
	})
}
