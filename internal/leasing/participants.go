package leasing

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/queue"
	"github.com/simlock/simlock/internal/store"
)

// EndedLease is a lease that has just ended, as a lease-end participant
// hears of it.
type EndedLease struct {
	// LeaseID is the lease's unique key, as its events carry it.
	LeaseID string
	OwnerID string
	// DeviceID is simlock's device id, as lease.released carries it.
	DeviceID string
	// Platform is the device's platform.
	Platform contract.Platform
	// Reason is the reason lease.released or lease.expired carries.
	Reason contract.EndReason
}

// LeaseEndParticipant is code an optional module gives the engine because
// it must act on a device after its lease ends and before the device is
// wiped (ending a session that drives the device, say). The engine imports
// no participant; with none registered it behaves exactly as without this
// port.
//
// LeaseEnded is called once per ended lease (unless the participant is a
// LeaseEndIdler idle for it), in a goroutine of its own,
// after the end is committed and published and while the device is
// reclaiming under the engine's claim. The clean waits until every
// participant has returned, or until Options.EndWait has passed since they
// were called, whichever comes first. ctx is cancelled when the engine stops
// waiting early: at that ceiling, when a nuke or a graceful stop cuts the
// wait short, and at Close; it is already cancelled for a lease that ends
// during a nuke or a stop. A participant should return soon after ctx ends;
// the engine does not wait for one that does not. A returned error, or a
// panic, is logged with the lease and device, and the clean goes ahead.
type LeaseEndParticipant interface {
	LeaseEnded(ctx context.Context, ended EndedLease) error
}

// LeaseEndIdler is a LeaseEndParticipant that can tell at once that it has
// nothing to do for an ended lease (no transfer, no command of it). The
// engine asks it when it would call it, after the end is committed, and
// calls it only when it is not idle: most leases end with nothing for any
// participant, and each call is a goroutine and a wake-up between the
// release and the device's clean. A participant idle for every lease
// leaves the clean to start as soon as the end is committed.
type LeaseEndIdler interface {
	LeaseEndParticipant
	// IdleFor reports whether LeaseEnded would do nothing for ended. It
	// must not block, nor act: a participant that is idle now for a lease
	// that has ended stays so.
	IdleFor(ended EndedLease) bool
}

// defaultEndWait is lease.endWaitMs's default.
const defaultEndWait = 10 * time.Minute

// Causes of a cancelled participant context, for participants that want to
// tell them apart (context.Cause).
var (
	errEndWaitCeiling = errors.New("lease.endWaitMs passed")
	errMaintenance    = errors.New("a nuke is in progress")
)

// endState is what the engine tracks of lease ends and reclaims in flight.
// The decision lock guards it.
type endState struct {
	// calls are the participant calls the engine may still cut short: from
	// the call until every participant returned or the wait ended.
	calls map[*endCall]bool
	// maintenance counts nukes in progress. While it is above zero,
	// acquisition is fenced and participants get a cancelled context.
	maintenance int
	// reclaims maps each device being reclaimed, its participant wait
	// included, to a channel closed when that reclaim ends; a nuke waits
	// on them.
	reclaims map[string]chan struct{}
}

// endCall is the participants' call for one ended lease. Its context is
// shared by all of them: one budget per lease, not per participant.
type endCall struct {
	ended  EndedLease
	ctx    context.Context
	cancel context.CancelCauseFunc
	// returned is closed once every participant has returned.
	returned chan struct{}
	// ceiling is lease.endWaitMs from the call; nil when the call was cut
	// short before it was made.
	ceiling *time.Timer
}

func (e *Engine) endWait() time.Duration {
	if e.opts.EndWait > 0 {
		return e.opts.EndWait
	}
	return defaultEndWait
}

// cutCauseLocked says why a participant called now gets a cancelled
// context, or nil when it gets a live one.
func (e *Engine) cutCauseLocked() error {
	switch {
	case e.stopping || e.ctx.Err() != nil:
		return errStopping
	case e.ends.maintenance > 0:
		return errMaintenance
	}
	return nil
}

// cutEndsLocked cancels every participant context handed out, so each
// wait ends now and its reclaim starts (or, after Close, is left to the
// next start).
func (e *Engine) cutEndsLocked(cause error) {
	for c := range e.ends.calls {
		c.cancel(cause)
		delete(e.ends.calls, c)
	}
}

// afterEndLocked runs in the decision that ends a lease; what it starts
// begins once that decision commits. With no participant it starts the
// device's clean, as always. With participants it calls them, and then:
// cleans the device once they have returned (or the ceiling passed); cleans
// it at once, without waiting, when a nuke or a stop is under way; and
// waits for nothing when the end left no device to clean.
func (e *Engine) afterEndLocked(tx *queue.Txn, l store.Lease, reason contract.EndReason) {
	d, ok := e.reg.get(l.DeviceID)
	// A device startup could not read, or found gone, is not cleaned now.
	reclaim := ok && d.State == contract.DeviceReclaiming && !e.noReclaim[l.DeviceID]
	if len(e.opts.LeaseEndParticipants) == 0 {
		if reclaim {
			e.startReclaimLocked(tx, d)
		}
		return
	}
	ended := EndedLease{LeaseID: l.UniqueKey(), OwnerID: l.OwnerID, DeviceID: l.DeviceID, Reason: reason}
	if ok {
		ended.Platform = d.Platform
	}
	if reclaim {
		// Claimed before any participant runs, until the clean ends:
		// nothing else (recovery, doctor, a waiter) touches the device
		// while a participant may still be working on it.
		e.setClaim(tx, d, claimReclaim)
	}
	c := e.newEndCallLocked(ended)
	switch {
	case c.ceiling == nil:
		tx.After(func() { e.callParticipants(c) })
		if reclaim {
			e.startReclaimLocked(tx, d)
		}
	case !reclaim:
		tx.After(func() {
			e.callParticipants(c)
			e.goWork(func() { e.awaitParticipants(c, false) })
		})
	default:
		done := e.trackReclaimLocked(d.ID)
		tx.After(func() {
			e.callParticipants(c)
			e.goWork(func() {
				defer e.reclaimEnded(d.ID, done)
				e.awaitParticipants(c, true)
				e.reclaimAfterWait(d)
			})
		})
	}
}

