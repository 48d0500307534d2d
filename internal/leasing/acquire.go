package leasing

import (
	"context"
	"sort"
	"time"

	"github.com/simlock/simlock/internal/components"
	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/core"
	"github.com/simlock/simlock/internal/driver"
	"github.com/simlock/simlock/internal/store"
)

// Acquire asks for a device and waits until one is granted, the request
// fails, or ctx ends. Progress is called with each step of the wait; it must
// not block. When ctx ends while the request waits in the queue, the request
// is withdrawn (cancelled); when it ends while a device is being started for
// it, the device is kept for the next requester and no lease is made.
func (e *Engine) Acquire(ctx context.Context, c Caller, in contract.LeaseRequestInput, progress func(contract.LeaseProgress)) (contract.LeaseGrant, error) {
	if progress == nil {
		progress = func(contract.LeaseProgress) {}
	}
	r, err := e.submit(ctx, c, in, progress)
	if err != nil {
		return contract.LeaseGrant{}, err
	}
	select {
	case <-r.done:
	case <-ctx.Done():
		if !e.abandon(r) {
			return contract.LeaseGrant{}, contract.Errorf(contract.CodeCancelled, "stopped waiting for request %s, which still waits", r.rec.ID)
		}
		<-r.done
	}
	if r.err != nil {
		return contract.LeaseGrant{}, r.err
	}
	return *r.grant, nil
}

func (e *Engine) ttlFor(ms int64, field string) (time.Duration, *contract.Error) {
	if ms == 0 {
		return e.opts.DefaultTTL, nil
	}
	ttl := time.Duration(ms) * time.Millisecond
	if ttl > e.opts.MaxTTL {
		return 0, contract.BadRequest(field, "must be at most lease.maxTtlMs (%d), got %d", e.opts.MaxTTL.Milliseconds(), ms).
			With("maxTtlMs", e.opts.MaxTTL.Milliseconds())
	}
	return ttl, nil
}

// submit stores the request, resolves what it needs and puts it in line.
func (e *Engine) submit(ctx context.Context, c Caller, in contract.LeaseRequestInput, progress func(contract.LeaseProgress)) (*request, error) {
	ttl, cerr := e.ttlFor(in.TTLMs, "ttlMs")
	if cerr != nil {
		return nil, cerr
	}
	requester := in.RequesterID
	if requester == "" {
		requester = c.Principal
	}
	if requester == "" {
		return nil, contract.BadRequest("requesterId", "is required when the session has no principal")
	}
	spec := contract.RequestSpec{Platform: in.Platform, Model: in.Model, Class: in.Class, OSVersion: in.OSVersion}
	if in.IdempotencyKey != "" {
		// A request already settled under this key answers again with what
		// it answered then.
		rec, found, err := e.opts.Store.RequestByKey(ctx, requester, in.IdempotencyKey)
		if err != nil {
			return nil, contract.Errorf(contract.CodeInternal, "read request: %v", err)
		}
		if found && rec.State.Terminal() {
			if rec.Spec != spec {
				return nil, idempotencyConflict(in.IdempotencyKey)
			}
			r := &request{rec: rec, done: make(chan struct{}), grant: rec.Grant, err: rec.Error, replayed: true}
			if r.err == nil && r.grant == nil {
				r.err = contract.Errorf(contract.CodeCancelled, "request %s was %s", rec.ID, rec.State)
			}
			close(r.done)
			return r, nil
		}
	}
	drv, cerr := e.driverFor(in.Platform)

	e.mu.Lock()
	if e.stopping || !e.started {
		e.mu.Unlock()
		return nil, contract.Errorf(contract.CodeDaemonStopping, "the daemon is stopping")
	}
	if cerr := e.maintenanceFenceLocked(); cerr != nil {
		e.mu.Unlock()
		return nil, cerr
	}
	if in.IdempotencyKey != "" {
		for _, r := range e.requests {
			if r.rec.RequesterID == requester && r.rec.IdempotencyKey == in.IdempotencyKey {
				defer e.mu.Unlock()
				if r.rec.Spec != spec {
					return nil, idempotencyConflict(in.IdempotencyKey)
				}
				if progress != nil {
					r.progress = append(r.progress, progress)
					if r.last.Stage != "" {
						progress(r.last)
					}
				}
				return r, nil
			}
		}
	}
	if existing := e.activeForLocked(requester); existing != nil {
		e.mu.Unlock()
		return nil, existing
	}
	r := &request{
		rec: contract.LeaseRequestRecord{
			ID: newID("req_"), RequesterID: requester, OwnerID: c.Principal, IdempotencyKey: in.IdempotencyKey,
			Spec: spec, State: contract.RequestQueued, CreatedAt: now(),
			Policy: contract.WaitPolicy{NoWait: in.NoWait, TimeoutMs: in.TimeoutMs, TTLMs: ttl.Milliseconds()},
		},
		done:     make(chan struct{}),
		changed:  make(chan struct{}),
		detached: progress == nil,
	}
	if progress != nil {
		r.progress = append(r.progress, progress)
	}
	if r.rec.OwnerID == "" {
		r.rec.OwnerID = requester
	}
	tx := e.begin()
	tx.putRequest(r)
	tx.event("lease.requested", map[string]any{
		"requestId": r.rec.ID, "requestSpec": spec, "requester": requester,
		"waitPolicy": r.rec.Policy,
	})
	if _, err := e.commitLocked(tx); err != nil {
		e.mu.Unlock()
		return nil, err
	}
	e.requests[r.rec.ID] = r
	cat := e.catalogs[in.Platform]
	e.mu.Unlock()

	// Resolving may ask the driver, which can be slow: not under the lock.
	if cerr == nil {
		r.want = core.WantOf(spec, cat)
		r.spec, cerr = e.resolve(ctx, drv, r.want, cat)
	}

	e.mu.Lock()
	defer e.mu.Unlock()
	if cerr == nil && r.spec.Model != "" && e.removingLocked(r.spec) {
		cerr = contract.Errorf(contract.CodeRuntimeMissing, "%s %s is being removed", r.spec.Platform, r.spec.OSVersion).
			With("platform", r.spec.Platform).With("osVersion", r.spec.OSVersion).With("downloadable", false)
	}
	if cerr != nil && cerr.Code == contract.CodeRuntimeMissing && cerr.Details["downloadable"] == true && !in.AllowDownload &&
		e.opts.DownloadPolicy == "on-request" && e.opts.Installer != nil && e.opts.Installer.Supports(in.Platform) {
		cerr = cerr.With("hint", "allow a download with --allow-download (allowDownload: true)")
	}
	if cerr != nil {
		if component, ok := e.downloadFor(cerr, in); ok && !r.rec.State.Terminal() {
			r.downloading = true
			e.bumpLocked(r)
			e.goWork(func() { e.download(r, drv, component) })
			return r, nil
		}
		e.settleLocked(r, nil, cerr, "unresolvable-spec")
		return r, nil
	}
	if r.rec.State.Terminal() { // cancelled while resolving
		return r, nil
	}
	e.enqueueLocked(r)
	return r, nil
}

