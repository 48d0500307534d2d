package transfer_test

import (
	"bytes"
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/transfer"
)

// memSession keeps an upload in memory, or serves a download from it.
type memSession struct {
	mu        sync.Mutex
	buf       bytes.Buffer
	committed int64
	closed    int
	// block, when set, holds each Write until it is closed or ctx ends.
	block chan struct{}
	// closeTakes is how long Close takes (deleting a large staged file).
	closeTakes time.Duration
}

func (m *memSession) Write(ctx context.Context, offset int64, data []byte) error {
	if m.block != nil {
		select {
		case <-m.block:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.buf.Write(data)
	return nil
}

func (m *memSession) Read(_ context.Context, offset int64, n int) ([]byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return bytes.Clone(m.buf.Bytes()[offset : offset+int64(n)]), nil
}

func (m *memSession) Commit(_ context.Context, size int64) (contract.TransferResult, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.committed = size
	return contract.TransferResult{Path: "/sdcard/x"}, nil
}

func (m *memSession) Close() {
	time.Sleep(m.closeTakes)
	m.mu.Lock()
	defer m.mu.Unlock()
	m.closed++
}

func (m *memSession) closes() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.closed
}

func code(err error) contract.Code {
	if err == nil {
		return ""
	}
	return contract.AsError(err).Code
}

func size(n int64) *int64 { return &n }

func upload(t *testing.T, r *transfer.Registry, owner, lease string, declared *int64, s *memSession) string {
	t.Helper()
	info, err := r.Open(context.Background(), transfer.Open{Owner: owner, Lease: lease, LeaseID: lease, Direction: contract.TransferUpload, Declared: declared},
		func(context.Context) (transfer.Session, int64, error) { return s, 0, nil })
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return info.TransferID
}

func TestAnUploadMovesInOrderedChunksAndCommits(t *testing.T) {
	r := transfer.New(transfer.Options{MaxBytes: 100, Idle: time.Minute})
	s := &memSession{}
	id := upload(t, r, "agent-a", "lse_1", size(6), s)
	ctx := context.Background()
	if _, err := r.Write(ctx, "agent-a", contract.TransferWriteInput{TransferID: id, Offset: 0, Data: []byte("abc")}); err != nil {
		t.Fatal(err)
	}
	// A chunk sent again (its answer lost) is refused with where to go on.
	_, err := r.Write(ctx, "agent-a", contract.TransferWriteInput{TransferID: id, Offset: 0, Data: []byte("abc")})
	if ce := contract.AsError(err); code(err) != contract.CodeBadRequest || ce.Details["received"] != int64(3) {
		t.Fatalf("a repeated offset: got %v, want BAD_REQUEST with received 3", err)
	}
	// A commit short of the declared size keeps the transfer open.
	if _, err := r.Commit(ctx, "agent-a", id); code(err) != contract.CodeBadRequest {
		t.Fatalf("an early commit: got %v, want BAD_REQUEST", err)
	}
	if res, err := r.Write(ctx, "agent-a", contract.TransferWriteInput{TransferID: id, Offset: 3, Data: []byte("def")}); err != nil || res.Received != 6 {
		t.Fatalf("second chunk: %+v %v", res, err)
	}
	res, err := r.Commit(ctx, "agent-a", id)
	if err != nil || res.Bytes != 6 || res.LeaseID != "lse_1" || res.Path != "/sdcard/x" {
		t.Fatalf("Commit: %+v %v", res, err)
	}
	if s.buf.String() != "abcdef" || s.committed != 6 || s.closes() != 1 {
		t.Errorf("session got %q, committed %d, closed %d times", s.buf.String(), s.committed, s.closes())
	}
	if _, err := r.Write(ctx, "agent-a", contract.TransferWriteInput{TransferID: id, Offset: 6}); code(err) != contract.CodeUnknownTransfer {
		t.Errorf("a write after the commit: got %v, want UNKNOWN_TRANSFER", err)
	}
}

func TestATransferIsItsOwnersOnly(t *testing.T) {
	r := transfer.New(transfer.Options{MaxBytes: 100, Idle: time.Minute})
	s := &memSession{}
	id := upload(t, r, "agent-a", "lse_1", nil, s)
	ctx := context.Background()
	if _, err := r.Write(ctx, "agent-b", contract.TransferWriteInput{TransferID: id, Data: []byte("x")}); code(err) != contract.CodeUnknownTransfer {
		t.Errorf("another owner's write: got %v, want UNKNOWN_TRANSFER", err)
	}
	if _, err := r.Commit(ctx, "agent-b", id); code(err) != contract.CodeUnknownTransfer {
		t.Errorf("another owner's commit: got %v, want UNKNOWN_TRANSFER", err)
	}
	if _, err := r.Abort("agent-b", id); code(err) != contract.CodeUnknownTransfer {
		t.Errorf("another owner's abort: got %v, want UNKNOWN_TRANSFER", err)
	}
	if s.buf.Len() != 0 || s.closes() != 0 {
		t.Errorf("another owner reached the session: %q, %d closes", s.buf.String(), s.closes())
	}
}

func TestTheSizeBoundRefusesBeforeStartAndCutsAtTheLimit(t *testing.T) {
	r := transfer.New(transfer.Options{MaxBytes: 10, Idle: time.Minute})
	started := false
	_, err := r.Open(context.Background(), transfer.Open{Owner: "a", Lease: "l", Direction: contract.TransferUpload, Declared: size(11)},
		func(context.Context) (transfer.Session, int64, error) { started = true; return &memSession{}, 0, nil })
	if code(err) != contract.CodeBodyTooLarge || started {
		t.Fatalf("a declared size over the limit: got %v (started %v), want BODY_TOO_LARGE before start", err, started)
	}
	s := &memSession{}
	id := upload(t, r, "a", "l", nil, s)
	ctx := context.Background()
	if _, err := r.Write(ctx, "a", contract.TransferWriteInput{TransferID: id, Data: []byte("12345678")}); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Write(ctx, "a", contract.TransferWriteInput{TransferID: id, Offset: 8, Data: []byte("abc")}); code(err) != contract.CodeBodyTooLarge {
		t.Fatalf("a write past the limit: got %v, want BODY_TOO_LARGE", err)
	}
	if s.closes() != 1 || r.Len() != 0 {
		t.Errorf("the cut transfer is still open: %d closes, %d open", s.closes(), r.Len())
	}
	// A download larger than the limit is refused once staged.
	big := &memSession{}
	_, err = r.Open(context.Background(), transfer.Open{Owner: "a", Lease: "l", Direction: contract.TransferDownload},
		func(context.Context) (transfer.Session, int64, error) { return big, 11, nil })
	if code(err) != contract.CodeBodyTooLarge || big.closes() != 1 {
		t.Errorf("a download over the limit: got %v, %d closes; want BODY_TOO_LARGE and its session closed", err, big.closes())
	}
}

func TestADownloadEndsWithTheChunkThatReachesItsEnd(t *testing.T) {
	r := transfer.New(transfer.Options{MaxBytes: 100, Idle: time.Minute})
	s := &memSession{}
	s.buf.WriteString("hello world")
	info, err := r.Open(context.Background(), transfer.Open{Owner: "a", Lease: "l", Direction: contract.TransferDownload, ContentType: "image/png"},
		func(context.Context) (transfer.Session, int64, error) { return s, 11, nil })
	if err != nil || info.Size == nil || *info.Size != 11 || info.ContentType != "image/png" {
		t.Fatalf("Open: %+v %v", info, err)
	}
	ctx := context.Background()
	var got []byte
	for off := int64(0); ; {
		c, err := r.Read(ctx, "a", contract.TransferReadInput{TransferID: info.TransferID, Offset: off, Max: 4})
		if err != nil {
			t.Fatalf("Read at %d: %v", off, err)
		}
		got = append(got, c.Data...)
		off += int64(len(c.Data))
		if c.EOF {
			break
		}
	}
	if string(got) != "hello world" || s.closes() != 1 || r.Len() != 0 {
		t.Errorf("read %q, %d closes, %d open", got, s.closes(), r.Len())
	}
	// An empty download is one empty chunk with eof.
	empty := &memSession{}
	info, _ = r.Open(context.Background(), transfer.Open{Owner: "a", Lease: "l", Direction: contract.TransferDownload},
		func(context.Context) (transfer.Session, int64, error) { return empty, 0, nil })
	if c, err := r.Read(ctx, "a", contract.TransferReadInput{TransferID: info.TransferID}); err != nil || !c.EOF || len(c.Data) != 0 {
		t.Errorf("empty download: %+v %v", c, err)
	}
}

func TestAnIdleTransferIsAbandonedAndACallResetsItsBound(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := transfer.New(transfer.Options{MaxBytes: 100, Idle: 10 * time.Second})
		s := &memSession{}
		id := upload(t, r, "a", "l", nil, s)
		time.Sleep(9 * time.Second)
		if _, err := r.Write(context.Background(), "a", contract.TransferWriteInput{TransferID: id, Data: []byte("x")}); err != nil {
			t.Fatalf("a write within the bound: %v", err)
		}
		time.Sleep(9 * time.Second)
		synctest.Wait()
		if r.Len() != 1 || s.closes() != 0 {
			t.Fatalf("abandoned 18 s after open though written at 9 s: %d open, %d closes", r.Len(), s.closes())
		}
		time.Sleep(2 * time.Second)
		synctest.Wait()
		if r.Len() != 0 || s.closes() != 1 {
			t.Fatalf("still open 11 s after its last call: %d open, %d closes", r.Len(), s.closes())
		}
		if _, err := r.Commit(context.Background(), "a", id); code(err) != contract.CodeUnknownTransfer {
			t.Errorf("a commit after the bound: got %v, want UNKNOWN_TRANSFER", err)
		}
	})
}

