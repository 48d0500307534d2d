package bench

import (
	"context"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/simlock/simlock/internal/client"
	"github.com/simlock/simlock/internal/contract"
)

// The renewal rate: renewAgents agent sessions, each renewing as fast as
// it can (one call in flight, the next sent when the last is answered),
// for renewRateWarmup unmeasured, then renewRateWindow counted.
const (
	renewAgents     = 50
	renewRateWarmup = 500 * time.Millisecond
	renewRateWindow = 2 * time.Second
)

// measureRenewRate dials renewAgents sessions of the bench's principal and
// returns the renewals a second they complete together. Agent i renews
// held[i%len(held)]: a run of fewer than renewAgents leases shares its
// leases among the agents rather than taking more, whose capacity would
// change what the other rows measure (a renewal commits the same whether
// or not another agent renews the same lease).
func measureRenewRate(ctx context.Context, d *benchDaemon, held []heldLease) (float64, error) {
	agents := make([]*client.Client, renewAgents)
	for i := range agents {
		c, err := d.dial(ctx, false)
		if err != nil {
			return 0, benchError("connect", err)
		}
		defer c.Close()
		agents[i] = c
	}
	parent := ctx
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		done     atomic.Int64
		once     sync.Once
		firstErr error
		wg       sync.WaitGroup
	)
	for i, c := range agents {
		id := held[i%len(held)].id
		wg.Go(func() {
			for ctx.Err() == nil {
				if _, err := bounded(ctx, "lease.renew", func(ctx context.Context) (contract.LeaseRecord, error) {
					return c.Renew(ctx, id, 0)
				}); err != nil {
					if ctx.Err() == nil {
						once.Do(func() { firstErr = err; cancel() })
					}
					return
				}
				done.Add(1)
			}
		})
	}
	wait := func(d time.Duration) {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
		}
	}
	wait(renewRateWarmup)
	n0, t0 := done.Load(), time.Now()
	wait(renewRateWindow)
	n1, elapsed := done.Load(), time.Since(t0)
	cancel()
	wg.Wait()
	if firstErr != nil {
		return 0, firstErr
	}
	if err := parent.Err(); err != nil {
		return 0, err
	}
	return math.Round(float64(n1-n0) / elapsed.Seconds()), nil
}
