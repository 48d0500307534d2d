package daemon

import (
	"context"
	"fmt"
	"time"

	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/driver"
	"github.com/simlock/simlock/internal/leasing"
)

// doctor reports what stops a platform from working: missing tools, refused
// roots, disabled drivers, registry devices their root no longer holds, and
// devices changed outside simlock (erased, replaced, booted). With fix it
// marks such vanished devices deleted and quarantines the changed ones
// (never a leased one).
func (d *Daemon) doctor(ctx context.Context, in contract.DoctorInput) (contract.DoctorResult, error) {
	fix := in.Fix
	res := contract.DoctorResult{Findings: []contract.Finding{}}
	if d.opts.Prerequisites != nil {
		for _, m := range d.opts.Prerequisites(ctx) {
			res.Findings = append(res.Findings, contract.Finding{Kind: "prerequisite-missing", Platform: m.Platform,
				Prerequisite: m.Prerequisite, Message: m.Message, Remedy: m.Remedy})
		}
	}
	for _, p := range contract.Platforms() {
		if r, ok := d.opts.Rejections[p]; ok {
			res.Findings = append(res.Findings, contract.Finding{Kind: "root-rejected", Platform: p, Reason: r.Reason, Path: r.Path,
				Message: fmt.Sprintf("the %s device root %s was refused (%s): %s", p, r.Path, r.Reason, r.Detail),
				Remedy:  "point drivers." + string(p) + ".deviceRoot at a path that does not exist yet, for simlock to create, or fix this one, then restart the daemon"})
			continue
		}
		if _, ok := d.opts.Drivers[p]; !ok {
			res.Findings = append(res.Findings, contract.Finding{Kind: "driver-unavailable", Platform: p, Message: d.opts.DriverNotes[p]})
		}
	}
	missing, err := d.engine.Maintenance().Vanished(ctx)
	if err != nil {
		return res, err
	}
	for _, dev := range missing {
		f := contract.Finding{Kind: "device-missing", Platform: dev.Spec.Platform, DeviceID: dev.ID,
			Message: fmt.Sprintf("device %s (%s %s) is in the registry but not in its root", dev.ID, dev.Spec.Model, dev.Spec.OSVersion)}
		if dev.LeaseID != "" {
			f.Message += "; it is leased, so doctor leaves it"
		} else if fix {
			if err := d.engine.Maintenance().MarkMissing(dev.ID); err != nil {
				return res, err
			}
			f.Fixed = true
		} else {
			f.Remedy = "simlock doctor --fix marks it deleted"
		}
		res.Findings = append(res.Findings, f)
	}
	for _, dev := range d.engine.Maintenance().Stalled() {
		f := contract.Finding{Kind: "stalled-transition", Platform: dev.Spec.Platform, DeviceID: dev.ID,
			Message: fmt.Sprintf("device %s has been %s since %s with nothing working on it", dev.ID, dev.State, time.UnixMilli(dev.StateSince).UTC().Format(time.RFC3339))}
		if fix {
			if err := d.engine.Maintenance().QuarantineStalled(dev.ID); err != nil {
				return res, err
			}
			f.Fixed = true
		} else {
			f.Remedy = "simlock doctor --fix quarantines it; its clean is then retried"
		}
		res.Findings = append(res.Findings, f)
	}
	foreign, err := d.engine.Maintenance().Foreign(ctx, fix)
	if err != nil {
		return res, err
	}
	for _, f := range foreign {
		res.Findings = append(res.Findings, foreignFinding(f))
	}
	for _, l := range d.engine.Maintenance().ExpiredLeases() {
		f := contract.Finding{Kind: "expired-lease", DeviceID: l.DeviceID,
			Message: fmt.Sprintf("lease %s passed its deadline (%s) but its device is still leased", l.ID, time.UnixMilli(l.TTLDeadline).UTC().Format(time.RFC3339))}
		if fix {
			d.engine.Maintenance().ExpireNow(l.UniqueKey())
			f.Fixed = true
		} else {
			f.Remedy = "simlock doctor --fix expires it"
		}
		res.Findings = append(res.Findings, f)
	}
	res.Findings = append(res.Findings, d.engine.Maintenance().SlimAdvisories()...)
	for _, t := range d.engine.Maintenance().WarmPoolStatus().Targets {
		switch t.Reason {
		case "no-driver", "unknown-model", "runtime-missing", "unresolvable":
			res.Findings = append(res.Findings, contract.Finding{Kind: "warm-pool-target-unreachable", Platform: t.Platform, Reason: t.Reason,
				Message: fmt.Sprintf("warm-pool target %s %s %s can never be filled: %s", t.Platform, t.Model, t.OSVersion, t.Reason),
				Remedy:  "fix or remove the target in warmPool.targets (simlock catalog lists the models and runtimes), then restart the daemon"})
		}
	}
	orphans, err := d.engine.Maintenance().Orphans(ctx)
	if err != nil {
		return res, err
	}
	for _, o := range orphans {
		f := contract.Finding{Kind: "orphan", Platform: o.Platform, Path: o.Name,
			Message: fmt.Sprintf("%s device %s (%s) is in simlock's root but not in its registry", o.Platform, o.ID, o.Name)}
		if in.PurgeOrphans {
			if err := d.engine.Maintenance().PurgeOrphan(ctx, o); err != nil {
				f.Message += "; deleting it failed: " + err.Error()
			} else {
				f.Fixed = true
			}
		} else {
			f.Remedy = "simlock doctor --purge-orphans --yes deletes it"
		}
		res.Findings = append(res.Findings, f)
	}
	return res, nil
}