// enqueueLocked puts a resolved request in line and serves the queue.
func (e *Engine) enqueueLocked(r *request) {
	r.queuedAt = time.Now()
	e.queue = append(e.queue, r)
	e.serveQueueLocked()
	if r.rec.State == contract.RequestQueued && r.rec.Policy.NoWait {
		e.failQueuedLocked(r, contract.Errorf(contract.CodeNoCapacity, "no %s device is free and capacity is full", r.rec.Spec.Platform).
			With("platform", r.rec.Spec.Platform), "no-wait")
		return
	}
	e.reportPositionsLocked()
	if r.rec.State == contract.RequestQueued {
		tx := e.begin()
		tx.event("lease.queued", map[string]any{"requestId": r.rec.ID, "queuePosition": r.rec.QueuePosition})
		_, _ = e.commitLocked(tx)
		if ms := r.rec.Policy.TimeoutMs; ms > 0 {
			r.timer = time.AfterFunc(time.Duration(ms)*time.Millisecond, func() { e.timeout(r) })
		}
	}
}

// downloadFor says whether a request that failed to resolve with cerr
// should download a runtime, and which component: the runtime must be
// downloadable, the request allowed to download (within downloads.policy),
// and a driver able to install it.
func (e *Engine) downloadFor(cerr *contract.Error, in contract.LeaseRequestInput) (string, bool) {
	if cerr.Code != contract.CodeRuntimeMissing || cerr.Details["downloadable"] != true {
		return "", false
	}
	component, _ := cerr.Details["component"].(string)
	if component == "" || len(component) > contract.MaxComponentLen || e.opts.Installer == nil || !e.opts.Installer.Supports(in.Platform) {
		return "", false
	}
	switch e.opts.DownloadPolicy {
	case "always":
		return component, true
	case "never":
		return "", false
	}
	return component, in.AllowDownload
}

