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

// HealthPolicy is how leased devices are watched. Every ProbeInterval the
// drivers are asked which devices run; StableObservations stopped readings
// in a row are a crash, and the device is booted again under the same
// lease, up to MaxAttempts times with an exponential Backoff between tries,
// at most MaxConcurrent recoveries at once. A device that cannot be saved,
// or is gone, ends its lease as device-lost; so does a running one whose
// provenance marks show it was erased or replaced outside simlock.
type HealthPolicy struct {
	Enabled            bool
	ProbeInterval      time.Duration
	StableObservations int
	MaxAttempts        int
	Backoff            time.Duration
	MaxConcurrent      int
}

func (p HealthPolicy) withDefaults() HealthPolicy {
	if p.ProbeInterval <= 0 {
		p.ProbeInterval = 30 * time.Second
	}
	if p.StableObservations <= 0 {
		p.StableObservations = 2
	}
	if p.MaxAttempts <= 0 {
		p.MaxAttempts = 3
	}
	if p.Backoff <= 0 {
		p.Backoff = 5 * time.Second
	}
	if p.MaxConcurrent <= 0 {
		p.MaxConcurrent = 1
	}
	return p
}

// Health notices a lease holder hears.
const (
	NoticeUnhealthy = "device-unhealthy"
	NoticeRecovered = "device-recovered"
)

// healthState is what the monitor remembers of one leased device.
type healthState struct {
	stopped, absent int
	// recovering is closed-over cancel of a recovery in flight.
	cancel context.CancelFunc
}

// watchHealth probes leased devices until the engine closes. It is not
// driver work the engine waits for at a stop: the loop only reads, and its
// recoveries run as work.
func (e *Engine) watchHealth() {
	t := time.NewTicker(e.opts.Health.ProbeInterval)
	defer t.Stop()
	slots := make(chan struct{}, e.opts.Health.MaxConcurrent)
	for {
		select {
		case <-e.ctx.Done():
			return
		case <-t.C:
		}
		e.probe(slots)
	}
}

// watched is a leased device as the probe saw it before reading its
// platform.
type watched struct {
	lease string
	dev   driver.Device
	// recovering: a recovery was running, so its marks may be in the
	// middle of a boot.
	recovering bool
}

// provenanceTimeout bounds the read of one device's marks.
const provenanceTimeout = 15 * time.Second

// probe reads each platform with leased devices once and acts on what it
// sees.
func (e *Engine) probe(slots chan struct{}) {
	leased := map[contract.Platform][]watched{}
	e.view(func() {
		for id, l := range e.leases {
			if d, ok := e.reg.get(l.DeviceID); ok {
				h := e.health[d.ID]
				leased[d.Platform] = append(leased[d.Platform], watched{lease: id, dev: d.driverDevice(), recovering: h != nil && h.cancel != nil})
			}
		}
	})
	for p, ws := range leased {
		drv, ok := e.opts.Drivers[p]
		if !ok {
			continue
		}
		ctx, cancel := context.WithTimeout(e.ctx, time.Minute)
		reality, err := drv.ListManaged(ctx)
		cancel()
		if err != nil {
			// An unreadable platform says nothing about its devices.
			e.log.Warn("health probe could not read the platform", "platform", p, "err", err)
			continue
		}
		seen := map[string]driver.RunState{}
		addr := map[string]string{}
		for _, o := range reality.Devices {
			seen[o.ID], addr[o.ID] = o.RunState, o.Address
		}
		e.observe(p, seen, e.drifts(drv, ws, seen, addr), slots)
	}
}

// drifts reads the provenance marks of the leased devices seen running, in
// one call per device, and returns the drifts found, by lease. Only running
// devices are read: that bounds the work of a probe by the running slots,
// and an Android device's erasable mark can be read from nothing else. A
// device being recovered is left for the next probe; a read that fails
// says nothing.
func (e *Engine) drifts(drv driver.Driver, ws []watched, seen map[string]driver.RunState, addr map[string]string) map[string]driver.Drift {
	pr, ok := drv.(driver.ProvenanceReader)
	if !ok {
		return nil
	}
	out := map[string]driver.Drift{}
	for _, w := range ws {
		if w.recovering || seen[w.dev.ID] != driver.Running {
			continue
		}
		dev := w.dev
		dev.Address = addr[dev.ID]
		ctx, cancel := context.WithTimeout(e.ctx, provenanceTimeout)
		prov, err := pr.Provenance(ctx, dev)
		cancel()
		if err != nil {
			e.log.Warn("health probe could not read a device's provenance marks", "driverDeviceId", dev.ID, "err", err)
			continue
		}
		if drift := prov.Drift(); drift != driver.DriftNone {
			out[w.lease] = drift
		}
	}
	return out
}

