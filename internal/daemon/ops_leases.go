package daemon

import (
	"github.com/simlock/simlock/internal/contract"
)

// leaseOps are the operations on leases. Both modes answer most of them
// alike, through the lease port; lease.list reads each mode's own view,
// and lease.bind names a process of one machine.
func leaseOps() []opEntry {
	return []opEntry{
		{op: contract.OpLeaseRequest, both: handle(leaseRequest)},
		{op: contract.OpLeaseRenew, both: handle(leaseRenew)},
		{op: contract.OpLeaseRelease, both: handle(leaseRelease)},
		{op: contract.OpLeaseReleaseAll, both: handle(func(c *call, _ contract.Empty) (contract.ReleaseAllResult, error) {
			return c.d.leases.ReleaseAll()
		})},
		{op: contract.OpLeaseCancel, both: handle(func(c *call, in contract.LeaseCancelInput) (contract.LeaseCancelResult, error) {
			return c.d.leases.Cancel(c.s.ctx, c.caller, in)
		})},
		{op: contract.OpLeaseGet, both: handle(func(c *call, in contract.LeaseIDInput) (contract.LeaseGetResult, error) {
			return c.d.leases.Get(c.caller, in)
		})},
		{op: contract.OpLeaseWatch, both: handle(leaseWatch)},
		{op: contract.OpLeaseList,
			worker: handle(func(c *call, _ contract.Empty) (contract.LeaseListResult, error) {
				return contract.LeaseListResult{Leases: c.d.engine.Leases(c.caller)}, nil
			}),
			gateway: handle(func(c *call, _ contract.Empty) (contract.LeaseListResult, error) {
				return contract.LeaseListResult{Leases: c.d.leasing.Leases(c.caller, c.d.fleet.Snapshot().Leases)}, nil
			}),
		},
		{op: contract.OpLeaseBind,
			worker: handle(func(c *call, in contract.LeaseBindInput) (contract.LeaseRecord, error) {
				return c.d.engine.Bind(c.caller, in)
			}),
			gatewayRefuses: "a pid names a process of one machine; bind on the worker",
		},
	}
}

// leaseRequest asks for a lease and waits for it, pushing its progress;
// the session then holds the lease, and hears if the daemon ends it.
func leaseRequest(c *call, in contract.LeaseRequestInput) (contract.LeaseGrant, error) {
	caller, err := c.s.onBehalf(c.caller, &in)
	if err != nil {
		return contract.LeaseGrant{}, err
	}
	id, s := c.id, c.s
	grant, err := c.d.leases.Acquire(s.ctx, caller, in, func(p contract.LeaseProgress) {
		s.push(contract.Push{Push: contract.PushProgress, ID: id, Progress: &p})
	})
	if err != nil {
		return contract.LeaseGrant{}, err
	}
	c.d.holds(s, grant.Lease.UniqueKey())
	return grant, nil
}

func leaseRenew(c *call, in contract.LeaseRenewInput) (contract.LeaseRecord, error) {
	l, err := c.d.leases.Renew(c.caller, in)
	if err == nil {
		c.d.renewed(c.s, l)
	}
	return l, err
}

func leaseRelease(c *call, in contract.LeaseIDInput) (contract.ReleaseResult, error) {
	// A session ending its own lease needs no news of it; any other
	// session holding it hears lease-lost. Sessions hold leases by key:
	// the name resolves as the release will resolve it.
	if key, err := c.d.leases.Resolve(c.caller, in.LeaseID); err == nil {
		c.d.unhold(c.s, key)
	}
	return c.d.leases.Release(c.caller, in)
}

func leaseWatch(c *call, in contract.LeaseIDInput) (contract.LeaseWatchResult, error) {
	// Held by its key, registered before the check, so an end right after
	// it is heard.
	key, err := c.d.leases.Resolve(c.caller, in.LeaseID)
	if err != nil {
		return contract.LeaseWatchResult{}, err
	}
	c.d.holds(c.s, key)
	r, err := c.d.leases.Watch(c.caller, key)
	if err != nil {
		c.d.unhold(c.s, key)
	}
	return r, err
}
