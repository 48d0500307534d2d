package transfer

import (
	"context"
	"errors"
	"io"
	"time"

	"github.com/simlock/simlock/internal/contract"
)

// Call is one call of the daemon protocol, decoding its answer into out:
// the typed client's Call, or a frontend's backend.
type Call func(ctx context.Context, op contract.Op, in, out any) error

// abortBound bounds the abort of a transfer a stream gave up on; it runs
// even when the stream's own context has ended.
const abortBound = 5 * time.Second

// Send opens an upload with op and in, sends r's bytes chunk by chunk
// (each write answered before the next), and commits it. A failure after
// the open, r's own included, aborts the transfer and is returned as it is.
func Send(ctx context.Context, call Call, op contract.Op, in any, r io.Reader) (contract.TransferResult, error) {
	var info contract.TransferInfo
	if err := call(ctx, op, in, &info); err != nil {
		return contract.TransferResult{}, err
	}
	chunk := max(1, min(info.ChunkBytes, contract.MaxTransferChunk))
	buf := make([]byte, chunk)
	var off int64
	for {
		n, rerr := io.ReadFull(r, buf)
		if n > 0 {
			var res contract.TransferWriteResult
			if err := call(ctx, contract.OpTransferWrite, contract.TransferWriteInput{TransferID: info.TransferID, Offset: off, Data: buf[:n]}, &res); err != nil {
				abort(ctx, call, info.TransferID)
				return contract.TransferResult{}, err
			}
			off += int64(n)
		}
		if errors.Is(rerr, io.EOF) || errors.Is(rerr, io.ErrUnexpectedEOF) {
			break
		}
		if rerr != nil {
			abort(ctx, call, info.TransferID)
			return contract.TransferResult{}, rerr
		}
	}
	var res contract.TransferResult
	if err := call(ctx, contract.OpTransferCommit, contract.TransferIDInput{TransferID: info.TransferID}, &res); err != nil {
		return contract.TransferResult{}, err
	}
	return res, nil
}

// Receive opens a download with op and in, asks sink where its bytes go
// (sink sees the size and type before any byte, to answer with them), and
// copies them there chunk by chunk. It returns what was opened and how many
// bytes were written. A failure after the open, sink's or the writer's
// included, aborts the transfer.
func Receive(ctx context.Context, call Call, op contract.Op, in any, sink func(contract.TransferInfo) (io.Writer, error)) (contract.TransferInfo, int64, error) {
	var info contract.TransferInfo
	if err := call(ctx, op, in, &info); err != nil {
		return info, 0, err
	}
	w, err := sink(info)
	if err != nil {
		abort(ctx, call, info.TransferID)
		return info, 0, err
	}
	chunk := max(1, min(info.ChunkBytes, contract.MaxTransferChunk))
	var off int64
	for {
		var c contract.TransferChunk
		if err := call(ctx, contract.OpTransferRead, contract.TransferReadInput{TransferID: info.TransferID, Offset: off, Max: chunk}, &c); err != nil {
			abort(ctx, call, info.TransferID)
			return info, off, err
		}
		if len(c.Data) > 0 {
			if _, err := w.Write(c.Data); err != nil {
				if !c.EOF {
					abort(ctx, call, info.TransferID)
				}
				return info, off, err
			}
			off += int64(len(c.Data))
		}
		if c.EOF {
			return info, off, nil
		}
		if len(c.Data) == 0 {
			abort(ctx, call, info.TransferID)
			return info, off, contract.Errorf(contract.CodeInternal, "transfer %s answered an empty chunk before its end", info.TransferID)
		}
	}
}

// abort gives a transfer up, as far as a short bound allows; the daemon's
// idle bound ends it otherwise.
func abort(ctx context.Context, call Call, id string) {
	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), abortBound)
	defer cancel()
	var res contract.TransferAbortResult
	_ = call(actx, contract.OpTransferAbort, contract.TransferIDInput{TransferID: id}, &res)
}
