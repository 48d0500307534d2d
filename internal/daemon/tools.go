package daemon

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/driver"
	"github.com/simlock/simlock/internal/driver/demo"
	"github.com/simlock/simlock/internal/leasing"
)

// passthrough resolves `simlock simctl|adb <args>` to the command to run,
// pinned to the caller's lease (passthroughLease) by the platform's driver.
// The daemon runs nothing: the CLI runs the command with its own stdio, on
// this machine, which is why a remote session may not ask for one.
func (d *Daemon) passthrough(s *session, c leasing.Caller, in contract.PassthroughInput) (contract.PassthroughResult, error) {
	if s.remote {
		return contract.PassthroughResult{}, contract.Errorf(contract.CodePassthroughRefused,
			"device.passthrough hands back a command to run on this machine; a remote caller runs its commands with device.exec (POST /v1/leases/{id}/exec)").
			With("tool", in.Tool)
	}
	l, err := d.passthroughLease(c, in)
	if err != nil {
		return contract.PassthroughResult{}, err
	}
	return d.command(in.Tool, in.Args, l, false)
}

// passthroughLease is the lease a CLI passthrough is pinned to: the one it
// names (which must be the caller's), else the caller's only active lease
// on the tool's platform; with none, nil (only commands that act on no
// device pass); with several, the caller must name one.
func (d *Daemon) passthroughLease(c leasing.Caller, in contract.PassthroughInput) (*contract.LeaseGetResult, error) {
	if in.LeaseID != "" {
		l, err := d.engine.Get(c, contract.LeaseIDInput{LeaseID: in.LeaseID})
		if err != nil || (c.Admin && l.Lease.OwnerID != c.Principal) {
			// Another owner's lease is not one of yours, whoever asks.
			return nil, contract.Errorf(contract.CodeUnknownLease, "no active lease %s of yours", in.LeaseID).With("leaseId", in.LeaseID)
		}
		return &l, nil
	}
	platform := toolPlatform(in.Tool)
	var mine []contract.LeaseGetResult
	for _, rec := range d.engine.Leases(c) {
		if rec.OwnerID != c.Principal {
			continue
		}
		if l, err := d.engine.Get(c, contract.LeaseIDInput{LeaseID: rec.UniqueKey()}); err == nil && l.Device.Spec.Platform == platform {
			mine = append(mine, l)
		}
	}
	switch len(mine) {
	case 0:
		return nil, nil
	case 1:
		return &mine[0], nil
	}
	ids := make([]string, len(mine))
	for i, l := range mine {
		ids[i] = l.Lease.ID
	}
	return nil, contract.BadRequest("leaseId", "you hold %d %s leases (%s): name the one to run %s on with --lease <id>",
		len(mine), platform, strings.Join(ids, ", "), in.Tool)
}

// command is the one path from a tool and its arguments to the command
// that runs, for device.passthrough and device.exec alike, on every
// surface: the lease's device (nil: none) must be on the tool's platform,
// and the driver pins the command to it and refuses the rest (see
// driver.Target); remote says the caller may not name files of this
// machine.
func (d *Daemon) command(tool string, args []string, l *contract.LeaseGetResult, remote bool) (driver.Command, error) {
	platform := toolPlatform(tool)
	t := driver.Target{Remote: remote}
	if l != nil {
		if got := l.Device.Spec.Platform; got != platform {
			return driver.Command{}, contract.Errorf(contract.CodePassthroughRefused, "lease %s is on %s device; %s drives %s devices", l.Lease.ID, article(got), tool, platform).
				With("leaseId", l.Lease.ID).With("tool", tool)
		}
		t.Device = driver.Device{ID: l.Device.DriverDeviceID, Address: l.Device.Address}
	}
	drv, ok := d.opts.Drivers[platform]
	if !ok {
		return driver.Command{}, contract.Errorf(contract.CodeNoDriver, "no %s driver runs in this daemon, so there is no %s to run", platform, tool).
			With("platform", platform)
	}
	cmd, err := drv.Passthrough(t, args)
	if err != nil {
		return driver.Command{}, driver.ContractError(err)
	}
	return cmd, nil
}

// toolPlatform is the platform a passthrough tool drives.
func toolPlatform(tool string) contract.Platform {
	if tool == "adb" {
		return contract.PlatformAndroid
	}
	return contract.PlatformIOS
}

// article is a platform with its indefinite article.
func article(p contract.Platform) string {
	if p == contract.PlatformIOS {
		return "an " + string(p)
	}
	return "a " + string(p)
}

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

// demoInject makes a demo device misbehave at its next observation or
// operation, so crash recovery, quarantine and device loss can be seen
// without a real device.
func (d *Daemon) demoInject(in contract.DemoInjectInput) (contract.DemoInjectResult, error) {
	var dev *contract.Device
	for _, x := range d.engine.List(contract.ListDevices, nil, 0).Devices {
		if x.ID == in.DeviceID {
			dev = &x
			break
		}
	}
	if dev == nil {
		// Unknown, as any other device id the daemon does not have (the
		// exit-code table's UNKNOWN_DEVICE, exit 1), not a malformed input.
		return contract.DemoInjectResult{}, contract.Errorf(contract.CodeUnknownDevice, "no device %s", in.DeviceID).With("deviceId", in.DeviceID)
	}
	drv, ok := d.opts.Drivers[dev.Spec.Platform].(*demo.Driver)
	if !ok {
		return contract.DemoInjectResult{}, contract.Errorf(contract.CodeBadRequest,
			"device %s is served by the %s driver; faults can be injected only into the demo driver's devices", in.DeviceID, dev.Driver).With("field", "deviceId")
	}
	fault, err := demo.ParseFault(in.Fault)
	if err == nil {
		err = drv.Inject(dev.DriverDeviceID, fault)
	}
	if err != nil {
		return contract.DemoInjectResult{}, contract.Errorf(contract.CodeBadRequest, "%v", err).With("field", "deviceId")
	}
	d.log.Info("demo fault injected", "deviceId", in.DeviceID, "fault", in.Fault)
	return contract.DemoInjectResult{DeviceID: in.DeviceID, Fault: in.Fault, Injected: true}, nil
}
