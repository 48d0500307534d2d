// Package transfer keeps the file transfers in flight in one daemon: who
// opened each, which lease it belongs to, how many bytes it carried, and when
// it was last used. It enforces the rules every transfer shares, on a worker
// (whose sessions stage bytes in files and run the driver) and on a gateway
// (whose sessions relay each chunk to a worker) alike:
//
//   - an upload carries at most MaxBytes: a declared size over it is refused
//     before anything starts, and a write that would pass it ends the
//     transfer, both BODY_TOO_LARGE;
//   - a transfer belongs to the owner that opened it: any other owner is told
//     UNKNOWN_TRANSFER, as for an id that never was;
//   - one call at a time per transfer, at the offset where the last one
//     ended, so a chunk is never lost or written twice;
//   - a transfer with no call for Idle is abandoned, and a lease has at most
//     PerLease transfers open;
//   - the end of a lease aborts its transfers and waits for the calls in
//     flight on them, so nothing touches the device once the lease is over.
//
// The bytes themselves are the Session's business. A Registry is safe for
// concurrent use; it calls a Session from one goroutine at a time, and never
// while holding its lock.
package transfer

import (
	"context"
	"sync"
	"time"

	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/ids"
)

// Session is where one transfer's bytes go or come from.
type Session interface {
	// Write stores data at offset of an upload (offset is the bytes
	// written so far).
	Write(ctx context.Context, offset int64, data []byte) error
	// Read returns n bytes of a download at offset (both within its size).
	Read(ctx context.Context, offset int64, n int) ([]byte, error)
	// Commit finishes an upload of size bytes: the file lands on the
	// device, or the app is installed.
	Commit(ctx context.Context, size int64) (contract.TransferResult, error)
	// Close releases what the session holds (a staged file, a worker's
	// transfer). It is called once, when the transfer ends for any reason.
	Close()
}

// Options configures a Registry.
type Options struct {
	// MaxBytes is the most an upload, or a download's size, may be
	// (exec.maxUploadBytes).
	MaxBytes int64
	// Idle is how long a transfer may go without a call
	// (exec.transferIdleMs).
	Idle time.Duration
	// PerLease caps the transfers open on one lease; 0 means
	// DefaultPerLease.
	PerLease int
}

// DefaultPerLease is Options.PerLease's default.
const DefaultPerLease = 8

// Open describes a transfer to open.
type Open struct {
	// Owner is the principal the transfer belongs to.
	Owner string
	// Lease keys the lease the transfer belongs to (EndLease names it);
	// LeaseID is the lease's id as the caller knows it, for answers.
	Lease, LeaseID string
	Direction      contract.TransferDirection
	// Declared is an upload's length, when the caller knows it.
	Declared    *int64
	ContentType string
}

// Start makes an opened transfer's session. It runs outside the registry's
// lock with a context that the lease's end, an abort or Close cancels; for
// a download it returns the size of what it staged.
type Start func(ctx context.Context) (s Session, size int64, err error)

// Registry is the transfers in flight.
type Registry struct {
	opts Options

	mu sync.Mutex
	// mu guards the fields below.
	byID    map[string]*entry
	byLease map[string]map[*entry]bool
	closed  bool
}

// entry is one transfer.
type entry struct {
	id   string
	open Open
	info contract.TransferInfo
	// ctx ends when the transfer does (abort, idle, its lease's end,
	// Close); every call on the session runs under it.
	ctx    context.Context
	cancel context.CancelFunc
	// The fields below are guarded by the registry's mu.
	sess     Session
	size     int64 // a download's
	received int64 // an upload's
	// busy is set while a call (the start included) runs on the session;
	// done is closed when it returns.
	busy bool
	done chan struct{}
	// ended is set once the transfer left the table; a call still running
	// closes the session when it returns.
	ended bool
	idle  *time.Timer
}

// New returns an empty Registry.
func New(opts Options) *Registry {
	if opts.PerLease <= 0 {
		opts.PerLease = DefaultPerLease
	}
	return &Registry{opts: opts, byID: map[string]*entry{}, byLease: map[string]map[*entry]bool{}}
}

