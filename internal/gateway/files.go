package gateway

import (
	"context"
	"errors"
	"time"

	"github.com/simlock/simlock/internal/client"
	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/queue"
	"github.com/simlock/simlock/internal/transfer"
)

// File transfer through a gateway. The gateway keeps no byte of a file: it
// opens the same transfer on the lease's worker, on behalf of the lease's
// requester as device.exec does, and registers a relay of it in its own
// transfer registry, which holds the gateway's rules (the caller owns the
// transfer, exec.maxUploadBytes, exec.transferIdleMs, one call at a time).
// Each transfer.write or transfer.read is then forwarded to the worker and
// answered only once the worker has answered, so one chunk is in flight per
// transfer whatever the pace of either side. The worker checks everything
// again with its own bounds.

// abortTimeout bounds the abort of a worker's transfer the gateway gave up.
const abortTimeout = 5 * time.Second

// OpenTransfer opens, until ctx ends, on the lease's worker the transfer op (device.files.put
// or .get, device.apps.install, device.screenshot) asks for, in (the op's
// input), and registers its relay in reg. The caller must own the lease, or
// be an admin naming its requester (actsOn). The calls that touch the
// device (a download's open, an upload's commit) are bounded by
// gateway.execTimeoutMs, the others as any forwarded call.
func (l *Leasing) OpenTransfer(ctx context.Context, reg *transfer.Registry, c queue.Caller, op contract.Op, in contract.Validator) (contract.TransferInfo, error) {
	o := transfer.Open{Owner: c.Principal, Direction: contract.TransferUpload}
	var requesterID string
	var fwd any
	switch v := in.(type) {
	case *contract.FilesPutInput:
		o.LeaseID, requesterID, o.Declared = v.LeaseID, v.RequesterID, v.Size
		w := *v
		fwd = &w
	case *contract.AppInstallInput:
		o.LeaseID, requesterID, o.Declared = v.LeaseID, v.RequesterID, v.Size
		w := *v
		fwd = &w
	case *contract.FilesGetInput:
		o.LeaseID, requesterID = v.LeaseID, v.RequesterID
		o.Direction, o.ContentType = contract.TransferDownload, "application/octet-stream"
		w := *v
		fwd = &w
	case *contract.ScreenshotInput:
		o.LeaseID, requesterID = v.LeaseID, v.RequesterID
		o.Direction, o.ContentType = contract.TransferDownload, "image/png"
		w := *v
		fwd = &w
	default:
		return contract.TransferInfo{}, contract.Errorf(contract.CodeUnknownRequest, "operation %q opens no transfer", op)
	}
	e, err := l.actsOn(c, o.LeaseID, requesterID)
	if err != nil {
		return contract.TransferInfo{}, err
	}
	// Keyed by the lease's unique key, which its end names: two owners
	// may each have chosen the id it goes by.
	o.Lease = e.key
	// The worker knows the lease by its own id, and its requester as the
	// gateway's uplink names it.
	onWorker := l.idx.prefix + e.requester
	switch w := fwd.(type) {
	case *contract.FilesPutInput:
		w.LeaseID, w.RequesterID = e.workerLeaseID, onWorker
	case *contract.AppInstallInput:
		w.LeaseID, w.RequesterID = e.workerLeaseID, onWorker
	case *contract.FilesGetInput:
		w.LeaseID, w.RequesterID = e.workerLeaseID, onWorker
	case *contract.ScreenshotInput:
		w.LeaseID, w.RequesterID = e.workerLeaseID, onWorker
	}
	return reg.Open(ctx, o, func(ctx context.Context) (transfer.Session, int64, error) {
		var info contract.TransferInfo
		bound := callTimeout
		if o.Direction == contract.TransferDownload {
			bound = l.opts.ExecTimeout
		}
		err := l.forwardWithin(ctx, bound, e, func(ctx context.Context, cl *client.Client) error {
			return cl.Call(ctx, op, fwd, &info)
		})
		if err != nil {
			return nil, 0, l.onWorker(e, err)
		}
		r := &relay{l: l, e: e, id: info.TransferID}
		var size int64
		if o.Direction == contract.TransferDownload {
			if info.Size == nil || *info.Size < 0 {
				r.Close()
				return nil, 0, contract.Errorf(contract.CodeInternal, "worker %s opened a download without a size", e.workerID).With("workerId", e.workerID)
			}
			size = *info.Size
		}
		return r, size, nil
	})
}

