package leasing

import (
	"time"

	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/driver"
)

// QuarantinePolicy is how a quarantined device is retried: up to
// MaxRetries cleans, the first after Backoff, each next one Multiplier
// times later, capped at MaxBackoff. A device whose retries are spent is
// deleted.
type QuarantinePolicy struct {
	MaxRetries int
	Backoff    time.Duration
	Multiplier int
	MaxBackoff time.Duration
}

func (p QuarantinePolicy) withDefaults() QuarantinePolicy {
	if p.MaxRetries <= 0 {
		p.MaxRetries = 3
	}
	if p.Backoff <= 0 {
		p.Backoff = 30 * time.Second
	}
	if p.Multiplier <= 0 {
		p.Multiplier = 2
	}
	if p.MaxBackoff <= 0 {
		p.MaxBackoff = 5 * time.Minute
	}
	return p
}

// delay is the wait before retry number attempt (0-based).
func (p QuarantinePolicy) delay(attempt int) time.Duration {
	d := p.Backoff
	for range attempt {
		d *= time.Duration(p.Multiplier)
		if d >= p.MaxBackoff {
			return p.MaxBackoff
		}
	}
	return min(d, p.MaxBackoff)
}

// quarantineLocked moves a device to quarantined in tx, with its first
// retry scheduled; the caller commits, then calls armQuarantineLocked.
func (e *Engine) quarantineLocked(tx *txn, id, reason string, payload map[string]any) {
	nd := tx.setState(id, contract.DeviceQuarantined)
	nd.Address = ""
	nd.QuarantineAttempts = 0
	nd.QuarantineNextRetry = now() + e.opts.Quarantine.delay(0).Milliseconds()
	tx.putDevice(nd)
	p := map[string]any{"deviceId": id, "reason": reason}
	for k, v := range payload {
		p[k] = v
	}
	tx.event("device.quarantined", p)
}

// armQuarantineLocked sets the retry timer of a quarantined device from its
// stored next-retry time (at once when it has passed: after a restart).
func (e *Engine) armQuarantineLocked(id string) {
	d, ok := e.devices[id]
	if !ok || d.State != contract.DeviceQuarantined || d.QuarantineNextRetry == 0 || e.stopping {
		return
	}
	key := "quarantine:" + id
	if t, ok := e.timers[key]; ok {
		t.Stop()
	}
	wait := time.Until(time.UnixMilli(d.QuarantineNextRetry))
	e.timers[key] = time.AfterFunc(max(wait, 0), func() { e.retryQuarantined(id) })
}

// retryQuarantined tries to clean a quarantined device again. Cleaned, it
// serves again; failed, it waits longer, until its retries are spent and
// it is deleted.
func (e *Engine) retryQuarantined(id string) {
	e.mu.Lock()
	delete(e.timers, "quarantine:"+id)
	d, ok := e.devices[id]
	if !ok || d.State != contract.DeviceQuarantined || e.claims[id] != "" || e.stopping {
		e.mu.Unlock()
		return
	}
	e.claims[id] = "quarantine-retry"
	dev := *d
	e.mu.Unlock()

	drv, ok := e.opts.Drivers[dev.Platform]
	var res driver.ReclaimResult
	err := error(contract.Errorf(contract.CodeNoDriver, "no driver for %s", dev.Platform))
	dd := driver.Device{ID: dev.DriverDeviceID, Address: dev.Address, Data: dev.DriverData}
	if ok {
		res, err = drv.Reclaim(e.ctx, dd)
	}
	attempt := dev.QuarantineAttempts + 1
	if err != nil && attempt >= e.opts.Quarantine.MaxRetries && ok && e.ctx.Err() == nil {
		// Spent: delete it.
		derr := drv.Destroy(e.ctx, dd)
		e.mu.Lock()
		defer e.mu.Unlock()
		delete(e.claims, id)
		if derr != nil {
			e.log.Warn("could not delete a quarantined device whose retries are spent", "deviceId", id, "err", derr)
			tx := e.begin()
			nd := *e.devices[id]
			nd.QuarantineAttempts, nd.QuarantineNextRetry = attempt, 0
			tx.putDevice(nd)
			tx.event("device.quarantine-abandoned", map[string]any{"deviceId": id, "attempts": attempt, "deleted": false, "error": derr.Error()})
			_, _ = e.commitLocked(tx)
			return
		}
		tx := e.begin()
		tx.setState(id, contract.DeviceDeleted)
		tx.event("device.quarantine-abandoned", map[string]any{"deviceId": id, "attempts": attempt, "deleted": true, "error": err.Error()})
		tx.event("device.deleted", map[string]any{"deviceId": id, "initiator": "quarantine"})
		delete(e.stuck, id)
		if _, cerr := e.commitLocked(tx); cerr == nil {
			e.serveLocked()
		}
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.claims, id)
	if _, ok := e.devices[id]; !ok || e.ctx.Err() != nil {
		return
	}
	tx := e.begin()
	if err != nil {
		nd := *e.devices[id]
		nd.QuarantineAttempts = attempt
		nd.QuarantineNextRetry = now() + e.opts.Quarantine.delay(attempt).Milliseconds()
		tx.putDevice(nd)
		tx.event("device.quarantine-retry-failed", map[string]any{"deviceId": id, "attempt": attempt, "error": err.Error(), "nextRetryAt": nd.QuarantineNextRetry})
		if _, cerr := e.commitLocked(tx); cerr == nil {
			e.armQuarantineLocked(id)
		}
		return
	}
	state := res.State
	if state != contract.DeviceReady {
		state = contract.DeviceShutdown
	}
	nd := tx.setState(id, state)
	nd.QuarantineAttempts, nd.QuarantineNextRetry, nd.DeferredReclaim = 0, 0, false
	nd.LastUsedAt = now()
	if state == contract.DeviceShutdown {
		nd.Address = ""
	}
	tx.putDevice(nd)
	tx.event("device.quarantine-recovered", map[string]any{"deviceId": id, "attempts": attempt, "state": state})
	delete(e.stuck, id)
	if _, cerr := e.commitLocked(tx); cerr == nil {
		e.serveLocked()
	}
}