// foreignFinding says what doctor found changed outside simlock on a
// device, and what to do about it.
func foreignFinding(f leasing.Foreign) contract.Finding {
	dev := f.Device
	p := dev.Spec.Platform
	out := contract.Finding{Kind: f.Kind, Platform: p, DeviceID: dev.ID, Fixed: f.Fixed}
	what := fmt.Sprintf("device %s (%s %s)", dev.ID, dev.Spec.Model, dev.Spec.OSVersion)
	// Only simlock's own clean makes an erased device trustworthy again;
	// a device simlock cannot prove is its own it never cleans or deletes,
	// so a person must.
	deleteIt := "simlock will neither clean nor delete it, as it cannot prove the device is its own: check it, delete it with the platform's tools in drivers." +
		string(p) + ".deviceRoot, then simlock doctor --fix marks it deleted"
	if f.Kind == leasing.ForeignState {
		out.Message = fmt.Sprintf("%s is %s in simlock's registry but %s: it was booted outside simlock", what, f.Expected, f.Observed)
	} else {
		out.Reason = string(f.Drift)
		switch f.Drift {
		case driver.DriftErased:
			out.Message = what + " was erased outside simlock: its erasable provenance mark is gone"
		case driver.DriftMarkMismatch:
			out.Message = what + " carries a provenance mark simlock did not write: it was replaced, or its marks rewritten, outside simlock"
		default:
			out.Message = what + " has lost its durable provenance mark: nothing proves it is simlock's"
		}
	}
	refused := f.Kind == leasing.ForeignProvenance && f.Drift != driver.DriftErased
	switch {
	case dev.LeaseID != "":
		out.Message += "; it is leased, so doctor leaves it (the health monitor ends the lease once it sees the device running)"
	case f.Fixed && refused:
		out.Message += "; it is quarantined, so it is never handed out"
		out.Remedy = deleteIt
	case f.Fixed:
		out.Message += "; it is quarantined, so it is never handed out, and its clean is retried"
	case dev.State == contract.DeviceQuarantined && refused:
		out.Message += "; it is quarantined"
		out.Remedy = deleteIt
	case dev.State == contract.DeviceQuarantined:
		out.Message += "; it is quarantined, and its quarantine retries clean it"
	case refused:
		out.Remedy = "simlock doctor --fix quarantines it, so it is never handed out; " + deleteIt
	default:
		out.Remedy = "simlock doctor --fix quarantines it, so it is never handed out; its clean is then retried"
	}
	return out
}
