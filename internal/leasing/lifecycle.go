package leasing

import (
	"context"
	"sort"
	"time"

	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/driver"
	"github.com/simlock/simlock/internal/queue"
	"github.com/simlock/simlock/internal/store"
)

// armLocked (re)starts l's expiry timer, once tx has committed, for its
// expiry on the monotonic clock: a wall clock that jumps meanwhile neither
// hastens nor delays it.
func (e *Engine) armLocked(tx *queue.Txn, l *lease) {
	id := l.UniqueKey()
	l.armed++
	armed := l.armed
	tx.After(func() {
		if l.timer != nil {
			l.timer.Stop()
		}
		if e.leases[id] != l {
			return // ended in the same decision
		}
		l.timer = time.AfterFunc(time.Until(l.expiry), func() {
			_ = e.do(func(tx *queue.Txn) error {
				// A renew re-arms; a timer it replaced does nothing.
				if e.leases[id] == l && l.armed == armed {
					e.endLocked(tx, id, contract.EndExpired)
				}
				return nil
			})
		})
	})
}

// findLocked resolves the lease a caller names, and checks the caller may
// act on it, by the rule every surface of a worker and a gateway shares
// (contract.ResolveLeaseName): a chosen id within the caller's own leases,
// then a key.
func (e *Engine) findLocked(c Caller, name string) (*lease, *contract.Error) {
	return contract.ResolveLeaseName[*lease](c.Principal, c.Admin, name, leaseNames{e})
}

// leaseNames are the engine's active leases as contract.ResolveLeaseName
// reads them; the decision lock must be held.
type leaseNames struct{ e *Engine }

func (n leaseNames) ByKey(key string) (*lease, bool) {
	l, ok := n.e.leases[key]
	return l, ok
}

func (n leaseNames) ChosenBy(id string) map[string]*lease { return n.e.chosen[id] }

func (leaseNames) Name(l *lease) contract.LeaseName {
	return contract.LeaseName{Key: l.UniqueKey(), Owner: l.OwnerID, Chosen: l.IDChosenByRequester}
}

// Resolve is the unique key of the lease c names (see findLocked), for a
// frontend that keeps track of leases by key.
func (e *Engine) Resolve(c Caller, name string) (string, error) {
	var key string
	var cerr *contract.Error
	e.view(func() {
		var l *lease
		if l, cerr = e.findLocked(c, name); cerr == nil {
			key = l.UniqueKey()
		}
	})
	if cerr != nil {
		return "", cerr
	}
	return key, nil
}

// leaseEvent is the payload of a lease event: the lease named by its
// unique key (leaseId), which pairs a grant with its end in the usage
// figures however many owners chose one id, with the id its owner chose
// beside it (chosenLeaseId), and the fields given.
func leaseEvent(l store.Lease, fields map[string]any) map[string]any {
	fields["leaseId"] = l.UniqueKey()
	if l.IDChosenByRequester {
		fields["chosenLeaseId"] = l.ID
	}
	return fields
}

// Renew moves a lease's deadline to now plus ttlMs, or plus its stored width
// when ttlMs is 0. A given ttlMs becomes the stored width.
func (e *Engine) Renew(c Caller, in contract.LeaseRenewInput) (contract.LeaseRecord, error) {
	var out contract.LeaseRecord
	err := e.try(func(tx *queue.Txn) error {
		l, cerr := e.findLocked(c, in.LeaseID)
		if cerr != nil {
			return cerr
		}
		nl := l.Lease
		if in.TTLMs != 0 {
			ttl, cerr := e.desk.TTL(in.TTLMs, "ttlMs")
			if cerr != nil {
				return cerr
			}
			nl.TTLMs = ttl.Milliseconds()
		}
		mono, t := time.Now(), e.now()
		nl.LastRenewedAt, nl.TTLDeadline = t, t+nl.TTLMs
		e.putLease(tx, nl)
		l.expiry = mono.Add(time.Duration(nl.TTLMs) * time.Millisecond)
		tx.Event(contract.EvLeaseRenewed, leaseEvent(nl, map[string]any{"ttlDeadline": nl.TTLDeadline, "ttlMs": nl.TTLMs}))
		e.armLocked(tx, l)
		out = nl.LeaseRecord
		return nil
	})
	return out, err
}

// Release ends a lease. It returns once the end is committed and the device
// is reclaiming; the clean runs in the background and then the queue moves.
func (e *Engine) Release(c Caller, in contract.LeaseIDInput) (contract.ReleaseResult, error) {
	var res contract.ReleaseResult
	err := e.try(func(tx *queue.Txn) error {
		l, cerr := e.findLocked(c, in.LeaseID)
		if cerr != nil {
			return cerr
		}
		res = contract.ReleaseResult{LeaseID: l.ID, DeviceID: l.DeviceID, Released: true}
		e.endLocked(tx, l.UniqueKey(), contract.EndReleased)
		return nil
	})
	return res, err
}

