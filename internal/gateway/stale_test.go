package gateway

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/queue"
)

// staleRig is a gateway's leasing over one connected worker with room in
// its view and no session (every dispatch to it bounces, as a refusal
// before progress does), and one waiting request.
type staleRig struct {
	f *Fleet
	l *Leasing
}

func newStaleRig(t *testing.T) *staleRig {
	f := New(Options{Store: newMemStore(), InstanceID: "ins_gw"})
	f.put(*view("w1", 0, 2))
	l := NewLeasing(f, LeasingOptions{Store: newQueueStore(), DefaultTTL: time.Minute, MaxTTL: time.Hour})
	if _, err := l.Submit(context.Background(), queue.Caller{Principal: "agent"},
		contract.LeaseRequestInput{Platform: contract.PlatformIOS, TimeoutMs: 600_000}); err != nil {
		t.Fatal(err)
	}
	synctest.Wait()
	return &staleRig{f: f, l: l}
}

// bounces is how many times in a row the request bounced off w1's view
// as it is now marked.
func (r *staleRig) bounces() int {
	n := 0
	r.l.q.View(func() {
		for k, m := range r.l.stale {
			if k.worker == "w1" {
				n = m.bounces
			}
		}
	})
	return n
}

// read is a read of w1's status that changed nothing routing reads.
func (r *staleRig) read() {
	r.f.mu.Lock()
	r.f.workers["w1"].viewGen++
	gen := r.f.workers["w1"].viewGen
	r.f.mu.Unlock()
	r.l.viewChanged("w1", statusRead{gen: gen}, true)
	synctest.Wait()
}

// A worker that refuses a request before progress is not asked again at
// each read of its view, however many there are, but when its backoff
// ends: 0.5 s after the first refusal, then 1, 2, 4 s..., so in 10 s it is
// asked 5 times (at 0, 0.5, 1.5, 3.5 and 7.5 s).
func TestAWorkerThatBouncesIsAskedAgainOnItsBackoffNotAtEachRead(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newStaleRig(t)
		defer r.l.Close()
		if n := r.bounces(); n != 1 {
			t.Fatalf("after the first dispatch the request bounced %d times, want 1", n)
		}
		for range 100 {
			r.read()
		}
		if n := r.bounces(); n != 1 {
			t.Fatalf("100 reads that changed nothing sent the request to the worker %d more times, want none", n-1)
		}
		time.Sleep(10 * time.Second)
		synctest.Wait()
		if n := r.bounces(); n != 5 {
			t.Fatalf("in 10 s the worker was asked %d times, want 5 (backoff 0.5 s doubling)", n)
		}
		for range 30 {
			time.Sleep(10 * time.Second)
			synctest.Wait()
		}
		before := r.bounces()
		time.Sleep(60 * time.Second)
		synctest.Wait()
		if n := r.bounces() - before; n != 2 {
			t.Fatalf("in a minute at the cap the worker was asked %d times, want 2 (every %s)", n, staleBackoffMax)
		}
	})
}

// A real change of the worker's view (its capacity counters here) ends
// the mark at once, past the first half second, and resets the backoff.
func TestARealChangeOfTheViewEndsTheMarkAndResetsTheBackoff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newStaleRig(t)
		defer r.l.Close()
		time.Sleep(8 * time.Second) // bounced at 0, 0.5, 1.5, 3.5 and 7.5 s; next at 15.5 s
		synctest.Wait()
		if n := r.bounces(); n != 5 {
			t.Fatalf("bounced %d times in 8 s, want 5", n)
		}
		changed := view("w1", 1, 3)
		r.f.put(*changed)
		r.l.viewChanged("w1", statusRead{}, true)
		synctest.Wait()
		if n := r.bounces(); n != 1 {
			t.Fatalf("after a real change of the view the request bounced %d times in a row, want 1 (asked again at once, backoff reset)", n)
		}
		time.Sleep(staleBackoffMin)
		synctest.Wait()
		if n := r.bounces(); n != 2 {
			t.Fatalf("half a second after the reset the request bounced %d times in a row, want 2", n)
		}
	})
}

// The class of need is what a request asks for, a model named in any case.
func TestTheClassOfNeedIgnoresTheModelsCaseAndSettlesTheClass(t *testing.T) {
	if needKey(ask("iPhone 17", "")) != needKey(ask("iphone 17", "")) {
		t.Error("a model named in another case is another class of need")
	}
	if needKey(Ask{Platform: contract.PlatformIOS}) != needKey(Ask{Platform: contract.PlatformIOS, Class: contract.ClassPhone}) {
		t.Error("no model and no class is not a phone's class of need")
	}
	for _, other := range []Ask{ask("iPhone 16", ""), ask("iPhone 17", "26.1"), {Platform: contract.PlatformIOS, Model: "iPhone 17", Mode: contract.DeviceModeSlim}} {
		if needKey(ask("iPhone 17", "")) == needKey(other) {
			t.Errorf("%+v is the same class of need as iPhone 17 on any OS", other)
		}
	}
}

// When the view of a worker a request bounced off changes within half a
// second of the bounce, the room the request waits for may have freed
// there: a later request of another class of need is not sent there
// first, in that pass or any other, until the earlier one is asked again.
func TestARoomThatFreesRightAfterABounceIsKeptForTheRequestThatBounced(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := New(Options{Store: newMemStore(), InstanceID: "ins_gw"})
		f.put(*view("w1", 0, 2)) // no session: every dispatch bounces
		l := NewLeasing(f, LeasingOptions{Store: newQueueStore(), DefaultTTL: time.Minute, MaxTTL: time.Hour})
		defer l.Close()
		submit := func(agent, model string) {
			if _, err := l.Submit(context.Background(), queue.Caller{Principal: agent},
				contract.LeaseRequestInput{Platform: contract.PlatformIOS, Model: model, TimeoutMs: 60_000}); err != nil {
				t.Fatal(err)
			}
			synctest.Wait()
		}
		markOf := func(model string) *staleMark {
			var m *staleMark
			l.q.View(func() { m = l.stale[staleKey{"w1", needKey(ask(model, ""))}] })
			return m
		}
		submit("x", "iPhone 17")
		bounced := markOf("iPhone 17")
		if bounced == nil {
			t.Fatal("the request for iPhone 17 did not bounce off w1")
		}
		time.Sleep(100 * time.Millisecond)
		f.put(*view("w1", 1, 3)) // its view changes: room may have freed
		l.viewChanged("w1", statusRead{}, true)
		synctest.Wait()
		submit("p", "iPhone 16")
		if m := markOf("iPhone 16"); m != nil {
			t.Fatalf("a later request for another model was sent to w1 %s after the earlier request bounced, before the earlier one was asked again", m.at.Sub(bounced.at))
		}
		time.Sleep(staleBackoffMin)
		synctest.Wait()
		x, p := markOf("iPhone 17"), markOf("iPhone 16")
		if x == nil || !x.at.After(bounced.at) || p == nil {
			t.Fatalf("after the half second: the earlier request's mark %+v, the later one's %+v; want both asked (the earlier again)", x, p)
		}
	})
}
