package leasing

import (
	"strings"
	"time"

	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/core"
	"github.com/simlock/simlock/internal/driver"
	"github.com/simlock/simlock/internal/ids"
	"github.com/simlock/simlock/internal/queue"
	"github.com/simlock/simlock/internal/store"
)

// plan is what serving one waiter does now.
type plan struct {
	grant     *dev // idle ready device to grant
	adopt     *dev // device of a re-warm boot to take over (rewarm.go)
	boot      *dev // shut-down device to boot
	provision bool
	evict     *dev // idle device to shut down first, freeing a running slot
	destroy   *dev // idle device to delete first, freeing a device slot
	block     core.Block
	// yielded are the re-warm boots of evict and destroy, cancelled for
	// this start: each closes once the driver has let go of its device.
	yielded []<-chan struct{}
}

func (p plan) waits() bool { return p.grant == nil && p.adopt == nil && p.boot == nil && !p.provision }

// holdsSlot reports whether deleting or shutting down d frees a running
// slot: it runs, or a boot of it is in flight (a re-warm victim).
func holdsSlot(d *dev) bool { return core.Running(d.State) || d.claim == claimBoot }

// placer is the engine's side of the queue (queue.Placer), handed to the
// queue alone: it calls it under the decision lock, and nothing else
// does.
type placer struct{ e *Engine }

func (p placer) Admit(w *queue.Waiter) (*contract.Error, contract.RejectReason) { return p.e.admit(w) }

func (p placer) Place(tx *queue.Txn, w *queue.Waiter) (queue.Start, queue.Block) {
	return p.e.place(tx, w)
}

// place is the local placement of the head of a platform's line (see the
// package doc for its consistency model): grant an idle ready device that
// fits, else start a device (boot a shut-down one, or create one, making
// room first when a limit is reached), else wait.
func (e *Engine) place(tx *queue.Txn, w *queue.Waiter) (queue.Start, queue.Block) {
	n := w.Need().(*need)
	p := e.planLocked(n)
	switch {
	case p.grant != nil:
		e.grantLocked(tx, w, p.grant, contract.SourceWarm)
		return queue.Start{}, queue.NoBlock
	case p.adopt != nil:
		return e.adoptLocked(w, p.adopt), queue.NoBlock
	case p.waits():
		b := queue.BlockPlatform
		if p.block.Global() {
			b = queue.BlockAll
		}
		b.Stage = e.queueWait(n.want.Platform, p.block)
		// The head sees a device being cleaned that fits it as what it
		// waits for.
		if d := e.reg.soonestClean(n.want, e.catalogs[n.want.Platform]); d != nil {
			eta := d.StateSince + e.estimate(d.Platform, driver.OpReclaim, d.spec()) - e.now()
			b.Stage = &contract.LeaseProgress{Stage: contract.StageReclaiming, EtaMs: max(eta, 0)}
		}
		return queue.Start{}, b
	}
	return e.startLocked(tx, w, n, p), queue.NoBlock
}

