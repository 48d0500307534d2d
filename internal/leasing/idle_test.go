package leasing

import (
	"context"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/driver/demo"
)

// startIdle is start with the idle tiers on: shut down after 2 min unused,
// delete 4 min after.
func startIdle(t *testing.T, free int64) *harness {
	t.Helper()
	return build(t, newMemStore(), fixed(2), nil, nil, func(h *harness, o *Options) {
		o.DefaultTTL = time.Hour
		for p, d := range h.drivers {
			o.Drivers[p] = rooted{d}
		}
		o.Idle = IdlePolicy{Enabled: true, ShutdownAfter: 2 * time.Minute, DeleteAfter: 4 * time.Minute, PressureThreshold: 10 << 30,
			FreeBytes: func(string) (int64, error) { return free, nil }}
	})
}

// rooted gives a demo driver a device root, so the disk-pressure check has
// a volume to read.
type rooted struct{ *demo.Driver }

func (rooted) Root() string { return "/devices" }

func TestIdleDeviceIsShutDownThenDeletedButALeasedOneIsNot(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := startIdle(t, 100<<30)
		a := h.mustGrant(h.acquire("a", contract.LeaseRequestInput{Platform: contract.PlatformAndroid}))
		keep := h.mustGrant(h.acquire("b", contract.LeaseRequestInput{Platform: contract.PlatformAndroid}))
		h.release("a", a.Lease.ID) // Android reclaim leaves it ready
		time.Sleep(reclaimTime + 2*time.Minute + 31*time.Second)
		synctest.Wait()
		state := func(id string) contract.DeviceState {
			for _, d := range h.e.devices() {
				if d.ID == id {
					return d.State
				}
			}
			return contract.DeviceDeleted
		}
		if s := state(a.Device.ID); s != contract.DeviceShutdown {
			t.Fatalf("idle device after 2.5 min: %s, want shutdown", s)
		}
		time.Sleep(4*time.Minute + 31*time.Second)
		synctest.Wait()
		if s := state(a.Device.ID); s != contract.DeviceDeleted {
			t.Fatalf("idle device after the delete tier: %s, want deleted", s)
		}
		if s := state(keep.Device.ID); s != contract.DeviceLeased {
			t.Errorf("the leased device is %s", s)
		}
		want := []string{"device.shutdown", "cleanup.executed", "device.deleted", "cleanup.executed"}
		if got := slices.Compact(h.st.names(want...)); !slices.Equal(got, want) {
			t.Errorf("events = %v, want %v", got, want)
		}
	})
}

func TestDiskPressureDeletesAtTheShutdownAge(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := startIdle(t, 1<<30)
		g := h.mustGrant(h.acquire("a", ios))
		h.release("a", g.Lease.ID) // iOS reclaim leaves it shut down
		time.Sleep(reclaimTime + 2*time.Minute + 31*time.Second)
		synctest.Wait()
		if d := h.e.devices(); len(d) != 0 {
			t.Fatalf("devices under disk pressure = %+v, want the idle one deleted at 2 min", d)
		}
		if !h.e.Maintenance().Rules().DiskPressure {
			t.Error("rules do not report the pressure")
		}
	})
}

func TestCleanupDryRunChangesNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := startIdle(t, 100<<30)
		g := h.mustGrant(h.acquire("a", ios))
		h.release("a", g.Lease.ID)
		time.Sleep(reclaimTime)
		synctest.Wait()
		h.e.Close() // stop the loop; run the rules by hand below
		res := h.e.Maintenance().Cleanup(context.Background(), contract.CleanupRunInput{DryRun: true}, "command")
		if len(res.Actions) != 0 {
			t.Errorf("a fresh device was proposed: %+v", res.Actions)
		}
	})
}