// onWorker names the gateway's lease in an error that names the worker's.
func (l *Leasing) onWorker(e *indexed, err error) error {
	var ce *contract.Error
	if errors.As(err, &ce) && ce.Details["leaseId"] == e.workerLeaseID {
		return ce.With("leaseId", e.id)
	}
	return err
}

// relay is a transfer on a worker, as a gateway's session.
type relay struct {
	l  *Leasing
	e  *indexed
	id string
	// over is set once the worker has ended the transfer itself (a
	// commit, the read that reached the end); only the registry's
	// goroutine for the transfer touches it.
	over bool
}

func (r *relay) Write(ctx context.Context, offset int64, data []byte) error {
	err := r.l.forwardWithin(ctx, callTimeout, r.e, func(ctx context.Context, cl *client.Client) error {
		var res contract.TransferWriteResult
		if err := cl.Call(ctx, contract.OpTransferWrite, contract.TransferWriteInput{TransferID: r.id, Offset: offset, Data: data}, &res); err != nil {
			return err
		}
		if res.Received != offset+int64(len(data)) {
			return contract.Errorf(contract.CodeInternal, "worker %s holds %d bytes after a write that should leave %d", r.e.workerID, res.Received, offset+int64(len(data))).
				With("workerId", r.e.workerID)
		}
		return nil
	})
	return r.l.onWorker(r.e, err)
}

func (r *relay) Read(ctx context.Context, offset int64, n int) ([]byte, error) {
	var chunk contract.TransferChunk
	err := r.l.forwardWithin(ctx, callTimeout, r.e, func(ctx context.Context, cl *client.Client) error {
		return cl.Call(ctx, contract.OpTransferRead, contract.TransferReadInput{TransferID: r.id, Offset: offset, Max: n}, &chunk)
	})
	if err != nil {
		return nil, r.l.onWorker(r.e, err)
	}
	if len(chunk.Data) != n {
		// The worker staged the size it announced; a chunk of another
		// length is not that file, and what it says of its end is not
		// believed either: its transfer is given back.
		return nil, contract.Errorf(contract.CodeInternal, "worker %s answered %d bytes where %d were asked for", r.e.workerID, len(chunk.Data), n).
			With("workerId", r.e.workerID)
	}
	r.over = chunk.EOF
	return chunk.Data, nil
}

func (r *relay) Commit(ctx context.Context, size int64) (contract.TransferResult, error) {
	var res contract.TransferResult
	err := r.l.forwardWithin(ctx, r.l.opts.ExecTimeout, r.e, func(ctx context.Context, cl *client.Client) error {
		return cl.Call(ctx, contract.OpTransferCommit, contract.TransferIDInput{TransferID: r.id}, &res)
	})
	// A commit ends the worker's transfer, whatever its outcome.
	r.over = true
	if err != nil {
		return contract.TransferResult{}, r.l.onWorker(r.e, err)
	}
	if res.Bytes != size {
		return contract.TransferResult{}, contract.Errorf(contract.CodeInternal, "worker %s committed %d bytes of the %d sent", r.e.workerID, res.Bytes, size).
			With("workerId", r.e.workerID)
	}
	return res, nil
}

// Close gives the worker's transfer back when the gateway's ended first (an
// abort, the idle bound, the lease's end), so its staged bytes go now.
func (r *relay) Close() {
	if r.over {
		return
	}
	err := r.l.forwardWithin(context.Background(), abortTimeout, r.e, func(ctx context.Context, cl *client.Client) error {
		var res contract.TransferAbortResult
		return cl.Call(ctx, contract.OpTransferAbort, contract.TransferIDInput{TransferID: r.id}, &res)
	})
	var ce *contract.Error
	if err != nil && !(errors.As(err, &ce) && ce.Code == contract.CodeUnknownTransfer) {
		r.l.log.Info("could not abort a transfer on its worker; it ends at the worker's idle bound", "workerId", r.e.workerID, "transferId", r.id, "err", err)
	}
}
