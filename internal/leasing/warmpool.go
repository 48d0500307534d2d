package leasing

import (
	"sort"
	"strings"
	"time"

	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/core"
	"github.com/simlock/simlock/internal/driver"
	"github.com/simlock/simlock/internal/store"
)

// WarmPoolPolicy is what the warm pool keeps booted. Enabled, it keeps each
// target's Count idle devices ready, booting a shut-down one or creating
// one (never downloading, never evicting, never while a request waits on
// the platform, at most MaxConcurrentBoots at once), and keeps Reserve
// running slots per platform free of idle devices. Disabled, idle ready
// devices are shut down.
type WarmPoolPolicy struct {
	Enabled            bool
	Reserve            map[contract.Platform]int
	MaxConcurrentBoots int
	Targets            []contract.WarmTarget
	// Interval is how often a pass runs; 0 means 2 s.
	Interval time.Duration
}

func (p WarmPoolPolicy) withDefaults() WarmPoolPolicy {
	if p.MaxConcurrentBoots <= 0 {
		p.MaxConcurrentBoots = 1
	}
	if p.Interval <= 0 {
		p.Interval = 2 * time.Second
	}
	if p.Reserve == nil {
		p.Reserve = map[contract.Platform]int{}
	}
	return p
}

// warmState is what the pool remembers between passes.
type warmState struct {
	booting map[string]int    // device id -> target index, boots in flight
	reason  map[int]string    // target index -> last reason it is short
	failed  map[int]time.Time // target index -> last failed boot, to back off
}

func targetMatches(t contract.WarmTarget, d *store.Device) bool {
	return d.Platform == t.Platform && strings.EqualFold(d.Model, t.Model) &&
		(t.OSVersion == "" || core.VersionFits(d.OSVersion, t.OSVersion))
}

// runWarmPool runs passes until the engine closes.
func (e *Engine) runWarmPool() {
	t := time.NewTicker(e.opts.WarmPool.Interval)
	defer t.Stop()
	for {
		select {
		case <-e.ctx.Done():
			return
		case <-t.C:
		}
		e.warmPass()
	}
}

// idleReadyLocked lists idle ready devices, most recently used first.
func (e *Engine) idleReadyLocked() []*store.Device {
	var out []*store.Device
	for id, d := range e.devices {
		if _, leased := e.byDevice[id]; !leased && d.State == contract.DeviceReady && e.claims[id] == "" {
			out = append(out, d)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].LastUsedAt != out[j].LastUsedAt {
			return out[i].LastUsedAt > out[j].LastUsedAt
		}
		return out[i].ID < out[j].ID
	})
	return out
}

// targetedLocked is the set of idle ready devices the targets keep: for
// each target, up to Count of its matching devices.
func (e *Engine) targetedLocked() map[string]bool {
	kept := map[string]bool{}
	if e.opts.WarmPool == nil || !e.opts.WarmPool.Enabled {
		return kept
	}
	idle := e.idleReadyLocked()
	for _, t := range e.opts.WarmPool.Targets {
		n := 0
		for _, d := range idle {
			if n < t.Count && !kept[d.ID] && targetMatches(t, d) {
				kept[d.ID] = true
				n++
			}
		}
	}
	return kept
}

// waitingOnLocked reports whether a request waits in the queue for p.
func (e *Engine) waitingOnLocked(p contract.Platform) bool {
	for _, r := range e.queue {
		if r.want.Platform == p {
			return true
		}
	}
	return false
}

// warmPlan is one thing a pass decided to do.
type warmPlan struct {
	target int
	boot   string // a shut-down device to boot; "" to create one
}

// warmPass sheds idle devices over budget and fills short targets.
func (e *Engine) warmPass() {
	e.mu.Lock()
	if e.stopping || !e.started || e.maintenanceLocked() {
		// A nuke owns the devices while it runs.
		e.mu.Unlock()
		return
	}
	var shed []string
	var plans []warmPlan
	if !e.opts.WarmPool.Enabled {
		for _, d := range e.idleReadyLocked() {
			shed = append(shed, d.ID)
		}
	} else {
		shed = e.overBudgetLocked()
		plans = e.fillLocked()
	}
	for _, id := range shed {
		e.claims[id] = "eviction"
	}
	e.mu.Unlock()

	for _, id := range shed {
		_ = e.shutdownDevice(e.ctx, id, "warm-pool")
	}
	for _, p := range plans {
		e.startWarm(p)
	}
	if len(shed) > 0 {
		e.mu.Lock()
		e.serveLocked()
		e.mu.Unlock()
	}
}

