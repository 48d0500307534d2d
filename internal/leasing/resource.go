package leasing

import (
	"context"
	"math"
	"time"

	"github.com/simlock/simlock/internal/contract"
)

// settledRev is the revision of every settled request: it never changes
// again, and it is above any revision an open request can have.
const settledRev = math.MaxInt64

// Submit makes a lease request that waits on its own, as a resource: it
// returns at once with the request stored and in line (or already granted),
// and the request stays until it is granted, times out or is cancelled,
// whoever watches it. Failures found before the request could wait (bad
// input, an unknown model, no capacity with noWait, the requester already
// holding a lease) are returned as errors.
func (e *Engine) Submit(ctx context.Context, c Caller, in contract.LeaseRequestInput) (contract.LeaseRequestStatus, error) {
	r, err := e.submit(ctx, c, in, nil)
	if err != nil {
		return contract.LeaseRequestStatus{}, err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if _, open := e.requests[r.rec.ID]; open {
		return e.statusLocked(r), nil
	}
	if !r.replayed && r.err != nil {
		return contract.LeaseRequestStatus{}, r.err
	}
	return contract.LeaseRequestStatus{Request: r.rec, Rev: settledRev}, nil
}

func (e *Engine) statusLocked(r *request) contract.LeaseRequestStatus {
	st := contract.LeaseRequestStatus{Request: r.rec, Rev: r.rev, Target: r.target}
	if r.last.Stage != "" {
		p := r.last
		st.Progress = &p
	}
	return st
}

// RequestStatus reads a lease request. With in.WaitMs it first waits, at
// most that long, until the request's revision differs from in.AfterRev;
// a settled request answers at once. An agent sees only its own requests:
// others' are UNKNOWN_LEASE_REQUEST, as if they did not exist.
func (e *Engine) RequestStatus(ctx context.Context, c Caller, in contract.LeaseRequestGetInput) (contract.LeaseRequestStatus, error) {
	var expired <-chan time.Time
	if in.WaitMs > 0 {
		t := time.NewTimer(time.Duration(in.WaitMs) * time.Millisecond)
		defer t.Stop()
		expired = t.C
	}
	for {
		e.mu.Lock()
		r, open := e.requests[in.RequestID]
		if !open {
			e.mu.Unlock()
			break
		}
		if !c.sees(r.rec) {
			e.mu.Unlock()
			return contract.LeaseRequestStatus{}, unknownRequest(in.RequestID)
		}
		st := e.statusLocked(r)
		if expired == nil || st.Rev != in.AfterRev {
			e.mu.Unlock()
			return st, nil
		}
		changed, done := r.changed, r.done
		e.mu.Unlock()
		select {
		case <-changed:
		case <-done:
		case <-expired:
			expired = nil // answer with what is there now
		case <-ctx.Done():
			return contract.LeaseRequestStatus{}, contract.Errorf(contract.CodeCancelled, "stopped waiting: %v", ctx.Err())
		}
	}
	rec, ok, err := e.opts.Store.Request(ctx, in.RequestID)
	if err != nil {
		return contract.LeaseRequestStatus{}, contract.Errorf(contract.CodeInternal, "read request: %v", err)
	}
	if !ok || !c.sees(rec) {
		return contract.LeaseRequestStatus{}, unknownRequest(in.RequestID)
	}
	return contract.LeaseRequestStatus{Request: rec, Rev: settledRev}, nil
}

func unknownRequest(id string) *contract.Error {
	return contract.Errorf(contract.CodeUnknownLeaseRequest, "no lease request %s", id).With("requestId", id)
}

// Lease reads an active lease and its device.
func (e *Engine) Lease(c Caller, id string) (contract.LeaseGetResult, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	l, cerr := e.ownedLocked(c, id)
	if cerr != nil {
		return contract.LeaseGetResult{}, cerr
	}
	res := contract.LeaseGetResult{Lease: l.LeaseRecord, RequestID: l.RequestID}
	if d, ok := e.devices[l.DeviceID]; ok {
		res.Device = e.deviceViewLocked(d)
	}
	return res, nil
}
