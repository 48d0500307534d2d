package leasing

import (
	"context"
	"errors"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/driver"
	"github.com/simlock/simlock/internal/driver/demo"
)

// crashAll stops the engine like a killed daemon: nothing more is written.
func crashAll(h *harness) {
	h.e.Close()
	h.e.wait()
}

func deviceState(h *harness, id string) contract.DeviceState {
	for _, d := range h.e.devices() {
		if d.ID == id {
			return d.State
		}
	}
	return contract.DeviceDeleted
}

func TestStartupEndsLeasesWhoseDeviceStoppedOrVanishedAndKeepsTheRest(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := newMemStore()
		h := start(t, st, fixed(4))
		running := h.mustGrant(h.acquire("a", ios))
		stopped := h.mustGrant(h.acquire("b", ios))
		gone := h.mustGrant(h.acquire("c", contract.LeaseRequestInput{Platform: contract.PlatformAndroid}))
		crashAll(h)
		// While the daemon is down one device stops and one disappears.
		h.drivers[contract.PlatformIOS].Inject(stopped.Device.DriverDeviceID, demo.FaultCrash)
		h.drivers[contract.PlatformAndroid].Inject(gone.Device.DriverDeviceID, demo.FaultVanish)

		h2 := restart(t, st, fixed(4), h)
		leases := h2.e.Leases(Caller{Admin: true})
		if len(leases) != 1 || leases[0].ID != running.Lease.ID {
			t.Fatalf("leases after the restart = %+v, want only %s", leases, running.Lease.ID)
		}
		ends := st.names("lease.released")
		if len(ends) != 2 {
			t.Errorf("lease.released events = %v, want the two lost leases", ends)
		}
		time.Sleep(reclaimTime + time.Second)
		synctest.Wait()
		if s := deviceState(h2, stopped.Device.ID); s != contract.DeviceShutdown {
			t.Errorf("the stopped device is %s, want cleaned (shutdown)", s)
		}
		if s := deviceState(h2, gone.Device.ID); s != contract.DeviceDeleted {
			t.Errorf("the vanished device is %s, want deleted", s)
		}
		for _, d := range h2.e.devices() {
			if d.State == contract.DeviceReclaiming {
				t.Errorf("device %s stuck reclaiming", d.ID)
			}
		}
	})
}

// unreadable fails ListManaged for its platform, as a broken toolchain
// would.
type unreadable struct{ *demo.Driver }

func (unreadable) ListManaged(context.Context) (driver.Reality, error) {
	return driver.Reality{}, errors.New("simctl: unable to read the device set")
}

func TestUnreadablePlatformEndsLeasesAndLeavesDevicesForALaterStart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := newMemStore()
		h := start(t, st, fixed(2))
		g := h.mustGrant(h.acquire("a", ios))
		crashAll(h)

		drivers := map[contract.Platform]driver.Driver{
			contract.PlatformIOS:     unreadable{h.drivers[contract.PlatformIOS]},
			contract.PlatformAndroid: h.drivers[contract.PlatformAndroid],
		}
		e := New(Options{Store: st, Drivers: drivers, Limits: fixed(2), DefaultTTL: time.Minute, MaxTTL: time.Hour})
		if err := e.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		if l := e.Leases(Caller{Admin: true}); len(l) != 0 {
			t.Errorf("a lease on an unreadable platform survived: %+v", l)
		}
		time.Sleep(time.Minute)
		synctest.Wait()
		devs := e.devices()
		if len(devs) != 1 || devs[0].State != contract.DeviceReclaiming {
			t.Fatalf("devices = %+v, want the device left reclaiming", devs)
		}
		if !st.device(g.Device.ID).DeferredReclaim {
			t.Error("the device was not marked for a full clean")
		}
		e.Close()
		e.wait()

		// A start that can read the platform cleans it.
		h3 := restart(t, st, fixed(2), h)
		time.Sleep(reclaimTime + time.Second)
		synctest.Wait()
		if s := deviceState(h3, g.Device.ID); s != contract.DeviceShutdown {
			t.Errorf("after a readable start the device is %s, want cleaned", s)
		}
		if want := []string{"device.reclaimed"}; !slices.Equal(st.names("device.reclaimed"), want) {
			t.Errorf("device.reclaimed events = %v", st.names("device.reclaimed"))
		}
	})
}
