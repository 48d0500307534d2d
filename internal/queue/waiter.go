package queue

import (
	"time"

	"github.com/simlock/simlock/internal/contract"
)

// phase is where an open request is.
type phase uint8

const (
	phaseOut      phase = iota // between places, inside one decision
	phaseParked                // stored, outside the line (a runtime download)
	phaseInLine                // waiting in line
	phaseStarting              // placed: its Start runs
	phaseSettled               // answered; nothing changes any more
)

// Waiter is an open lease request and the requesters waiting on it. The
// queue owns it; a Placer reads it through its methods, under the lock.
type Waiter struct {
	rec      contract.LeaseRequestRecord
	need     Need
	platform contract.Platform
	phase    phase
	seq      uint64 // arrival number, given when it first joins the line
	pos      int    // place in line, from 1, while in line
	// scope is how far its wait reached when it was last asked and had to
	// wait (ScopeNone before then): whom it holds, so whose place it adds
	// to (reportPositionsLocked).
	scope Scope
	// deadline is when its timeoutMs runs out (zero: never), fixed when it
	// first joins the line.
	deadline time.Time
	timer    *time.Timer
	// abandoned: its requester went away while its device was started.
	abandoned bool
	// unsaved: its record waits for the next decision's commit
	// (Start.Carry); nobody is shown it meanwhile.
	unsaved bool
	// detached requests were made as a resource: they wait whether or not
	// anyone follows them.
	detached  bool
	interests []*Ticket
	last      contract.LeaseProgress // last progress told
	hinted    *contract.LeaseProgress
	target    *contract.DeviceSpec
	deviceID  string // the device being readied, once started
	rev       uint64
	changed   chan struct{}
	done      chan struct{}
	grant     *contract.LeaseGrant
	err       *contract.Error
	replayed  bool
	// the numbers of the decisions that last wrote and touched it
	// (Txn.n), so each is written and woken once per decision: numbers,
	// not the decisions themselves, which a long line would keep alive.
	writtenIn, touchedIn uint64

	all, line, plat, kind links
	// key is its class of need (needKeyOf), set as it joins the line.
	key string
	// pl and nl are its platform's line and its class of need's, while it
	// is in line.
	pl *platformLine
	nl *needLine
}

// ID is the request's id.
func (w *Waiter) ID() string { return w.rec.ID }

// Spec is what the request asked for.
func (w *Waiter) Spec() contract.RequestSpec { return w.rec.Spec }

// Requester is who the lease will be for.
func (w *Waiter) Requester() string { return w.rec.RequesterID }

// Owner is the principal the lease will belong to.
func (w *Waiter) Owner() string { return w.rec.OwnerID }

// ChosenLeaseID is the id the requester chose for its lease ("" for one
// the daemon makes).
func (w *Waiter) ChosenLeaseID() string { return w.rec.ChosenLeaseID }

// CreatedAt is when the request was made (epoch ms).
func (w *Waiter) CreatedAt() int64 { return w.rec.CreatedAt }

// TTLMs is the lease's lifetime once granted.
func (w *Waiter) TTLMs() int64 { return w.rec.Policy.TTLMs }

// Need is what the owner resolved the request to.
func (w *Waiter) Need() Need { return w.need }

// Platform is the platform whose line the request joins.
func (w *Waiter) Platform() contract.Platform { return w.platform }

// answer ends every wait on w with cerr, whatever its record says.
func (w *Waiter) answer(cerr *contract.Error) {
	if w.phase == phaseSettled {
		return
	}
	w.phase = phaseSettled
	w.err = cerr
	close(w.done)
}

// bump marks a change a reader may be waiting for. The channel a reader
// waits on is made by the reader (changedLocked): most waiters are never
// followed that way, and a change to them allocates nothing.
func (w *Waiter) bump(q *Queue) {
	w.rev = q.nextRev()
	if w.changed != nil {
		close(w.changed)
		w.changed = nil
	}
}

// changedLocked is closed at w's next change. The decision lock must be
// held.
func (w *Waiter) changedLocked() <-chan struct{} {
	if w.changed == nil {
		w.changed = make(chan struct{})
	}
	return w.changed
}