// download installs the runtime a request needs, reporting the install as
// the downloading stage, then resolves the request again and puts it in
// line. The install runs whether or not the requester still waits: other
// requests may have joined it, and the runtime stays installed.
func (e *Engine) download(r *request, drv driver.Driver, component string) {
	p := r.rec.Spec.Platform
	_, err := e.opts.Installer.Install(e.ctx, p, component, func(rep components.Report) {
		step := contract.LeaseProgress{Stage: contract.StageDownloading, Component: component, Waiting: rep.Waiting}
		if rep.Percent != nil {
			pct := min(max(int(*rep.Percent), 0), contract.MaxPercent) // rounded down
			step.Percent = &pct
		}
		e.mu.Lock()
		defer e.mu.Unlock()
		// A percentage is sent once per whole number.
		if !r.rec.State.Terminal() && !step.Same(r.last) {
			e.pushLocked(r, step)
		}
	})
	var spec contract.DeviceSpec
	var cerr *contract.Error
	reason := "download-failed"
	if err != nil {
		cerr = contract.AsError(err)
	} else {
		// The new runtime shows in a fresh catalog.
		cat, lerr := drv.ListCatalog(e.ctx)
		e.mu.Lock()
		if lerr == nil {
			e.catalogs[p] = cat
		} else {
			cat = e.catalogs[p]
		}
		e.mu.Unlock()
		r.want = core.WantOf(r.rec.Spec, cat)
		spec, cerr = e.resolve(e.ctx, drv, r.want, cat)
		reason = "unresolvable-spec"
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	r.downloading = false
	if r.rec.State.Terminal() {
		return
	}
	if r.abandoned || e.stopping {
		e.settleLocked(r, nil, contract.Errorf(contract.CodeCancelled, "the requester went away"), "cancelled")
		return
	}
	if cerr != nil {
		e.settleLocked(r, nil, cerr, reason)
		return
	}
	r.spec = spec
	e.enqueueLocked(r)
}

func idempotencyConflict(key string) *contract.Error {
	return contract.Errorf(contract.CodeIdempotencyConflict, "idempotency key %q was used for a different request", key).
		With("idempotencyKey", key)
}

// activeForLocked finds the requester's active lease or open request.
func (e *Engine) activeForLocked(requester string) *contract.Error {
	for _, l := range e.leases {
		if l.RequesterID == requester {
			return contract.Errorf(contract.CodeRequesterAlreadyLeased, "%s already holds lease %s; release it first", requester, l.ID).
				With("requesterId", requester).With("existingLeaseId", l.ID)
		}
	}
	for _, r := range e.requests {
		if r.rec.RequesterID == requester {
			return contract.Errorf(contract.CodeRequesterAlreadyLeased, "%s already has request %s waiting", requester, r.rec.ID).
				With("requesterId", requester).With("existingRequestId", r.rec.ID)
		}
	}
	return nil
}

// resolve picks the spec a new device for w would have: the first model in
// preference order that the driver accepts.
func (e *Engine) resolve(ctx context.Context, drv driver.Driver, w core.Want, cat driver.Catalog) (contract.DeviceSpec, *contract.Error) {
	preferred := e.opts.ClassDefaults[w.Platform][w.Class]
	models := core.ModelsFor(w, cat, preferred)
	osSpec, _ := contract.ParseOSVersion(w.OSVersion) // validated with the input
	if all := core.ClassModels(w, cat, preferred); len(models) == 0 && len(all) > 0 {
		if osSpec.IsRange() {
			// A range never downloads, and nothing installed fits it.
			return contract.DeviceSpec{}, e.errorf(&driver.RuntimeMissingError{Platform: w.Platform, OSVersion: w.OSVersion})
		}
		// The class has models but none pairs with a fitting installed
		// runtime: let the driver say exactly what is missing for the
		// first choice (and whether a download would help).
		spec, err := drv.ResolveSpec(ctx, driver.Request{Platform: w.Platform, Model: all[0], OSVersion: w.OSVersion})
		if err != nil {
			return contract.DeviceSpec{}, e.errorf(err)
		}
		return spec, nil
	}
	if len(models) == 0 {
		return contract.DeviceSpec{}, contract.Errorf(contract.CodeUnknownModel, "no %s model of class %s is available", w.Platform, w.Class).
			With("platform", w.Platform).With("class", w.Class)
	}
	var first error
	for _, m := range models {
		version := w.OSVersion
		if osSpec.IsRange() {
			// A range picks the newest installed runtime inside it; it
			// never asks for a download.
			if version = core.NewestFitting(cat.ModelRuntimes[m], w.OSVersion); version == "" {
				if first == nil {
					first = &driver.RuntimeMissingError{Platform: w.Platform, OSVersion: w.OSVersion}
				}
				continue
			}
		}
		spec, err := drv.ResolveSpec(ctx, driver.Request{Platform: w.Platform, Model: m, OSVersion: version})
		if err == nil {
			return spec, nil
		}
		if first == nil {
			first = err
		}
	}
	return contract.DeviceSpec{}, e.errorf(first)
}

// plan is what serving one waiter does now.
type plan struct {
	grant     string // idle ready device to grant
	boot      string // shut-down device to boot
	provision bool
	evict     string // idle device to shut down first, freeing a running slot
	destroy   string // idle device to delete first, freeing a device slot
	block     core.Block
}

func (p plan) waits() bool { return p.grant == "" && p.boot == "" && !p.provision }

// planLocked decides how to serve r: an idle ready device, else boot a
// shut-down one, else create one (making room by shutting down or deleting
// the least recently used idle device), else wait.
func (e *Engine) planLocked(r *request) plan {
	cat := e.catalogs[r.want.Platform]
	var ready, shut []*store.Device
	for id, d := range e.devices {
		if e.claims[id] != "" || !core.Fits(specOf(d), r.want, cat) {
			continue
		}
		switch d.State {
		case contract.DeviceReady:
			ready = append(ready, d)
		case contract.DeviceShutdown:
			shut = append(shut, d)
		}
	}
	if len(ready) > 0 {
		sort.Slice(ready, func(i, j int) bool { return ready[i].LastUsedAt > ready[j].LastUsedAt })
		return plan{grant: ready[0].ID}
	}
	u := e.usageLocked()
	p := r.want.Platform
	lim := e.opts.Limits
	if len(shut) > 0 {
		sort.Slice(shut, func(i, j int) bool { return shut[i].LastUsedAt > shut[j].LastUsedAt })
		block := core.CanStart(lim, u, p)
		if block == core.BlockNone {
			return plan{boot: shut[0].ID}
		}
		if victim := e.idleLocked(contract.DeviceQuarantined, p, block.Global(), ""); victim != "" {
			return plan{boot: shut[0].ID, destroy: victim}
		}
		if victim := e.idleLocked(contract.DeviceReady, p, block.Global(), ""); victim != "" {
			return plan{boot: shut[0].ID, evict: victim}
		}
		return plan{block: block}
	}
	pl := plan{provision: true}
	if block := core.CanCreate(lim, u, p); block != core.BlockNone {
		// Make room for one more device by deleting an idle one: of this
		// platform for its device limit, of any for the RAM budget.
		anyPlatform := block == core.BlockRAM
		victim := e.idleLocked(contract.DeviceShutdown, p, anyPlatform, "")
		if victim == "" {
			victim = e.idleLocked(contract.DeviceQuarantined, p, anyPlatform, "")
		}
		if victim == "" {
			victim = e.idleLocked(contract.DeviceReady, p, anyPlatform, "")
		}
		if victim == "" {
			return plan{block: block}
		}
		pl.destroy = victim
		if core.Running(e.devices[victim].State) && e.devices[victim].Platform == p {
			return pl // deleting a running device of p frees its running slot too
		}
	}
	if block := core.CanStart(lim, u, p); block != core.BlockNone {
		if pl.destroy != "" && core.Running(e.devices[pl.destroy].State) && block.Global() {
			return pl // the device being deleted frees a machine-wide slot
		}
		if pl.destroy == "" {
			// A quarantined device holds a running slot and serves nobody:
			// delete it before shutting down a healthy one.
			if victim := e.idleLocked(contract.DeviceQuarantined, p, block.Global(), ""); victim != "" {
				pl.destroy = victim
				return pl
			}
		}
		victim := e.idleLocked(contract.DeviceReady, p, block.Global(), pl.destroy)
		if victim == "" {
			return plan{block: block}
		}
		pl.evict = victim
	}
	return pl
}

// idleLocked picks the least recently used unclaimed, unleased device in
// state s, of platform p (or of any platform when anyPlatform).
func (e *Engine) idleLocked(s contract.DeviceState, p contract.Platform, anyPlatform bool, except string) string {
	var best *store.Device
	for id, d := range e.devices {
		if id == except || d.State != s || e.claims[id] != "" || e.stuck[id] || (!anyPlatform && d.Platform != p) {
			continue
		}
		if best == nil || d.LastUsedAt < best.LastUsedAt {
			best = d
		}
	}
	if best == nil {
		return ""
	}
	return best.ID
}

func specOf(d *store.Device) contract.DeviceSpec {
	return contract.DeviceSpec{Platform: d.Platform, Model: d.Model, OSVersion: d.OSVersion}
}

// serveLocked serves waiters in arrival order. A waiter that must wait
// blocks those behind it that want the same platform (or, when the limit it
// hit is machine-wide, everyone behind it): the head is never bypassed.
func (e *Engine) serveLocked() {
	e.serveQueueLocked()
	e.reportPositionsLocked()
}

// serveQueueLocked is serveLocked without telling waiters their places.
func (e *Engine) serveQueueLocked() {
	if e.stopping {
		return
	}
	globalBlocked := false
	blocked := map[contract.Platform]bool{}
	for _, r := range append([]*request(nil), e.queue...) {
		if globalBlocked || blocked[r.want.Platform] {
			continue
		}
		p := e.planLocked(r)
		if p.waits() {
			if p.block.Global() {
				globalBlocked = true
			}
			blocked[r.want.Platform] = true
			continue
		}
		e.removeFromQueueLocked(r)
		if p.grant != "" {
			e.grantLocked(r, p.grant, contract.SourceWarm, e.begin())
			continue
		}
		e.startLocked(r, p)
	}
}

func (e *Engine) removeFromQueueLocked(r *request) {
	for i, q := range e.queue {
		if q == r {
			e.queue = append(e.queue[:i], e.queue[i+1:]...)
			break
		}
	}
	if r.timer != nil {
		r.timer.Stop()
	}
}

// reportPositionsLocked tells each waiter its place when it changed, and
// what it waits on when that is a device being cleaned.
func (e *Engine) reportPositionsLocked() {
	pos := 0
	for _, r := range e.queue {
		pos++
		if r.rec.QueuePosition != pos {
			r.rec.QueuePosition = pos
			r.rec.Stage = contract.StageQueued
		}
		prog := contract.LeaseProgress{Stage: contract.StageQueued, QueuePosition: pos}
		if pos == 1 {
			if eta, ok := e.reclaimEtaLocked(r); ok {
				prog = contract.LeaseProgress{Stage: contract.StageReclaiming, EtaMs: eta}
			}
		}
		if prog.Stage != r.last.Stage || prog.QueuePosition != r.last.QueuePosition {
			e.pushLocked(r, prog)
		}
	}
}

// reclaimEtaLocked reports how long until a device being cleaned that fits r
// is back, when there is one.
func (e *Engine) reclaimEtaLocked(r *request) (int64, bool) {
	cat := e.catalogs[r.want.Platform]
	for _, d := range e.devices {
		if d.State == contract.DeviceReclaiming && core.Fits(specOf(d), r.want, cat) {
			eta := d.StateSince + e.estimate(d.Platform, driver.OpReclaim, specOf(d)) - now()
			return max(eta, 0), true
		}
	}
	return 0, false
}

func (e *Engine) pushLocked(r *request, p contract.LeaseProgress) {
	r.last = p
	r.rec.Stage = p.Stage
	e.bumpLocked(r)
	for _, f := range r.progress {
		f(p)
	}
}

// bumpLocked marks a change of r that readers may be waiting for.
func (e *Engine) bumpLocked(r *request) {
	e.revs++
	r.rev = e.revs
	if r.changed != nil {
		close(r.changed)
	}
	r.changed = make(chan struct{})
}

// startLocked reserves what plan p needs for r and starts the driver work.
func (e *Engine) startLocked(r *request, p plan) {
	tx := e.begin()
	r.rec.State = contract.RequestStarting
	r.rec.QueuePosition = 0
	e.bumpLocked(r)
	tx.putRequest(r)
	devID := p.boot
	if p.provision {
		devID = newID("dev_")
		t := now()
		tx.putDevice(store.Device{
			ID: devID, Platform: r.spec.Platform, Model: r.spec.Model, OSVersion: r.spec.OSVersion,
			Driver: e.opts.Drivers[r.spec.Platform].Name(), State: contract.DeviceProvisioning,
			CreatedAt: t, StateSince: t, LastUsedAt: t,
		})
	}
	e.claims[devID] = "boot"
	if p.evict != "" {
		e.claims[p.evict] = "eviction"
	}
	if p.destroy != "" {
		e.claims[p.destroy] = "destroy"
	}
	if _, err := e.commitLocked(tx); err != nil {
		delete(e.claims, devID)
		delete(e.claims, p.evict)
		delete(e.claims, p.destroy)
		e.settleLocked(r, nil, contract.AsError(err), "internal")
		return
	}
	// The next step shows at once, not when the driver work begins: making
	// room first can take a while, and the request has left the queue.
	if p.provision {
		spec := r.spec
		r.target = &spec
		e.pushLocked(r, contract.LeaseProgress{Stage: contract.StageProvisioning,
			EtaMs: e.estimate(r.spec.Platform, driver.OpProvision, r.spec) + e.estimate(r.spec.Platform, driver.OpBoot, r.spec)})
	} else {
		spec := specOf(e.devices[devID])
		r.target = &spec
		e.pushLocked(r, contract.LeaseProgress{Stage: contract.StageBooting, EtaMs: e.estimate(spec.Platform, driver.OpBoot, spec)})
	}
	e.goWork(func() { e.runStart(r, devID, p) })
}

// runStart makes room, then creates and/or boots the device, then grants it.
func (e *Engine) runStart(r *request, devID string, p plan) {
	ctx := e.ctx
	if p.destroy != "" {
		if err := e.removeDevice(ctx, p.destroy, "capacity"); err != nil {
			e.requeue(r, devID, p)
			return
		}
	}
	if p.evict != "" {
		if err := e.shutdownDevice(ctx, p.evict, "eviction"); err != nil {
			e.requeue(r, devID, p)
			return
		}
	}
	e.mu.Lock()
	dev := *e.devices[devID]
	e.mu.Unlock()
	drv := e.opts.Drivers[dev.Platform]
	spec := specOf(&dev)
	dd := driver.Device{ID: dev.DriverDeviceID, Address: dev.Address, Data: dev.DriverData}
	source := contract.SourceBooted
	started := time.Now()
	if p.provision {
		source = contract.SourceProvisioned
		e.progress(r, contract.LeaseProgress{Stage: contract.StageProvisioning,
			EtaMs: e.estimate(dev.Platform, driver.OpProvision, spec) + e.estimate(dev.Platform, driver.OpBoot, spec)})
		var err error
		dd, err = drv.Provision(ctx, spec)
		if err != nil {
			e.startFailed(r, devID, true, "provision-failed", err)
			return
		}
		e.mu.Lock()
		d := *e.devices[devID]
		d.DriverDeviceID, d.Address, d.DriverData = dd.ID, dd.Address, dd.Data
		tx := e.begin()
		tx.putDevice(d)
		tx.event("device.provisioned", map[string]any{
			"deviceId": devID, "spec": spec, "driver": drv.Name(), "duration": time.Since(started).Milliseconds(),
		})
		_, err = e.commitLocked(tx)
		e.mu.Unlock()
		if err != nil {
			e.startFailed(r, devID, true, "internal", err)
			return
		}
	}
	e.progress(r, contract.LeaseProgress{Stage: contract.StageBooting, EtaMs: e.estimate(dev.Platform, driver.OpBoot, spec)})
	bootStart := time.Now()
	ready, err := drv.MakeReady(ctx, dd)
	if err != nil {
		e.startFailed(r, devID, p.provision, "boot-failed", err)
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.claims, devID)
	d := *e.devices[devID]
	d.Address, d.DriverData = ready.Address, ready.Data
	if d.DriverData == nil {
		d.DriverData = dd.Data
	}
	tx := e.begin()
	tx.putDevice(d)
	tx.setState(devID, contract.DeviceReady)
	tx.event("device.ready", map[string]any{"deviceId": devID, "bootDuration": time.Since(bootStart).Milliseconds()})
	if r.abandoned || r.rec.State.Terminal() {
		// The requester left while its device started: keep the device,
		// ready, for whoever is next.
		if _, err := e.commitLocked(tx); err != nil {
			e.log.Error("could not record a ready device", "deviceId", devID, "err", err)
		}
		e.settleLocked(r, nil, contract.Errorf(contract.CodeCancelled, "the requester went away"), "cancelled")
		e.serveLocked()
		return
	}
	// Ready and leased in one commit: nobody ever sees the device idle.
	e.grantLocked(r, devID, source, tx)
	e.serveLocked()
}

// requeue puts r back at the head of the queue when the room it was to get
// could not be made; its timeout keeps its original deadline.
func (e *Engine) requeue(r *request, devID string, p plan) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.claims, devID)
	if p.provision {
		// The driver never created it: the record goes.
		tx := e.begin()
		tx.setState(devID, contract.DeviceDeleted)
		if _, err := e.commitLocked(tx); err != nil {
			e.log.Error("could not drop a device record", "deviceId", devID, "err", err)
		}
	}
	if r.abandoned || e.stopping {
		e.settleLocked(r, nil, contract.Errorf(contract.CodeCancelled, "the requester went away"), "cancelled")
		e.serveLocked()
		return
	}
	r.rec.State = contract.RequestQueued
	e.bumpLocked(r)
	e.queue = append([]*request{r}, e.queue...)
	tx := e.begin()
	tx.putRequest(r)
	if _, err := e.commitLocked(tx); err != nil {
		e.log.Error("could not record a requeued request", "requestId", r.rec.ID, "err", err)
	}
	if ms := r.rec.Policy.TimeoutMs; ms > 0 {
		r.timer = time.AfterFunc(time.Until(r.queuedAt.Add(time.Duration(ms)*time.Millisecond)), func() { e.timeout(r) })
	}
	e.serveLocked()
}

