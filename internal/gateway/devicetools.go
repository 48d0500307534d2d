package gateway

import (
	"context"
	"time"

	"github.com/simlock/simlock/internal/client"
	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/queue"
)

// deviceToolTimeout bounds a device tool forwarded to a worker: the
// slowest (a day's log read on iOS) is bounded on the worker well within
// it.
const deviceToolTimeout = 3 * time.Minute

// DeviceTool forwards a device tool operation (device.apps.launch, …) to
// the lease's worker, checked first against the gateway's index by the
// rule a worker keeps too (queue.Caller.ActsOn) and again by the worker,
// under the worker's names of the lease and requester. out receives the
// worker's answer; ctx is the caller's call. One path for every device
// tool: its refusals are forwarded as every lease operation's are.
func (l *Leasing) DeviceTool(ctx context.Context, c queue.Caller, op contract.Op, in contract.DeviceToolInput, out any) error {
	id, requester := in.Lease()
	e, err := l.actsOn(c, id, requester)
	if err != nil {
		return err
	}
	in.SetLease(e.workerLeaseID, l.idx.prefix+e.requester)
	return l.forwardWithin(ctx, deviceToolTimeout, e, func(ctx context.Context, cl *client.Client) error {
		return cl.Call(ctx, op, in, out)
	})
}
