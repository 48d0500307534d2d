package gateway

import (
	"fmt"
	"reflect"
	"slices"
	"testing"

	"github.com/simlock/simlock/internal/contract"
)

// Whatever events a worker relays, folding each into its view either takes
// it or leaves the view as it was (foldNone, foldNeedsRead); it never
// writes into the slices a copy of the view shares; and the view it leaves
// is one the worker's status could have shown: it passes checkStatus, and
// its leases and devices still name each other (viewLinks), which routing
// relies on. Two events are folded in turn, so that one may build on what
// the other changed (a grant, then the end of that lease).
func FuzzFoldEvent(f *testing.F) {
	cases := foldEventCases()
	for i, c := range cases {
		next := cases[(i+1)%len(cases)].ev
		f.Add(c.ev.Event, []byte(c.ev.Payload), next.Event, []byte(next.Payload))
	}
	f.Fuzz(func(t *testing.T, name1 string, payload1 []byte, name2 string, payload2 []byte) {
		v := foldBase()
		if err := foldKeepsAStatus(v, contract.Event{ID: "evt_1", Seq: 1, Timestamp: 5000, Event: name1, Payload: payload1}); err != nil {
			t.Fatal(err)
		}
		foldEvent(&v, contract.Event{ID: "evt_1", Seq: 1, Timestamp: 5000, Event: name1, Payload: payload1})
		if err := foldKeepsAStatus(v, contract.Event{ID: "evt_2", Seq: 2, Timestamp: 9000, Event: name2, Payload: payload2}); err != nil {
			t.Fatal(err)
		}
	})
}

// foldKeepsAStatus folds ev into a copy of v and says how the fold broke
// FuzzFoldEvent's promises, if it did. An event the relay refuses
// (checkEvent) is never folded, and passes.
func foldKeepsAStatus(v contract.WorkerView, ev contract.Event) error {
	if checkEvent(ev) != nil {
		return nil
	}
	if err := checkStatus(statusWithCapacity(v)); err != nil {
		return fmt.Errorf("the view folded into is not one a status shows: %v", err)
	}
	if err := viewLinks(v); err != nil {
		return fmt.Errorf("the view folded into: %v", err)
	}
	before := deepCopyView(v)
	shared := v
	got := foldEvent(&v, ev)
	if !reflect.DeepEqual(shared, before) {
		return fmt.Errorf("folding %s %s wrote into slices a copy of the view shares", ev.Event, ev.Payload)
	}
	if got != foldChanged && !reflect.DeepEqual(v, before) {
		return fmt.Errorf("folding %s %s = %d changed the view", ev.Event, ev.Payload, got)
	}
	if err := checkStatus(statusWithCapacity(v)); err != nil {
		return fmt.Errorf("folding %s %s left a view no status could show: %v", ev.Event, ev.Payload, err)
	}
	if err := viewLinks(v); err != nil {
		return fmt.Errorf("folding %s %s: %v", ev.Event, ev.Payload, err)
	}
	return nil
}

// statusWithCapacity is the status a worker whose view is v answers.
func statusWithCapacity(v contract.WorkerView) contract.Status {
	s := statusOf(v, 1)
	s.Capacity = v.Capacity
	return s
}

// deepCopyView copies v with slices of its own, so that what the fold
// writes in place shows against it.
func deepCopyView(v contract.WorkerView) contract.WorkerView {
	v.Devices, v.Leases, v.Waiting = slices.Clone(v.Devices), slices.Clone(v.Leases), slices.Clone(v.Waiting)
	return v
}

// viewLinks checks that a view's leases and devices name each other, by
// the leases' unique keys (two owners may choose one id): each lease on a
// listed device, leased by that lease, and no device under two leases or
// two leases under one key.
func viewLinks(v contract.WorkerView) error {
	devices := map[string]contract.Device{}
	for _, d := range v.Devices {
		if _, twice := devices[d.ID]; twice {
			return fmt.Errorf("device %s listed twice", d.ID)
		}
		devices[d.ID] = d
	}
	onDevice, keys := map[string]string{}, map[string]bool{}
	for _, l := range v.Leases {
		key := l.UniqueKey()
		if keys[key] {
			return fmt.Errorf("two leases %s", key)
		}
		keys[key] = true
		d, ok := devices[l.DeviceID]
		if !ok {
			return fmt.Errorf("lease %s on device %s, which the view does not list", key, l.DeviceID)
		}
		if other, taken := onDevice[l.DeviceID]; taken {
			return fmt.Errorf("device %s under leases %s and %s", l.DeviceID, other, key)
		}
		onDevice[l.DeviceID] = key
		if d.State != contract.DeviceLeased || d.LeaseID != l.ID || deviceLeaseKey(d) != key {
			return fmt.Errorf("lease %s names device %s, which is %s under lease %q (key %q)", key, d.ID, d.State, d.LeaseID, deviceLeaseKey(d))
		}
	}
	for _, d := range v.Devices {
		if d.State == contract.DeviceLeased && onDevice[d.ID] == "" {
			return fmt.Errorf("device %s is leased by %q, which the view does not list", d.ID, deviceLeaseKey(d))
		}
	}
	return nil
}
