package leasing

import (
	"context"
	"time"

	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/core"
	"github.com/simlock/simlock/internal/driver"
	"github.com/simlock/simlock/internal/queue"
	"github.com/simlock/simlock/internal/store"
)

// Re-warming released devices (warmPool.rewarmReleased).
//
// An iOS clean erases the simulator, which leaves it shut down, so without
// this the next requester pays a full boot. The warm pass boots such a
// device again when its last use is recent enough that it would be ready
// before the idle rule's age (idle.shutdownAfterMs) runs out, a running
// slot is free beyond the platform's reserve, no request waits on the
// platform, and fewer than warmPool.maxConcurrentBoots pool boots run. A
// re-warmed device nobody leases is shut down by the idle rule when that age
// has passed since its last use, as if it had never stopped, so it is never
// kept up longer than the rule would have kept it.
//
// The slot a re-warm boot holds is the pool's only until a request wants
// it, and a request never waits for a re-warm to finish that it does not
// want:
//
//   - A request the device fits takes the boot over (adoptLocked). It
//     leaves the line at once as starting, is told the booting stage with
//     what is left of the boot, and is granted the device in the commit that
//     marks it ready, with source booted: the device was not ready when it
//     was asked for. No boot the request could start itself would be sooner.
//   - A request that needs the slot, or the device's place under the device
//     limit, for another device takes it as it takes an idle ready
//     device's: the re-warming device is its eviction (or deletion) victim,
//     chosen only when no idle device would do (yieldLocked). The boot
//     claim becomes the victim's claim, which frees the slot in that same
//     decision; the boot is cancelled, and the request's start waits for the
//     driver to return from it, then shuts the device down (or deletes it)
//     and starts its own. Such a request waits for a cancelled boot to stop
//     and one shutdown, as for any eviction, never for the boot itself.
//
// Both keep the claim model as it is: a boot claim holds a running slot
// whoever the boot is for, and a victim's claim releases it.

// rewarm is one re-warm boot in flight; the decision lock guards adopter.
type rewarm struct {
	// cancel ends the boot when a request takes its slot.
	cancel context.CancelFunc
	// done is closed once the driver's boot call has returned, so a start
	// that took the device over acts on it only after the driver let go.
	done  chan struct{}
	since time.Time
	// adopter is the request that took the boot over; nil while the boot
	// is the pool's.
	adopter *queue.Waiter
}

// kickWarm asks for a warm pass now. It never blocks.
func (e *Engine) kickWarm() {
	select {
	case e.warm.kick <- struct{}{}:
	default:
	}
}

// rewarmLocked starts re-warm boots of recently used, idle, shut-down
// devices, most recently used first, within what plans (this pass's target
// starts) leave.
func (e *Engine) rewarmLocked(tx *queue.Txn, plans []warmPlan) {
	wp := e.opts.WarmPool
	if !wp.RewarmReleased {
		return
	}
	u := e.reg.use
	inFlight := len(e.warm.booting) + len(e.warm.rewarming)
	for _, p := range plans {
		if p.boot == nil {
			// A device the pass is to create reserves its slot only when
			// its creation begins.
			u.Reserved.Add(wp.Targets[p.target].Platform, 1)
			inFlight++
		}
	}
	_, depth := e.q.CountsLocked()
	t := e.now()
	window := e.opts.Idle.ShutdownAfter.Milliseconds()
	for _, p := range contract.Platforms() {
		v := e.reg.victims[victimKey{contract.DeviceShutdown, p}]
		if _, ok := e.opts.Drivers[p]; !ok || v == nil || e.q.WaitingOnLocked(p) {
			continue
		}
		var picked []*dev
		for i := v.len() - 1; i >= 0 && inFlight < wp.MaxConcurrentBoots && e.rewarmRoomLocked(u, p, depth); i-- {
			d := v.items[i]
			idle := t - d.LastUsedAt
			if idle >= window {
				break // least recently used first: the rest are older
			}
			if idle+e.estimate(p, driver.OpBoot, d.spec()) >= window {
				continue // it would be ready only for the idle rule to stop it
			}
			if d.rewarmFailed == d.LastUsedAt {
				continue // one failed boot is enough until a lease uses it
			}
			picked = append(picked, d)
			u.Reserved.Add(p, 1)
			inFlight++
		}
		// Claimed after the walk: a claim takes the device out of v.
		for _, d := range picked {
			e.beginRewarmLocked(tx, d)
		}
	}
}

// rewarmRoomLocked reports whether one more boot of p fits in u for a
// re-warm: a running slot free beyond p's reserve and, while anyone waits
// in line, beyond the last machine-wide slot, which a waiter of another
// platform may need next.
func (e *Engine) rewarmRoomLocked(u core.Usage, p contract.Platform, depth int) bool {
	lim := e.opts.Limits
	if core.CanStart(lim, u, p) != core.BlockNone {
		return false
	}
	if u.Running.Of(p)+u.Reserved.Of(p)+e.opts.WarmPool.Reserve[p] >= lim.Platforms[p].MaxRunning {
		return false
	}
	return depth == 0 || u.TotalRunning()+1 < lim.MaxRunning
}

