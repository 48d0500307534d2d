package queue

import (
	"time"

	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/ids"
)

// Txn is one decision in the making. Its changes are in memory at once;
// its records and events commit together when the decision ends, and what
// it tells (After, settlements, progress) is told only after that commit.
// A Txn is valid only inside the Do that made it.
type Txn struct {
	q       *Queue
	n       uint64      // its number (Queue.decisions), which waiters keep
	res     Reservation // the store's write lock, when the store reserves
	events  []contract.Event
	written []*Waiter // records to write, each once
	stale   []contract.LeaseRequestRecord
	touched []*Waiter // revisions to bump after the commit
	tells   []func()
	settled []*Waiter // answered by this decision (after its commit)
	moved   []*Waiter // where the line changed: positions from here on
	hinted  []*Waiter // heads whose blocking stage changed
	// rescoped: a waiter's block reaches others than it did, so places
	// behind it change.
	rescoped bool
	kick     bool
	// created is the request this decision made (Submit), carry the one
	// it placed at once with a Start that carries, and carried the
	// decision whose writes it commits (Queue.carried).
	created, carry *Waiter
	carried        *carry
}

// done lets go of what the decision held once it is over: whoever keeps
// the Txn after it (a Placer comparing passes) must not keep alive the
// store's transaction it committed in and the events and waiters it
// listed.
func (tx *Txn) done() {
	tx.res = nil
	tx.events, tx.written, tx.stale, tx.touched = nil, nil, nil, nil
	tx.tells, tx.settled, tx.moved, tx.hinted = nil, nil, nil, nil
	tx.created, tx.carry, tx.carried = nil, nil, nil
}

// Event adds an event to the decision; it is published after the commit.
func (tx *Txn) Event(name string, payload any) {
	tx.events = append(tx.events, contract.Event{
		ID: ids.New("evt_", ids.Short), Timestamp: time.Now().UnixMilli(), Event: name, Payload: marshal(payload),
	})
}

// After runs f once the decision has committed, still under the lock, in
// the order After was called. f must not block.
func (tx *Txn) After(f func()) { tx.tells = append(tx.tells, f) }

// Kick says the decision may have made room: the line is served before
// the commit.
func (tx *Txn) Kick() { tx.kick = true }

// Abandoned reports whether w no longer wants a grant: its requester went
// away, or it was settled meanwhile. A Start checks it before it grants.
func (tx *Txn) Abandoned(w *Waiter) bool { return w.abandoned || !tx.q.isOpen(w) }

func (q *Queue) isOpen(w *Waiter) bool { return q.open[w.rec.ID] == w }

func (tx *Txn) write(w *Waiter) {
	if w.writtenIn != tx.n {
		w.writtenIn = tx.n
		tx.written = append(tx.written, w)
	}
	tx.touch(w)
}

func (tx *Txn) touch(w *Waiter) {
	if w.touchedIn != tx.n {
		w.touchedIn = tx.n
		tx.touched = append(tx.touched, w)
	}
}

// Grant settles w as granted with g, in this decision. The placer writes
// the lease (and its lease.granted event) in the same Txn.
func (tx *Txn) Grant(w *Waiter, g contract.LeaseGrant) {
	q := tx.q
	if !q.isOpen(w) {
		q.log.Error("grant of a request that is not open", "requestId", w.rec.ID)
		return
	}
	q.forgetLocked(w)
	w.rec.State, w.rec.Stage, w.rec.QueuePosition = contract.RequestGranted, "", 0
	w.rec.SettledAt, w.rec.LeaseID, w.rec.Grant = g.Lease.GrantedAt, g.Lease.ID, &g
	tx.write(w)
	tx.settled = append(tx.settled, w)
	tx.tells = append(tx.tells, func() {
		// Told after the commit: the decision's events have their seqs,
		// and the grant says which a status must reach to show it.
		told := g
		told.EventSeq = q.eventSeq
		w.grant = &told
		w.answer(nil)
	})
}

// Settle ends w with an error, in this decision: failed, or cancelled when
// the code is CANCELLED, with a lease.rejected event giving reason. A
// request already settled is left as it is.
func (tx *Txn) Settle(w *Waiter, cerr *contract.Error, reason contract.RejectReason) {
	q := tx.q
	if !q.isOpen(w) {
		return
	}
	q.forgetLocked(w)
	state := contract.RequestFailed
	if cerr.Code == contract.CodeCancelled {
		state = contract.RequestCancelled
	}
	w.rec.State, w.rec.Stage, w.rec.QueuePosition = state, "", 0
	w.rec.SettledAt, w.rec.Error = time.Now().UnixMilli(), cerr
	tx.write(w)
	tx.rejected(w.rec, reason)
	tx.settled = append(tx.settled, w)
	tx.tells = append(tx.tells, func() { w.answer(cerr) })
}

