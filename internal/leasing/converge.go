package leasing

import (
	"context"
	"sort"
	"sync"
	"time"

	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/driver"
	"github.com/simlock/simlock/internal/queue"
	"github.com/simlock/simlock/internal/store"
)

// startupReadBound bounds each platform's read at startup; a platform that
// does not answer in time is unreadable for this start.
const startupReadBound = time.Minute

// reality is what each platform's driver reported at startup.
type reality struct {
	devices    map[contract.Platform]map[string]driver.RunState
	unreadable map[contract.Platform]bool
}

func (r reality) readable(p contract.Platform) bool {
	_, ok := r.devices[p]
	return ok && !r.unreadable[p]
}

// state is how the device was found: its run state, and whether it exists.
func (r reality) state(d *dev) (driver.RunState, bool) {
	s, ok := r.devices[d.Platform][d.DriverDeviceID]
	return s, ok
}

// readReality reads every platform once, in parallel, each bounded.
func (e *Engine) readReality(ctx context.Context) reality {
	r := reality{devices: map[contract.Platform]map[string]driver.RunState{}, unreadable: map[contract.Platform]bool{}}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for p, drv := range e.opts.Drivers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rctx, cancel := context.WithTimeout(ctx, startupReadBound)
			defer cancel()
			got, err := drv.ListManaged(rctx)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				e.log.Warn("platform unreadable at startup; its leases end and its devices wait for a start that can read it", "platform", p, "err", err)
				r.unreadable[p] = true
				return
			}
			m := map[string]driver.RunState{}
			for _, o := range got.Devices {
				m[o.ID] = o.RunState
			}
			r.devices[p] = m
		}()
	}
	wg.Wait()
	return r
}

// convergeDevicesLocked checks each device loaded at startup against what
// its platform showed, in the startup decision; the work it starts begins
// once that decision commits.
func (e *Engine) convergeDevicesLocked(tx *queue.Txn, r reality) {
	var all []*dev
	e.reg.each(func(d *dev) bool {
		all = append(all, d)
		return true
	})
	for _, d := range all {
		switch d.State {
		case contract.DeviceQuarantined:
			// Retries resume from the stored next-retry time; a device
			// quarantined before retries existed gets its first one now.
			if d.QuarantineNextRetry == 0 && d.QuarantineAttempts < e.opts.Quarantine.MaxRetries {
				e.changeDevice(tx, d, func(rec *store.Device) {
					rec.QuarantineNextRetry = e.now() + e.opts.Quarantine.delay(rec.QuarantineAttempts).Milliseconds()
				})
			}
			e.armQuarantineLocked(tx, d)
		case contract.DeviceProvisioning:
			state, present := r.state(d)
			switch {
			case d.DriverDeviceID != "" && present && (state == driver.Running || state == driver.Transitioning):
				// Made, and booting or up: a boot goes on without the
				// daemon that asked for it. Wait for it, not fail it.
				e.reprobeLocked(tx, d)
			case d.DriverDeviceID != "" && present && state == driver.Stopped && r.readable(d.Platform):
				// Made, never booted: a device like any shut down one.
				e.changeDevice(tx, d, func(rec *store.Device) { rec.State, rec.Address = contract.DeviceShutdown, "" })
				tx.Event(contract.EvDeviceShutdown, map[string]any{"deviceId": d.ID, "initiator": "startup"})
			default:
				e.setClaim(tx, d, claimDestroy)
				tx.After(func() { e.goWork(func() { e.destroyAbandoned(d) }) })
			}
		case contract.DeviceReclaiming:
			if d.lease == "" && r.readable(d.Platform) {
				// Interrupted (or put off while its platform was
				// unreadable): clean it in full now.
				e.startReclaimLocked(tx, d)
			}
		case contract.DeviceReady, contract.DeviceShutdown:
			if d.lease != "" || !r.readable(d.Platform) {
				break
			}
			state, present := r.state(d)
			switch {
			case !present:
				e.setState(tx, d, contract.DeviceDeleted)
				tx.Event(contract.EvDeviceDeleted, map[string]any{"deviceId": d.ID, "initiator": "missing"})
			case d.State == contract.DeviceShutdown && (state == driver.Running || state == driver.Transitioning):
				// A boot a request or the warm pool started, gone on
				// without the daemon: wait for it.
				e.reprobeLocked(tx, d)
			case d.State == contract.DeviceReady && state == driver.Stopped:
				e.changeDevice(tx, d, func(rec *store.Device) { rec.State, rec.Address = contract.DeviceShutdown, "" })
				tx.Event(contract.EvDeviceShutdown, map[string]any{"deviceId": d.ID, "initiator": "startup"})
			}
		case contract.DeviceLeased:
			if d.lease == "" {
				// A leased device with no lease cannot be handed out as it
				// is: clean it first.
				e.setState(tx, d, contract.DeviceReclaiming)
				e.startReclaimLocked(tx, d)
			}
		}
	}
}

