package leasing

import (
	"context"
	"sort"
	"time"

	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/driver"
	"github.com/simlock/simlock/internal/store"
)

// armLocked (re)starts l's expiry timer from its stored deadline.
func (e *Engine) armLocked(l *store.Lease) {
	if t, ok := e.timers[l.ID]; ok {
		t.Stop()
	}
	id, deadline := l.ID, l.TTLDeadline
	wait := time.Until(time.UnixMilli(deadline))
	e.timers[id] = time.AfterFunc(wait, func() {
		e.mu.Lock()
		defer e.mu.Unlock()
		// A renew moves the deadline and re-arms; a stale timer does nothing.
		if l, ok := e.leases[id]; ok && l.TTLDeadline == deadline {
			e.expireLocked(id)
		}
	})
}

// ownedLocked finds a lease the caller may act on. Another owner's lease is
// FORBIDDEN for agents; admins act on any.
func (e *Engine) ownedLocked(c Caller, id string) (*store.Lease, *contract.Error) {
	l, ok := e.leases[id]
	if !ok {
		return nil, contract.Errorf(contract.CodeUnknownLease, "no active lease %s", id).With("leaseId", id)
	}
	if !c.Admin && l.OwnerID != c.Principal {
		return nil, contract.Errorf(contract.CodeForbidden, "lease %s belongs to another owner", id).With("leaseId", id)
	}
	return l, nil
}

// Renew moves a lease's deadline to now plus ttlMs, or plus its stored width
// when ttlMs is 0. A given ttlMs becomes the stored width.
func (e *Engine) Renew(c Caller, in contract.LeaseRenewInput) (contract.LeaseRecord, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	l, cerr := e.ownedLocked(c, in.LeaseID)
	if cerr != nil {
		return contract.LeaseRecord{}, cerr
	}
	nl := *l
	if in.TTLMs != 0 {
		ttl, cerr := e.ttlFor(in.TTLMs, "ttlMs")
		if cerr != nil {
			return contract.LeaseRecord{}, cerr
		}
		nl.TTLMs = ttl.Milliseconds()
	}
	t := now()
	nl.LastRenewedAt, nl.TTLDeadline = t, t+nl.TTLMs
	tx := e.begin()
	tx.putLease(nl)
	tx.event("lease.renewed", map[string]any{"leaseId": nl.ID, "ttlDeadline": nl.TTLDeadline, "ttlMs": nl.TTLMs})
	if _, err := e.commitLocked(tx); err != nil {
		return contract.LeaseRecord{}, err
	}
	e.armLocked(e.leases[nl.ID])
	return nl.LeaseRecord, nil
}

// Release ends a lease. It returns once the end is committed and the device
// is reclaiming; the clean runs in the background and then the queue moves.
func (e *Engine) Release(c Caller, in contract.LeaseIDInput) (contract.ReleaseResult, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	l, cerr := e.ownedLocked(c, in.LeaseID)
	if cerr != nil {
		return contract.ReleaseResult{}, cerr
	}
	dev := l.DeviceID
	if err := e.endLocked(l.ID, ReasonExplicit); err != nil {
		return contract.ReleaseResult{}, err
	}
	return contract.ReleaseResult{LeaseID: in.LeaseID, DeviceID: dev, Released: true}, nil
}

// ReleaseAll ends every lease (reason killed) and cancels every open request.
func (e *Engine) ReleaseAll() (contract.ReleaseAllResult, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	res := contract.ReleaseAllResult{Released: []string{}, Cancelled: []string{}}
	for _, r := range e.sortedRequestsLocked() {
		switch r.rec.State {
		case contract.RequestQueued:
			e.settleLocked(r, nil, contract.Errorf(contract.CodeCancelled, "an operator released everything"), "killed")
		case contract.RequestStarting:
			// Its device is being started: it is kept, ready, and no lease
			// is made from it.
			r.abandoned = true
		default:
			continue
		}
		res.Cancelled = append(res.Cancelled, r.rec.ID)
	}
	ids := make([]string, 0, len(e.leases))
	for id := range e.leases {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		if err := e.endLocked(id, ReasonKilled); err != nil {
			return res, err
		}
		res.Released = append(res.Released, id)
	}
	return res, nil
}

func (e *Engine) expireLocked(id string) {
	if err := e.endLocked(id, ReasonExpired); err != nil {
		e.log.Error("could not expire lease", "leaseId", id, "err", err)
	}
}

// endLocked commits a lease's end, tells its holders, and starts the
// device's clean (after its lease-end participants, when there are any).
// Every lease end goes through here.
func (e *Engine) endLocked(id, reason string) error {
	l, ok := e.leases[id]
	if !ok {
		return nil
	}
	ended := *l
	t := now()
	ended.EndedAt, ended.EndReason = t, reason
	tx := e.begin()
	tx.putLease(ended)
	if d, ok := e.devices[ended.DeviceID]; ok && d.State == contract.DeviceLeased {
		e.markDeferredLocked(tx, tx.setState(d.ID, contract.DeviceReclaiming))
	}
	if reason == ReasonExpired {
		tx.event("lease.expired", map[string]any{"leaseId": id, "deviceId": ended.DeviceID, "ownerId": ended.OwnerID})
	} else {
		tx.event("lease.released", map[string]any{"leaseId": id, "deviceId": ended.DeviceID, "reason": reason, "ownerId": ended.OwnerID})
	}
	if _, err := e.commitLocked(tx); err != nil {
		return err
	}
	if t, ok := e.timers[id]; ok {
		t.Stop()
		delete(e.timers, id)
	}
	e.opts.LeaseEnded(ended.LeaseRecord, reason)
	e.stopRecoveryLocked(ended.DeviceID)
	e.afterEndLocked(ended, reason)
	// A waiter may be served by this device once clean; say so now.
	e.reportPositionsLocked()
	return nil
}

