package daemon

import (
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/simlock/simlock/internal/contract"
)

// lockedPort is a lease port whose decision lock is held until free is
// closed; each Err counts one wait for it.
type lockedPort struct {
	free  chan struct{}
	waits chan struct{}
	err   error
}

func (p *lockedPort) Err() error {
	p.waits <- struct{}{}
	<-p.free
	return p.err
}

// A decision lock not had within the bound fails liveness, and probes
// meanwhile share the one wait rather than start one each; once the lock
// is free liveness passes again, and a port stopped by a failed commit
// fails it.
func TestLivenessFailsWhileTheDecisionLockIsNotHadAndProbesShareOneWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		port := &lockedPort{free: make(chan struct{}), waits: make(chan struct{}, 10)}
		var p lockProbe
		for i := range 3 {
			start := time.Now()
			if _, done := p.run(t.Context(), port, liveBound); done {
				t.Fatalf("probe %d: the lock was had while it is held", i)
			}
			if waited := time.Since(start); waited != liveBound {
				t.Errorf("probe %d waited %v, want the bound %v", i, waited, liveBound)
			}
		}
		if n := len(port.waits); n != 1 {
			t.Errorf("three probes of a held lock started %d waits, want 1", n)
		}
		close(port.free)
		synctest.Wait()
		if err, done := p.run(t.Context(), port, liveBound); !done || err != nil {
			t.Errorf("with the lock free: done %v err %v, want had, nil", done, err)
		}
		port.err = errors.New("disk full")
		if err, done := p.run(t.Context(), port, liveBound); !done || err == nil {
			t.Errorf("with a failed commit: done %v err %v, want had, the failure", done, err)
		}
	})
}

// The uplink check is absent until a gateway is named, fails from then
// until the uplink connects, passes while it is up, and fails again from
// the moment it ends, saying since when.
func TestTheUplinkCheckFollowsTheUplink(t *testing.T) {
	var u uplinkState
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	if c, ok := u.check(); ok {
		t.Fatalf("no gateway named: check %+v, want none", c)
	}
	u.target(true, t0)
	want := func(step string, ok bool, detail string) {
		t.Helper()
		c, present := u.check()
		if !present || c.Name != contract.HealthUplink || c.OK != ok || c.Detail != detail {
			t.Errorf("%s: check %+v (present %v), want ok %v detail %q", step, c, present, ok, detail)
		}
	}
	want("named, never connected", false, "not connected to the gateway since 2026-01-02T03:04:05Z")
	u.target(true, t0.Add(time.Minute)) // each turn of the join loop names it again
	want("named again", false, "not connected to the gateway since 2026-01-02T03:04:05Z")
	u.up(true, "https://gw-2.example:7430", t0.Add(2*time.Minute))
	want("connected", true, "connected to https://gw-2.example:7430")
	u.up(false, "", t0.Add(3*time.Minute))
	want("ended", false, "not connected to the gateway since 2026-01-02T03:07:05Z")
	u.target(false, t0.Add(4*time.Minute))
	if c, ok := u.check(); ok {
		t.Errorf("gateway no longer named: check %+v, want none", c)
	}
}
