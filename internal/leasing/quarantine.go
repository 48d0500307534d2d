package leasing

import (
	"time"

	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/driver"
	"github.com/simlock/simlock/internal/queue"
	"github.com/simlock/simlock/internal/store"
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
// retry scheduled and armed once tx commits.
func (e *Engine) quarantineLocked(tx *queue.Txn, d *dev, reason string, payload map[string]any) {
	e.changeDevice(tx, d, func(r *store.Device) {
		r.State = contract.DeviceQuarantined
		r.Address = ""
		r.QuarantineAttempts = 0
		r.QuarantineNextRetry = e.now() + e.opts.Quarantine.delay(0).Milliseconds()
	})
	p := map[string]any{"deviceId": d.ID, "reason": reason}
	for k, v := range payload {
		p[k] = v
	}
	tx.Event(contract.EvDeviceQuarantined, p)
	e.armQuarantineLocked(tx, d)
}

// armQuarantineLocked sets, once tx commits, the retry timer of a
// quarantined device from its stored next-retry time (at once when it has
// passed: after a restart).
func (e *Engine) armQuarantineLocked(tx *queue.Txn, d *dev) {
	tx.After(func() {
		if d.at == nil || d.State != contract.DeviceQuarantined || d.QuarantineNextRetry == 0 || e.stopping {
			return
		}
		key := "quarantine:" + d.ID
		if t, ok := e.timers[key]; ok {
			t.Stop()
		}
		wait := e.untilWall(d.QuarantineNextRetry)
		e.timers[key] = time.AfterFunc(max(wait, 0), func() { e.retryQuarantined(d) })
	})
}

// retryQuarantined tries to clean a quarantined device again. Cleaned, it
// serves again; failed, it waits longer, until its retries are spent and
// it is deleted.
func (e *Engine) retryQuarantined(d *dev) {
	var rec store.Device
	started := false
	_ = e.do(func(tx *queue.Txn) error {
		delete(e.timers, "quarantine:"+d.ID)
		if d.at == nil || d.State != contract.DeviceQuarantined || d.claim != claimNone || e.stopping {
			return nil
		}
		e.setClaim(tx, d, claimRetry)
		rec, started = d.Device, true
		return nil
	})
	if started {
		e.runQuarantineRetry(d, rec)
	}
}

// RetryDevice retries a quarantined device's clean now, instead of at its
// next backoff (an operator's Retry): the attempt it makes is the one the
// backoff would have made. It answers with the device as the retry found
// it; the clean runs on (device.quarantine-recovered or
// device.quarantine-retry-failed end it). Any other device is
// NOT_RETRYABLE, as is one whose retry already runs.
func (m *Maintenance) RetryDevice(id string) (contract.Device, error) {
	e := m.e
	var out contract.Device
	var cerr *contract.Error
	err := e.try(func(tx *queue.Txn) error {
		d, ok := e.reg.get(id)
		switch {
		case !ok || d.at == nil || d.State == contract.DeviceDeleted:
			cerr = contract.Errorf(contract.CodeUnknownDevice, "no device %s", id).With("deviceId", id)
		case d.State != contract.DeviceQuarantined:
			cerr = contract.Errorf(contract.CodeNotRetryable, "device %s is %s; only a quarantined device can be retried", id, d.State).
				With("deviceId", id).With("state", d.State)
		case d.claim != claimNone:
			cerr = contract.Errorf(contract.CodeNotRetryable, "a retry of device %s already runs", id).With("deviceId", id)
		case e.stopping:
			cerr = contract.Errorf(contract.CodeDaemonStopping, "the daemon is stopping")
		default:
			key := "quarantine:" + d.ID
			if t, ok := e.timers[key]; ok {
				t.Stop()
				delete(e.timers, key)
			}
			e.setClaim(tx, d, claimRetry)
			rec := d.Device
			out = deviceView(d)
			tx.Event(contract.EvDeviceRetryRequested, map[string]any{"deviceId": d.ID, "attempt": rec.QuarantineAttempts + 1})
			tx.After(func() { e.goWork(func() { e.runQuarantineRetry(d, rec) }) })
		}
		return nil
	})
	if err != nil {
		return contract.Device{}, err
	}
	if cerr != nil {
		return contract.Device{}, cerr
	}
	return out, nil
}

// runQuarantineRetry cleans d, claimed for the retry, once more and settles
// what came of it.
func (e *Engine) runQuarantineRetry(d *dev, rec store.Device) {
	drv, ok := e.opts.Drivers[rec.Platform]
	var res driver.ReclaimResult
	err := error(contract.Errorf(contract.CodeNoDriver, "no driver for %s", rec.Platform))
	dd := driver.Device{ID: rec.DriverDeviceID, Address: rec.Address, Data: rec.DriverData}
	if ok {
		res, err = drv.Reclaim(e.ctx, dd)
	}
	attempt := rec.QuarantineAttempts + 1
	var derr error
	spent := err != nil && attempt >= e.opts.Quarantine.MaxRetries && ok && e.ctx.Err() == nil
	if spent {
		derr = drv.Destroy(e.ctx, dd)
	}
	_ = e.do(func(tx *queue.Txn) error {
		e.setClaim(tx, d, claimNone)
		if d.at == nil || (!spent && e.ctx.Err() != nil) {
			return nil
		}
		switch {
		case spent && derr != nil:
			e.log.Warn("could not delete a quarantined device whose retries are spent", "deviceId", d.ID, "err", derr)
			e.changeDevice(tx, d, func(r *store.Device) { r.QuarantineAttempts, r.QuarantineNextRetry = attempt, 0 })
			tx.Event(contract.EvDeviceQuarantineAbandoned, map[string]any{"deviceId": d.ID, "attempts": attempt, "deleted": false, "error": derr.Error()})
		case spent:
			e.setStuck(d, false)
			e.setState(tx, d, contract.DeviceDeleted)
			tx.Event(contract.EvDeviceQuarantineAbandoned, map[string]any{"deviceId": d.ID, "attempts": attempt, "deleted": true, "error": err.Error()})
			tx.Event(contract.EvDeviceDeleted, map[string]any{"deviceId": d.ID, "initiator": "quarantine"})
		case err != nil:
			e.changeDevice(tx, d, func(r *store.Device) {
				r.QuarantineAttempts = attempt
				r.QuarantineNextRetry = e.now() + e.opts.Quarantine.delay(attempt).Milliseconds()
			})
			tx.Event(contract.EvDeviceQuarantineRetryFailed, map[string]any{"deviceId": d.ID, "attempt": attempt, "error": err.Error(), "nextRetryAt": d.QuarantineNextRetry})
			e.armQuarantineLocked(tx, d)
		default:
			e.setStuck(d, false)
			state := e.reclaimed(tx, d, res, func(r *store.Device) { r.QuarantineAttempts, r.QuarantineNextRetry = 0, 0 })
			tx.Event(contract.EvDeviceQuarantineRecovered, map[string]any{"deviceId": d.ID, "attempts": attempt, "state": state})
		}
		return nil
	})
}