// startReclaimLocked cleans a device in the background.
func (e *Engine) startReclaimLocked(id string) {
	e.claims[id] = "reclaim"
	d := *e.devices[id]
	done := e.trackReclaimLocked(id)
	e.goWork(func() {
		defer e.reclaimEnded(id, done)
		e.runReclaim(d)
	})
}

func (e *Engine) runReclaim(d store.Device) {
	drv, ok := e.opts.Drivers[d.Platform]
	started := time.Now()
	var res driver.ReclaimResult
	var err error
	if ok {
		res, err = drv.Reclaim(e.ctx, driver.Device{ID: d.DriverDeviceID, Address: d.Address, Data: d.DriverData})
	} else {
		err = driver.ContractError(contract.Errorf(contract.CodeNoDriver, "no driver for %s", d.Platform))
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.claims, d.ID)
	if _, ok := e.devices[d.ID]; !ok {
		return
	}
	tx := e.begin()
	if err != nil {
		if e.ctx.Err() != nil {
			// Stopping: leave it reclaiming; the next start cleans it again.
			return
		}
		e.log.Warn("reclaim failed", "deviceId", d.ID, "err", err)
		tx.event("device.purge-failed", map[string]any{"deviceId": d.ID, "duration": time.Since(started).Milliseconds(), "error": err.Error()})
		e.quarantineLocked(tx, d.ID, "purge-failed", nil)
	} else {
		state := res.State
		if state != contract.DeviceReady {
			state = contract.DeviceShutdown
		}
		nd := tx.setState(d.ID, state)
		nd.LastUsedAt = now()
		nd.DeferredReclaim = false // wiped: whatever was put off is done
		if state == contract.DeviceShutdown {
			nd.Address = ""
		}
		tx.putDevice(nd)
		tx.event("device.reclaimed", map[string]any{"deviceId": d.ID, "strategy": res.Strategy, "duration": time.Since(started).Milliseconds()})
	}
	if _, err := e.commitLocked(tx); err != nil {
		return
	}
	e.armQuarantineLocked(d.ID)
	e.serveLocked()
}

// shutdownDevice stops an idle device to free its running slot. A device
// that fails to stop is quarantined and never chosen to make room again.
func (e *Engine) shutdownDevice(ctx context.Context, id, initiator string) error {
	e.mu.Lock()
	d := *e.devices[id]
	e.mu.Unlock()
	err := e.opts.Drivers[d.Platform].Shutdown(ctx, driver.Device{ID: d.DriverDeviceID, Address: d.Address, Data: d.DriverData})
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.claims, id)
	tx := e.begin()
	if err != nil {
		e.log.Warn("shutdown failed", "deviceId", id, "err", err)
		e.stuck[id] = true
		tx.setState(id, contract.DeviceShutdown)
		e.quarantineLocked(tx, id, "shutdown-failed", map[string]any{"error": err.Error()})
	} else {
		nd := tx.setState(id, contract.DeviceShutdown)
		nd.Address = ""
		tx.putDevice(nd)
		tx.event("device.shutdown", map[string]any{"deviceId": id, "initiator": initiator})
	}
	if _, cerr := e.commitLocked(tx); cerr != nil && err == nil {
		err = cerr
	}
	e.armQuarantineLocked(id)
	return err
}

// removeDevice deletes an idle device to free its slots. A device that
// fails to delete is quarantined and never chosen to make room again.
func (e *Engine) removeDevice(ctx context.Context, id, initiator string) error {
	e.mu.Lock()
	d := *e.devices[id]
	e.mu.Unlock()
	err := e.opts.Drivers[d.Platform].Destroy(ctx, driver.Device{ID: d.DriverDeviceID, Address: d.Address, Data: d.DriverData})
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.claims, id)
	tx := e.begin()
	if err != nil {
		e.log.Warn("delete failed", "deviceId", id, "err", err)
		e.stuck[id] = true
		if d.State == contract.DeviceReady {
			tx.setState(id, contract.DeviceShutdown)
		}
		e.quarantineLocked(tx, id, "delete-failed", map[string]any{"error": err.Error()})
	} else {
		tx.setState(id, contract.DeviceDeleted)
		tx.event("device.deleted", map[string]any{"deviceId": id, "initiator": initiator})
	}
	if _, cerr := e.commitLocked(tx); cerr != nil && err == nil {
		err = cerr
	}
	e.armQuarantineLocked(id)
	return err
}

// destroyAbandoned deletes a device whose creation failed or was cut short.
func (e *Engine) destroyAbandoned(id string) {
	e.mu.Lock()
	d, ok := e.devices[id]
	if !ok {
		e.mu.Unlock()
		return
	}
	dev := *d
	e.mu.Unlock()
	var err error
	if drv, ok := e.opts.Drivers[dev.Platform]; ok && dev.DriverDeviceID != "" {
		err = drv.Destroy(e.ctx, driver.Device{ID: dev.DriverDeviceID, Address: dev.Address, Data: dev.DriverData})
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.claims, id)
	tx := e.begin()
	if err != nil {
		e.log.Warn("could not delete a failed device", "deviceId", id, "err", err)
		e.quarantineLocked(tx, id, "delete-failed", map[string]any{"error": err.Error()})
	} else {
		tx.setState(id, contract.DeviceDeleted)
		tx.event("device.deleted", map[string]any{"deviceId": id, "initiator": "failed-start"})
	}
	if _, err := e.commitLocked(tx); err == nil {
		e.armQuarantineLocked(id)
		e.serveLocked()
	}
}
