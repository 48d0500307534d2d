package daemon

import (
	"context"
	"errors"
	"time"

	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/driver"
)

// deviceToolOps are the device tools: on a worker, each calls its
// driver's DeviceTools for the lease's device (onTool); on a gateway, each
// is forwarded to the lease's worker (gateway.Leasing.DeviceTool).
func deviceToolOps() []opEntry {
	return []opEntry{
		{op: contract.OpAppLaunch,
			worker: handle(func(c *call, in contract.AppLaunchInput) (out contract.AppLaunchResult, err error) {
				err = c.onTool(&in, func(ctx context.Context, t driver.DeviceTools, dev driver.Device) (err error) {
					out, err = t.LaunchApp(ctx, dev, in.AppID, in.Args)
					return err
				})
				return out, err
			}),
			gateway: handle(forwardTool[contract.AppLaunchInput, contract.AppLaunchResult]),
		},
		{op: contract.OpAppTerminate,
			worker: handle(func(c *call, in contract.AppTerminateInput) (contract.AppTerminateResult, error) {
				return contract.AppTerminateResult{AppID: in.AppID}, c.onTool(&in, func(ctx context.Context, t driver.DeviceTools, dev driver.Device) error {
					return t.TerminateApp(ctx, dev, in.AppID)
				})
			}),
			gateway: handle(forwardTool[contract.AppTerminateInput, contract.AppTerminateResult]),
		},
		{op: contract.OpOpenURL,
			worker: handle(func(c *call, in contract.OpenURLInput) (contract.OpenURLResult, error) {
				return contract.OpenURLResult{URL: in.URL}, c.onTool(&in, func(ctx context.Context, t driver.DeviceTools, dev driver.Device) error {
					return t.OpenURL(ctx, dev, in.URL)
				})
			}),
			gateway: handle(forwardTool[contract.OpenURLInput, contract.OpenURLResult]),
		},
		{op: contract.OpDeviceLogs,
			worker: handle(func(c *call, in contract.DeviceLogsInput) (out contract.DeviceLogs, err error) {
				q := driver.LogQuery{Lines: in.LogLines(), Since: time.Duration(in.SinceMs) * time.Millisecond, Process: in.Process}
				err = c.onTool(&in, func(ctx context.Context, t driver.DeviceTools, dev driver.Device) (err error) {
					out, err = t.DeviceLogs(ctx, dev, q)
					return err
				})
				// A driver's answer is bounded again here, whatever it did.
				return contract.BoundLogLines(out.Lines, q.Lines), err
			}),
			// A worker's answer is a claim: its lines are bounded again.
			gateway: handle(func(c *call, in contract.DeviceLogsInput) (contract.DeviceLogs, error) {
				out, err := forwardTool[contract.DeviceLogsInput, contract.DeviceLogs](c, in)
				return contract.BoundLogLines(out.Lines, in.LogLines()), err
			}),
		},
		{op: contract.OpSetLocation,
			worker: handle(func(c *call, in contract.LocationInput) (contract.LocationResult, error) {
				return contract.LocationResult{Latitude: *in.Latitude, Longitude: *in.Longitude}, c.onTool(&in, func(ctx context.Context, t driver.DeviceTools, dev driver.Device) error {
					return t.SetLocation(ctx, dev, *in.Latitude, *in.Longitude)
				})
			}),
			gateway: handle(forwardTool[contract.LocationInput, contract.LocationResult]),
		},
		{op: contract.OpSetAppearance,
			worker: handle(func(c *call, in contract.AppearanceInput) (contract.AppearanceResult, error) {
				return contract.AppearanceResult{Appearance: in.Appearance}, c.onTool(&in, func(ctx context.Context, t driver.DeviceTools, dev driver.Device) error {
					return t.SetAppearance(ctx, dev, in.Appearance)
				})
			}),
			gateway: handle(forwardTool[contract.AppearanceInput, contract.AppearanceResult]),
		},
	}
}

// onTool runs f on the device of the lease in names, for a caller who
// acts on it (as device.exec checks: leaseToRun). f holds one of the
// lease's exec.maxConcurrent command slots while it runs, so the lease's
// end (execParticipant) cancels its context and waits for it before the
// device is cleaned; a call whose lease ended meanwhile answers
// UNKNOWN_LEASE. A driver's failure is its contract error; one without a
// code (a tool that failed) names paths of this machine, so a remote
// caller is told only that it failed, and the log keeps why.
func (c *call) onTool(in contract.DeviceToolInput, f func(ctx context.Context, t driver.DeviceTools, dev driver.Device) error) error {
	d := c.d
	leaseID, requesterID := in.Lease()
	l, err := d.leaseToRun(c.caller, leaseID, requesterID)
	if err != nil {
		return err
	}
	p := l.Device.Spec.Platform
	tools, ok := d.opts.Drivers[p].(driver.DeviceTools)
	if !ok {
		return contract.Errorf(contract.CodeNoDriver, "the %s driver has no device tools", p).With("platform", p)
	}
	run, stop := context.WithCancelCause(c.ctx)
	defer stop(nil)
	defer context.AfterFunc(d.life, func() { stop(errDaemonStopping) })()
	limit := int(d.opts.Config.Int("exec.maxConcurrent"))
	lease := execKey{l.Lease.OwnerID, l.Lease.UniqueKey()}
	release, ok := d.execs.take(lease, limit, stop)
	if !ok {
		return contract.Errorf(contract.CodeTooManyStreams,
			"lease %s already runs %d commands, the most one lease may (exec.maxConcurrent); wait for one to end", leaseID, limit).
			With("leaseId", leaseID).With("maxConcurrent", limit)
	}
	defer release()
	// A lease's end stops the calls it finds holding a slot; one that
	// ended between the check above and the slot is seen here.
	if _, err := d.engine.Get(c.caller, contract.LeaseIDInput{LeaseID: lease.lease}); err != nil {
		return leaseEndedError(leaseID, string(c.op), "was not run")
	}
	err = f(run, tools, driver.Device{ID: l.Device.DriverDeviceID, Address: l.Device.Address})
	if err == nil {
		return nil
	}
	switch cause := context.Cause(run); {
	case errors.Is(cause, errLeaseEnded):
		return leaseEndedError(leaseID, string(c.op), "was stopped")
	case errors.Is(cause, errDaemonStopping):
		return contract.Errorf(contract.CodeDaemonStopping, "the daemon is stopping; %s was stopped", c.op)
	case c.ctx.Err() != nil:
		return contract.Errorf(contract.CodeCancelled, "the caller went away; %s was stopped", c.op)
	}
	ce := driver.ContractError(err)
	if ce.Code == contract.CodeInternal && c.s.remote {
		d.log.Warn("a device tool failed", "op", c.op, "leaseId", leaseID, "err", err)
		return contract.Errorf(contract.CodeInternal, "%s failed on the device's machine; its daemon log says why", c.op).With("leaseId", leaseID)
	}
	return ce
}

// forwardTool answers a device tool on a gateway: forwarded to the lease's
// worker.
func forwardTool[In any, Out any, P interface {
	*In
	contract.DeviceToolInput
}](c *call, in In) (Out, error) {
	var out Out
	err := c.d.leasing.DeviceTool(c.ctx, c.caller, c.op, P(&in), &out)
	return out, err
}