// overBudgetLocked picks idle ready devices to shut down so that idle
// devices leave each platform's reserve free: least recently used first,
// devices no target keeps before the kept ones.
func (e *Engine) overBudgetLocked() []string {
	var out []string
	kept := e.targetedLocked()
	u := e.usageLocked()
	for _, p := range contract.Platforms() {
		reserve := e.opts.WarmPool.Reserve[p]
		if reserve <= 0 {
			continue
		}
		var idle []*store.Device
		for _, d := range e.idleReadyLocked() {
			if d.Platform == p {
				idle = append(idle, d)
			}
		}
		free := e.opts.Limits.Platforms[p].MaxRunning - u.Running[p] - u.Reserved[p]
		excess := reserve - free
		// Least recently used last in idle; unkept ones go first.
		sort.SliceStable(idle, func(i, j int) bool { return !kept[idle[i].ID] && kept[idle[j].ID] })
		for i := len(idle) - 1; i >= 0 && excess > 0; i-- {
			out = append(out, idle[i].ID)
			excess--
		}
	}
	return out
}

// fillLocked decides which short targets to start a device for now, and
// records why the others are short.
func (e *Engine) fillLocked() []warmPlan {
	st := e.warm
	var plans []warmPlan
	inFlight := len(st.booting)
	u := e.usageLocked()
	idle := e.idleReadyLocked()
	for i, t := range e.opts.WarmPool.Targets {
		ready, booting := 0, 0
		for _, d := range idle {
			if targetMatches(t, d) {
				ready++
			}
		}
		for _, ti := range st.booting {
			if ti == i {
				booting++
			}
		}
		short := t.Count - min(ready, t.Count) - booting
		reason := ""
		for short > 0 {
			reason = e.warmBlockLocked(i, t, u, inFlight)
			if reason != "" {
				break
			}
			plan := warmPlan{target: i}
			for id, d := range e.devices {
				if _, leased := e.byDevice[id]; !leased && d.State == contract.DeviceShutdown && e.claims[id] == "" && targetMatches(t, d) {
					plan.boot = id
					break
				}
			}
			if plan.boot == "" {
				if b := core.CanCreate(e.opts.Limits, u, t.Platform); b != core.BlockNone {
					reason = warmReason(b)
					break
				}
			}
			// Reserve the slot now, so the next target counts it.
			if plan.boot != "" {
				e.claims[plan.boot] = "boot"
				st.booting[plan.boot] = i
			} else {
				u.Devices[t.Platform]++
			}
			u.Reserved[t.Platform]++
			inFlight++
			short--
			plans = append(plans, plan)
		}
		if reason != st.reason[i] {
			st.reason[i] = reason
			if reason != "" && reason != "request-waiting" && reason != "boot-limit" {
				tx := e.begin()
				tx.event("warm-pool.target-missed", map[string]any{
					"platform": t.Platform, "model": t.Model, "osVersion": t.OSVersion, "count": t.Count,
					"ready": ready, "short": short, "reason": reason,
				})
				_, _ = e.commitLocked(tx)
			}
		}
	}
	return plans
}

// warmBlockLocked says why target i cannot get one more device now.
func (e *Engine) warmBlockLocked(i int, t contract.WarmTarget, u core.Usage, inFlight int) string {
	if _, ok := e.opts.Drivers[t.Platform]; !ok {
		return "no-driver"
	}
	if e.waitingOnLocked(t.Platform) {
		return "request-waiting"
	}
	if inFlight >= e.opts.WarmPool.MaxConcurrentBoots {
		return "boot-limit"
	}
	if at, ok := e.warm.failed[i]; ok && time.Since(at) < time.Minute {
		return "boot-failed"
	}
	if b := core.CanStart(e.opts.Limits, u, t.Platform); b != core.BlockNone {
		return warmReason(b)
	}
	if u.Running[t.Platform]+u.Reserved[t.Platform]+e.opts.WarmPool.Reserve[t.Platform] >= e.opts.Limits.Platforms[t.Platform].MaxRunning {
		return "reserve"
	}
	return ""
}

func warmReason(b core.Block) string {
	switch b {
	case core.BlockDeviceLimit:
		return "device-limit"
	case core.BlockRAM:
		return "ram-budget"
	}
	return "running-limit"
}

// startWarm boots a shut-down device, or resolves, creates and boots a new
// one, for a target.
func (e *Engine) startWarm(p warmPlan) {
	t := e.opts.WarmPool.Targets[p.target]
	drv := e.opts.Drivers[t.Platform]
	id := p.boot
	if id == "" {
		// Model names match in any case, as in requests.
		model := t.Model
		e.mu.Lock()
		for _, m := range e.catalogs[t.Platform].Models {
			if strings.EqualFold(m, model) {
				model = m
			}
		}
		e.mu.Unlock()
		spec, err := drv.ResolveSpec(e.ctx, driver.Request{Platform: t.Platform, Model: model, OSVersion: t.OSVersion})
		e.mu.Lock()
		if err != nil {
			reason := "unresolvable"
			switch driver.ContractError(err).Code {
			case contract.CodeUnknownModel:
				reason = "unknown-model"
			case contract.CodeRuntimeMissing:
				reason = "runtime-missing"
			}
			e.noteWarmFailureLocked(p.target, reason, false)
			e.mu.Unlock()
			return
		}
		if b := core.CanCreate(e.opts.Limits, e.usageLocked(), t.Platform); b != core.BlockNone || e.stopping {
			e.mu.Unlock()
			return
		}
		id = newID("dev_")
		ts := now()
		tx := e.begin()
		tx.putDevice(store.Device{ID: id, Platform: spec.Platform, Model: spec.Model, OSVersion: spec.OSVersion,
			Driver: drv.Name(), State: contract.DeviceProvisioning, CreatedAt: ts, StateSince: ts, LastUsedAt: ts})
		if _, err := e.commitLocked(tx); err != nil {
			e.mu.Unlock()
			return
		}
		e.claims[id] = "boot"
		e.warm.booting[id] = p.target
		e.mu.Unlock()
	}
	e.goWork(func() { e.runWarm(id, p.target, p.boot == "") })
}