// progress pushes a stage to r's requesters from outside the lock.
func (e *Engine) progress(r *request, p contract.LeaseProgress) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if !r.rec.State.Terminal() && r.last.Stage != p.Stage {
		e.pushLocked(r, p)
	}
}

// startFailed settles r with the driver's error and disposes of the device.
func (e *Engine) startFailed(r *request, devID string, created bool, reason string, err error) {
	cerr := e.errorf(err)
	e.log.Warn("device start failed", "deviceId", devID, "requestId", r.rec.ID, "err", err)
	e.mu.Lock()
	if created {
		e.claims[devID] = "destroy"
		e.goWork(func() { e.destroyAbandoned(devID) })
	} else {
		delete(e.claims, devID)
	}
	if cerr.Details["reason"] == "boot-timeout" {
		reason = "boot-timeout"
	}
	e.settleLocked(r, nil, cerr, reason)
	e.serveLocked()
	e.mu.Unlock()
}

// grantLocked leases device devID to r, committing it with what tx already
// holds.
func (e *Engine) grantLocked(r *request, devID string, source contract.GrantSource, tx *txn) {
	d := e.devices[devID]
	t := now()
	ttl := r.rec.Policy.TTLMs
	lease := store.Lease{
		LeaseRecord: contract.LeaseRecord{
			ID: newID("lse_"), DeviceID: devID, RequesterID: r.rec.RequesterID, OwnerID: r.rec.OwnerID,
			GrantedAt: t, TTLMs: ttl, LastRenewedAt: t, TTLDeadline: t + ttl,
		},
		RequestID: r.rec.ID,
	}
	spec := specOf(d)
	drv := e.opts.Drivers[d.Platform]
	prov, boot, recl := e.estimate(d.Platform, driver.OpProvision, spec), e.estimate(d.Platform, driver.OpBoot, spec), e.estimate(d.Platform, driver.OpReclaim, spec)
	grant := contract.LeaseGrant{
		Device: contract.GrantDevice{ID: devID, DriverDeviceID: d.DriverDeviceID, Spec: spec, Address: d.Address, Mode: "full"},
		Lease:  lease.LeaseRecord,
		Timing: contract.Timing{EstimatedProvisionMs: prov, EstimatedBootMs: boot, EstimatedReclaimMs: recl,
			EstimatedReadyMs: prov + boot},
		Environment: map[string]string{},
		RequestID:   r.rec.ID,
		Source:      source,
	}
	if drv != nil {
		for k, v := range drv.LeaseEnvironment() {
			grant.Environment[k] = v
		}
	}
	nd := tx.setState(devID, contract.DeviceLeased)
	nd.LastUsedAt = t
	tx.putDevice(nd)
	tx.putLease(lease)
	r.rec.State, r.rec.Stage, r.rec.QueuePosition = contract.RequestGranted, "", 0
	r.rec.SettledAt, r.rec.LeaseID, r.rec.Grant = t, lease.ID, &grant
	tx.putRequest(r)
	tx.event("lease.granted", map[string]any{
		"leaseId": lease.ID, "deviceId": devID, "requester": r.rec.RequesterID, "requestId": r.rec.ID, "source": source,
	})
	if _, err := e.commitLocked(tx); err != nil {
		r.rec.State = contract.RequestStarting
		e.settleLocked(r, nil, contract.AsError(err), "internal")
		return
	}
	e.armLocked(e.leases[lease.ID])
	r.grant = &grant
	e.finishLocked(r)
}

