package daemon

import (
	"context"

	"github.com/simlock/simlock/internal/contract"
)

// workerOps are the operations on a gateway's workers. A worker answers
// worker.list as a fleet of one and refuses the rest.
func workerOps() []opEntry {
	return []opEntry{
		{op: contract.OpWorkerList,
			worker: handle(func(c *call, _ contract.Empty) (contract.WorkerListResult, error) {
				return contract.WorkerListResult{Mode: contract.ModeWorker, Workers: []contract.WorkerSummary{c.d.selfSummary()}}, nil
			}),
			gateway: handle(func(c *call, _ contract.Empty) (contract.WorkerListResult, error) {
				return contract.WorkerListResult{Mode: contract.ModeGateway, Workers: c.d.fleet.Summaries()}, nil
			}),
		},
		{op: contract.OpWorkerGet, workerRefuses: true, gateway: handle(func(c *call, in contract.WorkerIDInput) (contract.WorkerView, error) {
			return c.d.fleet.View(in.WorkerID)
		})},
		{op: contract.OpWorkerDrain, workerRefuses: true, gateway: workerChange(func(c *call) fleetChange { return c.d.fleet.Drain })},
		{op: contract.OpWorkerUndrain, workerRefuses: true, gateway: workerChange(func(c *call) fleetChange { return c.d.fleet.Undrain })},
		{op: contract.OpWorkerRemove, workerRefuses: true, gateway: workerChange(func(c *call) fleetChange { return c.d.fleet.Remove })},
	}
}

// fleetChange changes one worker of a gateway's fleet.
type fleetChange func(ctx context.Context, id string) (contract.WorkerSummary, error)

// workerChange answers a change to one worker with its summary after.
func workerChange(change func(c *call) fleetChange) handler {
	return handle(func(c *call, in contract.WorkerIDInput) (contract.WorkerResult, error) {
		sum, err := change(c)(c.s.ctx, in.WorkerID)
		if err != nil {
			return contract.WorkerResult{}, err
		}
		return contract.WorkerResult{Worker: sum}, nil
	})
}
