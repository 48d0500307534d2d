package gateway

import "slices"

// earlyMax bounds the ends a worker relayed of leases the gateway had not
// indexed that are remembered per worker (earlyEnds): the gateway judges a
// grant within relayWait of its answer, and a worker relays no more than
// its relay rate's burst in that time; the oldest goes first.
const earlyMax = 256

// earlyEnds remembers, per worker, the latest leases whose end (expired,
// released) the worker relayed while the gateway held no lease of that id
// there: most are the worker's own, but one may be a lease the worker
// granted the gateway whose answer is still to be judged (the answer is
// read by the dispatch's goroutine, the event relayed by the link's, and
// the end may be told first). Judged after its end, such a grant would be
// indexed as a lease that lives on, and hold its device in routing until
// a snapshot ends it; instead its request goes back in line (grant). The
// queue's decision lock guards it.
type earlyEnds struct {
	byWorker map[string]*earlyRing
}

// earlyRing is one worker's remembered ends, the oldest first in order.
type earlyRing struct {
	ids   map[string]struct{}
	order []string
}

// note remembers that workerID ended workerLeaseID before the gateway held
// it.
func (e *earlyEnds) note(workerID, workerLeaseID string) {
	if e.byWorker == nil {
		e.byWorker = map[string]*earlyRing{}
	}
	r := e.byWorker[workerID]
	if r == nil {
		r = &earlyRing{ids: map[string]struct{}{}}
		e.byWorker[workerID] = r
	}
	if _, ok := r.ids[workerLeaseID]; ok {
		return
	}
	if len(r.order) >= earlyMax {
		delete(r.ids, r.order[0])
		r.order = slices.Delete(r.order, 0, 1)
	}
	r.ids[workerLeaseID] = struct{}{}
	r.order = append(r.order, workerLeaseID)
}

// take reports whether workerID ended workerLeaseID before the gateway
// held it, and forgets it.
func (e *earlyEnds) take(workerID, workerLeaseID string) bool {
	r := e.byWorker[workerID]
	if r == nil {
		return false
	}
	if _, ok := r.ids[workerLeaseID]; !ok {
		return false
	}
	delete(r.ids, workerLeaseID)
	if i := slices.Index(r.order, workerLeaseID); i >= 0 {
		r.order = slices.Delete(r.order, i, i+1)
	}
	return true
}

// forget drops what is remembered of workerID (the gateway forgot it).
func (e *earlyEnds) forget(workerID string) { delete(e.byWorker, workerID) }