// planLocked decides how to serve n: an idle ready device, else the boot
// of a re-warm that fits, else boot a shut-down one, else create one
// (making room by shutting down or deleting the least recently used idle
// device, or, when there is none, a device the pool is re-warming), else
// wait.
func (e *Engine) planLocked(n *need) plan {
	cat := e.catalogs[n.want.Platform]
	if d := e.reg.mostRecent(contract.DeviceReady, n.want, cat); d != nil {
		return plan{grant: d}
	}
	if d := e.adoptableLocked(n.want, cat); d != nil {
		return plan{adopt: d}
	}
	u := e.reg.use
	p := n.want.Platform
	lim := e.opts.Limits
	if shut := e.reg.mostRecent(contract.DeviceShutdown, n.want, cat); shut != nil {
		block := core.CanStart(lim, u, p)
		if block == core.BlockNone {
			return plan{boot: shut}
		}
		if victim := e.reg.leastRecent(contract.DeviceQuarantined, p, block.Global(), ""); victim != nil {
			return plan{boot: shut, destroy: victim}
		}
		if victim := e.reg.leastRecent(contract.DeviceReady, p, block.Global(), ""); victim != nil {
			return plan{boot: shut, evict: victim}
		}
		if victim := e.yieldableLocked(p, block.Global(), ""); victim != nil {
			return plan{boot: shut, evict: victim}
		}
		return plan{block: block}
	}
	pl := plan{provision: true}
	if block := core.CanCreate(lim, u, p, n.spec.Mode == contract.DeviceModeSlim); block != core.BlockNone {
		// Make room for one more device by deleting an idle one: of this
		// platform for its device limit, of any for the RAM budget.
		anyPlatform := block == core.BlockRAM
		victim := e.reg.leastRecent(contract.DeviceShutdown, p, anyPlatform, "")
		if victim == nil {
			victim = e.reg.leastRecent(contract.DeviceQuarantined, p, anyPlatform, "")
		}
		if victim == nil {
			victim = e.reg.leastRecent(contract.DeviceReady, p, anyPlatform, "")
		}
		if victim == nil {
			victim = e.yieldableLocked(p, anyPlatform, "")
		}
		if victim == nil {
			return plan{block: block}
		}
		pl.destroy = victim
		if holdsSlot(victim) && victim.Platform == p {
			return pl // deleting a running device of p frees its running slot too
		}
	}
	if block := core.CanStart(lim, u, p); block != core.BlockNone {
		if pl.destroy != nil && holdsSlot(pl.destroy) && block.Global() {
			return pl // the device being deleted frees a machine-wide slot
		}
		if pl.destroy == nil {
			// A quarantined device holds a running slot and serves nobody:
			// delete it before shutting down a healthy one.
			if victim := e.reg.leastRecent(contract.DeviceQuarantined, p, block.Global(), ""); victim != nil {
				pl.destroy = victim
				return pl
			}
		}
		except := ""
		if pl.destroy != nil {
			except = pl.destroy.ID
		}
		victim := e.reg.leastRecent(contract.DeviceReady, p, block.Global(), except)
		if victim == nil {
			victim = e.yieldableLocked(p, block.Global(), except)
		}
		if victim == nil {
			return plan{block: block}
		}
		pl.evict = victim
	}
	return pl
}

// startLocked reserves what plan p needs for w, in tx, and returns the
// driver work.
func (e *Engine) startLocked(tx *queue.Txn, w *queue.Waiter, n *need, p plan) queue.Start {
	d := p.boot
	if p.provision {
		d = e.newDevice(tx, n.spec, claimBoot)
	} else {
		e.setClaim(tx, d, claimBoot)
	}
	// A victim the pool is re-warming gives its boot up now, so that its
	// slot is this start's from this decision on (rewarm.go).
	for _, v := range []*dev{p.evict, p.destroy} {
		if v == nil {
			continue
		}
		if done := e.yieldLocked(tx, v); done != nil {
			p.yielded = append(p.yielded, done)
		}
	}
	if p.evict != nil {
		e.setClaim(tx, p.evict, claimEviction)
	}
	if p.destroy != nil {
		e.setClaim(tx, p.destroy, claimDestroy)
	}
	spec := d.spec()
	// The next step shows at once, not when the driver work begins: making
	// room first can take a while, and the request has left the queue.
	step := contract.LeaseProgress{Stage: contract.StageBooting, EtaMs: e.estimate(spec.Platform, driver.OpBoot, spec)}
	if p.provision {
		step = contract.LeaseProgress{Stage: contract.StageProvisioning,
			EtaMs: e.estimate(spec.Platform, driver.OpProvision, spec) + e.estimate(spec.Platform, driver.OpBoot, spec)}
	}
	return queue.Start{Progress: step, Target: &spec, DeviceID: d.ID, Run: func() { e.runStart(w, d, p) }}
}

