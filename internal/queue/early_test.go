package queue

import (
	"testing"
	"testing/synctest"

	"github.com/simlock/simlock/internal/contract"
)

// An Early Start begins while the decision that placed it commits, not
// after; the decision that ends it waits for that commit, and the
// requester hears nothing before both have committed.
func TestAnEarlyStartBeginsWhileItsPlacementCommits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t)
		r.pl.free[contract.PlatformIOS] = 1
		r.pl.early = true
		var begunAtCommit []bool
		r.st.beforeCommit = func() {
			synctest.Wait() // a Start begun runs until it blocks
			begunAtCommit = append(begunAtCommit, len(r.pl.started) > 0)
		}
		c := r.submit("agent-a", contract.LeaseRequestInput{Platform: contract.PlatformIOS})
		r.st.beforeCommit = nil
		if len(begunAtCommit) != 1 || !begunAtCommit[0] {
			t.Fatalf("the Start had begun at the placement's commit: %v, want it begun while that decision committed", begunAtCommit)
		}
		if s := r.st.stateOf("agent-a"); s != contract.RequestStarting {
			t.Errorf("the placed request is stored %q, want starting", s)
		}
		if answered(c) {
			t.Fatal("the requester was answered before its Start ended")
		}
		r.pl.finish(<-r.pl.started)
		synctest.Wait()
		if !answered(c) || c.err != nil {
			t.Fatalf("after the Start's grant the request is answered %v (%v), want granted", answered(c), c.err)
		}
		if s := r.st.stateOf("agent-a"); s != contract.RequestGranted {
			t.Errorf("the granted request is stored %q, want granted", s)
		}
	})
}
