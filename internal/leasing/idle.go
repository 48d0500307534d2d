package leasing

import (
	"context"
	"sort"
	"time"

	"github.com/simlock/simlock/internal/contract"
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
func (e *Engine) Rules() contract.CleanupRulesResult {
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
		e.Cleanup(e.ctx, contract.CleanupRunInput{}, "tick")
	}
}

// proposalsLocked lists what the rules would do now, oldest idle first.
func (e *Engine) proposalsLocked(rule string, pressure bool) []contract.CleanupAction {
	t := now()
	var out []contract.CleanupAction
	deleteAfter := e.opts.Idle.DeleteAfter
	if pressure {
		deleteAfter = e.opts.Idle.ShutdownAfter
	}
	kept := e.targetedLocked()
	for id, d := range e.devices {
		if _, leased := e.byDevice[id]; leased || e.claims[id] != "" || kept[id] {
			continue
		}
		idle := t - max(d.LastUsedAt, d.StateSince)
		switch {
		case d.State == contract.DeviceReady && (rule == "" || rule == contract.RuleIdleShutdown) && idle >= e.opts.Idle.ShutdownAfter.Milliseconds():
			out = append(out, contract.CleanupAction{Rule: contract.RuleIdleShutdown, DeviceID: id, Action: "shutdown", IdleMs: idle})
		case d.State == contract.DeviceShutdown && (rule == "" || rule == contract.RuleIdleDelete) && idle >= deleteAfter.Milliseconds():
			out = append(out, contract.CleanupAction{Rule: contract.RuleIdleDelete, DeviceID: id, Action: "delete", IdleMs: idle})
		}
	}
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
func (e *Engine) Cleanup(ctx context.Context, in contract.CleanupRunInput, trigger string) contract.CleanupRunResult {
	pressure := e.diskPressure()
	e.mu.Lock()
	actions := e.proposalsLocked(in.Rule, pressure)
	if in.DryRun || e.stopping || e.maintenanceLocked() {
		e.mu.Unlock()
		return contract.CleanupRunResult{DryRun: in.DryRun, Actions: nonNilActions(actions)}
	}
	var todo []contract.CleanupAction
	for _, a := range actions {
		if e.claims[a.DeviceID] == "" {
			e.claims[a.DeviceID] = "cleanup"
			todo = append(todo, a)
		}
	}
	e.mu.Unlock()
	done := []contract.CleanupAction{}
	for _, a := range todo {
		initiator := "rule"
		var err error
		if a.Action == "shutdown" {
			err = e.shutdownDevice(ctx, a.DeviceID, initiator)
		} else {
			err = e.removeDevice(ctx, a.DeviceID, initiator)
		}
		if err != nil {
			a.Error = err.Error()
		}
		e.mu.Lock()
		tx := e.begin()
		tx.event("cleanup.executed", map[string]any{"rule": a.Rule, "deviceId": a.DeviceID, "action": a.Action, "idleMs": a.IdleMs, "trigger": trigger, "ok": err == nil})
		_, _ = e.commitLocked(tx)
		e.serveLocked()
		e.mu.Unlock()
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
