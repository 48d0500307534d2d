package queue

import (
	"context"
	"slices"
	"testing"

	"github.com/simlock/simlock/internal/contract"
)

// keyed is a test waiter's need with a class: its platform and a key.
type keyed struct {
	p   contract.Platform
	key string
}

func (n keyed) Platform() contract.Platform { return n.p }
func (n keyed) NeedKey() string             { return n.key }

// byNeed is a fake Placer with free room per class of need: a waiter
// whose class has room is granted at once; one whose class has none waits
// with ScopeNeed.
type byNeed struct {
	free map[string]int
	// held are requesters that wait whatever the room (as a gateway's
	// waiter does while a worker's double grant to it stands).
	held   map[string]bool
	placed []string // requesters, in the order they were granted
	asked  map[string]int
}

func (b *byNeed) Admit(*Waiter) (*contract.Error, contract.RejectReason) { return nil, "" }

func (b *byNeed) Place(tx *Txn, w *Waiter) (Start, Block) {
	k := w.Need().(keyed).key
	b.asked[k]++
	if b.free[k] == 0 || b.held[w.Requester()] {
		return Start{}, BlockNeed
	}
	b.free[k]--
	b.placed = append(b.placed, w.Requester())
	tx.Grant(w, contract.LeaseGrant{RequestID: w.ID(), Lease: contract.LeaseRecord{ID: "lse_" + w.ID(), RequesterID: w.Requester()}})
	return Start{}, NoBlock
}

type needRig struct {
	t  *testing.T
	q  *Queue
	pl *byNeed
}

func newNeedRig(t *testing.T) *needRig {
	r := &needRig{t: t, pl: &byNeed{free: map[string]int{}, held: map[string]bool{}, asked: map[string]int{}}}
	r.q = New(Options{Store: newMemStore(), Placer: r.pl,
		LeaseOf: func(string) (string, string, bool) { return "", "", false }})
	return r
}

func (r *needRig) submit(requester, key string) *call {
	r.t.Helper()
	c := &call{}
	in := contract.LeaseRequestInput{Platform: contract.PlatformIOS, RequesterID: requester}
	c.t, c.err = r.q.Submit(context.Background(), Ask{Caller: Caller{Principal: requester}, Input: in, TTLMs: 60_000},
		func(context.Context) Resolution { return Resolution{Need: keyed{p: contract.PlatformIOS, key: key}} })
	if c.err != nil {
		r.t.Fatalf("submit %s: %v", requester, c.err)
	}
	return c
}

// room frees n of key's room, as a lease ending would.
func (r *needRig) room(key string, n int) {
	_ = r.q.Do(func(tx *Txn) error {
		r.pl.free[key] += n
		tx.Kick()
		return nil
	})
}

func TestAWaiterNothingServesIsPassedOverByLaterWaitersOfOtherNeeds(t *testing.T) {
	r := newNeedRig(t)
	r.pl.free["plain"] = 1
	x := r.submit("x", "model-x")
	plain := r.submit("p", "plain")
	if answered(x) {
		t.Fatal("the request for model X was granted with no room for it")
	}
	if !answered(plain) {
		t.Fatal("a plain request waited behind a request for model X that nothing can serve now: head-of-line blocking across needs")
	}
}

func TestAWaiterIsNeverOvertakenByALaterWaiterOfTheSameNeed(t *testing.T) {
	r := newNeedRig(t)
	first := r.submit("a", "model-x")
	second := r.submit("b", "model-x")
	r.submit("c", "plain")
	r.room("model-x", 1)
	if !answered(first) || answered(second) {
		t.Fatalf("one room for X: first answered %v, second answered %v; want only the first", answered(first), answered(second))
	}
	// Held whatever the room, a waiter still holds the later ones of its
	// class, and only them.
	third := r.submit("d", "model-x")
	r.pl.held["b"] = true
	r.room("model-x", 1)
	r.room("plain", 1)
	if answered(second) || answered(third) {
		t.Fatalf("with b held: b answered %v, d answered %v; want neither (d must not overtake b)", answered(second), answered(third))
	}
	if want := []string{"a", "c"}; !slices.Equal(r.pl.placed, want) {
		t.Fatalf("placed %v, want %v", r.pl.placed, want)
	}
}

func TestAPassedOverWaiterIsPlacedFirstWhenRoomForItFrees(t *testing.T) {
	r := newNeedRig(t)
	x := r.submit("x", "model-x")
	p1 := r.submit("p1", "plain")
	x2 := r.submit("x2", "model-x")
	// One decision frees room that both classes could use: the earlier
	// waiter goes first, the later ones of its class wait their turn,
	// and the plain one, passed over nothing, is served too.
	_ = r.q.Do(func(tx *Txn) error {
		r.pl.free["model-x"]++
		r.pl.free["plain"]++
		tx.Kick()
		return nil
	})
	if want := []string{"x", "p1"}; !slices.Equal(r.pl.placed, want) {
		t.Fatalf("placed %v, want %v: the passed-over waiter first, then the plain one", r.pl.placed, want)
	}
	if !answered(x) || !answered(p1) || answered(x2) {
		t.Fatalf("answered x %v, p1 %v, x2 %v; want x and p1 only", answered(x), answered(p1), answered(x2))
	}
}

func TestAPassAsksOncePerBlockedNeedWhateverTheLineLength(t *testing.T) {
	r := newNeedRig(t)
	for i := range 300 {
		key := []string{"model-x", "model-y", "tablet"}[i%3]
		r.submit("r"+string(rune('a'+i%26))+string(rune('a'+i/26)), key)
	}
	clear(r.pl.asked)
	_ = r.q.Do(func(tx *Txn) error { tx.Kick(); return nil })
	for _, k := range []string{"model-x", "model-y", "tablet"} {
		if r.pl.asked[k] != 1 {
			t.Fatalf("a pass over a line of 300 waiters of 3 blocked needs asked the placer %d times for %s, want 1", r.pl.asked[k], k)
		}
	}
}
