package leasing

import (
	"slices"
	"time"

	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/queue"
	"github.com/simlock/simlock/internal/store"
)

// ClockJumped moves the stored deadlines and times by skew, the amount the
// wall clock jumped beyond real time while the engine ran
// (wallclock.Skew), in one decision recorded as clock.jumped, which also
// stores at, the clock reading they are in step with from then on (nil
// keeps the stored one): what each measures stays the same real time, now
// told in the clock's new time. It changes no lease's expiry, which runs
// on the monotonic clock already: each lease's deadline is told again from
// it. It keeps the times compared with the wall clock (a device's idle
// time, a quarantine's next retry, a stall's start) and the deadlines
// shown and stored (which the next start compares with the clock) in step
// with it.
func (m *Maintenance) ClockJumped(skew time.Duration, at *store.Clock) {
	e := m.e
	_ = e.do(func(tx *queue.Txn) error {
		e.shiftClockLocked(tx, skew, "running")
		e.pending.clock = at
		return nil
	})
}

// shiftClockLocked moves, in tx, every active lease's deadline and last
// renewal and every device's state-since, last use and next quarantine
// retry by skew, and records clock.jumped (at: start or running), then
// arms the timers again from the moved times.
//
// A lease's expiry is the truth its deadline is told from. While running,
// it is on the monotonic clock already, and the deadline is told again
// from it in the clock's new time (its last renewal moving with it): a
// lease granted or renewed between the jump and this decision (the clocks
// are read once a second) has its deadline in the new time already, and
// moving it by skew would expire it early or keep it late. At start, the
// stored deadline is all there is: it moves by skew, and the expiry is set
// from it.
func (e *Engine) shiftClockLocked(tx *queue.Txn, skew time.Duration, at string) {
	ms := skew.Milliseconds()
	ids := make([]string, 0, len(e.leases))
	for id := range e.leases {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		l := e.leases[id]
		nl := l.Lease
		moved := ms
		if at == "running" {
			moved = e.wallAt(l.expiry) - nl.TTLDeadline
		}
		nl.TTLDeadline += moved
		nl.LastRenewedAt += moved
		e.putLease(tx, nl)
		if at != "running" {
			l.expiry = e.monoAt(nl.TTLDeadline)
		}
		e.armLocked(tx, l)
	}
	var devs []*dev
	e.reg.each(func(d *dev) bool {
		devs = append(devs, d)
		return true
	})
	for _, d := range devs {
		rewarmed := d.rewarmedAt != 0 && d.rewarmedAt == d.StateSince
		e.changeDevice(tx, d, func(r *store.Device) {
			r.StateSince += ms
			if r.LastUsedAt != 0 {
				r.LastUsedAt += ms
			}
			if r.QuarantineNextRetry != 0 {
				r.QuarantineNextRetry += ms
			}
		})
		if rewarmed {
			e.reg.update(d, func(d *dev) { d.rewarmedAt = d.StateSince })
		}
		e.armStallLocked(tx, d)
		if d.State == contract.DeviceQuarantined {
			e.armQuarantineLocked(tx, d)
		}
	}
	tx.Event(contract.EvClockJumped, map[string]any{"skewMs": ms, "at": at, "leases": len(ids), "devices": len(devs)})
}
