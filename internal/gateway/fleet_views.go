package gateway

import (
	"slices"

	"github.com/simlock/simlock/internal/client"
	"github.com/simlock/simlock/internal/contract"
)

// setChanged and setOnEvent install the leasing's hooks; set before any
// uplink is served.
func (f *Fleet) setChanged(fn func(workerID string, r statusRead, connected bool)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.changed = fn
}

func (f *Fleet) setOnEvent(fn func(workerID string, ev contract.Event)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.onEvent = fn
}

func (f *Fleet) setRemoved(fn func(workerID string)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.removed = fn
}

// forgotten tells the leasing the gateway forgot a worker.
func (f *Fleet) forgotten(id string) {
	f.mu.Lock()
	fn := f.removed
	f.mu.Unlock()
	if fn != nil {
		fn(id)
	}
}

// notify tells the leasing a view changed.
func (f *Fleet) notify(id string, r statusRead, connected bool) {
	f.mu.Lock()
	fn := f.changed
	f.mu.Unlock()
	if fn != nil {
		fn(id, r, connected)
	}
}

// statusRead is a worker's leases as a status read at view generation gen
// reported them: read on the worker's link number link (Fleet's worker.gen,
// which counts its uplinks), reflecting its event log up to seq (0: the
// worker does not say).
type statusRead struct {
	leases []contract.LeaseRecord
	gen    uint64
	seq    int64
	link   int
}

// notifyLater tells the leasing of a status read of connected worker w,
// from under the fleet's lock (the leasing takes its own lock first, then
// the fleet's): in a goroutine, one per worker at a time, which tells the
// reads in order and, of those made while it was telling one, only the
// newest. A leasing slow to decide (its store locked by another process)
// then holds one pending read per worker, however often the worker is
// read; and a newer read says all an older one would have. A change with
// no read (gen 0: a view kept from events) only kicks the line, which a
// pending read does too: it does not replace the read, whose leases are
// still to be reconciled.
func (f *Fleet) notifyLater(w *worker, r statusRead) {
	if f.changed == nil {
		return
	}
	if r.gen > 0 || w.pending == nil {
		w.pending = &r
	}
	if w.telling {
		return
	}
	w.telling = true
	fn, id := f.changed, w.view.ID
	go func() {
		for {
			f.mu.Lock()
			r := w.pending
			w.pending = nil
			if r == nil {
				w.telling = false
				f.mu.Unlock()
				return
			}
			f.mu.Unlock()
			fn(id, *r, true)
		}
	}()
}

// reindex takes w's view, as it is now, into the routing index: called
// wherever the view changes in what routing reads. f.mu must be held.
func (f *Fleet) reindex(w *worker) {
	f.routes.put(&w.view)
}

// decide runs fn over the routing index, the views as they are now, under
// the fleet's lock: fn must not call the Fleet.
func (f *Fleet) decide(fn func(ix *routeIndex)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fn(f.routes)
}

// assess is the fast-fail table for a over the known workers.
func (f *Fleet) assess(a Ask) *contract.Error {
	var cerr *contract.Error
	f.decide(func(ix *routeIndex) { cerr = ix.assess(a) })
	return cerr
}

// views copies the views of every worker.
func (f *Fleet) views() []*contract.WorkerView {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]*contract.WorkerView, 0, len(f.workers))
	for _, w := range f.workers {
		v := w.view
		out = append(out, &v)
	}
	return out
}

// session is clientOf with the number of the link it runs over (which
// counts the worker's uplinks): what a call over it answers was decided
// before any status read over a later link.
func (f *Fleet) session(id string) (*client.Client, int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if w, ok := f.workers[id]; ok && w.view.Connection == contract.WorkerConnected {
		return w.client, w.gen
	}
	return nil, 0
}

// viewLists reports whether workerID's view lists the lease the worker
// names by key (a read or a fold took its grant).
func (f *Fleet) viewLists(workerID, key string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	w, ok := f.workers[workerID]
	return ok && leaseAt(w.view.Leases, key) >= 0
}

// generation is how many times a worker's view has changed.
func (f *Fleet) generation(id string) uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.generationLocked(id)
}

// generationLocked is generation with f.mu held (in decide).
func (f *Fleet) generationLocked(id string) uint64 {
	if w, ok := f.workers[id]; ok {
		return w.viewGen
	}
	return 0
}

// printOf is the fingerprint of what routing reads of a worker's view
// (viewPrint); false for a worker the gateway does not know.
func (f *Fleet) printOf(id string) (uint64, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	w, ok := f.workers[id]
	if !ok {
		return 0, false
	}
	return viewPrint(&w.view), true
}

// clientOf is the session to a connected worker, or nil.
func (f *Fleet) clientOf(id string) *client.Client {
	f.mu.Lock()
	defer f.mu.Unlock()
	if w, ok := f.workers[id]; ok && w.view.Connection == contract.WorkerConnected {
		return w.client
	}
	return nil
}

// refresh asks the link of a worker to read its status again now.
func (f *Fleet) refresh(id string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if w, ok := f.workers[id]; ok {
		f.readAgainLocked(w)
	}
}

// refreshCatalog asks the link of a worker to read its catalog, and the
// rest of its view, again now.
func (f *Fleet) refreshCatalog(id string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if w, ok := f.workers[id]; ok && w.recatalog != nil {
		select {
		case w.recatalog <- struct{}{}:
		default:
		}
	}
}

func tag(ds []contract.Device, id string) []contract.Device {
	out := slices.Clone(ds)
	for i := range out {
		out[i].WorkerID = id
	}
	return out
}

func tagLeases(ls []contract.LeaseRecord, id string) []contract.LeaseRecord {
	out := slices.Clone(ls)
	for i := range out {
		out[i].WorkerID = id
	}
	return out
}

func tagWaiting(ws []contract.WaitingRequest, id string) []contract.WaitingRequest {
	out := slices.Clone(ws)
	for i := range out {
		out[i].WorkerID = id
	}
	return out
}
