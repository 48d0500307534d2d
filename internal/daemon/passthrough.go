package daemon

import (
	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/driver"
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
	var held []contract.LeaseGetResult
	for _, rec := range d.engine.Leases(c) {
		if rec.OwnerID != c.Principal {
			continue
		}
		if l, err := d.engine.Get(c, contract.LeaseIDInput{LeaseID: rec.UniqueKey()}); err == nil {
			held = append(held, l)
		}
	}
	return contract.OnlyToolLease(in.Tool, c.Principal, held)
}

// command is the one path from a tool and its arguments to the command
// that runs, for device.passthrough and device.exec alike, on every
// surface: the lease's device (nil: none) must be on the tool's platform,
// and the driver pins the command to it and refuses the rest (see
// driver.Target); remote says the caller may not name files of this
// machine.
func (d *Daemon) command(tool string, args []string, l *contract.LeaseGetResult, remote bool) (driver.Command, error) {
	platform := contract.ToolPlatform(tool)
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

// article is a platform with its indefinite article.
func article(p contract.Platform) string {
	if p == contract.PlatformIOS {
		return "an " + string(p)
	}
	return "a " + string(p)
}
