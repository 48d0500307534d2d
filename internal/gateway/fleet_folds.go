package gateway

import "github.com/simlock/simlock/internal/contract"

// foldRelayedLocked folds into w's view the events just relayed from it
// (foldEvent), and reports whether its status must be read: an event
// changed what the view shows in a way it could not take, or more were
// folded since the last read than it keeps. A worker whose status says no
// eventSeq, or whose status was not read yet on this link, is not folded:
// every event that changes its status asks for a read, as it always did.
// An event the last read applied already shows changes nothing. f.mu must
// be held.
func (f *Fleet) foldRelayedLocked(w *worker, evs []contract.Event) (read bool) {
	changed := false
	for _, ev := range evs {
		if w.statusSeq == 0 {
			read = read || refreshOn(ev.Event)
			continue
		}
		if ev.Seq <= w.statusSeq {
			// The read applied shows it: nothing to fold. A change the
			// view takes by finding what it names (a lease, a device) is
			// in it already, so its fold would not find it as named: no
			// read for that, or each read's own older events would ask
			// for the next. Another one the view could not take (folded
			// on a copy, which a fold never writes through) still has the
			// status read, as it always had.
			if !namesWhatTheViewHolds(ev.Event) {
				scratch := w.view
				read = read || foldEvent(&scratch, ev) == foldNeedsRead
			}
			continue
		}
		switch foldEvent(&w.view, ev) {
		case foldNeedsRead:
			read = true
		case foldChanged:
			changed = true
			if !w.reading {
				break // the next read is asked for after it: it shows it
			}
			if len(w.folds) >= maxFolds {
				w.folds, read = nil, true
			}
			w.folds = append(w.folds, ev)
		}
	}
	if changed {
		w.counts = countView(w.view.Devices, w.view.Leases)
		w.viewGen++
		f.reindex(w)
		if w.view.Connection == contract.WorkerConnected {
			// A kick of the line, with nothing to reconcile: the leasing
			// learns the leases from the same events (onEvent).
			f.notifyLater(w, statusRead{link: w.gen})
		}
	}
	return read
}

// readAgainLocked asks w's link to read its status again at once
// (coalesced with a read already asked for). f.mu must be held.
func (f *Fleet) readAgainLocked(w *worker) {
	if w.refreshNow == nil {
		return
	}
	select {
	case w.refreshNow <- struct{}{}:
	default:
	}
}

// namesWhatTheViewHolds reports whether an event's fold finds, in the
// view, the lease or device it names, as the worker had it before the
// event.
func namesWhatTheViewHolds(name string) bool {
	switch name {
	case contract.EvLeaseGranted, contract.EvLeaseRenewed, contract.EvLeaseReleased, contract.EvLeaseExpired,
		contract.EvDeviceReclaimed, contract.EvLeaseRejected:
		return true
	}
	return false
}
