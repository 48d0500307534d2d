package events

import (
	"testing"

	"github.com/simlock/simlock/internal/contract"
)

func TestPublishReachesSubscribersInOrder(t *testing.T) {
	b := NewBus()
	s, last := b.Subscribe(8)
	if last != 0 {
		t.Fatalf("last seq on an empty bus = %d, want 0", last)
	}
	b.Publish(contract.Event{Seq: 1, Event: "a"}, contract.Event{Seq: 2, Event: "b"})
	for _, want := range []string{"a", "b"} {
		if got := (<-s.C()).Event; got != want {
			t.Fatalf("got %q, want %q", got, want)
		}
	}
	if _, last := b.Subscribe(1); last != 2 {
		t.Fatalf("last seq = %d, want 2", last)
	}
}

func TestSlowSubscriberIsCutOffWithoutBlocking(t *testing.T) {
	b := NewBus()
	slow, _ := b.Subscribe(1)
	fast, _ := b.Subscribe(4)
	b.Publish(contract.Event{Seq: 1}, contract.Event{Seq: 2}, contract.Event{Seq: 3})
	if !slow.Lagged() {
		t.Fatal("slow subscriber not marked lagged")
	}
	n := 0
	for range slow.C() {
		n++
	}
	if n != 1 {
		t.Fatalf("slow subscriber got %d events before its channel closed, want 1", n)
	}
	if fast.Lagged() {
		t.Fatal("fast subscriber cut off")
	}
	if len(fast.C()) != 3 {
		t.Fatalf("fast subscriber has %d events, want 3", len(fast.C()))
	}
}

func TestCloseEndsSubscription(t *testing.T) {
	b := NewBus()
	s, _ := b.Subscribe(1)
	s.Close()
	s.Close()
	if _, ok := <-s.C(); ok {
		t.Fatal("channel still open after Close")
	}
	b.Publish(contract.Event{Seq: 1}) // must not panic on a closed subscription
}

func TestATapSeesEveryEventInOrderWhereASubscriberWouldBeCutOff(t *testing.T) {
	b := NewBus()
	var seen []int64
	b.Tap(func(ev contract.Event) { seen = append(seen, ev.Seq) })
	slow, _ := b.Subscribe(1)
	b.Publish(contract.Event{Seq: 1}, contract.Event{Seq: 2})
	b.Publish(contract.Event{Seq: 3})
	if !slow.Lagged() {
		t.Fatal("the slow subscriber was not cut off, so the test shows nothing")
	}
	if len(seen) != 3 || seen[0] != 1 || seen[1] != 2 || seen[2] != 3 {
		t.Fatalf("the tap saw seqs %v, want [1 2 3]", seen)
	}
}
