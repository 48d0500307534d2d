package leasing

import (
	"context"

	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/core"
	"github.com/simlock/simlock/internal/ids"
	"github.com/simlock/simlock/internal/queue"
	"github.com/simlock/simlock/internal/store"
)

// pendingWrites are the device and lease rows the decision in progress
// changed, each once, last version wins; the queue's commit takes them with
// its own records and events (see engineStore). For rows that were stored
// before the decision it keeps the stored version too, so the store writes
// only the columns that changed.
type pendingWrites struct {
	devices []store.Device
	leases  []store.Lease
	clock   *store.Clock
	devAt   map[string]int
	leaseAt map[string]int
	before  store.Before
}

// device adds d's new version; stored is its version before the decision
// when it is stored, nil for a device the decision creates. Only the first
// call for a device in a decision says what is stored.
func (p *pendingWrites) device(d store.Device, stored *store.Device) {
	if p.devAt == nil {
		p.devAt, p.leaseAt = map[string]int{}, map[string]int{}
		p.before = store.Before{Devices: map[string]store.Device{}, Leases: map[string]store.Lease{}}
	}
	if i, ok := p.devAt[d.ID]; ok {
		p.devices[i] = d
		return
	}
	p.devAt[d.ID] = len(p.devices)
	p.devices = append(p.devices, d)
	if stored != nil {
		p.before.Devices[d.ID] = *stored
	}
}

// lease is device for leases.
func (p *pendingWrites) lease(l store.Lease, stored *store.Lease) {
	if p.devAt == nil {
		p.devAt, p.leaseAt = map[string]int{}, map[string]int{}
		p.before = store.Before{Devices: map[string]store.Device{}, Leases: map[string]store.Lease{}}
	}
	key := l.UniqueKey()
	if i, ok := p.leaseAt[key]; ok {
		p.leases[i] = l
		return
	}
	p.leaseAt[key] = len(p.leases)
	p.leases = append(p.leases, l)
	if stored != nil {
		p.before.Leases[key] = *stored
	}
}

// take hands over what is pending and starts afresh.
func (p *pendingWrites) take() store.Change {
	c := store.Change{Devices: p.devices, Leases: p.leases, Clock: p.clock, Before: p.before}
	p.devices, p.leases, p.clock = nil, nil, nil
	clear(p.devAt)
	clear(p.leaseAt)
	p.before = store.Before{Devices: map[string]store.Device{}, Leases: map[string]store.Lease{}}
	return c
}

// engineStore is the queue's Store: one commit holds the queue's records
// and events and the engine's device and lease rows. It runs under the
// decision lock, like everything that fills pending.
type engineStore struct{ e *Engine }

func (s engineStore) Commit(ctx context.Context, w queue.Writes) ([]contract.Event, error) {
	c := s.e.change(w)
	if c.Empty() {
		return nil, nil
	}
	return s.e.opts.Store.Commit(ctx, c)
}

// Reserve takes the store's write lock ahead of a decision when the store
// can (store.Reserver: SQLite); with one that cannot, there is nothing to
// take, and the decision commits as it ends.
func (s engineStore) Reserve(ctx context.Context) (queue.Reservation, error) {
	r, ok := s.e.opts.Store.(store.Reserver)
	if !ok {
		return nil, nil
	}
	res, err := r.Reserve(ctx)
	if err != nil {
		return nil, err
	}
	return engineReservation{e: s.e, res: res}, nil
}

// engineReservation commits a decision under the store's reservation: the
// queue's records and events with the engine's rows, as engineStore does.
type engineReservation struct {
	e   *Engine
	res store.Reservation
}

func (r engineReservation) Commit(ctx context.Context, w queue.Writes) ([]contract.Event, error) {
	return r.res.Commit(ctx, r.e.change(w))
}

func (r engineReservation) Release() { r.res.Release() }

// change is one decision's Change: the rows pending in the engine with the
// queue's records and events.
func (e *Engine) change(w queue.Writes) store.Change {
	c := e.pending.take()
	c.Requests = w.Requests
	c.Events = make([]store.NewEvent, len(w.Events))
	for i, ev := range w.Events {
		c.Events[i] = store.NewEvent{ID: ev.ID, Timestamp: ev.Timestamp, Event: ev.Event, Payload: ev.Payload}
	}
	return c
}

func (s engineStore) RequestByKey(ctx context.Context, requesterID, key string) (contract.LeaseRequestRecord, bool, error) {
	return s.e.opts.Store.RequestByKey(ctx, requesterID, key)
}

func (s engineStore) Request(ctx context.Context, id string) (contract.LeaseRequestRecord, bool, error) {
	return s.e.opts.Store.Request(ctx, id)
}