// ReleaseAll ends every lease (reason killed) and cancels every open
// request, in one decision: queued ones are cancelled, those whose device
// is being started are abandoned (the device is kept, ready, and no lease
// is made from it).
func (e *Engine) ReleaseAll() (contract.ReleaseAllResult, error) {
	res := contract.ReleaseAllResult{Released: []string{}, Cancelled: []string{}}
	err := e.try(func(tx *queue.Txn) error {
		res.Cancelled = tx.CancelAll(contract.Errorf(contract.CodeCancelled, "an operator released everything"), contract.RejectKilled, false)
		res.Released = e.endAllLocked(tx, contract.EndKilled)
		return nil
	})
	return res, err
}

// endAllLocked ends every active lease with reason, in tx, and returns
// their ids in order.
func (e *Engine) endAllLocked(tx *queue.Txn, reason contract.EndReason) []string {
	ids := make([]string, 0, len(e.leases))
	for id := range e.leases {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		e.endLocked(tx, id, reason)
	}
	return ids
}

// endLocked ends the lease with key id in tx; once committed, its holders
// are told and the device's clean starts (after its lease-end
// participants, when there are any). Every lease end goes through here.
func (e *Engine) endLocked(tx *queue.Txn, id string, reason contract.EndReason) {
	l, ok := e.leases[id]
	if !ok {
		return
	}
	ended := l.Lease
	ended.EndedAt, ended.EndReason = e.now(), string(reason)
	e.putLease(tx, ended)
	if d, ok := e.reg.get(ended.DeviceID); ok && d.State == contract.DeviceLeased {
		e.changeDevice(tx, d, func(r *store.Device) {
			r.State = contract.DeviceReclaiming
			// A device whose clean waits for participants is wiped in full
			// if the daemon dies before the clean is done.
			r.DeferredReclaim = r.DeferredReclaim || len(e.opts.LeaseEndParticipants) > 0
		})
	}
	if reason == contract.EndExpired {
		tx.Event(contract.EvLeaseExpired, leaseEvent(ended, map[string]any{"deviceId": ended.DeviceID, "ownerId": ended.OwnerID}))
	} else {
		tx.Event(contract.EvLeaseReleased, leaseEvent(ended, map[string]any{"deviceId": ended.DeviceID, "reason": string(reason), "ownerId": ended.OwnerID}))
	}
	tx.After(func() { e.opts.LeaseEnded(ended.LeaseRecord, string(reason)) })
	e.stopRecoveryLocked(ended.DeviceID)
	e.afterEndLocked(tx, ended, reason)
}

// startReclaimLocked claims a device and cleans it in the background once tx
// has committed.
func (e *Engine) startReclaimLocked(tx *queue.Txn, d *dev) {
	e.setClaim(tx, d, claimReclaim)
	done := e.trackReclaimLocked(d.ID)
	tx.After(func() {
		e.goWork(func() {
			defer e.reclaimEnded(d.ID, done)
			e.runReclaim(d)
		})
	})
}

// runReclaim cleans d and commits the result, in the same decision as
// whatever the line does with the device then: a clean device goes to the
// next waiter that fits in that one commit.
func (e *Engine) runReclaim(d *dev) {
	var rec store.Device
	e.view(func() { rec = d.Device })
	if e.opts.FreshIdentity[rec.Platform] {
		e.retire(d, rec)
		return
	}
	drv, ok := e.opts.Drivers[rec.Platform]
	started := time.Now()
	var res driver.ReclaimResult
	var err error
	if ok {
		res, err = drv.Reclaim(e.ctx, driver.Device{ID: rec.DriverDeviceID, Address: rec.Address, Data: rec.DriverData})
	} else {
		err = driver.ContractError(contract.Errorf(contract.CodeNoDriver, "no driver for %s", rec.Platform))
	}
	_ = e.do(func(tx *queue.Txn) error {
		e.setClaim(tx, d, claimNone)
		if d.at == nil {
			return nil
		}
		if err != nil {
			if e.ctx.Err() != nil {
				// Stopping: leave it reclaiming; the next start cleans it again.
				return nil
			}
			e.log.Warn("reclaim failed", "deviceId", d.ID, "err", err)
			tx.Event(contract.EvDevicePurgeFailed, map[string]any{"deviceId": d.ID, "duration": time.Since(started).Milliseconds(), "error": err.Error()})
			e.quarantineLocked(tx, d, "purge-failed", nil)
			return nil
		}
		state := e.reclaimed(tx, d, res, nil)
		tx.Event(contract.EvDeviceReclaimed, map[string]any{"deviceId": d.ID, "strategy": res.Strategy, "duration": time.Since(started).Milliseconds(), "state": state})
		if state == contract.DeviceShutdown {
			// The warm pass may boot it again; it runs after this commit,
			// once the line has had its pick of the device and its slot.
			tx.After(e.kickWarm)
		}
		return nil
	})
}

// initiatorFresh names the retirement of a device whose platform gives
// each lease a fresh one.
const initiatorFresh = "fresh-identity"

