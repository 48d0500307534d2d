package daemon

import (
	"github.com/simlock/simlock/internal/contract"
)

// requestOps are the operations on lease requests as a resource: created
// without waiting, then read, followed or retried by id. Both modes answer
// them alike, through the lease port.
func requestOps() []opEntry {
	return []opEntry{
		{op: contract.OpLeaseRequestCreate, both: handle(func(c *call, in contract.LeaseRequestInput) (contract.LeaseRequestStatus, error) {
			caller, err := c.s.onBehalf(c.caller, &in)
			if err != nil {
				return contract.LeaseRequestStatus{}, err
			}
			return c.d.leases.Submit(c.s.ctx, caller, in)
		})},
		{op: contract.OpLeaseRequestGet, both: handle(func(c *call, in contract.LeaseRequestGetInput) (contract.LeaseRequestStatus, error) {
			return c.d.leases.RequestStatus(c.s.ctx, c.caller, in)
		})},
		{op: contract.OpLeaseRequestRetry, both: handle(func(c *call, in contract.LeaseRequestRetryInput) (contract.LeaseRequestStatus, error) {
			return c.d.leases.RetryRequest(c.s.ctx, c.caller, in.RequestID)
		})},
	}
}
