package leasing

import (
	"context"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/driver"
	"github.com/simlock/simlock/internal/driver/demo"
)

type notice struct {
	lease, what string
	attempts    int
}

// startHealth is start with the health monitor on: probes every 10 s, two
// stopped readings a crash, 5 s backoff, three tries.
func startHealth(t *testing.T) (*harness, func() []notice) {
	t.Helper()
	var mu sync.Mutex
	var notices []notice
	h := build(t, newMemStore(), fixed(2), nil, nil, func(_ *harness, o *Options) {
		o.DefaultTTL = time.Hour
		o.Health = HealthPolicy{Enabled: true, ProbeInterval: 10 * time.Second, StableObservations: 2, MaxAttempts: 3, Backoff: 5 * time.Second, MaxConcurrent: 1}
		o.DeviceHealth = func(l contract.LeaseRecord, what string, attempts int) {
			mu.Lock()
			defer mu.Unlock()
			notices = append(notices, notice{l.ID, what, attempts})
		}
	})
	return h, func() []notice {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(notices)
	}
}

func TestCrashedDeviceIsRebootedUnderTheSameLease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h, notices := startHealth(t)
		g := h.mustGrant(h.acquire("a", ios))
		if err := h.drivers[contract.PlatformIOS].Inject(g.Device.DriverDeviceID, demo.FaultCrash); err != nil {
			t.Fatal(err)
		}
		// Two probes (10 s apart) see it stopped; then 5 s backoff and a
		// 2 s boot.
		time.Sleep(20*time.Second + 5*time.Second + bootTime + time.Second)
		synctest.Wait()
		want := []notice{{g.Lease.ID, NoticeUnhealthy, 0}, {g.Lease.ID, NoticeRecovered, 1}}
		if got := notices(); !slices.Equal(got, want) {
			t.Fatalf("notices = %+v, want %+v", got, want)
		}
		if l := h.e.Leases(Caller{Admin: true}); len(l) != 1 || l[0].ID != g.Lease.ID {
			t.Errorf("leases after recovery = %+v, want the same lease kept", l)
		}
		ev := []string{"device.crash-detected", "device.recovered"}
		if got := h.st.names(ev...); !slices.Equal(got, ev) {
			t.Errorf("events = %v, want %v", got, ev)
		}
		// A single stopped reading is not a crash.
		h.drivers[contract.PlatformIOS].Inject(g.Device.DriverDeviceID, demo.FaultCrash)
		time.Sleep(10 * time.Second)
		synctest.Wait()
		if n := len(notices()); n != 2 {
			t.Errorf("one reading counted as a crash: %+v", notices())
		}
	})
}

func TestDeviceThatWillNotBootEndsTheLeaseAsDeviceLost(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h, notices := startHealth(t)
		g := h.mustGrant(h.acquire("a", ios))
		d := h.drivers[contract.PlatformIOS]
		d.Inject(g.Device.DriverDeviceID, demo.FaultCrash)
		for n := 1; n <= 3; n++ {
			d.FailOn("boot", n) // each of the three tries
		}
		time.Sleep(20*time.Second + (5+10+20)*time.Second + 3*bootTime + time.Second)
		synctest.Wait()
		if got := h.lost; len(got) != 1 || got[0] != g.Lease.ID+":device-lost" {
			t.Fatalf("lease ends = %v, want %s:device-lost", got, g.Lease.ID)
		}
		if got := notices(); len(got) != 1 || got[0].what != NoticeUnhealthy {
			t.Errorf("notices = %+v, want only unhealthy", got)
		}
		ev := []string{"device.crash-detected", "device.recovery-failed", "lease.released"}
		if got := h.st.names(ev...); !slices.Equal(got, ev) {
			t.Errorf("events = %v, want %v", got, ev)
		}
	})
}