func unknown(id string) error {
	return contract.Errorf(contract.CodeUnknownTransfer, "no open transfer %s of yours: it ended, was abandoned after exec.transferIdleMs without a call, or its lease ended", id).
		With("transferId", id)
}

func (r *Registry) tooLarge(what string, n int64) error {
	return contract.Errorf(contract.CodeBodyTooLarge, "%s is %d bytes, more than exec.maxUploadBytes (%d)", what, n, r.opts.MaxBytes).
		With("maxBytes", r.opts.MaxBytes)
}

// Open checks o against the bounds, reserves its place, runs start and
// registers the session it makes. Nothing is started for a declared size
// over MaxBytes or a lease with PerLease transfers open. start's context
// ends with ctx (the caller gone) as well as with the transfer.
func (r *Registry) Open(ctx context.Context, o Open, start Start) (contract.TransferInfo, error) {
	if o.Declared != nil && *o.Declared > r.opts.MaxBytes {
		return contract.TransferInfo{}, r.tooLarge("the upload", *o.Declared)
	}
	ectx, cancel := context.WithCancel(context.Background())
	e := &entry{id: ids.New("tr_", ids.Long), open: o, ctx: ectx, cancel: cancel, busy: true, done: make(chan struct{})}
	e.info = contract.TransferInfo{TransferID: e.id, Direction: o.Direction, LeaseID: o.LeaseID, Size: o.Declared,
		MaxBytes: r.opts.MaxBytes, ChunkBytes: contract.MaxTransferChunk, IdleMs: r.opts.Idle.Milliseconds(), ContentType: o.ContentType}
	r.mu.Lock()
	switch {
	case r.closed:
		r.mu.Unlock()
		cancel()
		return contract.TransferInfo{}, contract.Errorf(contract.CodeDaemonStopping, "the daemon is stopping")
	case len(r.byLease[o.Lease]) >= r.opts.PerLease:
		r.mu.Unlock()
		cancel()
		return contract.TransferInfo{}, contract.Errorf(contract.CodeTooManyStreams, "lease %s has %d file transfers open, the most one lease may; finish or abort one first", o.LeaseID, r.opts.PerLease).
			With("maxTransfers", r.opts.PerLease)
	}
	r.addLocked(e)
	r.mu.Unlock()

	sctx, stop := callContext(ctx, e)
	sess, size, err := start(sctx)
	stop()

	r.mu.Lock()
	e.busy = false
	ended := e.ended
	if err != nil || ended || (o.Direction == contract.TransferDownload && size > r.opts.MaxBytes) {
		r.removeLocked(e)
		r.mu.Unlock()
		cancel()
		if sess != nil {
			sess.Close()
		}
		// Closed once the session is: whoever waits for the call (the
		// lease's end) finds its staging gone.
		close(e.done)
		switch {
		case ended:
			return contract.TransferInfo{}, contract.Errorf(contract.CodeUnknownLease, "lease %s ended while its transfer opened", o.LeaseID).With("leaseId", o.LeaseID)
		case err != nil:
			return contract.TransferInfo{}, err
		}
		return contract.TransferInfo{}, r.tooLarge("the file", size)
	}
	e.sess, e.size = sess, size
	if o.Direction == contract.TransferDownload {
		e.info.Size = &size
	}
	e.idle = time.AfterFunc(r.opts.Idle, func() { r.expire(e) })
	info := e.info
	close(e.done)
	r.mu.Unlock()
	return info, nil
}

func (r *Registry) addLocked(e *entry) {
	r.byID[e.id] = e
	set := r.byLease[e.open.Lease]
	if set == nil {
		set = map[*entry]bool{}
		r.byLease[e.open.Lease] = set
	}
	set[e] = true
}

// removeLocked takes e out of the table and marks it ended.
func (r *Registry) removeLocked(e *entry) {
	e.ended = true
	if e.idle != nil {
		e.idle.Stop()
	}
	delete(r.byID, e.id)
	if set := r.byLease[e.open.Lease]; set != nil {
		delete(set, e)
		if len(set) == 0 {
			delete(r.byLease, e.open.Lease)
		}
	}
}

// expire abandons e after Idle without a call, unless a call runs now.
func (r *Registry) expire(e *entry) {
	r.mu.Lock()
	if e.ended || e.busy {
		r.mu.Unlock()
		return
	}
	r.removeLocked(e)
	r.mu.Unlock()
	e.cancel()
	e.sess.Close()
}