// beginRewarmLocked claims d for a re-warm boot, which starts once tx has
// committed.
func (e *Engine) beginRewarmLocked(tx *queue.Txn, d *dev) {
	ctx, cancel := context.WithCancel(e.ctx)
	r := &rewarm{cancel: cancel, done: make(chan struct{}), since: time.Now()}
	e.setClaim(tx, d, claimBoot)
	e.warm.rewarming[d.ID] = r
	tx.After(func() { e.goWork(func() { e.runRewarm(ctx, d, r) }) })
}

// runRewarm boots d and commits the result: d ready and idle, or, in the
// same commit, leased to the request that adopted the boot.
func (e *Engine) runRewarm(ctx context.Context, d *dev, r *rewarm) {
	defer r.cancel()
	var rec store.Device
	e.view(func() { rec = d.Device })
	dd := driver.Device{ID: rec.DriverDeviceID, Address: rec.Address, Data: rec.DriverData}
	started := time.Now()
	ready, err := e.opts.Drivers[rec.Platform].MakeReady(ctx, dd)
	close(r.done)
	_ = e.do(func(tx *queue.Txn) error {
		if e.warm.rewarming[d.ID] != r {
			return nil // a request took the slot: its start owns the device now
		}
		delete(e.warm.rewarming, d.ID)
		e.setClaim(tx, d, claimNone)
		w := r.adopter
		if err != nil {
			if e.ctx.Err() == nil {
				e.log.Warn("re-warm boot failed", "deviceId", d.ID, "err", err)
				d.rewarmFailed = d.LastUsedAt
			}
			if w != nil {
				cerr, reason := e.startError(err, contract.RejectBootFailed)
				tx.Settle(w, cerr, reason)
			}
			return nil
		}
		if d.at == nil {
			if w != nil {
				tx.Requeue(w) // the device went; another may serve it
			}
			return nil
		}
		e.booted(tx, d, ready, func(r *store.Device) { r.State = contract.DeviceReady })
		tx.Event(contract.EvDeviceReady, map[string]any{"deviceId": d.ID, "bootDuration": time.Since(started).Milliseconds(), "initiator": "rewarm"})
		if w == nil || tx.Abandoned(w) {
			// Its last use stays as it was, and the idle rule counts from
			// there (idle.go): the boot does not make it recently used.
			d.rewarmedAt = d.StateSince
			if w != nil {
				tx.Settle(w, contract.Errorf(contract.CodeCancelled, "the requester went away"), contract.RejectCancelled)
			}
			return nil
		}
		e.grantLocked(tx, w, d, contract.SourceBooted)
		return nil
	})
}

// adoptableLocked is the device of a re-warm boot no request took over yet
// that fits want, the most recently used first; nil if there is none.
func (e *Engine) adoptableLocked(want core.Want, cat driver.Catalog) *dev {
	var best *dev
	for id, r := range e.warm.rewarming { // at most warmPool.maxConcurrentBoots
		d, ok := e.reg.get(id)
		if !ok || r.adopter != nil || !core.Fits(d.spec(), want, cat) {
			continue
		}
		if best == nil || later(d, best) {
			best = d
		}
	}
	return best
}

// adoptLocked hands the re-warm boot of d to w: w is granted d when the boot
// ends (runRewarm), so its Start has nothing of its own to run.
func (e *Engine) adoptLocked(w *queue.Waiter, d *dev) queue.Start {
	r := e.warm.rewarming[d.ID]
	r.adopter = w
	spec := d.spec()
	left := e.estimate(spec.Platform, driver.OpBoot, spec) - time.Since(r.since).Milliseconds()
	return queue.Start{
		Progress: contract.LeaseProgress{Stage: contract.StageBooting, EtaMs: max(left, 0)},
		Target:   &spec,
		DeviceID: d.ID,
		Run:      func() {},
	}
}

// yieldableLocked is the device of a re-warm boot no request took over,
// of platform p (of any platform when anyPlatform), other than except, the
// least recently used first; nil if there is none.
func (e *Engine) yieldableLocked(p contract.Platform, anyPlatform bool, except string) *dev {
	var best *dev
	for id, r := range e.warm.rewarming { // at most warmPool.maxConcurrentBoots
		d, ok := e.reg.get(id)
		if !ok || r.adopter != nil || id == except || (d.Platform != p && !anyPlatform) {
			continue
		}
		if best == nil || earlier(d, best) {
			best = d
		}
	}
	return best
}

// yieldLocked ends the pool's hold on d if a re-warm boots it: the boot is
// cancelled once tx has committed, and the returned channel closes when the
// driver has returned from it. It returns nil for any other device.
func (e *Engine) yieldLocked(tx *queue.Txn, d *dev) <-chan struct{} {
	r, ok := e.warm.rewarming[d.ID]
	if !ok {
		return nil
	}
	delete(e.warm.rewarming, d.ID)
	tx.After(r.cancel)
	e.log.Info("a re-warm boot gives its slot to a request", "deviceId", d.ID)
	return r.done
}
