package leasing

import (
	"context"

	"github.com/simlock/simlock/internal/components"
	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/core"
	"github.com/simlock/simlock/internal/driver"
	"github.com/simlock/simlock/internal/queue"
)

// The request operations are the front desk's (queue.Desk), which both
// placers share; the engine adds only how a request resolves
// (resolveRequest).

// Acquire asks for a device and waits until one is granted, the request
// fails, or ctx ends (see queue.Desk.Acquire). When ctx ends while a
// device is being started for the request, the device is kept for the
// next requester and no lease is made.
func (e *Engine) Acquire(ctx context.Context, c Caller, in contract.LeaseRequestInput, progress func(contract.LeaseProgress)) (contract.LeaseGrant, error) {
	return e.desk.Acquire(ctx, c, in, progress)
}

// Submit makes a lease request that waits on its own, as a resource (see
// queue.Desk.Submit).
func (e *Engine) Submit(ctx context.Context, c Caller, in contract.LeaseRequestInput) (contract.LeaseRequestStatus, error) {
	return e.desk.Submit(ctx, c, in)
}

// RetryRequest makes failed request id again (see queue.Desk.RetryRequest).
func (e *Engine) RetryRequest(ctx context.Context, c Caller, id string) (contract.LeaseRequestStatus, error) {
	return e.desk.RetryRequest(ctx, c, id)
}

// RequestStatus reads a lease request (see queue.Queue.Status).
func (e *Engine) RequestStatus(ctx context.Context, c Caller, in contract.LeaseRequestGetInput) (contract.LeaseRequestStatus, error) {
	return e.desk.RequestStatus(ctx, c, in)
}

// Cancel withdraws a waiting request (see queue.Queue.Cancel).
func (e *Engine) Cancel(ctx context.Context, c Caller, in contract.LeaseCancelInput) (contract.LeaseCancelResult, error) {
	return e.desk.Cancel(ctx, c, in)
}

// need is what the local placer places: the request's wants with its class
// settled, and the spec a new device for it would have.
type need struct {
	want core.Want
	spec contract.DeviceSpec
}

func (n *need) Platform() contract.Platform { return n.want.Platform }

// resolveRequest turns a request into a need, a download to make first, or
// the error that settles it.
func (e *Engine) resolveRequest(ctx context.Context, in contract.LeaseRequestInput) queue.Resolution {
	spec := in.Spec()
	drv, cerr := e.driverFor(in.Platform)
	if cerr != nil {
		return queue.Resolution{Err: cerr, Reason: contract.RejectUnresolvable}
	}
	var cat driver.Catalog
	e.view(func() { cat = e.catalogs[in.Platform] })
	n := &need{want: core.WantOf(spec, cat)}
	n.spec, cerr = e.resolve(ctx, drv, n.want, cat)
	if cerr == nil {
		e.noteSlimRefused(n, cat)
		return queue.Resolution{Need: n}
	}
	if cerr.Code == contract.CodeRuntimeMissing && cerr.Details["downloadable"] == true && !in.AllowDownload &&
		e.opts.DownloadPolicy == "on-request" && e.opts.Installer != nil && e.opts.Installer.Supports(in.Platform) {
		cerr = cerr.With("hint", "allow a download with --allow-download (allowDownload: true)")
	}
	if component, ok := e.downloadFor(cerr, in); ok {
		return queue.Resolution{Park: func(w *queue.Waiter) { e.download(w, drv, component) }}
	}
	return queue.Resolution{Err: cerr, Reason: contract.RejectUnresolvable}
}

// admit refuses a request whose resolved runtime is being removed: no new
// device is made on it while it goes.
func (e *Engine) admit(w *queue.Waiter) (*contract.Error, contract.RejectReason) {
	n := w.Need().(*need)
	if n.spec.Model != "" && e.removingLocked(n.spec) {
		return contract.Errorf(contract.CodeRuntimeMissing, "%s %s is being removed", n.spec.Platform, n.spec.OSVersion).
			With("platform", n.spec.Platform).With("osVersion", n.spec.OSVersion).With("downloadable", false), contract.RejectUnresolvable
	}
	return nil, ""
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
	return component, core.DownloadAllowed(e.opts.DownloadPolicy, in.AllowDownload)
}

// download installs the runtime a parked request needs, reporting the
// install as the downloading stage, then resolves the request again and
// puts it in line. The install runs whether or not the requester still
// waits: other requests may have joined it, and the runtime stays
// installed.
func (e *Engine) download(w *queue.Waiter, drv driver.Driver, component string) {
	spec := w.Spec()
	p := spec.Platform
	_, err := e.opts.Installer.Install(e.ctx, p, component, func(rep components.Report) {
		// The requester's downloading stage is the wait and the download;
		// a bare installer line, the verification and the record add
		// nothing it shows.
		if rep.LogOnly || (rep.Phase != contract.PhaseQueue && rep.Phase != contract.PhaseDownload) {
			return
		}
		step := contract.LeaseProgress{Stage: contract.StageDownloading, Component: component, Waiting: rep.Phase == contract.PhaseQueue,
			BytesDone: rep.Bytes, BytesTotal: rep.Total}
		if rep.Percent != nil {
			pct := min(max(int(*rep.Percent), 0), contract.MaxPercent) // rounded down
			step.Percent = &pct
		}
		// A percentage is sent once per whole number.
		e.q.Progress(w, step)
	})
	var n *need
	var cerr *contract.Error
	reason := contract.RejectDownloadFailed
	if err != nil {
		cerr = contract.AsError(err)
	} else {
		// The new runtime shows in a fresh catalog.
		cat, lerr := e.listCatalog(e.ctx, drv)
		e.view(func() {
			if lerr == nil {
				e.catalogs[p] = cat
			} else {
				cat = e.catalogs[p]
			}
		})
		n = &need{want: core.WantOf(spec, cat)}
		n.spec, cerr = e.resolve(e.ctx, drv, n.want, cat)
		reason = contract.RejectUnresolvable
	}
	_ = e.do(func(tx *queue.Txn) error {
		switch {
		case tx.Abandoned(w) || e.stopping:
			tx.Settle(w, contract.Errorf(contract.CodeCancelled, "the requester went away"), contract.RejectCancelled)
		case cerr != nil:
			tx.Settle(w, cerr, reason)
		default:
			tx.Enqueue(w, n)
		}
		return nil
	})
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
			return contract.DeviceSpec{}, e.errorf(&driver.RuntimeMissingError{Platform: w.Platform, OSVersion: w.OSVersion, ImageTag: w.ImageTag})
		}
		// The class has models but none pairs with a fitting installed
		// runtime: let the driver say exactly what is missing for the
		// first choice (and whether a download would help).
		spec, err := drv.ResolveSpec(ctx, driver.Request{Platform: w.Platform, Model: all[0], OSVersion: w.OSVersion, ImageTag: w.ImageTag, Mode: w.ModeIn(cat)})
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
					first = &driver.RuntimeMissingError{Platform: w.Platform, OSVersion: w.OSVersion, ImageTag: w.ImageTag}
				}
				continue
			}
		}
		spec, err := drv.ResolveSpec(ctx, driver.Request{Platform: w.Platform, Model: m, OSVersion: version, ImageTag: w.ImageTag, Mode: w.ModeIn(cat)})
		if err == nil {
			return spec, nil
		}
		if first == nil {
			first = err
		}
	}
	return contract.DeviceSpec{}, e.errorf(first)
}