func TestTheEndOfALeaseAbortsItsTransfersAndWaitsForTheCallInFlight(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := transfer.New(transfer.Options{MaxBytes: 100, Idle: time.Minute})
		busy := &memSession{block: make(chan struct{}), closeTakes: time.Second}
		idle := &memSession{}
		other := &memSession{}
		busyID := upload(t, r, "a", "lse_1", nil, busy)
		upload(t, r, "a", "lse_1", nil, idle)
		otherID := upload(t, r, "a", "lse_2", nil, other)
		writeErr := make(chan error, 1)
		go func() {
			_, err := r.Write(context.Background(), "a", contract.TransferWriteInput{TransferID: busyID, Data: []byte("x")})
			writeErr <- err
		}()
		synctest.Wait() // the write is blocked in the session
		ended := make(chan struct{})
		go func() {
			r.EndLease(context.Background(), "lse_1")
			close(ended)
		}()
		<-ended
		// EndLease returned once what the call in flight held was
		// released, not merely once the call returned.
		if busy.closes() != 1 || idle.closes() != 1 {
			t.Errorf("when EndLease returned, the lease's sessions had %d and %d closes, want 1 each", busy.closes(), idle.closes())
		}
		if err := <-writeErr; code(err) != contract.CodeUnknownTransfer {
			t.Errorf("the write in flight: got %v, want UNKNOWN_TRANSFER", err)
		}
		if other.closes() != 0 || r.Len() != 1 {
			t.Errorf("another lease's transfer was touched: %d closes, %d open", other.closes(), r.Len())
		}
		if _, err := r.Write(context.Background(), "a", contract.TransferWriteInput{TransferID: otherID, Data: []byte("y")}); err != nil {
			t.Errorf("another lease's write: %v", err)
		}
	})
}

