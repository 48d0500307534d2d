package leasing

import (
	"context"
	"sort"
	"time"

	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/queue"
)

// IdlePolicy is the idle tiers: a ready device unused for ShutdownAfter is
// shut down; a shut-down one unused for DeleteAfter is deleted, or after
// ShutdownAfter while the disk is short (free space below
// PressureThreshold on a device root's volume). Leased, claimed and
// warm-pool devices are never touched.
type IdlePolicy struct {
	Enabled           bool
	ShutdownAfter     time.Duration
	DeleteAfter       time.Duration
	PressureThreshold int64
	// FreeBytes reads the free space of the volume holding path; nil means
	// no disk-pressure check.
	FreeBytes func(path string) (int64, error)
}

func (p IdlePolicy) withDefaults() IdlePolicy {
	if p.ShutdownAfter <= 0 {
		p.ShutdownAfter = 10 * time.Minute
	}
	if p.DeleteAfter <= 0 {
		p.DeleteAfter = time.Hour
	}
	return p
}

// Rules describes the idle rules as configured.
func (m *Maintenance) Rules() contract.CleanupRulesResult {
	e := m.e
	p := e.opts.Idle
	return contract.CleanupRulesResult{
		Rules: []contract.CleanupRule{
			{Name: contract.RuleIdleShutdown, Action: "shutdown", AfterMs: p.ShutdownAfter.Milliseconds(),
				Description: "shut down a ready device nobody leased for idle.shutdownAfterMs"},
			{Name: contract.RuleIdleDelete, Action: "delete", AfterMs: p.DeleteAfter.Milliseconds(),
				Description: "delete a shut-down device nobody used for idle.deleteAfterMs (idle.shutdownAfterMs under disk pressure)"},
		},
		DiskPressure: e.diskPressure(),
	}
}

// diskPressure reports whether any device root's volume is short of space.
func (e *Engine) diskPressure() bool {
	p := e.opts.Idle
	if p.FreeBytes == nil || p.PressureThreshold <= 0 {
		return false
	}
	for _, drv := range e.opts.Drivers {
		root := drv.Root()
		if root == "" {
			continue
		}
		if free, err := p.FreeBytes(root); err == nil && free < p.PressureThreshold {
			return true
		}
	}
	return false
}

// reapIdle runs the idle rules on a tick until the engine closes.
func (e *Engine) reapIdle() {
	every := min(max(e.opts.Idle.ShutdownAfter/4, 100*time.Millisecond), 30*time.Second)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-e.ctx.Done():
			return
		case <-t.C:
		}
		e.Maintenance().Cleanup(e.ctx, contract.CleanupRunInput{}, "tick")
	}
}

// proposalsLocked lists what the rules would do now, oldest idle first. It
// walks the idle devices from the least recently used and stops at the
// first used too recently: a device's idle time is at most the time since
// its last use.
func (e *Engine) proposalsLocked(rule string, pressure bool) []contract.CleanupAction {
	t := e.now()
	var out []contract.CleanupAction
	deleteAfter := e.opts.Idle.DeleteAfter
	if pressure {
		deleteAfter = e.opts.Idle.ShutdownAfter
	}
	kept := e.targetedLocked()
	look := func(state contract.DeviceState, r, action string, after int64) {
		if rule != "" && rule != r {
			return
		}
		for _, p := range contract.Platforms() {
			v := e.reg.victims[victimKey{state, p}]
			if v == nil {
				continue
			}
			for _, d := range v.items {
				if t-d.LastUsedAt < after {
					break
				}
				since := max(d.LastUsedAt, d.StateSince)
				if d.State == contract.DeviceReady && d.rewarmedAt == d.StateSince {
					// Re-warmed: up as long as it would have been had its
					// clean not stopped it, and no longer.
					since = d.LastUsedAt
				}
				if idle := t - since; idle >= after && !kept[d.ID] {
					out = append(out, contract.CleanupAction{Rule: r, DeviceID: d.ID, Action: action, IdleMs: idle})
				}
			}
		}
	}
	look(contract.DeviceReady, contract.RuleIdleShutdown, "shutdown", e.opts.Idle.ShutdownAfter.Milliseconds())
	look(contract.DeviceShutdown, contract.RuleIdleDelete, "delete", deleteAfter.Milliseconds())
	sort.Slice(out, func(i, j int) bool {
		if out[i].IdleMs != out[j].IdleMs {
			return out[i].IdleMs > out[j].IdleMs
		}
		return out[i].DeviceID < out[j].DeviceID
	})
	return out
}

// Cleanup runs the idle rules now (or, with DryRun, says what they would
// do). Each action is taken under a claim, checked again just before, so
// a device leased meanwhile is left alone.
func (m *Maintenance) Cleanup(ctx context.Context, in contract.CleanupRunInput, trigger string) contract.CleanupRunResult {
	e := m.e
	pressure := e.diskPressure()
	var actions []contract.CleanupAction
	var todo []contract.CleanupAction
	var devs []*dev
	dry := false
	_ = e.do(func(tx *queue.Txn) error {
		actions = e.proposalsLocked(in.Rule, pressure)
		if in.DryRun || e.stopping || e.maintenanceLocked() {
			dry = true
			return nil
		}
		for _, a := range actions {
			if d, ok := e.reg.get(a.DeviceID); ok && d.idle() {
				e.setClaim(tx, d, claimCleanup)
				todo = append(todo, a)
				devs = append(devs, d)
			}
		}
		return nil
	})
	if dry {
		return contract.CleanupRunResult{DryRun: in.DryRun, Actions: nonNilActions(actions)}
	}
	done := []contract.CleanupAction{}
	for i, a := range todo {
		var err error
		if a.Action == "shutdown" {
			err = e.shutdownDevice(ctx, devs[i], "rule")
		} else {
			err = e.removeDevice(ctx, devs[i], "rule")
		}
		if err != nil {
			a.Error = err.Error()
		}
		_ = e.do(func(tx *queue.Txn) error {
			tx.Event(contract.EvCleanupExecuted, map[string]any{"rule": a.Rule, "deviceId": a.DeviceID, "action": a.Action, "idleMs": a.IdleMs, "trigger": trigger, "ok": err == nil})
			return nil
		})
		done = append(done, a)
	}
	return contract.CleanupRunResult{Actions: done}
}

func nonNilActions(a []contract.CleanupAction) []contract.CleanupAction {
	if a == nil {
		return []contract.CleanupAction{}
	}
	return a
}
