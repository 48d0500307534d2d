package client

import (
	"context"
	"encoding/json"

	"github.com/simlock/simlock/internal/contract"
)

// RequestLease asks for a device and waits for the grant, calling progress
// with each step of the wait. Cancelling ctx closes nothing: callers that
// stop waiting should close the client, which withdraws the request.
func (c *Client) RequestLease(ctx context.Context, in contract.LeaseRequestInput, progress func(contract.LeaseProgress)) (contract.LeaseGrant, error) {
	var g contract.LeaseGrant
	if progress == nil {
		progress = func(contract.LeaseProgress) {}
	}
	err := c.call(ctx, contract.OpLeaseRequest, in, &g, &call{progress: progress})
	return g, err
}

// Renew extends a lease; ttlMs 0 keeps its width.
func (c *Client) Renew(ctx context.Context, leaseID string, ttlMs int64) (contract.LeaseRecord, error) {
	var l contract.LeaseRecord
	err := c.Call(ctx, contract.OpLeaseRenew, contract.LeaseRenewInput{LeaseID: leaseID, TTLMs: ttlMs}, &l)
	return l, err
}

// Bind ties a lease to local process pid: the daemon ends the lease when
// the process exits.
func (c *Client) Bind(ctx context.Context, leaseID string, pid int) (contract.LeaseRecord, error) {
	var l contract.LeaseRecord
	err := c.Call(ctx, contract.OpLeaseBind, contract.LeaseBindInput{LeaseID: leaseID, PID: pid}, &l)
	return l, err
}

// Release ends a lease.
func (c *Client) Release(ctx context.Context, leaseID string) (contract.ReleaseResult, error) {
	var r contract.ReleaseResult
	err := c.Call(ctx, contract.OpLeaseRelease, contract.LeaseIDInput{LeaseID: leaseID}, &r)
	return r, err
}

// ReleaseAll ends every lease and cancels every waiting request (admin).
func (c *Client) ReleaseAll(ctx context.Context) (contract.ReleaseAllResult, error) {
	var r contract.ReleaseAllResult
	err := c.Call(ctx, contract.OpLeaseReleaseAll, contract.Empty{}, &r)
	return r, err
}

// Cancel withdraws a waiting request.
func (c *Client) Cancel(ctx context.Context, in contract.LeaseCancelInput) (contract.LeaseCancelResult, error) {
	var r contract.LeaseCancelResult
	err := c.Call(ctx, contract.OpLeaseCancel, in, &r)
	return r, err
}

// Leases lists the leases this session may see.
func (c *Client) Leases(ctx context.Context) ([]contract.LeaseRecord, error) {
	var r contract.LeaseListResult
	err := c.Call(ctx, contract.OpLeaseList, contract.Empty{}, &r)
	return r.Leases, err
}

// List reads one kind of record, all of it (admin).
func (c *Client) List(ctx context.Context, kind contract.ListKind) (contract.ListGetResult, error) {
	return c.ListPage(ctx, contract.ListGetInput{Kind: kind})
}

// ListPage reads one page of one kind of record (admin): in.Limit records
// after in.After; the result's Next is the After of the page that follows.
func (c *Client) ListPage(ctx context.Context, in contract.ListGetInput) (contract.ListGetResult, error) {
	var r contract.ListGetResult
	err := c.Call(ctx, contract.OpListGet, in, &r)
	return r, err
}

// Status reads the daemon's status.
func (c *Client) Status(ctx context.Context) (contract.Status, error) {
	return c.StatusWith(ctx, contract.StatusGetInput{})
}

// StatusWith reads the daemon's status as in asks: a summary, or only once
// startup has converged.
func (c *Client) StatusWith(ctx context.Context, in contract.StatusGetInput) (contract.Status, error) {
	var s contract.Status
	err := c.Call(ctx, contract.OpStatusGet, in, &s)
	return s, err
}

// Catalog reads what the platforms offer; platform "" means all.
func (c *Client) Catalog(ctx context.Context, platform contract.Platform) (contract.CatalogResult, error) {
	var r contract.CatalogResult
	err := c.Call(ctx, contract.OpCatalogGet, contract.CatalogGetInput{Platform: platform}, &r)
	return r, err
}