// push tells every requester of w a step of its wait.
func (w *Waiter) push(p contract.LeaseProgress) {
	w.last = p
	w.rec.Stage = p.Stage
	for _, t := range w.interests {
		if t.progress != nil {
			t.progress(p)
		}
	}
}

// report tells a waiter in line where it is, if that changed: its place
// (with what it waits for, when its placer said), or the stage its placer
// said it waits on.
func (w *Waiter) report(q *Queue) {
	p := contract.LeaseProgress{Stage: contract.StageQueued, QueuePosition: w.pos}
	switch {
	case w.hinted == nil:
	case w.hinted.Stage == contract.StageQueued:
		p.Wait = w.hinted.Wait // what it waits for, at its own place
	default:
		p = *w.hinted
	}
	if !p.Same(w.last) {
		w.push(p)
		w.bump(q)
	}
}

// status is w as lease-request.get shows it.
func (w *Waiter) status() contract.LeaseRequestStatus {
	st := contract.LeaseRequestStatus{Request: w.rec, Rev: w.rev, Target: w.target}
	if w.last.Stage != "" {
		p := w.last
		st.Progress = &p
	}
	return st
}

// Ticket is one requester's interest in a request: several requesters
// share a request they made with the same idempotency key. Its methods are
// safe for concurrent use.
type Ticket struct {
	w        *Waiter
	progress func(contract.LeaseProgress)
}

// RequestID is the request's id.
func (t *Ticket) RequestID() string { return t.w.rec.ID }

// Done is closed when the request is answered.
func (t *Ticket) Done() <-chan struct{} { return t.w.done }

// Result is the answer once Done is closed: the grant, or the error.
func (t *Ticket) Result() (contract.LeaseGrant, *contract.Error) {
	<-t.w.done
	if t.w.err != nil {
		return contract.LeaseGrant{}, t.w.err
	}
	if t.w.grant == nil {
		return contract.LeaseGrant{}, contract.Errorf(contract.CodeCancelled, "request %s was %s", t.w.rec.ID, t.w.rec.State)
	}
	return *t.w.grant, nil
}

// links are a waiter's neighbours in one list.
type links struct{ prev, next *Waiter }

func allLinks(w *Waiter) *links  { return &w.all }
func lineLinks(w *Waiter) *links { return &w.line }
func platLinks(w *Waiter) *links { return &w.plat }
func needLinks(w *Waiter) *links { return &w.kind }

// list is an intrusive doubly linked list of waiters kept in arrival order.
type list struct {
	head, tail *Waiter
	n          int
	at         func(*Waiter) *links
}

// insert puts w in seq order: at the end for a newcomer, where its arrival
// puts it for one coming back. The walk starts from the end nearer in seq:
// one coming back was most often dispatched from near the head (a long
// line's head goes back after a bounce in a few steps, not past every
// later arrival).
func (l *list) insert(w *Waiter) {
	after := l.tail
	switch {
	case l.head == nil || w.seq > l.tail.seq:
	case w.seq < l.head.seq:
		after = nil
	case w.seq-l.head.seq < l.tail.seq-w.seq:
		after = nil
		for next := l.head; next != nil && next.seq < w.seq; next = l.at(next).next {
			after = next
		}
	}
	for after != nil && after.seq > w.seq {
		after = l.at(after).prev
	}
	lw := l.at(w)
	lw.prev = after
	if after == nil {
		lw.next = l.head
		l.head = w
	} else {
		lw.next = l.at(after).next
		l.at(after).next = w
	}
	if lw.next == nil {
		l.tail = w
	} else {
		l.at(lw.next).prev = w
	}
	l.n++
}

// pushBack puts w at the end.
func (l *list) pushBack(w *Waiter) {
	lw := l.at(w)
	lw.prev, lw.next = l.tail, nil
	if l.tail == nil {
		l.head = w
	} else {
		l.at(l.tail).next = w
	}
	l.tail = w
	l.n++
}

func (l *list) remove(w *Waiter) {
	lw := l.at(w)
	if lw.prev == nil {
		l.head = lw.next
	} else {
		l.at(lw.prev).next = lw.next
	}
	if lw.next == nil {
		l.tail = lw.prev
	} else {
		l.at(lw.next).prev = lw.prev
	}
	*lw = links{}
	l.n--
}
