package queue

import (
	"slices"
	"testing"
)

// TestListInsertKeepsArrivalOrder checks that a waiter coming back takes
// its arrival's place whichever end of the line the walk starts from:
// before the head, near it, in the middle, near the tail and past it.
func TestListInsertKeepsArrivalOrder(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   []uint64 // seqs inserted, in this order
	}{
		{"newcomers", []uint64{1, 2, 3, 4}},
		{"before the head", []uint64{5, 6, 7, 8, 9, 1}},
		{"just after the head", []uint64{1, 10, 20, 30, 40, 50, 60, 2}},
		{"just before the tail", []uint64{1, 10, 20, 30, 40, 50, 60, 59}},
		{"in the middle", []uint64{1, 10, 20, 30, 40, 50, 60, 35}},
		{"several coming back", []uint64{100, 200, 300, 400, 500, 3, 450, 150, 7, 499, 101}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := list{at: lineLinks}
			for _, s := range tc.in {
				l.insert(&Waiter{seq: s})
			}
			want := slices.Sorted(slices.Values(tc.in))
			var fwd, back []uint64
			for w := l.head; w != nil; w = w.line.next {
				fwd = append(fwd, w.seq)
			}
			for w := l.tail; w != nil; w = w.line.prev {
				back = append([]uint64{w.seq}, back...)
			}
			if !slices.Equal(fwd, want) {
				t.Errorf("walked from the head: %v, want %v", fwd, want)
			}
			if !slices.Equal(back, want) {
				t.Errorf("walked from the tail: %v, want %v", back, want)
			}
			if l.n != len(want) {
				t.Errorf("n = %d, want %d", l.n, len(want))
			}
		})
	}
}
