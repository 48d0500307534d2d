package leasing

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/driver"
	"github.com/simlock/simlock/internal/queue"
)

// Stalled lists devices stuck in a transition (provisioning, reclaiming)
// past the stall threshold with no work in flight on them: nothing will
// move them on.
func (m *Maintenance) Stalled() []contract.Device {
	e := m.e
	var out []contract.Device
	t := e.now()
	e.view(func() {
		e.reg.each(func(d *dev) bool {
			if d.claim != claimNone || (d.State == contract.DeviceReclaiming && d.lease != "") {
				return true
			}
			if v := e.withTransition(deviceView(d), d, t); v.Stalled {
				out = append(out, v)
			}
			return true
		})
	})
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// QuarantineStalled puts a stalled device in quarantine, where its clean is
// retried; a device that moved on meanwhile is left alone.
func (m *Maintenance) QuarantineStalled(id string) error {
	e := m.e
	return e.try(func(tx *queue.Txn) error {
		d, ok := e.reg.get(id)
		if !ok || !d.idle() || (d.State != contract.DeviceProvisioning && d.State != contract.DeviceReclaiming) {
			return nil
		}
		e.quarantineLocked(tx, d, "stalled-transition", nil)
		return nil
	})
}

// ExpiredLeases lists active leases more than a second past their expiry
// (on the monotonic clock, as their timers count it); the engine expires
// them on its timers, so any found is a fault to report.
func (m *Maintenance) ExpiredLeases() []contract.LeaseRecord {
	e := m.e
	var out []contract.LeaseRecord
	e.view(func() {
		for _, l := range e.leases {
			if time.Since(l.expiry) > time.Second {
				out = append(out, l.LeaseRecord)
			}
		}
	})
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// ExpireNow ends the lease with key id if its deadline passed.
func (m *Maintenance) ExpireNow(id string) {
	e := m.e
	_ = e.try(func(tx *queue.Txn) error {
		if l, ok := e.leases[id]; ok && !time.Now().Before(l.expiry) {
			e.endLocked(tx, id, contract.EndExpired)
		}
		return nil
	})
}

// Orphan is a device in a root simlock owns that the registry does not
// know.
type Orphan struct {
	Platform contract.Platform
	driver.Observed
}

// Orphans lists, per platform with a root, the devices found there that no
// registry record names.
func (m *Maintenance) Orphans(ctx context.Context) ([]Orphan, error) {
	e := m.e
	var out []Orphan
	for _, p := range contract.Platforms() {
		drv, ok := e.opts.Drivers[p]
		if !ok || drv.Root() == "" {
			continue
		}
		reality, err := drv.ListManaged(ctx)
		if err != nil {
			return nil, driver.ContractError(err)
		}
		known := map[string]bool{}
		provisioning := false
		e.view(func() {
			e.reg.each(func(d *dev) bool {
				if d.Platform == p && d.DriverDeviceID != "" {
					known[d.DriverDeviceID] = true
				}
				if d.Platform == p && d.State == contract.DeviceProvisioning {
					provisioning = true
				}
				return true
			})
		})
		if provisioning {
			// A device being created may not have its id recorded yet.
			continue
		}
		for _, o := range reality.Devices {
			if !known[o.ID] {
				out = append(out, Orphan{Platform: p, Observed: o})
			}
		}
	}
	return out, nil
}

// PurgeOrphan deletes an orphan after checking its root is still simlock's.
func (m *Maintenance) PurgeOrphan(ctx context.Context, o Orphan) error {
	e := m.e
	drv, ok := e.opts.Drivers[o.Platform]
	if !ok {
		return fmt.Errorf("no %s driver", o.Platform)
	}
	if err := drv.RevalidateRoot(); err != nil {
		return err
	}
	if err := drv.Destroy(ctx, o.Device); err != nil {
		return err
	}
	e.Emit(contract.EvDeviceOrphanPurged, map[string]any{"platform": o.Platform, "driverDeviceId": o.ID, "name": o.Name})
	return nil
}