func TestVanishedDeviceEndsTheLeaseAsDeviceLost(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h, _ := startHealth(t)
		g := h.mustGrant(h.acquire("a", ios))
		other := h.mustGrant(h.acquire("b", contract.LeaseRequestInput{Platform: contract.PlatformAndroid}))
		h.drivers[contract.PlatformIOS].Inject(g.Device.DriverDeviceID, demo.FaultVanish)
		time.Sleep(21 * time.Second)
		synctest.Wait()
		if got := h.lost; len(got) != 1 || got[0] != g.Lease.ID+":device-lost" {
			t.Fatalf("lease ends = %v, want %s:device-lost", got, g.Lease.ID)
		}
		if l := h.e.Leases(Caller{Admin: true}); len(l) != 1 || l[0].ID != other.Lease.ID {
			t.Errorf("the healthy lease did not survive: %+v", l)
		}
	})
}

func TestReleasingDuringARecoveryStopsIt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h, notices := startHealth(t)
		g := h.mustGrant(h.acquire("a", ios))
		h.drivers[contract.PlatformIOS].Inject(g.Device.DriverDeviceID, demo.FaultCrash)
		time.Sleep(21 * time.Second) // crash detected, recovery backing off
		synctest.Wait()
		h.release("a", g.Lease.ID)
		time.Sleep(time.Minute)
		synctest.Wait()
		for _, n := range notices() {
			if n.what == NoticeRecovered {
				t.Errorf("a released lease was recovered: %+v", notices())
			}
		}
		if got := h.st.names("device.recovered"); len(got) != 0 {
			t.Errorf("events = %v", got)
		}
	})
}

// bootWatcher records how each boot was asked for and how it ended.
type bootWatcher struct {
	*demo.Driver
	mu    sync.Mutex
	ended []error
	kinds []string // "ready" or "recover", in order
}

func (b *bootWatcher) MakeReady(ctx context.Context, dev driver.Device) (driver.Device, error) {
	d, err := b.Driver.MakeReady(ctx, dev)
	b.record("ready", ctx)
	return d, err
}

func (b *bootWatcher) Recover(ctx context.Context, dev driver.Device) (driver.Device, error) {
	d, err := b.Driver.Recover(ctx, dev)
	b.record("recover", ctx)
	return d, err
}

func (b *bootWatcher) record(kind string, ctx context.Context) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.ended = append(b.ended, ctx.Err())
	b.kinds = append(b.kinds, kind)
}

func TestReleasingDuringARebootCancelsTheBoot(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var watch *bootWatcher
		started := time.Now()
		h := build(t, newMemStore(), fixed(2), nil, nil, func(h *harness, o *Options) {
			o.DefaultTTL = time.Hour
			o.Health = HealthPolicy{Enabled: true, ProbeInterval: 10 * time.Second, StableObservations: 2, MaxAttempts: 3, Backoff: 5 * time.Second, MaxConcurrent: 1}
			watch = &bootWatcher{Driver: h.drivers[contract.PlatformIOS]}
			o.Drivers[contract.PlatformIOS] = watch
		})
		g := h.mustGrant(h.acquire("a", ios))
		h.drivers[contract.PlatformIOS].Inject(g.Device.DriverDeviceID, demo.FaultCrash)
		// Probes at 10 s and 20 s see it stopped; the first boot starts
		// after the 5 s backoff and takes 2 s: release half way through it.
		time.Sleep(time.Until(started.Add(20*time.Second + 5*time.Second + bootTime/2)))
		synctest.Wait()
		h.release("a", g.Lease.ID)
		time.Sleep(time.Minute)
		synctest.Wait()
		watch.mu.Lock()
		defer watch.mu.Unlock()
		// The grant's boot, then the recovery's, cut short by the release so
		// it does not race the clean.
		if len(watch.ended) != 2 || watch.ended[1] == nil {
			t.Errorf("boots ended with %v, want the recovery's cancelled", watch.ended)
		}
		// The recovery boots the device as it is (Recover), keeping the
		// holder's work; only the grant's boot may restore a clean state.
		if !slices.Equal(watch.kinds, []string{"ready", "recover"}) {
			t.Errorf("boots asked for %v, want the grant's MakeReady, then Recover", watch.kinds)
		}
		if s := deviceState(h, g.Device.ID); s != contract.DeviceShutdown {
			t.Errorf("device after the release = %s, want cleaned (shutdown)", s)
		}
	})
}
