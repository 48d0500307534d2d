package leasing

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/queue"
)

func TestStalledTransitionIsFoundAndQuarantined(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := start(t, newMemStore(), fixed(2))
		g := h.mustGrant(h.acquire("a", ios))
		// A clean nobody runs: the device is reclaiming with no claim, as
		// if its work was lost.
		_ = h.e.do(func(tx *queue.Txn) error {
			d, _ := h.e.reg.get(g.Device.ID)
			h.e.setState(tx, d, contract.DeviceReclaiming)
			l := h.e.leases[g.Lease.ID].Lease
			l.EndedAt = time.Now().UnixMilli()
			h.e.putLease(tx, l)
			return nil
		})
		if s := h.e.Maintenance().Stalled(); len(s) != 0 {
			t.Fatalf("stalled at once: %+v", s)
		}
		time.Sleep(max(3*reclaimTime, time.Minute) + time.Second)
		s := h.e.Maintenance().Stalled()
		if len(s) != 1 || s[0].ID != g.Device.ID {
			t.Fatalf("stalled = %+v, want the device", s)
		}
		if err := h.e.Maintenance().QuarantineStalled(g.Device.ID); err != nil {
			t.Fatal(err)
		}
		if d := h.e.devices(); d[0].State != contract.DeviceQuarantined {
			t.Errorf("after the fix: %s, want quarantined", d[0].State)
		}
	})
}

func TestOverdueLeaseIsReportedAndExpired(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := start(t, newMemStore(), fixed(2))
		g := h.mustGrant(h.acquire("a", ios))
		if got := h.e.Maintenance().ExpiredLeases(); len(got) != 0 {
			t.Fatalf("overdue at once: %+v", got)
		}
		// Its timer lost (a fault): the deadline passes unnoticed.
		h.e.view(func() { h.e.leases[g.Lease.ID].timer.Stop() })
		time.Sleep(2 * time.Minute)
		if got := h.e.Maintenance().ExpiredLeases(); len(got) != 1 || got[0].ID != g.Lease.ID {
			t.Fatalf("overdue = %+v", got)
		}
		h.e.Maintenance().ExpireNow(g.Lease.ID)
		if l := h.e.Leases(Caller{Admin: true}); len(l) != 0 {
			t.Errorf("leases after the fix = %+v", l)
		}
	})
}
