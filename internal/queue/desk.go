package queue

import (
	"context"
	"time"

	"github.com/simlock/simlock/internal/contract"
)

// Desk is the front desk both placers serve lease requests through, the
// worker's engine and a gateway's fleet alike: it checks the lease's TTL
// against the configured bounds, hands the request to the queue with what
// the placer makes of it, and answers the request operations (acquire,
// submit, status, retry, cancel). What is decided about a request before
// it is placed lives here and in the queue, once; a placer adds only its
// Resolve.
//
// A Desk holds no state of its own beyond its settings; its methods are
// safe for concurrent use, as the queue's are.
type Desk struct {
	// Q is the queue the requests wait in.
	Q *Queue
	// DefaultTTL is the lease lifetime of a request naming none
	// (lease.defaultTtlMs); MinTTL and MaxTTL bound the one it names
	// (lease.minTtlMs, 0 sets none; lease.maxTtlMs). They are the
	// configuration's, given by the owner: the desk has no defaults of
	// its own.
	DefaultTTL, MinTTL, MaxTTL time.Duration
	// Resolve turns a request into what its placer places (see
	// Resolution). It runs outside the decision lock, and may ask a
	// driver.
	Resolve func(ctx context.Context, in contract.LeaseRequestInput) Resolution
}

// TTL is the lease lifetime ms asks for, field naming it in a refusal
// (see TTLFor).
func (d *Desk) TTL(ms int64, field string) (time.Duration, *contract.Error) {
	return TTLFor(ms, d.DefaultTTL, d.MinTTL, d.MaxTTL, field)
}

// Acquire asks for a lease and waits until it is granted, the request
// fails, or ctx ends (lease.request). Progress is told each step of the
// wait; it must not block. When ctx ends while the request waits in line,
// the request is withdrawn (see Queue.Await).
func (d *Desk) Acquire(ctx context.Context, c Caller, in contract.LeaseRequestInput, progress func(contract.LeaseProgress)) (contract.LeaseGrant, error) {
	if progress == nil {
		progress = func(contract.LeaseProgress) {}
	}
	t, err := d.submit(ctx, c, in, progress)
	if err != nil {
		return contract.LeaseGrant{}, err
	}
	return d.Q.Await(ctx, t)
}

// Submit makes a lease request that waits on its own, as a resource
// (lease-request.create): it returns at once with the request stored and
// in line (or already granted), and the request stays until it is granted,
// times out or is cancelled, whoever watches it. Failures found before the
// request could wait (bad input, an unknown model, no capacity with
// noWait, the requester already holding a lease) are returned as errors.
func (d *Desk) Submit(ctx context.Context, c Caller, in contract.LeaseRequestInput) (contract.LeaseRequestStatus, error) {
	t, err := d.submit(ctx, c, in, nil)
	if err != nil {
		return contract.LeaseRequestStatus{}, err
	}
	return d.Q.Resource(t)
}

// RetryRequest makes failed request id again, as it was stored, as a new
// request for the same requester (see Queue.RetryInput).
func (d *Desk) RetryRequest(ctx context.Context, c Caller, id string) (contract.LeaseRequestStatus, error) {
	owner, in, err := d.Q.RetryInput(ctx, c, id)
	if err != nil {
		return contract.LeaseRequestStatus{}, err
	}
	return d.Submit(ctx, owner, in)
}

// RequestStatus reads a lease request (lease-request.get; see
// Queue.Status).
func (d *Desk) RequestStatus(ctx context.Context, c Caller, in contract.LeaseRequestGetInput) (contract.LeaseRequestStatus, error) {
	return d.Q.Status(ctx, c, in)
}

// Cancel withdraws a waiting request (lease.cancel; see Queue.Cancel).
func (d *Desk) Cancel(ctx context.Context, c Caller, in contract.LeaseCancelInput) (contract.LeaseCancelResult, error) {
	return d.Q.Cancel(ctx, c, in)
}

// submit checks the TTL and hands the request to the queue, with the
// placer's resolution of it (outside the lock).
func (d *Desk) submit(ctx context.Context, c Caller, in contract.LeaseRequestInput, progress func(contract.LeaseProgress)) (*Ticket, error) {
	ttl, cerr := d.TTL(in.TTLMs, "ttlMs")
	if cerr != nil {
		return nil, cerr
	}
	ask := Ask{Caller: c, Input: in, TTLMs: ttl.Milliseconds(), Progress: progress}
	return d.Q.Submit(ctx, ask, func(ctx context.Context) Resolution { return d.Resolve(ctx, in) })
}
