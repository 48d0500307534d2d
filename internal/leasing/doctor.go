package leasing

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/driver"
)

// Stalled-transition thresholds: a device is stalled when its transition
// has taken stalledMultiplier times the driver's estimate, and at least
// stalledMinimum.
const (
	stalledMultiplier = 3
	stalledMinimum    = time.Minute
)

// Stalled lists devices stuck in a transition (provisioning, reclaiming)
// with no work in flight on them: nothing will move them on.
func (e *Engine) Stalled() []contract.Device {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []contract.Device
	t := now()
	for id, d := range e.devices {
		if e.claims[id] != "" {
			continue
		}
		var op driver.Operation
		switch d.State {
		case contract.DeviceProvisioning:
			op = driver.OpProvision
		case contract.DeviceReclaiming:
			if _, leased := e.byDevice[id]; leased {
				continue
			}
			op = driver.OpReclaim
		default:
			continue
		}
		limit := max(stalledMultiplier*e.estimate(d.Platform, op, specOf(d)), stalledMinimum.Milliseconds())
		if t-d.StateSince > limit {
			out = append(out, e.deviceViewLocked(d))
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// QuarantineStalled puts a stalled device in quarantine, where its clean is
// retried; a device that moved on meanwhile is left alone.
func (e *Engine) QuarantineStalled(id string) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	d, ok := e.devices[id]
	if !ok || e.claims[id] != "" || (d.State != contract.DeviceProvisioning && d.State != contract.DeviceReclaiming) {
		return nil
	}
	if _, leased := e.byDevice[id]; leased {
		return nil
	}
	tx := e.begin()
	e.quarantineLocked(tx, id, "stalled-transition", nil)
	if _, err := e.commitLocked(tx); err != nil {
		return err
	}
	e.armQuarantineLocked(id)
	return nil
}

// ExpiredLeases lists active leases whose deadline has passed; the engine
// expires them on its timers, so any found is a fault to report.
func (e *Engine) ExpiredLeases() []contract.LeaseRecord {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []contract.LeaseRecord
	t := now()
	for _, l := range e.leases {
		if l.TTLDeadline < t-1000 {
			out = append(out, l.LeaseRecord)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// ExpireNow ends a lease whose deadline passed.
func (e *Engine) ExpireNow(id string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if l, ok := e.leases[id]; ok && l.TTLDeadline < now() {
		e.expireLocked(id)
	}
}

// Orphan is a device in a root simlock owns that the registry does not
// know.
type Orphan struct {
	Platform contract.Platform
	driver.Observed
}

// Orphans lists, per platform with a root, the devices found there that no
// registry record names.
func (e *Engine) Orphans(ctx context.Context) ([]Orphan, error) {
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
		e.mu.Lock()
		known := map[string]bool{}
		for _, d := range e.devices {
			if d.Platform == p && d.DriverDeviceID != "" {
				known[d.DriverDeviceID] = true
			}
		}
		provisioning := false
		for _, d := range e.devices {
			if d.Platform == p && d.State == contract.DeviceProvisioning {
				provisioning = true
			}
		}
		e.mu.Unlock()
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
func (e *Engine) PurgeOrphan(ctx context.Context, o Orphan) error {
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
	e.Emit("device.orphan-purged", map[string]any{"platform": o.Platform, "driverDeviceId": o.ID, "name": o.Name})
	return nil
}