// convergeLeasesLocked checks each lease kept over the restart against
// what its platform showed: a device that runs keeps its lease; one that
// stopped ends it as device-lost and is cleaned; one gone ends it and is
// marked deleted; on an unreadable platform the lease ends and the device
// stays reclaiming, marked for a full clean, until a start that can read
// the platform cleans it. Restart never proves a holder dead, so running
// devices' leases are never ended here.
func (e *Engine) convergeLeasesLocked(tx *queue.Txn, r reality) {
	ids := make([]string, 0, len(e.leases))
	for id := range e.leases {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		l, ok := e.leases[id]
		if !ok {
			continue
		}
		d, ok := e.reg.get(l.DeviceID)
		if !ok {
			continue
		}
		state, present := r.state(d)
		switch {
		case r.unreadable[d.Platform]:
			e.endAtStartupLocked(tx, id, d, "unreadable")
		case r.devices[d.Platform] == nil:
			// No driver for the platform this start: nothing to read, nothing
			// to decide.
		case !present:
			e.endAtStartupLocked(tx, id, d, "missing")
		case state == driver.Stopped:
			e.endLocked(tx, id, contract.EndDeviceLost)
		}
	}
}

// endAtStartupLocked ends a lease as device-lost without cleaning its
// device: gone (marked deleted) or unreadable (left reclaiming with the
// full-clean marker).
func (e *Engine) endAtStartupLocked(tx *queue.Txn, leaseID string, d *dev, why string) {
	e.noReclaim[d.ID] = true
	defer delete(e.noReclaim, d.ID)
	e.endLocked(tx, leaseID, contract.EndDeviceLost)
	if d.at == nil {
		return
	}
	if why == "missing" {
		e.setState(tx, d, contract.DeviceDeleted)
		tx.Event(contract.EvDeviceDeleted, map[string]any{"deviceId": d.ID, "initiator": "missing"})
		return
	}
	e.changeDevice(tx, d, func(rec *store.Device) { rec.DeferredReclaim = true })
}

// reprobeLocked waits, after the commit, for the boot of a device found
// booting or up at startup, and makes it ready once the driver says it is
// usable; a boot that does not come up (the driver's own boot bound) is
// quarantined with its reason, never left booting for ever.
func (e *Engine) reprobeLocked(tx *queue.Txn, d *dev) {
	e.setClaim(tx, d, claimBoot)
	tx.After(func() { e.goWork(func() { e.reprobe(d) }) })
}

func (e *Engine) reprobe(d *dev) {
	var rec store.Device
	e.view(func() { rec = d.Device })
	started := time.Now()
	var ready driver.Device
	err := error(contract.Errorf(contract.CodeNoDriver, "no driver for %s", rec.Platform))
	if drv, ok := e.opts.Drivers[rec.Platform]; ok {
		ready, err = drv.MakeReady(e.ctx, driver.Device{ID: rec.DriverDeviceID, Address: rec.Address, Data: rec.DriverData})
	}
	_ = e.do(func(tx *queue.Txn) error {
		e.setClaim(tx, d, claimNone)
		if d.at == nil {
			return nil
		}
		if err != nil {
			if e.ctx.Err() != nil {
				return nil // stopping: the next start probes it again
			}
			e.log.Warn("a device found booting at startup did not come up", "deviceId", d.ID, "err", err)
			e.quarantineLocked(tx, d, "boot-failed", map[string]any{"error": err.Error()})
			return nil
		}
		e.booted(tx, d, ready, func(r *store.Device) {
			r.State = contract.DeviceReady
		})
		tx.Event(contract.EvDeviceReady, map[string]any{"deviceId": d.ID, "bootDuration": time.Since(started).Milliseconds(), "initiator": "startup"})
		tx.Kick()
		return nil
	})
}
