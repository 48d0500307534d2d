package queue

import (
	"context"
	"runtime"
	"testing"
	"weak"

	"github.com/simlock/simlock/internal/contract"
)

// trackedStore is a memStore that reserves, keeping a weak pointer to
// each reservation it hands out.
type trackedStore struct {
	*memStore
	handed []weak.Pointer[trackedReservation]
}

type trackedReservation struct {
	s   *trackedStore
	pad [1 << 16]byte // as heavy as a store's transaction and statements
}

func (s *trackedStore) Reserve(context.Context) (Reservation, error) {
	r := &trackedReservation{s: s}
	s.handed = append(s.handed, weak.Make(r))
	return r, nil
}

func (r *trackedReservation) Commit(ctx context.Context, w Writes) ([]contract.Event, error) {
	return r.s.memStore.Commit(ctx, w)
}

func (r *trackedReservation) Release() {}

// A request waiting in line does not keep alive the store's reservation
// its decision committed under: a line of 10,000 would keep 10,000 of the
// store's transactions, with their statements.
func TestWaitersDoNotKeepTheirDecisionsReservations(t *testing.T) {
	st := &trackedStore{memStore: newMemStore()}
	r := newRig(t, func(o *Options) { o.Store = st })
	var calls []*call
	for _, who := range []string{"a", "b", "c"} {
		calls = append(calls, r.mustSubmit(who, contract.LeaseRequestInput{})) // no slot: each waits
	}
	runtime.GC()
	kept := 0
	for _, p := range st.handed {
		if p.Value() != nil {
			kept++
		}
	}
	if kept != 0 {
		t.Errorf("%d of %d reservations are still alive with the requests in line, want none", kept, len(st.handed))
	}
	runtime.KeepAlive(calls)
	runtime.KeepAlive(r)
}
