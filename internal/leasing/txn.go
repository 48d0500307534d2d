package leasing

import (
	"context"
	"time"

	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/core"
	"github.com/simlock/simlock/internal/store"
)

// txn is one decision in the making. Its writes go to the engine's memory at
// once (so the rest of the decision reads them) and are undone if the store
// refuses the commit; memory and store never disagree after a decision.
type txn struct {
	e      *Engine
	change store.Change
	undo   []func()
}

func (e *Engine) begin() *txn { return &txn{e: e} }

func (t *txn) putDevice(d store.Device) {
	e := t.e
	old, had := e.devices[d.ID]
	t.undo = append(t.undo, func() {
		if had {
			e.devices[d.ID] = old
		} else {
			delete(e.devices, d.ID)
		}
	})
	if d.State == contract.DeviceDeleted {
		delete(e.devices, d.ID)
	} else {
		nd := d
		e.devices[d.ID] = &nd
	}
	t.change.Devices = append(t.change.Devices, d)
}

// setState moves a device, refusing moves the state machine forbids.
func (t *txn) setState(id string, to contract.DeviceState) store.Device {
	d := *t.e.devices[id]
	if err := core.CheckTransition(id, d.State, to); err != nil {
		panic(err) // a bug in the engine, not a runtime condition
	}
	if d.State != to {
		d.State = to
		d.StateSince = now()
	}
	t.putDevice(d)
	return d
}

func (t *txn) putLease(l store.Lease) {
	e := t.e
	old, had := e.leases[l.ID]
	oldDev, hadDev := e.byDevice[l.DeviceID]
	t.undo = append(t.undo, func() {
		if had {
			e.leases[l.ID] = old
		} else {
			delete(e.leases, l.ID)
		}
		if hadDev {
			e.byDevice[l.DeviceID] = oldDev
		} else {
			delete(e.byDevice, l.DeviceID)
		}
	})
	if l.EndedAt != 0 {
		delete(e.leases, l.ID)
		delete(e.byDevice, l.DeviceID)
	} else {
		nl := l
		e.leases[l.ID] = &nl
		e.byDevice[l.DeviceID] = l.ID
	}
	t.change.Leases = append(t.change.Leases, l)
}

func (t *txn) putRequest(r *request) {
	old := r.rec
	t.undo = append(t.undo, func() { r.rec = old })
	t.change.Requests = append(t.change.Requests, r.rec)
}

func (t *txn) event(name string, payload any) {
	t.change.Events = append(t.change.Events, store.NewEvent{
		ID: newID("evt_"), Timestamp: now(), Event: name, Payload: marshal(payload),
	})
}

// commitLocked adds the capacity and queue facts the decision changed, writes
// it, and publishes its events. On failure every write is undone.
func (e *Engine) commitLocked(t *txn) ([]contract.Event, error) {
	if c := e.capacityLocked(); c.key != e.lastCap {
		t.event("capacity.changed", c.report)
		defer func(key string) { e.lastCap = key }(c.key)
	}
	if depth := len(e.queue); depth != e.lastDepth {
		t.event("queue.changed", map[string]any{"depth": depth})
		defer func() { e.lastDepth = depth }()
	}
	if len(t.change.Devices)+len(t.change.Leases)+len(t.change.Requests)+len(t.change.Events) == 0 {
		return nil, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	evs, err := e.opts.Store.Commit(ctx, t.change)
	if err != nil {
		for i := len(t.undo) - 1; i >= 0; i-- {
			t.undo[i]()
		}
		e.lastCap = "" // recompute next time
		e.log.Error("commit failed", "err", err)
		return nil, contract.Errorf(contract.CodeInternal, "could not save state: %v", err)
	}
	e.opts.Publish(evs...)
	return evs, nil
}

type capSnapshot struct {
	key    string
	report contract.Capacity
}

func (e *Engine) usageLocked() core.Usage {
	slots := make([]core.Slot, 0, len(e.devices))
	for id, d := range e.devices {
		claim := e.claims[id]
		slots = append(slots, core.Slot{
			Platform:  d.Platform,
			State:     d.State,
			Reserved:  claim == "boot" || d.State == contract.DeviceProvisioning,
			Releasing: claim == "eviction" || claim == "destroy",
		})
	}
	return core.Measure(e.opts.Limits, slots)
}

func (e *Engine) capacityLocked() capSnapshot {
	warm := map[contract.Platform]int{}
	for id, d := range e.devices {
		if d.State == contract.DeviceReady && e.claims[id] == "" {
			warm[d.Platform]++
		}
	}
	rep := core.Report(e.opts.Limits, e.usageLocked(), warm)
	return capSnapshot{key: string(marshal(rep)), report: rep}
}

// Capacity reports current usage against limits.
func (e *Engine) Capacity() contract.Capacity {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.capacityLocked().report
}
