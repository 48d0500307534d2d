package daemon

import (
	"context"

	"github.com/simlock/simlock/internal/contract"
)

// failedRequests are the requests that failed lately, newest first, at
// most limit (DefaultFailedRequests for 0), read from the store: worker and
// gateway alike keep their settled requests there.
func (d *Daemon) failedRequests(ctx context.Context, limit int) (contract.ListGetResult, error) {
	if limit <= 0 {
		limit = contract.DefaultFailedRequests
	}
	// Read ten times as many of the newest, of every state: pruning keeps
	// the table small (lease.maxRequestRecords), and a failure further
	// back than that is history, not attention.
	recs, err := d.db.Requests(ctx, min(10*limit, contract.MaxListPage))
	if err != nil {
		return contract.ListGetResult{}, contract.Errorf(contract.CodeInternal, "read requests: %v", err)
	}
	// A failure its requester has asked again since (a retry, or a new
	// request) is no longer anyone's to act on: only each requester's
	// newest request counts.
	out := []contract.LeaseRequestRecord{}
	newer := map[string]bool{}
	for _, r := range recs { // newest first
		if r.State == contract.RequestFailed && !newer[r.RequesterID] && len(out) < limit {
			out = append(out, r)
		}
		newer[r.RequesterID] = true
	}
	return contract.ListGetResult{Requests: out}, nil
}

// list answers list.get: one kind of record, whole or one page.
func (d *Daemon) list(in contract.ListGetInput) (contract.ListGetResult, error) {
	var after *contract.ListCursor
	if in.After != "" {
		c, err := contract.ParseListCursor(in.After)
		if err != nil {
			return contract.ListGetResult{}, err
		}
		after = &c
	}
	res := d.engine.List(in.Kind, after, in.Limit)
	// The kind read is in the answer, empty or not (see its MarshalJSON).
	switch {
	case in.Kind == contract.ListLeases && res.Leases == nil:
		res.Leases = []contract.LeaseRecord{}
	case in.Kind == contract.ListRequests && res.Requests == nil:
		res.Requests = []contract.LeaseRequestRecord{}
	case in.Kind != contract.ListLeases && in.Kind != contract.ListRequests && res.Devices == nil:
		res.Devices = []contract.Device{}
	}
	return res, nil
}

// workerList answers list.get on a worker: failed requests from the store,
// the rest from the engine, paged.
func workerList(c *call, in contract.ListGetInput) (contract.ListGetResult, error) {
	if in.Kind == contract.ListFailedRequests {
		return c.d.failedRequests(c.s.ctx, in.Limit)
	}
	return c.d.list(in)
}

// gatewayList answers list.get on a gateway: failed requests from the
// store, the rest from the fleet's view, whole.
func gatewayList(c *call, in contract.ListGetInput) (contract.ListGetResult, error) {
	d, ctx := c.d, c.s.ctx
	if in.Kind == contract.ListFailedRequests {
		return d.failedRequests(ctx, in.Limit)
	}
	if in.Limit > 0 || in.After != "" {
		return contract.ListGetResult{}, contract.BadRequest("limit", "a gateway's lists are not paged in this version; ask without limit and after")
	}
	snap := d.fleet.Snapshot()
	switch in.Kind {
	case contract.ListLeases:
		return contract.ListGetResult{Leases: d.leasing.Leases(c.caller, snap.Leases)}, nil
	case contract.ListRequests:
		rs, err := d.fleet.Requests(ctx)
		if err != nil {
			return contract.ListGetResult{}, err
		}
		return contract.ListGetResult{Requests: rs}, nil
	default:
		return contract.ListGetResult{Devices: d.leasing.ProjectDevices(c.caller, snap.Devices)}, nil
	}
}
