package queue

import (
	"slices"
	"testing"
)

// A place counts only the earlier waiters a request waits behind: an
// Android request behind an iOS one that holds only iOS is first in line;
// behind one that holds everyone (a machine-wide limit) it is second.
func TestAPlaceCountsOnlyTheWaitersAheadThatHoldIt(t *testing.T) {
	r := newRig(t)
	r.mustSubmit("a", ios)
	b := r.mustSubmit("b", android)
	c := r.mustSubmit("c", ios)
	if got := positions(b); !slices.Equal(got, []int{1}) {
		t.Errorf("the Android request's places behind an iOS one that holds only iOS: %v, want [1]", got)
	}
	if got := positions(c); !slices.Equal(got, []int{2}) {
		t.Errorf("the second iOS request's places: %v, want [2]", got)
	}

	r2 := newRig(t)
	r2.pl.scope[ios.Platform] = ScopeAll
	r2.mustSubmit("a", ios)
	b2 := r2.mustSubmit("b", android)
	if got := positions(b2); !slices.Equal(got, []int{2}) {
		t.Errorf("the Android request's places behind an iOS one that holds everyone: %v, want [2]", got)
	}
}