// observe acts on one platform's reading: seen is each device's run state,
// drifts the provenance drift read for a lease's device. A drift counts
// only for the lease it was read under, so a device cleaned and leased
// again since (its marks rewritten meanwhile) is never judged by it.
func (e *Engine) observe(p contract.Platform, seen map[string]driver.RunState, drifts map[string]driver.Drift, slots chan struct{}) {
	_ = e.do(func(tx *queue.Txn) error {
		ids := make([]string, 0, len(e.leases))
		for id := range e.leases {
			ids = append(ids, id)
		}
		sort.Strings(ids)
		for _, leaseID := range ids {
			l := e.leases[leaseID]
			d, ok := e.reg.get(l.DeviceID)
			if !ok || d.Platform != p || d.State != contract.DeviceLeased {
				continue
			}
			h := e.health[d.ID]
			if h == nil {
				h = &healthState{}
				e.health[d.ID] = h
			}
			if h.cancel != nil {
				continue // a recovery is running
			}
			state, present := seen[d.DriverDeviceID]
			switch {
			case !present:
				h.stopped = 0
				h.absent++
				if h.absent >= e.opts.Health.StableObservations {
					tx.Event(contract.EvDeviceRecoveryFailed, map[string]any{"deviceId": d.ID, "leaseId": leaseID, "attempts": 0, "reason": "vanished"})
					delete(e.health, d.ID)
					e.endLocked(tx, leaseID, contract.EndDeviceLost)
				}
			case state == driver.Stopped:
				h.absent = 0
				h.stopped++
				if h.stopped >= e.opts.Health.StableObservations {
					e.startRecoveryLocked(tx, leaseID, d, h, slots)
				}
			case state == driver.Running:
				h.stopped, h.absent = 0, 0
				if drift, ok := drifts[leaseID]; ok {
					// Erased or replaced behind the holder's back: its
					// work is gone or it is not simlock's device, so the
					// lease cannot go on as if nothing happened. The clean
					// that follows refuses a device that is not simlock's,
					// which quarantines it.
					tx.Event(contract.EvDeviceRecoveryFailed, map[string]any{"deviceId": d.ID, "leaseId": leaseID, "attempts": 0,
						"reason": "provenance-drift", "detail": drift})
					delete(e.health, d.ID)
					e.endLocked(tx, leaseID, contract.EndDeviceLost)
				}
			}
		}
		// Forget devices no longer leased.
		for id := range e.health {
			if d, ok := e.reg.get(id); !ok || d.lease == "" {
				delete(e.health, id)
			}
		}
		return nil
	})
}

// startRecoveryLocked reports the crash and, once tx commits, boots the
// device again in the background, under the same lease.
func (e *Engine) startRecoveryLocked(tx *queue.Txn, leaseID string, d *dev, h *healthState, slots chan struct{}) {
	ctx, cancel := context.WithCancel(e.ctx)
	h.cancel = cancel
	h.stopped = 0
	tx.Event(contract.EvDeviceCrashDetected, map[string]any{"deviceId": d.ID, "leaseId": leaseID})
	l := e.leases[leaseID].LeaseRecord
	tx.After(func() {
		e.opts.DeviceHealth(l, NoticeUnhealthy, 0)
		e.goWork(func() { e.recover(ctx, leaseID, d, slots) })
	})
}

// recover boots a crashed device, backing off between tries; it gives up,
// ending the lease as device-lost, when the tries are spent. It stops at
// once if the lease ends meanwhile.
func (e *Engine) recover(ctx context.Context, leaseID string, d *dev, slots chan struct{}) {
	defer e.view(func() {
		if h := e.health[d.ID]; h != nil {
			h.cancel = nil
		}
	})
	select {
	case slots <- struct{}{}:
		defer func() { <-slots }()
	case <-ctx.Done():
		return
	}
	var lastErr error
	for attempt := 1; attempt <= e.opts.Health.MaxAttempts; attempt++ {
		wait := e.opts.Health.Backoff << (attempt - 1)
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		var rec store.Device
		still := false
		e.view(func() {
			_, leased := e.leases[leaseID]
			still = d.at != nil && leased && d.State == contract.DeviceLeased
			rec = d.Device
		})
		if !still {
			return
		}
		// Recover, not MakeReady: the device boots as it was, with the
		// holder's work on it, since the lease goes on.
		ready, err := e.opts.Drivers[rec.Platform].Recover(ctx, driver.Device{ID: rec.DriverDeviceID, Address: rec.Address, Data: rec.DriverData})
		if ctx.Err() != nil {
			return
		}
		if err == nil {
			_ = e.do(func(tx *queue.Txn) error {
				l, still := e.leases[leaseID]
				if !still {
					return nil
				}
				e.booted(tx, d, ready, nil)
				tx.Event(contract.EvDeviceRecovered, map[string]any{"deviceId": d.ID, "leaseId": leaseID, "attempts": attempt})
				rec := l.LeaseRecord
				tx.After(func() { e.opts.DeviceHealth(rec, NoticeRecovered, attempt) })
				return nil
			})
			return
		}
		lastErr = err
		e.log.Warn("recovery attempt failed", "deviceId", d.ID, "leaseId", leaseID, "attempt", attempt, "err", err)
	}
	_ = e.do(func(tx *queue.Txn) error {
		if _, still := e.leases[leaseID]; !still {
			return nil
		}
		msg := ""
		if lastErr != nil {
			msg = lastErr.Error()
		}
		tx.Event(contract.EvDeviceRecoveryFailed, map[string]any{"deviceId": d.ID, "leaseId": leaseID, "attempts": e.opts.Health.MaxAttempts, "reason": "attempts-exhausted", "error": msg})
		delete(e.health, d.ID)
		e.endLocked(tx, leaseID, contract.EndDeviceLost)
		return nil
	})
}

// stopRecoveryLocked ends a recovery in flight for a device whose lease
// ended.
func (e *Engine) stopRecoveryLocked(devID string) {
	if h := e.health[devID]; h != nil && h.cancel != nil {
		h.cancel()
	}
	delete(e.health, devID)
}
