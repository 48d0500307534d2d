package daemon

import (
	"github.com/simlock/simlock/internal/contract"
)

// fileOps are the file transfer operations. Opening one differs by mode:
// a worker stages from or for its own device (files.go), a gateway relays
// to the lease's worker. The transfer.* calls are the same in both modes:
// the registry holds the rules, and its sessions differ.
func fileOps() []opEntry {
	return []opEntry{
		{op: contract.OpFilesPut,
			worker: handle(func(c *call, in contract.FilesPutInput) (contract.TransferInfo, error) {
				return c.d.openFilesPut(c.s.ctx, c.caller, in)
			}),
			gateway: handle(relayTransfer[contract.FilesPutInput]),
		},
		{op: contract.OpFilesGet,
			worker: handle(func(c *call, in contract.FilesGetInput) (contract.TransferInfo, error) {
				return c.d.openFilesGet(c.s.ctx, c.caller, in)
			}),
			gateway: handle(relayTransfer[contract.FilesGetInput]),
		},
		{op: contract.OpAppsInstall,
			worker: handle(func(c *call, in contract.AppInstallInput) (contract.TransferInfo, error) {
				return c.d.openAppInstall(c.s.ctx, c.caller, in)
			}),
			gateway: handle(relayTransfer[contract.AppInstallInput]),
		},
		{op: contract.OpScreenshot,
			worker: handle(func(c *call, in contract.ScreenshotInput) (contract.TransferInfo, error) {
				return c.d.openScreenshot(c.s.ctx, c.caller, in)
			}),
			gateway: handle(relayTransfer[contract.ScreenshotInput]),
		},
		{op: contract.OpTransferWrite, both: handle(func(c *call, in contract.TransferWriteInput) (contract.TransferWriteResult, error) {
			return c.d.transfers.Write(c.s.ctx, c.caller.Principal, in)
		})},
		{op: contract.OpTransferRead, both: handle(func(c *call, in contract.TransferReadInput) (contract.TransferChunk, error) {
			return c.d.transfers.Read(c.s.ctx, c.caller.Principal, in)
		})},
		{op: contract.OpTransferCommit, both: handle(func(c *call, in contract.TransferIDInput) (contract.TransferResult, error) {
			return c.d.transfers.Commit(c.s.ctx, c.caller.Principal, in.TransferID)
		})},
		{op: contract.OpTransferAbort, both: handle(func(c *call, in contract.TransferIDInput) (contract.TransferAbortResult, error) {
			return c.d.transfers.Abort(c.caller.Principal, in.TransferID)
		})},
	}
}

// relayTransfer opens a transfer on a gateway: relayed to the worker of
// the lease the input names.
func relayTransfer[In any, P interface {
	*In
	contract.Validator
}](c *call, in In) (contract.TransferInfo, error) {
	return c.d.leasing.OpenTransfer(c.s.ctx, c.d.transfers, c.caller, c.op, P(&in))
}