func (tx *Txn) rejected(rec contract.LeaseRequestRecord, reason contract.RejectReason) {
	tx.Event(contract.EvLeaseRejected, map[string]any{
		"requestId": rec.ID, "requester": rec.RequesterID, "requestSpec": rec.Spec, "reason": reason,
		"code": rec.Error.Code,
	})
}

// SettleStale settles a request a previous run left open: its requester's
// connection is gone with that run. The daemon's start does this for every
// open record it loads, with the reason its mode gives it
// (daemon-restarted on a worker, gateway-restarted on a gateway).
func (tx *Txn) SettleStale(rec contract.LeaseRequestRecord, reason contract.RejectReason) {
	rec.State, rec.Stage, rec.QueuePosition = contract.RequestFailed, "", 0
	rec.SettledAt = time.Now().UnixMilli()
	rec.Error = contract.Errorf(contract.CodeDaemonStopping, "the daemon stopped while this request was open").
		With("reason", reason)
	tx.stale = append(tx.stale, rec)
	tx.rejected(rec, reason)
}

// Requeue puts a placed waiter back in line, at the place its arrival gives
// it, when the room its Start was to get could not be made. Its deadline
// stays: past it, it fails with QUEUE_TIMEOUT at once. A waiter whose
// requester went away is cancelled instead; while the queue stops, it is
// answered DAEMON_STOPPING with its record left open.
func (tx *Txn) Requeue(w *Waiter) {
	q := tx.q
	if !q.isOpen(w) {
		return
	}
	if w.abandoned {
		tx.Settle(w, contract.Errorf(contract.CodeCancelled, "the requester went away"), contract.RejectCancelled)
		return
	}
	if q.stopping {
		tx.answerStopping(w)
		return
	}
	w.rec.State = contract.RequestQueued
	w.target = nil
	tx.write(w)
	tx.enqueue(w, true)
}

// Enqueue puts a parked request (its runtime downloaded) in line with need,
// as a newcomer: its timeout counts from now.
func (tx *Txn) Enqueue(w *Waiter, need Need) {
	q := tx.q
	if !q.isOpen(w) {
		return
	}
	if q.stopping {
		tx.answerStopping(w)
		return
	}
	w.need, w.platform = need, need.Platform()
	if cerr, reason := q.opts.Placer.Admit(w); cerr != nil {
		tx.Settle(w, cerr, reason)
		return
	}
	tx.enqueue(w, false)
}

func (tx *Txn) answerStopping(w *Waiter) {
	tx.q.forgetLocked(w)
	cerr := contract.Errorf(contract.CodeDaemonStopping, "the daemon is stopping")
	tx.settled = append(tx.settled, w)
	tx.tells = append(tx.tells, func() { w.answer(cerr) })
}

// enqueue puts w in line and serves; noWait and the deadline are decided
// here, for newcomers and returning waiters alike.
func (tx *Txn) enqueue(w *Waiter, again bool) {
	q := tx.q
	now := time.Now()
	if !again {
		q.seq++
		w.seq = q.seq
		if ms := w.rec.Policy.TimeoutMs; ms > 0 {
			w.deadline = now.Add(time.Duration(ms) * time.Millisecond)
		}
		// Stored with the record this decision writes: a queue that takes
		// over the line (Restore) puts it back in this place, with this
		// deadline.
		w.rec.Arrival = w.seq
		w.rec.DeadlineAt = 0
		if !w.deadline.IsZero() {
			w.rec.DeadlineAt = w.deadline.UnixMilli()
		}
		tx.write(w)
	} else if !w.deadline.IsZero() && !now.Before(w.deadline) {
		tx.Settle(w, timeoutError(w), contract.RejectTimeout)
		return
	}
	q.line.insert(w)
	w.pl = q.lineOf(w.platform)
	w.pl.insert(w)
	w.key = needKeyOf(w.need)
	w.nl = q.needLineOf(w)
	w.nl.insert(w)
	w.phase = phaseInLine
	w.rec.State = contract.RequestQueued
	tx.moved = append(tx.moved, w)
	tx.touch(w)
	q.serveJoinedLocked(tx, w, again)
	if w.phase != phaseInLine {
		return // placed at once
	}
	if w.rec.Policy.NoWait {
		tx.Settle(w, contract.Errorf(contract.CodeNoCapacity, "no %s device is free and capacity is full", w.platform).
			With("platform", w.platform), contract.RejectNoWait)
		return
	}
	if !again {
		tx.Event(contract.EvLeaseQueued, map[string]any{"requestId": w.rec.ID, "queuePosition": q.positionLocked(w)})
	}
	if !w.deadline.IsZero() {
		tx.After(func() { q.armLocked(w) })
	}
}

