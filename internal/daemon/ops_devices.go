package daemon

import (
	"github.com/simlock/simlock/internal/contract"
)

// deviceOps are the operations on devices and what runs on them. A worker
// answers them from its own devices; a gateway from its fleet, through the
// lease's worker, and refuses those that name one machine's tools.
func deviceOps() []opEntry {
	return []opEntry{
		{op: contract.OpCatalogGet,
			worker: handle(func(c *call, in contract.CatalogGetInput) (contract.CatalogResult, error) {
				cats, err := c.d.engine.Catalog(c.s.ctx, in.Platform)
				if err != nil {
					return contract.CatalogResult{}, err
				}
				return contract.CatalogResult{Platforms: cats}, nil
			}),
			gateway: handle(func(c *call, in contract.CatalogGetInput) (contract.CatalogResult, error) {
				return c.d.fleet.Catalog(in.Platform), nil
			}),
		},
		{op: contract.OpDeviceRetry,
			worker: handle(func(c *call, in contract.DeviceIDInput) (contract.DeviceRetryResult, error) {
				d, err := c.d.engine.Maintenance().RetryDevice(in.DeviceID)
				if err != nil {
					return contract.DeviceRetryResult{}, err
				}
				return contract.DeviceRetryResult{Device: d}, nil
			}),
			gateway: handle(func(c *call, in contract.DeviceIDInput) (contract.DeviceRetryResult, error) {
				d, err := c.d.fleet.RetryDevice(c.s.ctx, in.DeviceID)
				if err != nil {
					return contract.DeviceRetryResult{}, err
				}
				return contract.DeviceRetryResult{Device: d}, nil
			}),
		},
		{op: contract.OpDeviceExec,
			worker: handle(func(c *call, in contract.ExecInput) (contract.ExecResult, error) {
				return c.d.exec(c.ctx, c.s, c.caller, c.id, in)
			}),
			gateway: handle(func(c *call, in contract.ExecInput) (contract.ExecResult, error) {
				s, id := c.s, c.id
				// The call's context: a caller that goes ends the worker's
				// command too (the forward is cancelled over the uplink).
				return c.d.leasing.Exec(c.ctx, c.caller, in, func() {
					s.push(contract.Push{Push: contract.PushExecStarted, ID: id})
				}, func(o contract.ExecOutput) {
					s.push(contract.Push{Push: contract.PushExecOutput, ID: id, Output: &o})
				})
			}),
		},
		{op: contract.OpPassthrough,
			worker: handle(func(c *call, in contract.PassthroughInput) (contract.PassthroughResult, error) {
				return c.d.passthrough(c.s, c.caller, in)
			}),
			gatewayRefuses: "a gateway has no devices of its own to run simctl or adb against",
		},
		{op: contract.OpDemoInject,
			worker: handle(func(c *call, in contract.DemoInjectInput) (contract.DemoInjectResult, error) {
				return c.d.demoInject(in)
			}),
			gatewayRefuses: "a gateway has no simulated devices",
		},
	}
}
