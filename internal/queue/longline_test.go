package queue

import (
	"fmt"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/simlock/simlock/internal/contract"
)

// In a line longer than placesInline, a grant at the head tells nobody
// behind it a new place in its own decision (that would cost the length
// of the line under the decision lock, for each grant); one walk within
// placesEvery tells every waiter whose place changed, once, however many
// decisions changed it meanwhile. A waiter that joins such a line hears
// its place at once.
func TestALongLinesPlacesAreToldByOneWalkWithinPlacesEvery(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t)
		r.pl.instant = true
		n := placesInline + 3 // still longer than placesInline after two grants
		calls := make([]*call, n)
		for i := range calls {
			calls[i] = r.mustSubmit(fmt.Sprintf("r%04d", i), ios)
		}
		last := calls[n-1]
		if got := positions(last); !slices.Equal(got, []int{n}) {
			t.Fatalf("the waiter that joined a line of %d heard places %v, want [%d] at once", n-1, got, n)
		}
		r.pl.release(contract.PlatformIOS, "nobody")
		r.pl.release(contract.PlatformIOS, "nobody")
		if !answered(calls[0]) || !answered(calls[1]) {
			t.Fatal("the two heads were not granted as two slots freed")
		}
		if got := positions(last); !slices.Equal(got, []int{n}) {
			t.Errorf("right after two grants at the head the last waiter heard places %v, want still [%d]: told in the grants' own decisions", got, n)
		}
		time.Sleep(placesEvery)
		synctest.Wait()
		if got := positions(last); !slices.Equal(got, []int{n, n - 2}) {
			t.Errorf("within placesEvery the last waiter heard places %v, want [%d %d]: one walk for both grants", got, n, n-2)
		}
		for i, c := range calls[2:] {
			if got := c.last().QueuePosition; got != i+1 {
				t.Fatalf("waiter %d is told place %d after the walk, want %d", i+2, got, i+1)
			}
		}
		r.q.Close()
	})
}

// A request that joins the line behind an earlier waiter of its class of
// need costs no Place: the earlier one could not be placed when the line
// was last served, and nothing made room since. When room is made, the
// earlier one is placed first.
func TestANewcomerBehindAWaiterOfItsNeedAsksThePlacerNothing(t *testing.T) {
	r := newRig(t)
	r.pl.instant = true
	a := r.mustSubmit("a", ios)
	r.pl.asked = 0
	b := r.mustSubmit("b", ios)
	c := r.mustSubmit("c", ios)
	if r.pl.asked != 0 {
		t.Errorf("two requests that joined behind a waiting one of their need asked the placer %d times, want 0", r.pl.asked)
	}
	r.pl.release(contract.PlatformIOS, "nobody")
	if !answered(a) || answered(b) || answered(c) {
		t.Errorf("a slot freed: answered a=%v b=%v c=%v, want a only (arrival order)", answered(a), answered(b), answered(c))
	}
	if got := positions(c); !slices.Equal(got, []int{3, 2}) {
		t.Errorf("c's places: %v, want [3 2]", got)
	}
	// A newcomer of another need is the head of its own line: asked,
	// and placed.
	r.pl.free[contract.PlatformAndroid] = 1
	if d := r.mustSubmit("d", android); !answered(d) {
		t.Error("the first Android request, with an Android slot free, was not placed as it joined")
	}
}
