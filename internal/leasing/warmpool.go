package leasing

import (
	"math"
	"sort"
	"strings"
	"time"

	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/core"
	"github.com/simlock/simlock/internal/driver"
	"github.com/simlock/simlock/internal/queue"
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
	// RewarmReleased boots again a device its clean left shut down while
	// its last use is less than the idle shutdown age ago, so the next
	// lease finds it ready (see rewarm.go). It needs Enabled.
	RewarmReleased bool
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
	// rewarming are the re-warm boots in flight, by device id.
	rewarming map[string]*rewarm
	// kick asks for a pass now rather than at the next tick; one slot, so
	// kicks between two passes make one pass. Set once by New.
	kick chan struct{}
	// grants count the leases granted since start, by platform and
	// source (see sourceIndex), for status.
	grants [contract.NumPlatforms][numSources]int
}

func newWarmState() warmState {
	return warmState{booting: map[string]int{}, reason: map[int]string{}, failed: map[int]time.Time{},
		rewarming: map[string]*rewarm{}, kick: make(chan struct{}, 1)}
}

// targetBuckets calls f for each spec bucket a device of target t could
// be in.
func (e *Engine) targetBuckets(t contract.WarmTarget, f func(b *fitBucket)) {
	i := t.Platform.Index()
	if i < 0 {
		return
	}
	cat := e.catalogs[t.Platform]
	for k, b := range e.reg.fits[i] {
		if strings.EqualFold(k.model, t.Model) && (t.OSVersion == "" || core.VersionFits(k.osVersion, t.OSVersion)) &&
			(t.ImageTag == "" || k.imageTag == t.ImageTag) && k.mode == cat.ModeOn(t.Mode, k.osVersion) {
			f(b)
		}
	}
}

// targetReady lists t's idle ready devices, most recently used first.
func (e *Engine) targetReady(t contract.WarmTarget) []*dev {
	var out []*dev
	e.targetBuckets(t, func(b *fitBucket) { out = append(out, b.ready.items...) })
	sort.Slice(out, func(i, j int) bool { return later(out[i], out[j]) })
	return out
}

// runWarmPool runs passes every Interval until the engine closes.
func (e *Engine) runWarmPool() {
	t := time.NewTicker(e.opts.WarmPool.Interval)
	defer t.Stop()
	for {
		select {
		case <-e.ctx.Done():
			return
		case <-t.C:
		case <-e.warm.kick:
		}
		e.warmPass()
	}
}

// targetedLocked is the set of idle ready devices the targets keep: for
// each target, up to Count of its matching devices.
func (e *Engine) targetedLocked() map[string]bool {
	kept := map[string]bool{}
	if e.opts.WarmPool == nil || !e.opts.WarmPool.Enabled {
		return kept
	}
	for _, t := range e.opts.WarmPool.Targets {
		n := 0
		for _, d := range e.targetReady(t) {
			if n == t.Count {
				break
			}
			if !kept[d.ID] {
				kept[d.ID] = true
				n++
			}
		}
	}
	return kept
}

// warmPlan is one thing a pass decided to do.
type warmPlan struct {
	target int
	boot   *dev // a shut-down device to boot; nil to create one
}

// warmPass sheds idle devices over budget and fills short targets.
func (e *Engine) warmPass() {
	var shed []*dev
	var plans []warmPlan
	_ = e.do(func(tx *queue.Txn) error {
		if e.stopping || !e.started || e.maintenanceLocked() {
			// A nuke owns the devices while it runs.
			return nil
		}
		if !e.opts.WarmPool.Enabled {
			for _, p := range contract.Platforms() {
				shed = append(shed, e.reg.idleReady(p)...)
			}
		} else {
			shed = e.overBudgetLocked()
			plans = e.fillLocked(tx)
			e.rewarmLocked(tx, plans)
		}
		for _, d := range shed {
			e.setClaim(tx, d, claimEviction)
		}
		return nil
	})
	for _, d := range shed {
		_ = e.shutdownDevice(e.ctx, d, "warm-pool")
	}
	for _, p := range plans {
		e.startWarm(p)
	}
}

// overBudgetLocked picks idle ready devices to shut down so that idle
// devices leave each platform's reserve free: least recently used first,
// devices no target keeps before the kept ones.
func (e *Engine) overBudgetLocked() []*dev {
	var out []*dev
	kept := e.targetedLocked()
	u := e.reg.use
	for _, p := range contract.Platforms() {
		reserve := e.opts.WarmPool.Reserve[p]
		if reserve <= 0 {
			continue
		}
		idle := e.reg.idleReady(p) // most recently used first
		free := e.opts.Limits.Platforms[p].MaxRunning - u.Running.Of(p) - u.Reserved.Of(p)
		excess := reserve - free
		// Least recently used last in idle; unkept ones go first.
		sort.SliceStable(idle, func(i, j int) bool { return !kept[idle[i].ID] && kept[idle[j].ID] })
		for i := len(idle) - 1; i >= 0 && excess > 0; i-- {
			out = append(out, idle[i])
			excess--
		}
	}
	return out
}

