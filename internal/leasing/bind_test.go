package leasing

import (
	"errors"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/simlock/simlock/internal/contract"
)

// procTable is an in-memory process table: pid → start time.
type procTable struct {
	mu    sync.Mutex
	procs map[int]int64
}

func newProcTable(procs map[int]int64) *procTable { return &procTable{procs: procs} }

func (p *procTable) StartedAt(pid int) (int64, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if t, ok := p.procs[pid]; ok {
		return t, nil
	}
	return 0, errors.New("no such process")
}

func (p *procTable) set(pid int, started int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if started == 0 {
		delete(p.procs, pid)
		return
	}
	p.procs[pid] = started
}

func bindHarness(t *testing.T, st *memStore, procs *procTable, prev *harness) *harness {
	return build(t, st, fixed(4), prev, nil, func(_ *harness, o *Options) {
		o.Bind = BindPolicy{Processes: procs, Interval: time.Second}
	})
}

func (h *harness) lostReasons() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.lost)
}

func TestABoundLeaseEndsWhenItsProcessExits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		procs := newProcTable(map[int]int64{4242: 1000})
		h := bindHarness(t, newMemStore(), procs, nil)
		g := h.mustGrant(h.acquire("a", ios))
		l, err := h.e.Bind(Caller{Principal: "a"}, contract.LeaseBindInput{LeaseID: g.Lease.ID, PID: 4242})
		if err != nil {
			t.Fatal(err)
		}
		if l.BoundPID != 4242 {
			t.Errorf("bound lease record = %+v, want boundPid 4242", l)
		}
		if n := len(h.st.names("lease.bound")); n != 1 {
			t.Errorf("%d lease.bound events, want 1", n)
		}
		time.Sleep(3 * time.Second)
		if got := h.e.Leases(Caller{Admin: true}); len(got) != 1 {
			t.Fatalf("leases while the process runs = %+v, want the bound one", got)
		}
		procs.set(4242, 0)
		time.Sleep(time.Second)
		synctest.Wait()
		if got := h.e.Leases(Caller{Admin: true}); len(got) != 0 {
			t.Errorf("leases a second after the process exited = %+v, want none", got)
		}
		if want := []string{g.Lease.ID + ":" + string(contract.EndBoundProcessExited)}; !slices.Equal(h.lostReasons(), want) {
			t.Errorf("lease ends = %v, want %v", h.lostReasons(), want)
		}
	})
}

func TestAReusedPidDoesNotKeepABoundLeaseAlive(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		procs := newProcTable(map[int]int64{4242: 1000})
		h := bindHarness(t, newMemStore(), procs, nil)
		g := h.mustGrant(h.acquire("a", ios))
		if _, err := h.e.Bind(Caller{Principal: "a"}, contract.LeaseBindInput{LeaseID: g.Lease.ID, PID: 4242}); err != nil {
			t.Fatal(err)
		}
		// The process exits and another one gets its pid.
		procs.set(4242, 5000)
		time.Sleep(time.Second)
		synctest.Wait()
		if got := h.e.Leases(Caller{Admin: true}); len(got) != 0 {
			t.Errorf("leases after the pid was reused = %+v, want none", got)
		}
	})
}

func TestBindRefusesAMissingProcessAnotherOwnersLeaseAndChangesNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		procs := newProcTable(map[int]int64{4242: 1000})
		h := bindHarness(t, newMemStore(), procs, nil)
		g := h.mustGrant(h.acquire("a", ios))
		_, err := h.e.Bind(Caller{Principal: "a"}, contract.LeaseBindInput{LeaseID: g.Lease.ID, PID: 999})
		if ce := wantCode(t, err, contract.CodeBadRequest); ce.Details["field"] != "pid" {
			t.Errorf("missing process: error %+v, want field pid", ce)
		}
		_, err = h.e.Bind(Caller{Principal: "b"}, contract.LeaseBindInput{LeaseID: g.Lease.ID, PID: 4242})
		wantCode(t, err, contract.CodeForbidden)
		_, err = h.e.Bind(Caller{Principal: "a"}, contract.LeaseBindInput{LeaseID: "lse_nope", PID: 4242})
		wantCode(t, err, contract.CodeUnknownLease)
		if n := len(h.st.names("lease.bound")); n != 0 {
			t.Errorf("%d lease.bound events after three refusals, want 0", n)
		}
		if got := h.e.Leases(Caller{Admin: true}); len(got) != 1 || got[0].BoundPID != 0 {
			t.Errorf("leases = %+v, want the one lease, unbound", got)
		}
	})
}

func TestABindingOutlivesARestartAndAProcessThatExitedMeanwhileEndsTheLease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := newMemStore()
		procs := newProcTable(map[int]int64{4242: 1000})
		h := bindHarness(t, st, procs, nil)
		g := h.mustGrant(h.acquire("a", ios))
		if _, err := h.e.Bind(Caller{Principal: "a"}, contract.LeaseBindInput{LeaseID: g.Lease.ID, PID: 4242}); err != nil {
			t.Fatal(err)
		}
		h.e.Close()
		h.e.wait()

		h2 := bindHarness(t, st, procs, h)
		if got := h2.e.Leases(Caller{Admin: true}); len(got) != 1 || got[0].BoundPID != 4242 {
			t.Fatalf("leases after the restart = %+v, want the lease still bound to 4242", got)
		}
		procs.set(4242, 0)
		time.Sleep(time.Second)
		synctest.Wait()
		if got := h2.e.Leases(Caller{Admin: true}); len(got) != 0 {
			t.Errorf("leases after the bound process exited = %+v, want none", got)
		}
	})
}
