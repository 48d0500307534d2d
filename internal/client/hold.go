package client

import (
	"context"
	"errors"
	"time"

	"github.com/simlock/simlock/internal/contract"
)

// renewBound is the longest one renewal may take before it counts as failed
// and waits for the next tick.
const renewBound = 10 * time.Second

// Hold keeps a granted lease alive: it renews it every third of its TTL, so
// two renewals in a row may fail before the lease lapses. It is the one
// keep-alive every holder uses (the CLI's held lease, the MCP server's
// grants).
//
// connect returns the session to renew over; Hold asks it again at every
// tick, so a holder that reconnects after losing the daemon renews over the
// new session. A renewal that fails for any other reason than the daemon no
// longer knowing the lease (the daemon unreachable, a timeout) is tried
// again at the next tick. report, when not nil, hears each attempt: the
// renewed record, or the error of one that failed and will be tried again.
//
// Hold returns nil when ctx ends, and an error wrapping ErrLeaseGone, with
// the daemon's UNKNOWN_LEASE, when the lease has ended.
func Hold(ctx context.Context, lease contract.LeaseRecord, connect func(context.Context) (*Client, error), report func(contract.LeaseRecord, error)) error {
	every := max(time.Duration(lease.TTLMs)*time.Millisecond/3, 10*time.Millisecond)
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
		rec, err := renewOnce(ctx, lease.ID, connect, min(every, renewBound))
		switch {
		case ctx.Err() != nil:
			return nil
		case err != nil && contract.AsError(err).Code == contract.CodeUnknownLease:
			return errors.Join(ErrLeaseGone, err)
		}
		if report != nil {
			report(rec, err)
		}
	}
}

// ErrLeaseGone is what Hold returns when the daemon no longer knows the
// lease it keeps: it expired, was released elsewhere, or its device was lost.
var ErrLeaseGone = errors.New("the lease has ended")

func renewOnce(ctx context.Context, id string, connect func(context.Context) (*Client, error), bound time.Duration) (contract.LeaseRecord, error) {
	ctx, cancel := context.WithTimeout(ctx, bound)
	defer cancel()
	c, err := connect(ctx)
	if err != nil {
		return contract.LeaseRecord{}, err
	}
	return c.Renew(ctx, id, 0)
}