// Replay reads stored events (admin).
func (c *Client) Replay(ctx context.Context, in contract.EventsReplayInput) ([]contract.Event, error) {
	var r contract.EventsReplayResult
	err := c.Call(ctx, contract.OpEventsReplay, in, &r)
	return r.Events, err
}

// Subscribe starts an event subscription (admin). Events published after
// the call arrive on the channel, which closes when the connection ends or
// the daemon cuts the subscription off. lastSeq is the newest seq before it.
func (c *Client) Subscribe(ctx context.Context) (events <-chan contract.Event, lastSeq int64, err error) {
	var r contract.EventsSubscribeResult
	ch := make(chan contract.Event, 4096)
	// The daemon pushes events only after its answer; registering the
	// channel in the read loop, as the answer is routed, misses none.
	register := func(in contract.Inbound) {
		var res contract.EventsSubscribeResult
		if json.Unmarshal(in.Result, &res) == nil {
			c.mu.Lock()
			c.subs[res.SubscriptionID] = ch
			c.mu.Unlock()
		}
	}
	if err := c.call(ctx, contract.OpEventsSubscribe, contract.Empty{}, &r, &call{onResult: register}); err != nil {
		return nil, 0, err
	}
	return ch, r.LastSeq, nil
}

// Config reads the daemon's effective config, or one key of it (admin).
func (c *Client) Config(ctx context.Context, key string) (map[string]any, error) {
	var r map[string]any
	err := c.Call(ctx, contract.OpConfigGet, contract.ConfigGetInput{Key: key}, &r)
	return r, err
}

// Stop asks the daemon to stop gracefully (admin).
func (c *Client) Stop(ctx context.Context) error {
	return c.Call(ctx, contract.OpDaemonStop, contract.Empty{}, nil)
}

// Exec runs simctl or adb on a leased device on the daemon's machine;
// output is called with each chunk, in order, from the read loop (it must
// not block for long).
func (c *Client) Exec(ctx context.Context, in contract.ExecInput, output func(contract.ExecOutput)) (contract.ExecResult, error) {
	return c.ExecStarted(ctx, in, nil, output)
}

// ExecStarted is Exec, told when the daemon has started the command (its
// exec-started push): a refusal before it is a plain error.
func (c *Client) ExecStarted(ctx context.Context, in contract.ExecInput, started func(), output func(contract.ExecOutput)) (contract.ExecResult, error) {
	var r contract.ExecResult
	err := c.call(ctx, contract.OpDeviceExec, in, &r, &call{output: output, started: started})
	return r, err
}

// InstallComponent installs a runtime on this worker (admin); events is
// called with each event of its job, from the read loop.
func (c *Client) InstallComponent(ctx context.Context, in contract.ComponentInstallInput, events func(contract.JobEvent)) (contract.ComponentInstallResult, error) {
	var r contract.ComponentInstallResult
	err := c.call(ctx, contract.OpComponentInstall, in, &r, &call{job: events})
	return r, err
}

// InstallOnFleet installs a runtime on the workers in.Workers chooses,
// through a gateway (admin); events is called with each event of its job,
// from the read loop.
func (c *Client) InstallOnFleet(ctx context.Context, in contract.ComponentInstallInput, events func(contract.JobEvent)) (contract.JobDone, error) {
	var r contract.JobDone
	err := c.call(ctx, contract.OpComponentInstall, in, &r, &call{job: events})
	return r, err
}

// FollowJob follows a job (admin): events gets its state first, then each
// event until its done event; the answer is the job as it ended.
func (c *Client) FollowJob(ctx context.Context, id string, events func(contract.JobEvent)) (contract.Job, error) {
	var r contract.Job
	err := c.call(ctx, contract.OpJobFollow, contract.JobIDInput{JobID: id}, &r, &call{job: events})
	return r, err
}

// DeviceTool runs a device tool operation (device.apps.launch, …) on the
// lease in names and decodes its result into out.
func (c *Client) DeviceTool(ctx context.Context, op contract.Op, in contract.DeviceToolInput, out any) error {
	return c.Call(ctx, op, in, out)
}

// Ping makes one round trip that does nothing on the daemon's side: it
// answers once the daemon has read the call, whatever it is busy with.
func (c *Client) Ping(ctx context.Context) error {
	return c.Call(ctx, contract.OpPing, contract.Empty{}, nil)
}
