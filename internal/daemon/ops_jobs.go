package daemon

import (
	"time"

	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/gateway"
)

// jobOps are the operations on jobs (installs that outlive their call) and
// the components they install. A gateway installs across its fleet and
// has no runtimes of its own to list or remove.
func jobOps() []opEntry {
	return []opEntry{
		{op: contract.OpJobList, both: handle(func(c *call, in contract.JobListInput) (contract.JobListResult, error) {
			list, err := c.d.jobs.List(c.s.ctx, in.State, in.Limit)
			if err != nil {
				return contract.JobListResult{}, err
			}
			return contract.JobListResult{Jobs: list}, nil
		})},
		{op: contract.OpJobGet, both: handle(func(c *call, in contract.JobIDInput) (contract.Job, error) {
			return c.d.jobs.Get(c.s.ctx, in.JobID)
		})},
		{op: contract.OpJobFollow, both: handle(func(c *call, in contract.JobIDInput) (contract.Job, error) {
			s, id := c.s, c.id
			err := c.d.jobs.Follow(s.ctx, in.JobID, func(ev contract.JobEvent) {
				s.push(contract.Push{Push: contract.PushJob, ID: id, Job: &ev})
			})
			if err != nil {
				return contract.Job{}, err
			}
			return c.d.jobs.Get(s.ctx, in.JobID)
		})},
		{op: contract.OpComponentInstall,
			worker: handle(func(c *call, in contract.ComponentInstallInput) (contract.ComponentInstallResult, error) {
				return c.d.installComponent(c.s, c.id, in)
			}),
			gateway: handle(fleetInstall),
		},
		{op: contract.OpComponentList,
			worker: handle(func(c *call, in contract.ComponentListInput) (contract.ComponentListResult, error) {
				return c.d.listComponents(c.s, in)
			}),
			gatewayRefuses: "a gateway has no runtimes of its own; list them on the workers",
		},
		{op: contract.OpComponentRemove,
			worker: handle(func(c *call, in contract.ComponentRemoveInput) (contract.ComponentRemoveResult, error) {
				return c.d.removeComponent(c.s, in)
			}),
			gatewayRefuses: "a gateway has no runtimes of its own; remove them on the workers",
		},
	}
}

// fleetInstall installs a component across a gateway's fleet, pushing the
// job's events to its caller.
func fleetInstall(c *call, in contract.ComponentInstallInput) (contract.JobDone, error) {
	s, id, d := c.s, c.id, c.d
	cfg := d.opts.Config
	pol := gateway.InstallPolicy{
		Retries: int(cfg.Int("gateway.installRetries")),
		Silence: time.Duration(cfg.Int("downloads.timeoutMs"))*time.Millisecond + time.Minute,
	}
	// The job is the fleet's, not the caller's: a caller that goes away
	// leaves it running (job show and its event stream follow it); the
	// gateway stopping ends it.
	return d.fleet.Install(d.life, d.jobs, pol, in, func(ev contract.JobEvent) {
		s.push(contract.Push{Push: contract.PushJob, ID: id, Job: &ev})
	})
}
