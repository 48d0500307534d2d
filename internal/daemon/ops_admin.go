package daemon

import (
	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/leasing"
)

// adminOps are the operations on the daemon itself: its status, config,
// lists and stop, and the upkeep of one machine's devices, which a gateway
// refuses (it has none: each worker runs its own).
func adminOps() []opEntry {
	return []opEntry{
		// The connection answers these before a session dispatches.
		{op: contract.OpHello, conn: true},
		{op: contract.OpCallCancel, conn: true},

		// One handler: status answers during startup and after a failed
		// one too, when the mode's parts may not be there; d.status fills
		// in a worker's or a gateway's part by what startup set.
		{op: contract.OpStatusGet, both: handle(func(c *call, in contract.StatusGetInput) (statusAnswer, error) {
			if in.WaitReady {
				if err := c.s.awaitStartup(); err != nil {
					return statusAnswer{}, err
				}
			}
			return c.d.status(c.s.ctx, c.caller, in), nil
		})},
		{op: contract.OpConfigGet, both: handle(func(c *call, in contract.ConfigGetInput) (map[string]any, error) {
			cfg := c.d.opts.Config
			if in.Key == "" {
				return map[string]any{"config": cfg.Nested()}, nil
			}
			v, ok := cfg.Get(in.Key)
			if !ok {
				return nil, contract.BadRequest("key", "unknown config key %q", contract.Clip(in.Key))
			}
			return map[string]any{"key": in.Key, "value": v}, nil
		})},
		{op: contract.OpDaemonStop, both: handle(func(c *call, _ contract.Empty) (stopResult, error) {
			return stopResult{d: c.d}, nil
		})},
		{op: contract.OpListGet, worker: handle(workerList), gateway: handle(gatewayList)},
		{op: contract.OpDoctorRun,
			worker: handle(func(c *call, in contract.DoctorInput) (contract.DoctorResult, error) {
				if (in.Fix || in.PurgeOrphans) && !c.caller.Admin {
					return contract.DoctorResult{}, contract.Errorf(contract.CodeForbidden, "doctor --fix and --purge-orphans need the admin role")
				}
				return c.d.doctor(c.s.ctx, in)
			}),
			gatewayRefuses: "doctor checks one machine's devices and tools; run it on each worker",
		},
		{op: contract.OpNuke,
			worker: handle(func(c *call, in contract.NukeInput) (leasing.NukeResult, error) {
				return c.d.engine.Maintenance().Nuke(c.s.ctx, in.DeleteDevices)
			}),
			gatewayRefuses: "nuke stops one machine's devices; run it on each worker",
		},
		{op: contract.OpCleanupRun,
			worker: handle(func(c *call, in contract.CleanupRunInput) (contract.CleanupRunResult, error) {
				return c.d.engine.Maintenance().Cleanup(c.s.ctx, in, "command"), nil
			}),
			gatewayRefuses: "cleanup runs one machine's idle rules; run it on each worker",
		},
		{op: contract.OpCleanupRules,
			worker: handle(func(c *call, _ contract.Empty) (contract.CleanupRulesResult, error) {
				return c.d.engine.Maintenance().Rules(), nil
			}),
			gatewayRefuses: "a gateway has no idle rules of its own",
		},
	}
}
