package e2e

import (
	"encoding/json"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A holder whose renewals fail is told at the first failure that its lease
// is at risk (since when, and when it ends unless a renewal succeeds), and
// keeps renewing: when its worker comes back, it is told the lease is safe
// again, and it still holds it.
func TestAHolderIsToldItsLeaseIsAtRiskWhileItsWorkerIsStoppedAndSafeWhenItIsBack(t *testing.T) {
	t.Parallel()
	f := newFleet(t)
	a := f.worker("worker-a", 2)
	idA := instanceID(t, a)
	f.await("worker A connected", 5*time.Second, connected(idA))
	// 21 s: renewals every 7 s, so a stop of a few seconds is survived.
	p, g := f.gw.hold("at-risk", "ios", "--ttl", "21s")
	pid := lockPID(a.Dir)
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	defer syscall.Kill(pid, syscall.SIGCONT)
	stopped := time.Now()
	type notice struct {
		Notice      string `json:"notice"`
		LeaseID     string `json:"leaseId"`
		Since       int64  `json:"since"`
		TTLDeadline int64  `json:"ttlDeadline"`
		Message     string `json:"message"`
	}
	read := func(l string) notice {
		var n notice
		_ = json.Unmarshal([]byte(l), &n)
		return n
	}
	risk := read(p.waitLine(p.stderr, "the lease at risk", func(l string) bool { return read(l).Notice == "lease-at-risk" }).text)
	told := time.Since(stopped)
	if told > 7*time.Second+3*time.Second {
		t.Errorf("told at risk %s after the worker stopped, want within one renew interval (7 s) and the renewal's bound", told)
	}
	if risk.LeaseID != g.Lease.ID || risk.Since == 0 || risk.TTLDeadline < g.Lease.TTLDeadline ||
		!strings.Contains(risk.Message, "lease at risk: renewals failing since ") || !strings.Contains(risk.Message, ", expires at ") {
		t.Errorf("at-risk notice = %+v, want lease %s, since, its deadline and the sentence", risk, g.Lease.ID)
	}
	if err := syscall.Kill(pid, syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	safe := read(p.waitLine(p.stderr, "the lease safe again", func(l string) bool { return read(l).Notice == "lease-safe" }).text)
	if safe.LeaseID != g.Lease.ID || safe.TTLDeadline <= risk.TTLDeadline {
		t.Errorf("safe notice = %+v, want lease %s renewed past %d", safe, g.Lease.ID, risk.TTLDeadline)
	}
	if !p.running() {
		t.Fatalf("the holder exited\n%s", p.dump())
	}
	if ls := f.gw.leases(); ls[g.Lease.ID].ID != g.Lease.ID {
		t.Errorf("after recovery the gateway lists %+v, want %s still held", ls, g.Lease.ID)
	}
}
