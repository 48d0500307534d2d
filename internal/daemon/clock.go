package daemon

import (
	"context"
	"time"

	"github.com/simlock/simlock/internal/store"
	"github.com/simlock/simlock/internal/wallclock"
)

// How often a worker reads its clocks for a jump, and how often it stores
// a reading of a clock that did not jump.
const (
	clockCheckEvery = time.Second
	clockSaveEvery  = time.Minute
)

// clockAtStart compares the clocks now with the reading the stored times
// were last in step with, and returns how far the wall clock jumped beyond
// real time since (0 when it did not, or when that cannot be known: no
// reading stored, another boot) and the reading to store with the start.
func (d *Daemon) clockAtStart(ctx context.Context) (skew time.Duration, now wallclock.Reading) {
	now = d.opts.ReadClock()
	prev, found, err := d.db.Clock(ctx)
	switch {
	case err != nil:
		d.log.Warn("the stored clock reading is unreadable; a clock jump while the daemon was down cannot be seen", "err", err)
		return 0, now
	case !found:
		return 0, now
	}
	skew, ok := wallclock.Skew(fromStore(prev), now)
	switch {
	case !ok:
		d.log.Info("the machine booted since the last run (or its boot clock is unreadable): a clock jump while the daemon was down cannot be seen")
		return 0, now
	case !wallclock.Jumped(skew):
		return 0, now
	}
	d.log.Warn("the wall clock jumped since the last run; stored deadlines move with it", "skew", skew)
	return skew, now
}

// watchClock reads the clocks every clockCheckEvery until the daemon
// stops. A jump of the wall clock is told to the engine, which moves the
// stored times by it and stores the reading in the same decision; between
// jumps the reading is stored every clockSaveEvery, so a start compares
// with a recent one.
func (d *Daemon) watchClock(last wallclock.Reading) {
	t := time.NewTicker(clockCheckEvery)
	defer t.Stop()
	saved := time.Now()
	for {
		select {
		case <-d.stopReq:
			return
		case <-t.C:
		}
		r := d.opts.ReadClock()
		skew, ok := wallclock.Skew(last, r)
		last = r
		if ok && wallclock.Jumped(skew) {
			d.log.Warn("the wall clock jumped; stored deadlines move with it", "skew", skew)
			d.engine.Maintenance().ClockJumped(skew, toStore(r))
			saved = time.Now()
			continue
		}
		if time.Since(saved) < clockSaveEvery || r.BootID == "" {
			continue
		}
		ctx, cancel := context.WithTimeout(d.life, 10*time.Second)
		if err := d.db.PutClock(ctx, *toStore(r)); err != nil {
			d.log.Warn("could not store the clock reading", "err", err)
		} else {
			saved = time.Now()
		}
		cancel()
	}
}

func fromStore(c store.Clock) wallclock.Reading {
	return wallclock.Reading{WallMs: c.WallMs, BootNs: c.BootNs, BootID: c.BootID}
}

// toStore is r as stored; nil for a reading of no boot, which compares
// with nothing and is not worth storing.
func toStore(r wallclock.Reading) *store.Clock {
	if r.BootID == "" {
		return nil
	}
	return &store.Clock{WallMs: r.WallMs, BootNs: r.BootNs, BootID: r.BootID}
}