// retire ends a leased device's life instead of cleaning it, for a
// platform whose leases each get a fresh identity: shut down, then
// deleted, the device claimed throughout so that nothing leases or warms
// it between the two. A device that fails to stop or to delete is
// quarantined.
func (e *Engine) retire(d *dev, rec store.Device) {
	drv, ok := e.opts.Drivers[rec.Platform]
	var err error
	if !ok {
		err = driver.ContractError(contract.Errorf(contract.CodeNoDriver, "no driver for %s", rec.Platform))
	} else {
		err = drv.Shutdown(e.ctx, driver.Device{ID: rec.DriverDeviceID, Address: rec.Address, Data: rec.DriverData})
	}
	stopped := false
	_ = e.do(func(tx *queue.Txn) error {
		if d.at == nil || (err != nil && e.ctx.Err() != nil) {
			// Stopping: it stays reclaiming, and the next start retires it.
			e.setClaim(tx, d, claimNone)
			return nil
		}
		if err != nil {
			e.setClaim(tx, d, claimNone)
			e.log.Warn("shutdown failed", "deviceId", d.ID, "err", err)
			e.setState(tx, d, contract.DeviceShutdown)
			e.quarantineLocked(tx, d, "shutdown-failed", map[string]any{"error": err.Error()})
			return nil
		}
		e.changeDevice(tx, d, func(r *store.Device) { r.State, r.Address = contract.DeviceShutdown, "" })
		tx.Event(contract.EvDeviceShutdown, map[string]any{"deviceId": d.ID, "initiator": initiatorFresh})
		stopped = true
		return nil
	})
	if stopped {
		_ = e.removeDevice(e.ctx, d, initiatorFresh)
	}
}

// shutdownDevice stops an idle device (claimed by the caller) to free its
// running slot. A device that fails to stop is quarantined and never chosen
// to make room again.
func (e *Engine) shutdownDevice(ctx context.Context, d *dev, initiator string) error {
	var rec store.Device
	e.view(func() { rec = d.Device })
	err := e.opts.Drivers[rec.Platform].Shutdown(ctx, driver.Device{ID: rec.DriverDeviceID, Address: rec.Address, Data: rec.DriverData})
	cerr := e.do(func(tx *queue.Txn) error {
		e.setClaim(tx, d, claimNone)
		if d.at == nil {
			return nil
		}
		if err != nil {
			e.log.Warn("shutdown failed", "deviceId", d.ID, "err", err)
			e.setStuck(d, true)
			e.setState(tx, d, contract.DeviceShutdown)
			e.quarantineLocked(tx, d, "shutdown-failed", map[string]any{"error": err.Error()})
			return nil
		}
		e.changeDevice(tx, d, func(r *store.Device) { r.State, r.Address = contract.DeviceShutdown, "" })
		tx.Event(contract.EvDeviceShutdown, map[string]any{"deviceId": d.ID, "initiator": initiator})
		return nil
	})
	if err == nil {
		err = cerr
	}
	return err
}

// removeDevice deletes an idle device (claimed by the caller) to free its
// slots. A device that fails to delete is quarantined and never chosen to
// make room again.
func (e *Engine) removeDevice(ctx context.Context, d *dev, initiator string) error {
	var rec store.Device
	e.view(func() { rec = d.Device })
	err := e.opts.Drivers[rec.Platform].Destroy(ctx, driver.Device{ID: rec.DriverDeviceID, Address: rec.Address, Data: rec.DriverData})
	cerr := e.do(func(tx *queue.Txn) error {
		e.setClaim(tx, d, claimNone)
		if d.at == nil {
			return nil
		}
		if err != nil {
			e.log.Warn("delete failed", "deviceId", d.ID, "err", err)
			e.setStuck(d, true)
			if d.State == contract.DeviceReady {
				e.setState(tx, d, contract.DeviceShutdown)
			}
			e.quarantineLocked(tx, d, "delete-failed", map[string]any{"error": err.Error()})
			return nil
		}
		e.setState(tx, d, contract.DeviceDeleted)
		tx.Event(contract.EvDeviceDeleted, map[string]any{"deviceId": d.ID, "initiator": initiator})
		return nil
	})
	if err == nil {
		err = cerr
	}
	return err
}

// destroyAbandoned deletes a device whose creation failed or was cut short
// (claimed destroy by the caller).
func (e *Engine) destroyAbandoned(d *dev) {
	var rec store.Device
	gone := false
	e.view(func() { rec, gone = d.Device, d.at == nil })
	if gone {
		return
	}
	var err error
	if drv, ok := e.opts.Drivers[rec.Platform]; ok && rec.DriverDeviceID != "" {
		err = drv.Destroy(e.ctx, driver.Device{ID: rec.DriverDeviceID, Address: rec.Address, Data: rec.DriverData})
	}
	_ = e.do(func(tx *queue.Txn) error {
		e.setClaim(tx, d, claimNone)
		if d.at == nil {
			return nil
		}
		if err != nil {
			e.log.Warn("could not delete a failed device", "deviceId", d.ID, "err", err)
			e.quarantineLocked(tx, d, "delete-failed", map[string]any{"error": err.Error()})
			return nil
		}
		e.setState(tx, d, contract.DeviceDeleted)
		tx.Event(contract.EvDeviceDeleted, map[string]any{"deviceId": d.ID, "initiator": "failed-start"})
		return nil
	})
}
