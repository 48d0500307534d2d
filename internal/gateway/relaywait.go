package gateway

import (
	"context"
	"time"
)

// relayWait bounds how long the gateway waits, before it judges a
// worker's grant, for the events the worker committed before it to be
// relayed and told to the leasing (awaitRelayed). They are on the uplink
// ahead of the grant's answer, so the wait is the relay's own work; past
// it the grant is judged on what the gateway knows, as before (a double
// grant is still refused then).
const relayWait = time.Second

// awaitRelayed waits until the events worker id committed up to seq, on
// its uplink number link, have been relayed and told to the leasing
// (Fleet.relay's onEvent), or until that link ends or ctx does. It reports
// whether they have been.
//
// A worker pushes its events in seq order on its uplink before the answer
// to a call it commits them in: a grant's answer (contract.LeaseGrant's
// EventSeq) may overtake, in the gateway, a lease.expired the worker
// committed before it, because the answer is read by the dispatch's
// goroutine and the event relayed by the link's. Judged before that
// event is told, the grant of a device freed a moment ago would be taken
// for a second grant of it.
func (f *Fleet) awaitRelayed(ctx context.Context, id string, link int, seq int64) bool {
	for {
		f.mu.Lock()
		w, ok := f.workers[id]
		if !ok || w.gen != link || w.link == nil {
			f.mu.Unlock()
			return false
		}
		if w.toldSeq >= seq {
			f.mu.Unlock()
			return true
		}
		if w.told == nil {
			w.told = make(chan struct{})
		}
		moved, awaiting := w.told, f.awaiting
		f.mu.Unlock()
		if awaiting != nil {
			awaiting(id)
		}
		select {
		case <-moved:
		case <-ctx.Done():
			return false
		}
	}
}

// toldUpTo records that w's events up to seq have been relayed and told
// to the leasing, and wakes those waiting for them: the relay's cursor
// (worker.lastSeq), once what it moved over is told. f.mu must be held.
func (w *worker) toldUpTo(seq int64) {
	w.toldSeq = seq
	w.wakeTold()
}

// wakeTold wakes those waiting for w's events to be told (awaitRelayed),
// to look again: at a new seq, or at a link that ended. f.mu must be held.
func (w *worker) wakeTold() {
	if w.told != nil {
		close(w.told)
		w.told = nil
	}
}