// runStart makes room, then creates and/or boots the device, then grants it
// (or keeps it ready, when the requester went away).
func (e *Engine) runStart(w *queue.Waiter, d *dev, p plan) {
	ctx := e.ctx
	// A re-warm boot this start took the slot of stops first: the device is
	// shut down or deleted below only once the driver has let go of it.
	for _, done := range p.yielded {
		<-done
	}
	if p.destroy != nil {
		if err := e.removeDevice(ctx, p.destroy, "capacity"); err != nil {
			e.requeue(w, d, p)
			return
		}
	}
	if p.evict != nil {
		if err := e.shutdownDevice(ctx, p.evict, "eviction"); err != nil {
			e.requeue(w, d, p)
			return
		}
	}
	var rec store.Device
	e.view(func() { rec = d.Device })
	drv := e.opts.Drivers[rec.Platform]
	spec := d.spec()
	dd := driver.Device{ID: rec.DriverDeviceID, Address: rec.Address, Data: rec.DriverData}
	source := contract.SourceBooted
	if p.provision {
		source = contract.SourceProvisioned
		started := time.Now()
		var err error
		dd, err = drv.Provision(ctx, spec)
		if err != nil {
			e.startFailed(w, d, true, contract.RejectProvisionFailed, err)
			return
		}
		err = e.do(func(tx *queue.Txn) error {
			e.changeDevice(tx, d, func(r *store.Device) { r.DriverDeviceID, r.Address, r.DriverData = dd.ID, dd.Address, dd.Data })
			tx.Event(contract.EvDeviceProvisioned, map[string]any{
				"deviceId": d.ID, "spec": spec, "driver": drv.Name(), "duration": time.Since(started).Milliseconds(),
			})
			return nil
		})
		if err != nil {
			return // the engine stopped deciding: the next start converges
		}
	}
	eta := e.estimate(spec.Platform, driver.OpBoot, spec)
	e.q.Progress(w, contract.LeaseProgress{Stage: contract.StageBooting, EtaMs: eta})
	bootStart := time.Now()
	// The driver's steps reach the requester as the boot's detail; the
	// ETA stays the stage's, counted from the stage's start.
	steps := driver.WithBootSteps(ctx, func(step string) {
		e.q.Progress(w, contract.LeaseProgress{Stage: contract.StageBooting, EtaMs: eta, Detail: clipDetail(step)})
	})
	ready, err := drv.MakeReady(steps, dd)
	if err != nil {
		e.startFailed(w, d, p.provision, contract.RejectBootFailed, err)
		return
	}
	_ = e.do(func(tx *queue.Txn) error {
		e.setClaim(tx, d, claimNone)
		e.booted(tx, d, ready, func(r *store.Device) { r.State = contract.DeviceReady })
		tx.Event(contract.EvDeviceReady, map[string]any{"deviceId": d.ID, "bootDuration": time.Since(bootStart).Milliseconds()})
		if tx.Abandoned(w) {
			// The requester left while its device started: keep the device,
			// ready, for whoever is next.
			tx.Settle(w, contract.Errorf(contract.CodeCancelled, "the requester went away"), contract.RejectCancelled)
			return nil
		}
		// Ready and leased in one commit: nobody ever sees the device idle.
		e.grantLocked(tx, w, d, source)
		return nil
	})
}

// clipDetail bounds a driver's boot step to what a progress step carries.
func clipDetail(s string) string {
	if len(s) <= contract.MaxProgressDetailLen {
		return s
	}
	return strings.ToValidUTF8(s[:contract.MaxProgressDetailLen], "")
}

// requeue puts w back in line when the room it was to get could not be
// made; its timeout keeps its original deadline.
func (e *Engine) requeue(w *queue.Waiter, d *dev, p plan) {
	_ = e.do(func(tx *queue.Txn) error {
		e.setClaim(tx, d, claimNone)
		if p.provision {
			// The driver never created it: the record goes.
			e.setState(tx, d, contract.DeviceDeleted)
		}
		if e.stopping {
			tx.Settle(w, contract.Errorf(contract.CodeCancelled, "the requester went away"), contract.RejectCancelled)
			return nil
		}
		tx.Requeue(w)
		return nil
	})
}