// settleLocked ends an open request with an error (grants go through
// grantLocked), committing the record and a lease.rejected event.
func (e *Engine) settleLocked(r *request, _ *contract.LeaseGrant, cerr *contract.Error, reason string) {
	if _, open := e.requests[r.rec.ID]; !open {
		return
	}
	e.removeFromQueueLocked(r)
	state := contract.RequestFailed
	if cerr.Code == contract.CodeCancelled {
		state = contract.RequestCancelled
	}
	r.rec.State, r.rec.Stage, r.rec.QueuePosition, r.rec.SettledAt, r.rec.Error = state, "", 0, now(), cerr
	tx := e.begin()
	tx.putRequest(r)
	tx.event("lease.rejected", map[string]any{
		"requestId": r.rec.ID, "requester": r.rec.RequesterID, "requestSpec": r.rec.Spec, "reason": reason,
		"code": cerr.Code,
	})
	if _, err := e.commitLocked(tx); err != nil {
		e.log.Error("could not record settled request", "requestId", r.rec.ID, "err", err)
	}
	r.err = cerr
	e.finishLocked(r)
}

func (e *Engine) finishLocked(r *request) {
	e.bumpLocked(r)
	delete(e.requests, r.rec.ID)
	if r.timer != nil {
		r.timer.Stop()
	}
	close(r.done)
}