func (e *Engine) noteWarmFailureLocked(target int, reason string, failedBoot bool) {
	if failedBoot {
		e.warm.failed[target] = time.Now()
	}
	if e.warm.reason[target] == reason {
		return
	}
	e.warm.reason[target] = reason
	t := e.opts.WarmPool.Targets[target]
	tx := e.begin()
	tx.event("warm-pool.target-missed", map[string]any{
		"platform": t.Platform, "model": t.Model, "osVersion": t.OSVersion, "count": t.Count, "reason": reason,
	})
	_, _ = e.commitLocked(tx)
}

// runWarm does the driver work of a warm start: create (when new), boot,
// then the device is ready and idle.
func (e *Engine) runWarm(id string, target int, create bool) {
	e.mu.Lock()
	dev := *e.devices[id]
	e.mu.Unlock()
	drv := e.opts.Drivers[dev.Platform]
	spec := specOf(&dev)
	dd := driver.Device{ID: dev.DriverDeviceID, Address: dev.Address, Data: dev.DriverData}
	var err error
	if create {
		started := time.Now()
		dd, err = drv.Provision(e.ctx, spec)
		if err == nil {
			e.mu.Lock()
			d := *e.devices[id]
			d.DriverDeviceID, d.Address, d.DriverData = dd.ID, dd.Address, dd.Data
			tx := e.begin()
			tx.putDevice(d)
			tx.event("device.provisioned", map[string]any{"deviceId": id, "spec": spec, "driver": drv.Name(),
				"duration": time.Since(started).Milliseconds(), "initiator": "warm-pool"})
			_, err = e.commitLocked(tx)
			e.mu.Unlock()
		}
	}
	var ready driver.Device
	bootStart := time.Now()
	if err == nil {
		ready, err = drv.MakeReady(e.ctx, dd)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.warm.booting, id)
	if err != nil {
		e.log.Warn("warm-pool boot failed", "deviceId", id, "err", err)
		e.noteWarmFailureLocked(target, "boot-failed", true)
		if create {
			e.claims[id] = "destroy"
			e.goWork(func() { e.destroyAbandoned(id) })
		} else {
			delete(e.claims, id)
		}
		return
	}
	delete(e.claims, id)
	if _, ok := e.devices[id]; !ok {
		return
	}
	d := *e.devices[id]
	d.Address, d.DriverData = ready.Address, ready.Data
	if d.DriverData == nil {
		d.DriverData = dd.Data
	}
	tx := e.begin()
	tx.putDevice(d)
	nd := tx.setState(id, contract.DeviceReady)
	nd.LastUsedAt = now()
	tx.putDevice(nd)
	tx.event("device.ready", map[string]any{"deviceId": id, "bootDuration": time.Since(bootStart).Milliseconds(), "initiator": "warm-pool"})
	if _, err := e.commitLocked(tx); err == nil {
		e.serveLocked()
	}
}

// WarmPoolStatus reports the pool's settings and each target's state.
func (e *Engine) WarmPoolStatus() contract.WarmPoolStatus {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.opts.WarmPool == nil {
		return contract.WarmPoolStatus{ReserveRunning: map[contract.Platform]int{}, Targets: []contract.WarmTargetStatus{}}
	}
	p := *e.opts.WarmPool
	out := contract.WarmPoolStatus{Enabled: p.Enabled, ReserveRunning: map[contract.Platform]int{}, Targets: []contract.WarmTargetStatus{}}
	for _, pl := range contract.Platforms() {
		out.ReserveRunning[pl] = p.Reserve[pl]
	}
	idle := e.idleReadyLocked()
	for i, t := range p.Targets {
		st := contract.WarmTargetStatus{WarmTarget: t}
		for _, d := range idle {
			if targetMatches(t, d) {
				st.Ready++
			}
		}
		st.Ready = min(st.Ready, t.Count)
		for _, ti := range e.warm.booting {
			if ti == i {
				st.Booting++
			}
		}
		st.Short = max(t.Count-st.Ready-st.Booting, 0)
		if st.Short > 0 {
			st.Reason = e.warm.reason[i]
		}
		out.Targets = append(out.Targets, st)
	}
	return out
}
