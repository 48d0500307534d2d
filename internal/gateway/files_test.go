package gateway

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/queue"
	"github.com/simlock/simlock/internal/transfer"
)

// lyingFiles is a worker whose file transfers say more than they were
// asked: a download announced as 10 bytes answers a read with 20, one of
// /huge is announced as a TiB, and a write is acknowledged with a count it
// never got. It records what the gateway asked of it.
type lyingFiles struct {
	mu    sync.Mutex
	calls []contract.Request
}

// answer records req and answers it as the lying worker does.
func (w *lyingFiles) answer(req contract.Request) any {
	w.mu.Lock()
	w.calls = append(w.calls, req)
	w.mu.Unlock()
	switch req.Op {
	case contract.OpFilesGet, contract.OpFilesPut:
		size := int64(10)
		var in contract.FilesGetInput
		if json.Unmarshal(req.Input, &in) == nil && in.Path == "/huge" {
			size = 1 << 40
		}
		return contract.TransferInfo{TransferID: "tr_worker", Size: &size, ChunkBytes: contract.MaxTransferChunk}
	case contract.OpTransferRead:
		return contract.TransferChunk{Data: make([]byte, 20), EOF: true}
	case contract.OpTransferWrite:
		return contract.TransferWriteResult{Received: 1 << 20}
	case contract.OpTransferAbort:
		return contract.TransferAbortResult{Aborted: true}
	}
	return nil
}

func (w *lyingFiles) ops() []contract.Op {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []contract.Op
	for _, c := range w.calls {
		out = append(out, c.Op)
	}
	return out
}

// A worker's answers about a transfer are claims: a chunk of another size
// than asked, or a write count that is not the bytes sent, fails the call
// INTERNAL, never reaches the caller as data, and the worker's transfer is
// given back. The lease's requester reaches the worker as the gateway's
// uplink names it.
func TestAWorkersFileAnswersAreCheckedBeforeTheyAreRelayed(t *testing.T) {
	f, _ := newFleet(t, newMemStore())
	w := &lyingFiles{}
	c := scriptedSession(t, w.answer)
	f.mu.Lock()
	f.workers["w1"] = &worker{view: contract.WorkerView{ID: "w1", Label: "one", Connection: contract.WorkerConnected}, client: c}
	f.mu.Unlock()
	l := NewLeasing(f, LeasingOptions{Store: newQueueStore(), DefaultTTL: time.Minute, MaxTTL: time.Hour,
		ExecTimeout: time.Minute})
	defer l.Close()
	var id string
	_ = l.q.Do(func(*queue.Txn) error {
		e, err := l.idx.add(grantOf("w1", "lse_w", "alice", "tok_alice", ""))
		if err != nil {
			return err
		}
		id = e.id
		return nil
	})
	ctx := context.Background()
	reg := transfer.New(transfer.Options{MaxBytes: 1 << 20, Idle: time.Minute})
	defer reg.Close()
	alice := queue.Caller{Principal: "tok_alice"}

	info, err := l.OpenTransfer(ctx, reg, alice, contract.OpFilesGet, &contract.FilesGetInput{LeaseID: id, Path: "/sdcard/x"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := reg.Read(ctx, "tok_alice", contract.TransferReadInput{TransferID: info.TransferID}); codeOf(err) != contract.CodeInternal {
		t.Errorf("a read answered with 20 bytes of 10: got %v, want INTERNAL", err)
	}
	if _, err := l.OpenTransfer(ctx, reg, alice, contract.OpFilesGet, &contract.FilesGetInput{LeaseID: id, Path: "/huge"}); codeOf(err) != contract.CodeBodyTooLarge {
		t.Errorf("a download the worker announced as a TiB: got %v, want BODY_TOO_LARGE", err)
	}
	up, err := l.OpenTransfer(ctx, reg, alice, contract.OpFilesPut, &contract.FilesPutInput{LeaseID: id, Path: "/sdcard/y"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := reg.Write(ctx, "tok_alice", contract.TransferWriteInput{TransferID: up.TransferID, Data: []byte("abc")}); codeOf(err) != contract.CodeInternal {
		t.Errorf("a write acknowledged for bytes never sent: got %v, want INTERNAL", err)
	}
	if reg.Len() != 0 {
		t.Errorf("%d transfers still open after the worker's bad answers", reg.Len())
	}
	aborts := 0
	for _, op := range w.ops() {
		if op == contract.OpTransferAbort {
			aborts++
		}
	}
	if aborts != 3 {
		t.Errorf("the worker's transfers were given back %d times, want 3 (ops %v)", aborts, w.ops())
	}
	w.mu.Lock()
	var open contract.FilesGetInput
	for _, call := range w.calls {
		if call.Op == contract.OpFilesGet {
			_ = json.Unmarshal(call.Input, &open)
		}
	}
	w.mu.Unlock()
	if open.LeaseID != "lse_w" || open.RequesterID != l.idx.prefix+"alice" {
		t.Errorf("the worker was asked %+v, want its own lease id and the requester as the uplink names it", open)
	}
	// Someone else on the gateway gets nowhere near the lease.
	if _, err := l.OpenTransfer(ctx, reg, queue.Caller{Principal: "tok_bob"}, contract.OpScreenshot, &contract.ScreenshotInput{LeaseID: id}); codeOf(err) != contract.CodeForbidden {
		t.Errorf("bob's screenshot of alice's lease: got %v, want FORBIDDEN", err)
	}
}

func codeOf(err error) contract.Code {
	if err == nil {
		return ""
	}
	return contract.AsError(err).Code
}
