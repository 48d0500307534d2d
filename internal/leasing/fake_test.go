package leasing

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sync"

	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/store"
)

// memStore is an in-memory Store: it keeps what a real store would, so a
// second engine can start from it as from a database after a crash.
type memStore struct {
	mu sync.Mutex
	// mu guards the fields below.
	devices  map[string]store.Device
	leases   map[string]store.Lease
	requests map[string]contract.LeaseRequestRecord
	events   []contract.Event
	failNext bool
}

func newMemStore() *memStore {
	return &memStore{devices: map[string]store.Device{}, leases: map[string]store.Lease{}, requests: map[string]contract.LeaseRequestRecord{}}
}

var errInjected = errors.New("disk full")

func (m *memStore) Commit(_ context.Context, c store.Change) ([]contract.Event, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.failNext {
		m.failNext = false
		return nil, errInjected
	}
	// What the engine says is stored must be exactly what is: it decides
	// which columns a real store writes.
	for id, was := range c.Before.Devices {
		if got, ok := m.devices[id]; !ok || !reflect.DeepEqual(got, was) {
			return nil, fmt.Errorf("Before names device %s as %+v, stored %+v (%v)", id, was, got, ok)
		}
	}
	for id, was := range c.Before.Leases {
		if got, ok := m.leases[id]; !ok || got != was {
			return nil, fmt.Errorf("Before names lease %s as %+v, stored %+v (%v)", id, was, got, ok)
		}
	}
	for _, d := range c.Devices {
		m.devices[d.ID] = d
	}
	for _, l := range c.Leases {
		m.leases[l.UniqueKey()] = l
	}
	for _, r := range c.Requests {
		m.requests[r.ID] = r
	}
	var out []contract.Event
	for _, e := range c.Events {
		ev := contract.Event{ID: e.ID, Seq: int64(len(m.events) + 1), Timestamp: e.Timestamp, Event: e.Event, Payload: e.Payload}
		m.events = append(m.events, ev)
		out = append(out, ev)
	}
	return out, nil
}

func (m *memStore) Load(context.Context) (store.Snapshot, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var s store.Snapshot
	for _, d := range m.devices {
		if d.State != contract.DeviceDeleted {
			s.Devices = append(s.Devices, d)
		}
	}
	for _, l := range m.leases {
		if l.EndedAt == 0 {
			s.Leases = append(s.Leases, l)
		}
	}
	for _, r := range m.requests {
		if !r.State.Terminal() {
			s.Requests = append(s.Requests, r)
		}
	}
	return s, nil
}

func (m *memStore) RequestByKey(_ context.Context, requester, key string) (contract.LeaseRequestRecord, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, r := range m.requests {
		if r.RequesterID == requester && r.IdempotencyKey == key {
			return r, true, nil
		}
	}
	return contract.LeaseRequestRecord{}, false, nil
}

func (m *memStore) Request(_ context.Context, id string) (contract.LeaseRequestRecord, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	r, ok := m.requests[id]
	return r, ok, nil
}

// names lists the events stored so far, optionally only those named.
func (m *memStore) names(only ...string) []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []string
	for _, e := range m.events {
		if len(only) == 0 {
			out = append(out, e.Event)
			continue
		}
		for _, o := range only {
			if e.Event == o {
				out = append(out, e.Event)
			}
		}
	}
	return out
}
