package leasing

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sync"

	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/store"
	"github.com/simlock/simlock/internal/store/memstore"
)

// memStore is the shared in-memory store (memstore) as the engine's
// Store, so a second engine can start from it as from a database after a
// crash. It checks what a real store cannot: that every row a Change's
// Before names is stored exactly so (the engine decides from Before which
// columns a real store writes). failNext fails the next Commit; mu guards
// it. It is no store.Reserver (the field is not embedded): every decision
// is written through Commit.
type memStore struct {
	st       *memstore.Store
	mu       sync.Mutex
	failNext bool
}

func newMemStore() *memStore { return &memStore{st: memstore.New()} }

func (m *memStore) Load(ctx context.Context) (store.Snapshot, error) { return m.st.Load(ctx) }

func (m *memStore) RequestByKey(ctx context.Context, requester, key string) (contract.LeaseRequestRecord, bool, error) {
	return m.st.RequestByKey(ctx, requester, key)
}

func (m *memStore) Request(ctx context.Context, id string) (contract.LeaseRequestRecord, bool, error) {
	return m.st.Request(ctx, id)
}

var errInjected = errors.New("disk full")

func (m *memStore) Commit(ctx context.Context, c store.Change) ([]contract.Event, error) {
	m.mu.Lock()
	fail := m.failNext
	m.failNext = false
	m.mu.Unlock()
	if fail {
		return nil, errInjected
	}
	// The write lock, so that nothing commits between the check and the
	// write.
	res, err := m.st.Reserve(ctx)
	if err != nil {
		return nil, err
	}
	defer res.Release()
	for id, was := range c.Before.Devices {
		if got, ok := m.st.Device(id); !ok || !reflect.DeepEqual(got, was) {
			return nil, fmt.Errorf("Before names device %s as %+v, stored %+v (%v)", id, was, got, ok)
		}
	}
	for id, was := range c.Before.Leases {
		if got, ok := m.st.Lease(id); !ok || got != was {
			return nil, fmt.Errorf("Before names lease %s as %+v, stored %+v (%v)", id, was, got, ok)
		}
	}
	return res.Commit(ctx, c)
}

// put commits c as an earlier run would have: the rows a test starts
// from.
func (m *memStore) put(c store.Change) {
	if _, err := m.st.Commit(context.Background(), c); err != nil {
		panic(err)
	}
}

// device is the stored device id (zero if none).
func (m *memStore) device(id string) store.Device {
	d, _ := m.st.Device(id)
	return d
}

// lease is the stored lease with the unique key key.
func (m *memStore) lease(key string) (store.Lease, bool) { return m.st.Lease(key) }

// storedEvents is every stored event, oldest first.
func (m *memStore) storedEvents() []contract.Event {
	evs, err := m.st.Events(context.Background(), store.EventQuery{Limit: 1 << 30})
	if err != nil {
		panic(err)
	}
	return evs
}

// storedRequests is every stored request.
func (m *memStore) storedRequests() []contract.LeaseRequestRecord {
	rs, err := m.st.Requests(context.Background(), 1<<30)
	if err != nil {
		panic(err)
	}
	return rs
}

// names lists the events stored so far, optionally only those named.
func (m *memStore) names(only ...string) []string {
	var out []string
	for _, e := range m.storedEvents() {
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