// startError is what a request whose start failed with err is told, and
// the lease.rejected reason: reason, unless the driver says the boot timed
// out.
func (e *Engine) startError(err error, reason contract.RejectReason) (*contract.Error, contract.RejectReason) {
	cerr := e.errorf(err)
	if cerr.Details["reason"] == string(contract.RejectBootTimeout) {
		reason = contract.RejectBootTimeout
	}
	return cerr, reason
}

// startFailed settles w with the driver's error and disposes of the device.
func (e *Engine) startFailed(w *queue.Waiter, d *dev, created bool, reason contract.RejectReason, err error) {
	cerr, reason := e.startError(err, reason)
	e.log.Warn("device start failed", "deviceId", d.ID, "requestId", w.ID(), "err", err)
	_ = e.do(func(tx *queue.Txn) error {
		if created {
			e.setClaim(tx, d, claimDestroy)
			tx.After(func() { e.goWork(func() { e.destroyAbandoned(d) }) })
		} else {
			e.setClaim(tx, d, claimNone)
		}
		tx.Settle(w, cerr, reason)
		return nil
	})
}

// grantLocked leases device d to w, in tx.
func (e *Engine) grantLocked(tx *queue.Txn, w *queue.Waiter, d *dev, source contract.GrantSource) {
	t := e.now()
	ttl := w.TTLMs()
	// Every lease has a key of the daemon's own, unique among every
	// lease it ever granted; a chosen id is its owner's name for it,
	// unique only among the owner's leases.
	id, key, chosen := ids.New("lse_", ids.Short), "", false
	if c := w.ChosenLeaseID(); c != "" {
		id, key, chosen = c, id, true
	}
	rec := store.Lease{
		LeaseRecord: contract.LeaseRecord{
			ID: id, Key: key, DeviceID: d.ID, RequesterID: w.Requester(), OwnerID: w.Owner(),
			GrantedAt: t, TTLMs: ttl, LastRenewedAt: t, TTLDeadline: t + ttl, IDChosenByRequester: chosen,
		},
		RequestID: w.ID(),
	}
	spec := d.spec()
	drv := e.opts.Drivers[d.Platform]
	prov, boot, recl := e.estimate(d.Platform, driver.OpProvision, spec), e.estimate(d.Platform, driver.OpBoot, spec), e.estimate(d.Platform, driver.OpReclaim, spec)
	grant := contract.LeaseGrant{
		Device: contract.GrantDevice{ID: d.ID, DriverDeviceID: d.DriverDeviceID, Spec: spec, Address: d.Address, Mode: grantMode(d)},
		Lease:  rec.LeaseRecord,
		Timing: contract.Timing{EstimatedProvisionMs: prov, EstimatedBootMs: boot, EstimatedReclaimMs: recl,
			EstimatedReadyMs: prov + boot},
		Environment: map[string]string{},
		RequestID:   w.ID(),
		Source:      source,
	}
	if drv != nil {
		for k, v := range drv.LeaseEnvironment() {
			grant.Environment[k] = v
		}
	}
	e.changeDevice(tx, d, func(r *store.Device) {
		r.State = contract.DeviceLeased
		r.LastUsedAt = t
	})
	e.putLease(tx, rec)
	e.countGrantLocked(tx, d.Platform, source)
	tx.Grant(w, grant)
	tx.Event(contract.EvLeaseGranted, leaseEvent(rec, map[string]any{
		"deviceId": d.ID, "requester": rec.RequesterID, "requestId": w.ID(), "source": source,
		"mode": grantMode(d), "ownerId": rec.OwnerID, "ttlMs": rec.TTLMs, "ttlDeadline": rec.TTLDeadline,
	}))
	e.armLocked(tx, e.leases[rec.UniqueKey()])
}