// failQueuedLocked fails a waiting request and lets the queue move.
func (e *Engine) failQueuedLocked(r *request, cerr *contract.Error, reason string) {
	e.settleLocked(r, nil, cerr, reason)
	e.reportPositionsLocked()
}

func (e *Engine) timeout(r *request) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if r.rec.State != contract.RequestQueued {
		return
	}
	if _, open := e.requests[r.rec.ID]; !open {
		return
	}
	e.failQueuedLocked(r, contract.Errorf(contract.CodeQueueTimeout, "no device was free within %s",
		time.Duration(r.rec.Policy.TimeoutMs)*time.Millisecond).With("requestId", r.rec.ID), "timeout")
	e.serveLocked()
}

// abandon is called when a requester stops waiting. It reports whether the
// request ends with it; when others still wait on it, or it is a resource
// that waits on its own, only this requester's interest ends.
func (e *Engine) abandon(r *request) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	if _, open := e.requests[r.rec.ID]; !open {
		return true
	}
	if len(r.progress) > 1 || r.detached {
		if len(r.progress) > 0 {
			r.progress = r.progress[:len(r.progress)-1]
		}
		return false
	}
	switch r.rec.State {
	case contract.RequestQueued:
		// Also while it waits for a download: the request ends now; the
		// install goes on, for whoever else needs the runtime.
		e.failQueuedLocked(r, contract.Errorf(contract.CodeCancelled, "the requester stopped waiting"), "cancelled")
		e.serveLocked()
	case contract.RequestStarting:
		r.abandoned = true
	}
	return true
}