// changeDevice changes d's record through f, in tx: the registry's counts
// and indexes follow, the row is written with the decision, and the line is
// served before the commit (the change may have made room). A move the
// device state machine forbids is a bug in the engine and panics.
func (e *Engine) changeDevice(tx *queue.Txn, d *dev, f func(d *store.Device)) {
	from, stored := d.State, d.Device
	e.reg.update(d, func(d *dev) {
		f(&d.Device)
		if d.State != from {
			d.StateSince = e.now()
		}
	})
	if err := core.CheckTransition(d.ID, from, d.State); err != nil {
		panic(err)
	}
	if d.State != from {
		e.armStallLocked(tx, d)
	}
	// A device the decision made is pending already, as new: the first
	// version pending in a decision is what the store holds.
	e.pending.device(d.Device, &stored)
	tx.Kick()
}

// setState moves d to state to, in tx.
func (e *Engine) setState(tx *queue.Txn, d *dev, to contract.DeviceState) {
	e.changeDevice(tx, d, func(r *store.Device) { r.State = to })
}

// newDevice records a device about to be created, in tx.
func (e *Engine) newDevice(tx *queue.Txn, spec contract.DeviceSpec, c claim) *dev {
	t := e.now()
	d := e.reg.add(store.Device{
		ID: ids.New("dev_", ids.Short), Platform: spec.Platform, Model: spec.Model, OSVersion: spec.OSVersion, ImageTag: spec.ImageTag, Mode: spec.Mode,
		Driver: e.opts.Drivers[spec.Platform].Name(), State: contract.DeviceProvisioning,
		CreatedAt: t, StateSince: t, LastUsedAt: t,
	})
	e.setClaim(tx, d, c)
	e.pending.device(d.Device, nil)
	e.armStallLocked(tx, d)
	return d
}

// setClaim marks (or, with claimNone, ends) driver work on d. Claims are not
// stored, but they count against capacity, so they change only in a
// decision.
func (e *Engine) setClaim(tx *queue.Txn, d *dev, c claim) {
	if d.at == nil {
		return // deleted meanwhile
	}
	e.reg.update(d, func(d *dev) { d.claim = c })
	tx.Kick()
}

// setStuck marks d as never to be chosen to make room again.
func (e *Engine) setStuck(d *dev, stuck bool) {
	if d.at == nil {
		return
	}
	e.reg.update(d, func(d *dev) { d.stuck = stuck })
}

// addLeaseLocked registers an active lease.
func (e *Engine) addLeaseLocked(rec store.Lease) *lease {
	l := &lease{Lease: rec, due: -1, expiry: e.monoAt(rec.TTLDeadline)}
	key := l.UniqueKey()
	e.leases[key] = l
	e.byRequester[l.RequesterID] = l
	if l.IDChosenByRequester {
		e.nameLocked(l)
	}
	e.fileBound(l)
	after := e.leaseOrder.Back()
	for after != nil {
		a := after.Value.(*lease)
		if a.GrantedAt < l.GrantedAt || (a.GrantedAt == l.GrantedAt && a.UniqueKey() < key) {
			break
		}
		after = after.Prev()
	}
	if after == nil {
		l.at = e.leaseOrder.PushFront(l)
	} else {
		l.at = e.leaseOrder.InsertAfter(l, after)
	}
	if d, ok := e.reg.get(l.DeviceID); ok {
		e.reg.update(d, func(d *dev) { d.lease, d.leaseID = key, l.ID })
		e.dueAdd(l, d.Platform)
	}
	return l
}

// nameLocked files a lease by the id its owner chose: unique within the
// owner, and what findLocked resolves first.
func (e *Engine) nameLocked(l *lease) {
	owners := e.chosen[l.ID]
	if owners == nil {
		owners = map[string]*lease{}
		e.chosen[l.ID] = owners
	}
	owners[l.OwnerID] = l
}

// unnameLocked forgets what nameLocked filed.
func (e *Engine) unnameLocked(l *lease) {
	if owners := e.chosen[l.ID]; owners[l.OwnerID] == l {
		delete(owners, l.OwnerID)
		if len(owners) == 0 {
			delete(e.chosen, l.ID)
		}
	}
}

// putLease writes a lease in tx: a new one is registered, an ended one
// forgotten, with its device's link to it.
func (e *Engine) putLease(tx *queue.Txn, rec store.Lease) {
	key := rec.UniqueKey()
	l, ok := e.leases[key]
	var was *store.Lease
	if ok {
		stored := l.Lease
		was = &stored
	}
	e.pending.lease(rec, was)
	switch {
	case !ok && rec.EndedAt == 0:
		e.addLeaseLocked(rec)
		tx.Kick()
	case ok && rec.EndedAt != 0:
		if l.timer != nil {
			l.timer.Stop()
		}
		delete(e.leases, key)
		delete(e.bound, key)
		if e.byRequester[rec.RequesterID] == l {
			delete(e.byRequester, rec.RequesterID)
		}
		e.unnameLocked(l)
		e.leaseOrder.Remove(l.at)
		e.dueRemove(l)
		if d, ok := e.reg.get(rec.DeviceID); ok && d.lease == key {
			e.reg.update(d, func(d *dev) { d.lease, d.leaseID = "", "" })
		}
		tx.Kick()
	case ok:
		l.Lease, l.view = rec, nil
		e.fileBound(l)
		if e.dueMoved(l) {
			tx.Kick() // the first in line may be told of another lease
		}
	}
}