// begin starts a call on owner's transfer id.
func (r *Registry) begin(owner, id string, dir contract.TransferDirection) (*entry, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	e, ok := r.byID[id]
	if !ok || e.owner() != owner {
		return nil, unknown(id)
	}
	if e.busy {
		return nil, contract.BadRequest("transferId", "transfer %s has a call in flight; send the next one once it has answered", id)
	}
	if e.open.Direction != dir {
		return nil, contract.BadRequest("transferId", "transfer %s is an %s", id, e.open.Direction)
	}
	e.busy = true
	e.done = make(chan struct{})
	e.idle.Stop()
	return e, nil
}

func (e *entry) owner() string { return e.open.Owner }

// end ends a call begun on e: the transfer is over when finished, or when
// it was aborted meanwhile; otherwise its idle bound starts again.
func (r *Registry) end(e *entry, finished bool) {
	r.mu.Lock()
	e.busy = false
	done := e.done
	closing := e.ended || finished
	if finished && !e.ended {
		r.removeLocked(e)
	}
	if !closing {
		e.idle.Reset(r.opts.Idle)
	}
	r.mu.Unlock()
	if closing {
		e.cancel()
		e.sess.Close()
	}
	// After the session closed: whoever waits for the call (the lease's
	// end) finds what it held released.
	close(done)
}

// callContext is ctx, ended also when the transfer ends.
func callContext(ctx context.Context, e *entry) (context.Context, context.CancelFunc) {
	c, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(e.ctx, cancel)
	return c, func() { stop(); cancel() }
}

// Write stores the next chunk of owner's upload.
func (r *Registry) Write(ctx context.Context, owner string, in contract.TransferWriteInput) (contract.TransferWriteResult, error) {
	e, err := r.begin(owner, in.TransferID, contract.TransferUpload)
	if err != nil {
		return contract.TransferWriteResult{}, err
	}
	if in.Offset != e.received {
		r.end(e, false)
		return contract.TransferWriteResult{}, contract.BadRequest("offset", "transfer %s has received %d bytes; write from there, not from %d", in.TransferID, e.received, in.Offset).
			With("received", e.received)
	}
	n := int64(len(in.Data))
	if e.received+n > r.opts.MaxBytes {
		r.end(e, true)
		return contract.TransferWriteResult{}, r.tooLarge("the upload", e.received+n)
	}
	if d := e.open.Declared; d != nil && e.received+n > *d {
		r.end(e, true)
		return contract.TransferWriteResult{}, contract.BadRequest("data", "transfer %s declared %d bytes and got more", in.TransferID, *d).With("size", *d)
	}
	cctx, cancel := callContext(ctx, e)
	err = e.sess.Write(cctx, in.Offset, in.Data)
	cancel()
	if err != nil {
		// What the session holds is not known to be whole any more.
		err = r.failed(e, err)
		r.end(e, true)
		return contract.TransferWriteResult{}, err
	}
	r.mu.Lock()
	e.received += n
	got := e.received
	r.mu.Unlock()
	r.end(e, false)
	return contract.TransferWriteResult{Received: got}, nil
}

// failed is the error of a failed call: for one whose transfer ended under
// it (its lease's end, an abort, Close), UNKNOWN_TRANSFER rather than
// whatever the session made of its cancelled context. Call it before the
// call's end.
func (r *Registry) failed(e *entry, err error) error {
	r.mu.Lock()
	ended := e.ended && e.ctx.Err() != nil
	r.mu.Unlock()
	if ended {
		return unknown(e.id)
	}
	return err
}