func TestALeaseEndedDuringTheStartLeavesNoTransfer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := transfer.New(transfer.Options{MaxBytes: 100, Idle: time.Minute})
		s := &memSession{}
		res := make(chan error, 1)
		go func() {
			_, err := r.Open(context.Background(), transfer.Open{Owner: "a", Lease: "l", LeaseID: "l", Direction: contract.TransferDownload},
				func(ctx context.Context) (transfer.Session, int64, error) {
					<-ctx.Done() // a driver pull the lease's end cancels
					return s, 0, ctx.Err()
				})
			res <- err
		}()
		synctest.Wait()
		r.EndLease(context.Background(), "l")
		if err := <-res; code(err) != contract.CodeUnknownLease {
			t.Errorf("Open: got %v, want UNKNOWN_LEASE", err)
		}
		if s.closes() != 1 || r.Len() != 0 {
			t.Errorf("%d closes, %d open", s.closes(), r.Len())
		}
	})
}

func TestALeaseHasAtMostPerLeaseTransfers(t *testing.T) {
	r := transfer.New(transfer.Options{MaxBytes: 100, Idle: time.Minute, PerLease: 2})
	upload(t, r, "a", "l", nil, &memSession{})
	id := upload(t, r, "a", "l", nil, &memSession{})
	_, err := r.Open(context.Background(), transfer.Open{Owner: "a", Lease: "l", Direction: contract.TransferUpload},
		func(context.Context) (transfer.Session, int64, error) { return &memSession{}, 0, nil })
	if code(err) != contract.CodeTooManyStreams {
		t.Fatalf("a third transfer: got %v, want TOO_MANY_STREAMS", err)
	}
	upload(t, r, "a", "other", nil, &memSession{})
	if _, err := r.Abort("a", id); err != nil {
		t.Fatal(err)
	}
	upload(t, r, "a", "l", nil, &memSession{})
}

func TestAFailedStartLeavesNothingOpen(t *testing.T) {
	r := transfer.New(transfer.Options{MaxBytes: 100, Idle: time.Minute})
	want := contract.Errorf(contract.CodeDeviceFileMissing, "no such file")
	_, err := r.Open(context.Background(), transfer.Open{Owner: "a", Lease: "l", Direction: contract.TransferDownload},
		func(context.Context) (transfer.Session, int64, error) { return nil, 0, want })
	if !errors.Is(err, want) || r.Len() != 0 {
		t.Errorf("got %v with %d open", err, r.Len())
	}
}