// positionLocked counts w's place in line from the front.
func (q *Queue) positionLocked(w *Waiter) int {
	if w == q.line.tail {
		return q.line.n
	}
	n := 1
	for p := w.line.prev; p != nil; p = p.line.prev {
		n++
	}
	return n
}

func timeoutError(w *Waiter) *contract.Error {
	return contract.Errorf(contract.CodeQueueTimeout, "no device was free within %s",
		time.Duration(w.rec.Policy.TimeoutMs)*time.Millisecond).With("requestId", w.rec.ID)
}

// armLocked sets w's timer for what is left of its deadline.
func (q *Queue) armLocked(w *Waiter) {
	if w.timer != nil {
		w.timer.Stop()
	}
	if w.phase != phaseInLine {
		return
	}
	w.timer = time.AfterFunc(time.Until(w.deadline), func() {
		_ = q.Do(func(tx *Txn) error {
			if w.phase == phaseInLine && !time.Now().Before(w.deadline) {
				tx.Settle(w, timeoutError(w), contract.RejectTimeout)
			}
			return nil
		})
	})
}

// started moves w out of the line to be started as placed.
func (tx *Txn) started(w *Waiter, s Start) {
	q := tx.q
	q.leaveLineLocked(w)
	if w.timer != nil {
		w.timer.Stop()
	}
	w.phase = phaseStarting
	w.hinted = nil
	w.rec.State, w.rec.QueuePosition = contract.RequestStarting, 0
	w.target, w.deviceID = s.Target, s.DeviceID
	w.last, w.rec.Stage = s.Progress, s.Progress.Stage
	tx.write(w)
	if s.Early {
		if s.Carry && s.Quiet && w == tx.created && !w.detached {
			tx.carry = w
		}
		q.opts.Go(s.Run)
	}
	if s.Quiet && s.Early {
		return // nothing to tell
	}
	tx.tells = append(tx.tells, func() {
		if !s.Quiet {
			w.push(s.Progress)
		}
		if !s.Early {
			q.opts.Go(s.Run)
		}
	})
}

// hint records the stage a blocked head waits on (nil: its place).
func (tx *Txn) hint(w *Waiter, stage *contract.LeaseProgress) {
	same := (stage == nil && w.hinted == nil) || (stage != nil && w.hinted != nil && stage.Same(*w.hinted))
	if same {
		return
	}
	w.hinted = stage
	tx.hinted = append(tx.hinted, w)
}

// CancelAll ends every open request with cerr (reason for lease.rejected)
// in this decision. A request whose Start runs is abandoned (its Start
// keeps what it readied and grants nothing); with settleStarting it is
// settled now as well. It returns the ids, oldest first.
func (tx *Txn) CancelAll(cerr *contract.Error, reason contract.RejectReason, settleStarting bool) []string {
	q := tx.q
	ids := []string{}
	for w := q.all.head; w != nil; {
		next := w.all.next
		switch w.phase {
		case phaseStarting:
			w.abandoned = true
			if settleStarting {
				tx.Settle(w, cerr, reason)
			}
		default:
			tx.Settle(w, cerr, reason)
		}
		ids = append(ids, w.rec.ID)
		w = next
	}
	return ids
}

// Progress tells w's requesters a step of its Start or download, unless it
// is what they last heard or w has settled. It is not a decision: nothing
// is stored but the record's stage in memory.
func (q *Queue) Progress(w *Waiter, p contract.LeaseProgress) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.broken != nil || !q.isOpen(w) || p.Same(w.last) {
		return
	}
	if w.unsaved {
		// Told once its record has committed (Start.Carry), which a
		// decision of its own does now: a Start that pushes progress
		// (a boot, a download) may run for minutes, and its requester
		// is not kept waiting for whatever decision comes next.
		w.last, w.rec.Stage = p, p.Stage
		if c := q.carried; c != nil && c.w == w && !c.told {
			c.told = true
			go func() { _ = q.Do(func(*Txn) error { return nil }) }()
		}
		return
	}
	w.push(p)
	w.bump(q)
}
