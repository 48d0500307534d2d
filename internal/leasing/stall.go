package leasing

import (
	"time"

	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/driver"
	"github.com/simlock/simlock/internal/queue"
)

// StallPolicy says when a transition (provisioning, reclaiming) counts as
// stalled: after Multiplier times the driver's estimate of it, and never
// sooner than Minimum. The zero policy is the defaults, 3× and one minute.
type StallPolicy struct {
	Multiplier int
	Minimum    time.Duration
}

func (p StallPolicy) withDefaults() StallPolicy {
	if p.Multiplier <= 0 {
		p.Multiplier = 3
	}
	if p.Minimum <= 0 {
		p.Minimum = time.Minute
	}
	return p
}

// transitioning reports whether d is in a transition whose length the
// stall rule judges.
func transitioning(s contract.DeviceState) bool {
	return s == contract.DeviceProvisioning || s == contract.DeviceReclaiming
}

// stallThresholdMs is how long d may stay in its transition before it
// counts as stalled: the one rule status, the event and doctor share. A
// provisioning device is also booted before it serves, so its estimate is
// provision plus boot.
func (e *Engine) stallThresholdMs(d *dev) int64 {
	var est int64
	switch d.State {
	case contract.DeviceProvisioning:
		est = e.estimate(d.Platform, driver.OpProvision, d.spec()) + e.estimate(d.Platform, driver.OpBoot, d.spec())
	case contract.DeviceReclaiming:
		est = e.estimate(d.Platform, driver.OpReclaim, d.spec())
	}
	p := e.opts.Stall
	return max(int64(p.Multiplier)*est, p.Minimum.Milliseconds())
}

// withTransition adds to v, the view of d at time t, how long d has been in
// its transition and whether that is past the stall threshold.
func (e *Engine) withTransition(v contract.Device, d *dev, t int64) contract.Device {
	if !transitioning(d.State) {
		return v
	}
	v.TransitionAgeMs = max(t-d.StateSince, 0)
	v.Stalled = v.TransitionAgeMs > e.stallThresholdMs(d)
	return v
}

// armStallLocked sets, once tx commits, the timer that reports d stalled if
// it is still in the transition it is in now when the threshold passes.
func (e *Engine) armStallLocked(tx *queue.Txn, d *dev) {
	if !transitioning(d.State) {
		return
	}
	state, since := d.State, d.StateSince
	tx.After(func() {
		if d.at == nil || d.State != state || d.StateSince != since || e.stopping {
			return
		}
		key := "stall:" + d.ID
		if t, ok := e.timers[key]; ok {
			t.Stop()
		}
		wait := e.untilWall(since + e.stallThresholdMs(d) + 1)
		e.timers[key] = time.AfterFunc(max(wait, 0), func() { e.reportStall(d, state, since) })
	})
}

// reportStall records device.stalled-transition-detected for d, once for
// the transition that began at since, if d is still in it. Nothing else
// changes: the work in flight may yet finish, and `doctor --fix` is what
// quarantines a stalled device with nothing working on it.
func (e *Engine) reportStall(d *dev, state contract.DeviceState, since int64) {
	_ = e.do(func(tx *queue.Txn) error {
		delete(e.timers, "stall:"+d.ID)
		if d.at == nil || d.State != state || d.StateSince != since || e.stopping {
			return nil
		}
		tx.Event(contract.EvDeviceStalledTransitionDetected, map[string]any{
			"deviceId": d.ID, "platform": d.Platform, "state": d.State,
			"transitionAgeMs": max(e.now()-since, 0), "thresholdMs": e.stallThresholdMs(d),
			"inFlight": d.claim != claimNone,
		})
		return nil
	})
}