// Read returns the chunk of owner's download at in.Offset; the chunk that
// reaches the end ends the transfer.
func (r *Registry) Read(ctx context.Context, owner string, in contract.TransferReadInput) (contract.TransferChunk, error) {
	e, err := r.begin(owner, in.TransferID, contract.TransferDownload)
	if err != nil {
		return contract.TransferChunk{}, err
	}
	if in.Offset > e.size {
		r.end(e, false)
		return contract.TransferChunk{}, contract.BadRequest("offset", "transfer %s has %d bytes; %d is past its end", in.TransferID, e.size, in.Offset).
			With("size", e.size)
	}
	n := int64(in.Max)
	if n == 0 {
		n = contract.MaxTransferChunk
	}
	n = min(n, e.size-in.Offset)
	data := []byte{}
	if n > 0 {
		cctx, cancel := callContext(ctx, e)
		data, err = e.sess.Read(cctx, in.Offset, int(n))
		cancel()
		if err != nil {
			err = r.failed(e, err)
			r.end(e, true)
			return contract.TransferChunk{}, err
		}
	}
	eof := in.Offset+int64(len(data)) >= e.size
	r.end(e, eof)
	return contract.TransferChunk{Data: data, EOF: eof}, nil
}

// Commit finishes owner's upload, which ends it whatever the outcome. An
// upload that declared its size must have received exactly that many
// bytes; until it has, it stays open.
func (r *Registry) Commit(ctx context.Context, owner, id string) (contract.TransferResult, error) {
	e, err := r.begin(owner, id, contract.TransferUpload)
	if err != nil {
		return contract.TransferResult{}, err
	}
	if d := e.open.Declared; d != nil && e.received != *d {
		r.end(e, false)
		return contract.TransferResult{}, contract.BadRequest("transferId", "transfer %s declared %d bytes and has received %d", id, *d, e.received).
			With("received", e.received).With("size", *d)
	}
	cctx, cancel := callContext(ctx, e)
	res, err := e.sess.Commit(cctx, e.received)
	cancel()
	if err != nil {
		err = r.failed(e, err)
	}
	r.end(e, true)
	if err != nil {
		return contract.TransferResult{}, err
	}
	res.LeaseID, res.Bytes = e.open.LeaseID, e.received
	return res, nil
}

// Abort ends owner's transfer now. A call running on it is cancelled, and
// fails.
func (r *Registry) Abort(owner, id string) (contract.TransferAbortResult, error) {
	r.mu.Lock()
	e, ok := r.byID[id]
	if !ok || e.owner() != owner {
		r.mu.Unlock()
		return contract.TransferAbortResult{}, unknown(id)
	}
	busy := e.busy
	r.removeLocked(e)
	r.mu.Unlock()
	e.cancel()
	if !busy {
		e.sess.Close()
	}
	return contract.TransferAbortResult{Aborted: true}, nil
}

// EndLease aborts every transfer of lease and waits, until ctx ends, for
// the calls that were running on them to return.
func (r *Registry) EndLease(ctx context.Context, lease string) {
	r.EndLeaseNow(lease)(ctx)
}

// EndLeaseNow aborts every transfer of lease at once: when it returns, no
// call finds any of them by id (UNKNOWN_TRANSFER). What it returns closes
// their sessions and waits, until ctx ends, for the calls that were
// running on them; a caller that must not wait for those runs it apart.
func (r *Registry) EndLeaseNow(lease string) (finish func(ctx context.Context)) {
	r.mu.Lock()
	var running []chan struct{}
	var idle []*entry
	for e := range r.byLease[lease] {
		if e.busy {
			running = append(running, e.done)
		} else {
			idle = append(idle, e)
		}
		r.removeLocked(e)
		e.cancel()
	}
	r.mu.Unlock()
	return func(ctx context.Context) {
		for _, e := range idle {
			e.sess.Close()
		}
		for _, done := range running {
			select {
			case <-done:
			case <-ctx.Done():
				return
			}
		}
	}
}

// HasLease reports whether lease has a transfer in the table, one still
// opening included: whether EndLease would have any to end.
func (r *Registry) HasLease(lease string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.byLease[lease]) > 0
}

// Close aborts every transfer and refuses new ones.
func (r *Registry) Close() {
	r.mu.Lock()
	r.closed = true
	leases := make([]string, 0, len(r.byLease))
	for l := range r.byLease {
		leases = append(leases, l)
	}
	r.mu.Unlock()
	done, cancel := context.WithCancel(context.Background())
	cancel() // Close does not wait for the calls in flight
	for _, l := range leases {
		r.EndLease(done, l)
	}
}

// Len reports how many transfers are open.
func (r *Registry) Len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.byID)
}