// Cancel withdraws a waiting request, named by id or by requester. A request
// named by id that has already settled answers by how it settled: cancelled
// again for a cancelled one, not-cancellable (naming the lease) for a grant.
func (e *Engine) Cancel(ctx context.Context, c Caller, in contract.LeaseCancelInput) (contract.LeaseCancelResult, error) {
	requester := in.RequesterID
	if requester == "" && in.RequestID == "" {
		requester = c.Principal
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	var found *request
	for _, r := range e.requests {
		if (in.RequestID != "" && r.rec.ID == in.RequestID) || (in.RequestID == "" && r.rec.RequesterID == requester) {
			found = r
			break
		}
	}
	if found == nil && in.RequestID != "" {
		e.mu.Unlock()
		rec, ok, err := e.opts.Store.Request(ctx, in.RequestID)
		e.mu.Lock()
		if err != nil {
			return contract.LeaseCancelResult{}, contract.Errorf(contract.CodeInternal, "read request: %v", err)
		}
		if !ok || !c.sees(rec) {
			return contract.LeaseCancelResult{Outcome: contract.CancelNotFound}, nil
		}
		switch rec.State {
		case contract.RequestCancelled:
			return contract.LeaseCancelResult{Outcome: contract.CancelCancelled, RequestID: rec.ID}, nil
		case contract.RequestQueued, contract.RequestStarting:
			// Settled between the two reads: the stored state is the
			// one before; look again.
			if r, open := e.requests[rec.ID]; open {
				found = r
			}
		}
		if found == nil {
			return contract.LeaseCancelResult{Outcome: contract.CancelNotCancellable, RequestID: rec.ID, LeaseID: rec.LeaseID}, nil
		}
	}
	if found == nil || !c.sees(found.rec) {
		return contract.LeaseCancelResult{Outcome: contract.CancelNotFound}, nil
	}
	if found.rec.State != contract.RequestQueued || found.downloading {
		return contract.LeaseCancelResult{Outcome: contract.CancelNotCancellable, RequestID: found.rec.ID}, nil
	}
	e.failQueuedLocked(found, contract.Errorf(contract.CodeCancelled, "the request was cancelled"), "cancelled")
	e.serveLocked()
	return contract.LeaseCancelResult{Outcome: contract.CancelCancelled, RequestID: found.rec.ID}, nil
}