// newEndCallLocked makes the participants' call for one ended lease: with a
// live context and the ceiling running, or with a context already
// cancelled when a nuke or a stop is under way.
func (e *Engine) newEndCallLocked(ended EndedLease) *endCall {
	ctx, cancel := context.WithCancelCause(context.Background())
	c := &endCall{ended: ended, ctx: ctx, cancel: cancel, returned: make(chan struct{})}
	if cause := e.cutCauseLocked(); cause != nil {
		cancel(cause)
		return c
	}
	if e.ends.calls == nil {
		e.ends.calls = map[*endCall]bool{}
	}
	e.ends.calls[c] = true
	c.ceiling = time.NewTimer(e.endWait())
	return c
}

// callParticipants calls every participant at once, each in its own
// goroutine, so none waits behind another and the lock is not held while
// they work. A LeaseEndIdler idle for the lease is not called; when none
// is left, the call has returned at once.
func (e *Engine) callParticipants(c *endCall) {
	ctx, ended := c.ctx, c.ended
	parts := make([]LeaseEndParticipant, 0, len(e.opts.LeaseEndParticipants))
	for _, p := range e.opts.LeaseEndParticipants {
		if i, ok := p.(LeaseEndIdler); !ok || !idleFor(i, ended) {
			parts = append(parts, p)
		}
	}
	if len(parts) == 0 {
		close(c.returned)
		return
	}
	var left atomic.Int32
	left.Store(int32(len(parts)))
	for _, p := range parts {
		go func() {
			// Logged here, not by the waiter: a participant that fails after
			// the engine stopped waiting is reported all the same.
			if err := callParticipant(ctx, p, ended); err != nil {
				e.log.Error("lease-end participant failed", "leaseId", ended.LeaseID, "deviceId", ended.DeviceID, "err", err)
			}
			if left.Add(-1) == 0 {
				close(c.returned)
			}
		}()
	}
}

// idleFor asks i whether it is idle for ended; one that panics is not,
// and is called (where its panic is logged).
func idleFor(i LeaseEndIdler, ended EndedLease) (idle bool) {
	defer func() {
		if recover() != nil {
			idle = false
		}
	}()
	return i.IdleFor(ended)
}

// callParticipant calls p, turning a panic into an error: a participant is
// an optional module, and its bug must not take the daemon down.
func callParticipant(ctx context.Context, p LeaseEndParticipant, ended EndedLease) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("lease-end participant panicked: %v", r)
		}
	}()
	return p.LeaseEnded(ctx, ended)
}

// awaitParticipants waits until c's participants have returned, the
// ceiling passes or the wait is cut short. The ceiling timer never outlives
// the wait, so a wait that ended early never warns or cancels later.
func (e *Engine) awaitParticipants(c *endCall, reclaiming bool) {
	defer c.ceiling.Stop()
	select {
	case <-c.returned:
	case <-c.ctx.Done():
	case <-c.ceiling.C:
		if reclaiming {
			e.log.Warn("lease-end participants did not return within lease.endWaitMs; reclaiming the device anyway",
				"leaseId", c.ended.LeaseID, "deviceId", c.ended.DeviceID, "endWait", e.endWait())
		}
		c.cancel(errEndWaitCeiling)
	}
	e.view(func() { delete(e.ends.calls, c) })
}

// reclaimAfterWait cleans the device whose participants are done. Whether
// the engine closed meanwhile is read, not decided: the common case
// changes nothing, so it costs no decision and no commit, and the clean's
// own decision (runReclaim) hands the device on.
func (e *Engine) reclaimAfterWait(d *dev) {
	closed := false
	e.view(func() { closed = d.at == nil || e.ctx.Err() != nil })
	if !closed {
		e.runReclaim(d)
		return
	}
	// Closed: no more driver work. The device stays reclaiming with its
	// deferred-reclaim marker, and the next start wipes it.
	_ = e.do(func(tx *queue.Txn) error {
		e.setClaim(tx, d, claimNone)
		return nil
	})
}

// trackReclaimLocked registers a reclaim starting on device id.
func (e *Engine) trackReclaimLocked(id string) chan struct{} {
	if e.ends.reclaims == nil {
		e.ends.reclaims = map[string]chan struct{}{}
	}
	done := make(chan struct{})
	e.ends.reclaims[id] = done
	return done
}

// reclaimEnded unregisters a reclaim and wakes whoever waits for it.
func (e *Engine) reclaimEnded(id string, done chan struct{}) {
	e.view(func() {
		if e.ends.reclaims[id] == done {
			delete(e.ends.reclaims, id)
		}
	})
	close(done)
}

// reclaimsLocked lists the reclaims in flight.
func (e *Engine) reclaimsLocked() []chan struct{} {
	out := make([]chan struct{}, 0, len(e.ends.reclaims))
	for _, done := range e.ends.reclaims {
		out = append(out, done)
	}
	return out
}
