// Package events is the daemon's in-process event bus. Events are facts
// published after the decision that made them has committed; observers
// (`simlock events`, the HTTP event stream the console reads, a gateway's
// uplink relaying a worker's log) subscribe to them.
// Nothing that a requester must see travels only on the bus: progress goes to
// the requester by a direct call chain.
//
// A Bus is safe for concurrent use. Publish never blocks: a subscriber that
// falls a whole buffer behind is cut off (its channel closed, Lagged true),
// so one slow reader cannot stall the daemon.
package events

import (
	"sync"

	"github.com/simlock/simlock/internal/contract"
)

// Bus fans events out to subscribers.
type Bus struct {
	mu sync.Mutex
	// mu guards the fields below.
	next int
	subs map[int]*Subscription
	last int64
	taps []func(contract.Event)
}

// NewBus makes an empty bus.
func NewBus() *Bus { return &Bus{subs: map[int]*Subscription{}} }

// Subscription receives events published after it was made.
type Subscription struct {
	bus    *Bus
	id     int
	c      chan contract.Event
	lagged bool
	closed bool
}

// Subscribe starts a subscription with room for buf undelivered events. It
// also returns the seq of the newest event published before it, so a caller
// can join stored history with live events without gap or duplicate.
func (b *Bus) Subscribe(buf int) (*Subscription, int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.next++
	s := &Subscription{bus: b, id: b.next, c: make(chan contract.Event, max(buf, 1))}
	b.subs[s.id] = s
	return s, b.last
}

// C delivers events in publish order; it is closed when the subscription ends.
func (s *Subscription) C() <-chan contract.Event { return s.c }

// Lagged reports whether the subscription was cut off for falling behind.
func (s *Subscription) Lagged() bool {
	s.bus.mu.Lock()
	defer s.bus.mu.Unlock()
	return s.lagged
}

// Close ends the subscription. It is safe to call more than once.
func (s *Subscription) Close() {
	s.bus.mu.Lock()
	defer s.bus.mu.Unlock()
	s.closeLocked()
}

func (s *Subscription) closeLocked() {
	if s.closed {
		return
	}
	s.closed = true
	delete(s.bus.subs, s.id)
	close(s.c)
}

// Tap adds fn to the functions every published event is handed to, in
// publish order, before any subscriber gets it. Unlike a subscription a tap
// is never cut off: it is for what must see every fact exactly once (the
// daemon's counters and its decision log), so fn must be quick and must
// not call back into the bus. Taps are added while the daemon is wired,
// before anything is published.
func (b *Bus) Tap(fn func(contract.Event)) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.taps = append(b.taps, fn)
}

// Publish delivers events, in order, to every tap and every subscriber.
func (b *Bus) Publish(evs ...contract.Event) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, ev := range evs {
		if ev.Seq > b.last {
			b.last = ev.Seq
		}
		for _, fn := range b.taps {
			fn(ev)
		}
		for _, s := range b.subs {
			select {
			case s.c <- ev:
			default:
				s.lagged = true
				s.closeLocked()
			}
		}
	}
}

// Close ends every subscription.
func (b *Bus) Close() {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, s := range b.subs {
		s.closeLocked()
	}
}