// fillLocked decides which short targets to start a device for now, and
// records why the others are short.
func (e *Engine) fillLocked(tx *queue.Txn) []warmPlan {
	st := e.warm
	var plans []warmPlan
	inFlight := len(st.booting) + len(st.rewarming)
	u := e.reg.use
	for i, t := range e.opts.WarmPool.Targets {
		ready := len(e.targetReady(t))
		booting := 0
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
			e.targetBuckets(t, func(b *fitBucket) {
				if plan.boot == nil {
					plan.boot = b.shutdown.last()
				}
			})
			if plan.boot == nil {
				// The spec is not resolved yet: a target asking slim is
				// sized slim, which its device is unless the runtime
				// cannot be slimmed.
				if b := core.CanCreate(e.opts.Limits, u, t.Platform, e.catalogs[t.Platform].Mode(t.Mode) == contract.DeviceModeSlim); b != core.BlockNone {
					reason = warmReason(b)
					break
				}
			}
			// Reserve the slot now, so the next target counts it.
			if plan.boot != nil {
				e.setClaim(tx, plan.boot, claimBoot)
				st.booting[plan.boot.ID] = i
			} else {
				u.Devices.Add(t.Platform, 1)
			}
			u.Reserved.Add(t.Platform, 1)
			inFlight++
			short--
			plans = append(plans, plan)
		}
		if reason != st.reason[i] {
			st.reason[i] = reason
			if reason != "" && reason != "request-waiting" && reason != "boot-limit" {
				tx.Event(contract.EvWarmPoolTargetMissed, map[string]any{
					"platform": t.Platform, "model": t.Model, "osVersion": t.OSVersion, "count": t.Count,
					"ready": ready, "short": short, "reason": reason,
				})
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
	if e.q.WaitingOnLocked(t.Platform) {
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
	if u.Running.Of(t.Platform)+u.Reserved.Of(t.Platform)+e.opts.WarmPool.Reserve[t.Platform] >= e.opts.Limits.Platforms[t.Platform].MaxRunning {
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
	d := p.boot
	if d == nil {
		// Model names match in any case, as in requests.
		model := t.Model
		mode := t.Mode
		e.view(func() {
			cat := e.catalogs[t.Platform]
			for _, m := range cat.Models {
				if strings.EqualFold(m, model) {
					model = m
				}
			}
			mode = cat.Mode(mode)
		})
		spec, err := drv.ResolveSpec(e.ctx, driver.Request{Platform: t.Platform, Model: model, OSVersion: t.OSVersion, ImageTag: t.ImageTag, Mode: mode})
		_ = e.do(func(tx *queue.Txn) error {
			if err != nil {
				reason := "unresolvable"
				switch driver.ContractError(err).Code {
				case contract.CodeUnknownModel:
					reason = "unknown-model"
				case contract.CodeRuntimeMissing:
					reason = "runtime-missing"
				}
				e.noteWarmFailureLocked(tx, p.target, reason, false)
				return nil
			}
			if b := core.CanCreate(e.opts.Limits, e.reg.use, t.Platform, spec.Mode == contract.DeviceModeSlim); b != core.BlockNone || e.stopping {
				return nil
			}
			d = e.newDevice(tx, spec, claimBoot)
			e.warm.booting[d.ID] = p.target
			return nil
		})
		if d == nil {
			return
		}
	}
	create := p.boot == nil
	e.goWork(func() { e.runWarm(d, p.target, create) })
}

func (e *Engine) noteWarmFailureLocked(tx *queue.Txn, target int, reason string, failedBoot bool) {
	if failedBoot {
		e.warm.failed[target] = time.Now()
	}
	if e.warm.reason[target] == reason {
		return
	}
	e.warm.reason[target] = reason
	t := e.opts.WarmPool.Targets[target]
	tx.Event(contract.EvWarmPoolTargetMissed, map[string]any{
		"platform": t.Platform, "model": t.Model, "osVersion": t.OSVersion, "count": t.Count, "reason": reason,
	})
}

// runWarm does the driver work of a warm start: create (when new), boot,
// then the device is ready and idle (or, in the same commit, granted to a
// request waiting for one like it).
func (e *Engine) runWarm(d *dev, target int, create bool) {
	var rec store.Device
	e.view(func() { rec = d.Device })
	drv := e.opts.Drivers[rec.Platform]
	spec := d.spec()
	dd := driver.Device{ID: rec.DriverDeviceID, Address: rec.Address, Data: rec.DriverData}
	var err error
	if create {
		started := time.Now()
		dd, err = drv.Provision(e.ctx, spec)
		if err == nil {
			err = e.do(func(tx *queue.Txn) error {
				e.changeDevice(tx, d, func(r *store.Device) { r.DriverDeviceID, r.Address, r.DriverData = dd.ID, dd.Address, dd.Data })
				tx.Event(contract.EvDeviceProvisioned, map[string]any{"deviceId": d.ID, "spec": spec, "driver": drv.Name(),
					"duration": time.Since(started).Milliseconds(), "initiator": "warm-pool"})
				return nil
			})
		}
	}
	var ready driver.Device
	bootStart := time.Now()
	if err == nil {
		ready, err = drv.MakeReady(e.ctx, dd)
	}
	_ = e.do(func(tx *queue.Txn) error {
		delete(e.warm.booting, d.ID)
		if err != nil {
			e.log.Warn("warm-pool boot failed", "deviceId", d.ID, "err", err)
			e.noteWarmFailureLocked(tx, target, "boot-failed", true)
			if create {
				e.setClaim(tx, d, claimDestroy)
				tx.After(func() { e.goWork(func() { e.destroyAbandoned(d) }) })
			} else {
				e.setClaim(tx, d, claimNone)
			}
			return nil
		}
		e.setClaim(tx, d, claimNone)
		if d.at == nil {
			return nil
		}
		e.booted(tx, d, ready, func(r *store.Device) {
			r.State = contract.DeviceReady
			r.LastUsedAt = e.now()
		})
		tx.Event(contract.EvDeviceReady, map[string]any{"deviceId": d.ID, "bootDuration": time.Since(bootStart).Milliseconds(), "initiator": "warm-pool"})
		return nil
	})
}

// WarmPoolStatus reports the pool's settings and each target's state.
func (m *Maintenance) WarmPoolStatus() contract.WarmPoolStatus {
	e := m.e
	var out contract.WarmPoolStatus
	e.view(func() { out = e.warmPoolStatusLocked() })
	return out
}

func (e *Engine) warmPoolStatusLocked() contract.WarmPoolStatus {
	out := contract.WarmPoolStatus{ReserveRunning: map[contract.Platform]int{}, Targets: []contract.WarmTargetStatus{}}
	out.Grants, out.GrantsByPlatform = e.grantCountsLocked()
	if e.opts.WarmPool == nil {
		return out
	}
	p := *e.opts.WarmPool
	out.Enabled, out.RewarmReleased, out.Rewarming = p.Enabled, p.Enabled && p.RewarmReleased, len(e.warm.rewarming)
	for _, pl := range contract.Platforms() {
		out.ReserveRunning[pl] = p.Reserve[pl]
	}
	for i, t := range p.Targets {
		st := contract.WarmTargetStatus{WarmTarget: t}
		st.Ready = min(len(e.targetReady(t)), t.Count)
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

// The grant sources as indexes of warmState.grants.
const (
	sourceWarm = iota
	sourceBooted
	sourceProvisioned
	numSources
)

func sourceIndex(s contract.GrantSource) int {
	switch s {
	case contract.SourceWarm:
		return sourceWarm
	case contract.SourceBooted:
		return sourceBooted
	}
	return sourceProvisioned
}

// countGrantLocked counts a grant by its source once tx has committed, so
// status never counts a lease the store does not hold.
func (e *Engine) countGrantLocked(tx *queue.Txn, p contract.Platform, source contract.GrantSource) {
	i := p.Index()
	if i < 0 {
		return
	}
	tx.After(func() { e.warm.grants[i][sourceIndex(source)]++ })
}

// grantCountsLocked is the grant counts for status: all platforms, and
// each platform.
func (e *Engine) grantCountsLocked() (contract.GrantCounts, map[contract.Platform]contract.GrantCounts) {
	var all [numSources]int
	by := make(map[contract.Platform]contract.GrantCounts, contract.NumPlatforms)
	for _, p := range contract.Platforms() {
		n := e.warm.grants[p.Index()]
		for s := range n {
			all[s] += n[s]
		}
		by[p] = grantCounts(n)
	}
	return grantCounts(all), by
}

func grantCounts(n [numSources]int) contract.GrantCounts {
	c := contract.GrantCounts{Warm: n[sourceWarm], Booted: n[sourceBooted], Provisioned: n[sourceProvisioned]}
	if total := c.Warm + c.Booted + c.Provisioned; total > 0 {
		c.WarmRate = math.Round(float64(c.Warm)/float64(total)*1000) / 1000
	}
	return c
}
