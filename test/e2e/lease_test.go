package e2e

import (
	"encoding/json"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A fresh home with no config: `simlock lease --detach` starts the daemon,
// shows each step on stderr as JSON (stderr is a pipe) and prints exactly one
// grant line on stdout.
func TestLeaseDetachFreshHome(t *testing.T) {
	t.Parallel()
	h := newHome(t) // no config: the demo driver's default timings
	r := h.run("lease", "--platform", "ios", "--detach")
	if r.code != 0 {
		t.Fatalf("lease --detach failed\n%s", r)
	}
	if _, err := os.Stat(h.path("config.json")); err == nil {
		t.Errorf("lease wrote a config.json into a fresh home")
	}

	out := strings.Split(strings.TrimRight(r.stdout, "\n"), "\n")
	if len(out) != 1 || !strings.HasSuffix(r.stdout, "\n") {
		t.Fatalf("want exactly one line on stdout, got %d\n%s", len(out), r)
	}
	g := parseGrant(t, out[0])
	if g.Device.Spec.Platform != "ios" {
		t.Errorf("device.spec.platform = %q, want ios", g.Device.Spec.Platform)
	}
	if g.Device.Spec.Model == "" || g.Device.Spec.OSVersion == "" {
		t.Errorf("device.spec has no model or osVersion: %+v", g.Device.Spec)
	}
	if g.Lease.DeviceID != g.Device.ID {
		t.Errorf("lease.deviceId %q is not device.id %q", g.Lease.DeviceID, g.Device.ID)
	}
	if g.Lease.GrantedAt <= 0 || g.Lease.TTLDeadline <= g.Lease.GrantedAt {
		t.Errorf("lease.ttlDeadline %d must be after grantedAt %d", g.Lease.TTLDeadline, g.Lease.GrantedAt)
	}
	if g.Lease.TTLDeadline-g.Lease.GrantedAt != g.Lease.TTLMs {
		t.Errorf("ttlDeadline - grantedAt = %d, want ttlMs %d", g.Lease.TTLDeadline-g.Lease.GrantedAt, g.Lease.TTLMs)
	}
	switch tm := g.Timing; {
	case tm == nil:
		t.Errorf("grant has no timing: %s", out[0])
	case tm.EstimatedProvisionMs == nil || tm.EstimatedBootMs == nil || tm.EstimatedReclaimMs == nil || tm.EstimatedReadyMs == nil:
		t.Errorf("timing lacks a field: %s", out[0])
	case *tm.EstimatedReadyMs <= 0:
		t.Errorf("timing.estimatedReadyMs = %d, want > 0 for a new device", *tm.EstimatedReadyMs)
	}
	if g.RequestID == "" {
		t.Errorf("grant has no requestId: %s", out[0])
	}

	// Every stderr line is JSON; provisioning comes, then booting.
	provisioning, booting := -1, -1
	for i, s := range strings.Split(strings.TrimRight(r.stderr, "\n"), "\n") {
		p, ok := parseProgress(s)
		if !ok {
			t.Errorf("stderr line %d is not a JSON progress line: %q", i, s)
			continue
		}
		if p.Stage != "queued" && p.EtaMs == nil {
			t.Errorf("progress line %q has no etaMs", s)
		}
		switch {
		case p.Stage == "provisioning" && provisioning < 0:
			if !strings.HasPrefix(s, `{"push":"progress","stage":"provisioning",`) {
				t.Errorf("provisioning line is not in the documented form: %q", s)
			}
			provisioning = i
		case p.Stage == "booting" && booting < 0:
			booting = i
		}
	}
	if provisioning < 0 || booting < 0 || booting < provisioning {
		t.Errorf("want a provisioning line, then a booting line on stderr\n%s", r)
	}
}

// With one device allowed: a second agent queues at position 1 and gets the
// device within a second of the first one's release; --no-wait, --timeout
// and a second lease by the same agent are refused with their exit codes.
func TestQueueAndRefusals(t *testing.T) {
	t.Parallel()
	h := newHome(t, append([]string{"capacity.strategy", "fixed", "capacity.config.maxRunning", "1"}, fastDemo...)...)
	holderA, ga := h.hold("a", "ios")

	timeoutRun := h.runAsync("lease", "--platform", "ios", "--agent-id", "d", "--timeout", "2s")

	r := h.run("lease", "--platform", "ios", "--agent-id", "c", "--no-wait")
	expectFailure(t, r, 11, "NO_CAPACITY")
	if r.stdout != "" {
		t.Errorf("a refused lease printed on stdout: %q", r.stdout)
	}

	r = h.run("lease", "--platform", "ios", "--agent-id", "a", "--detach")
	e := expectFailure(t, r, 13, "REQUESTER_ALREADY_LEASED")
	if e["existingLeaseId"] != ga.Lease.ID {
		t.Errorf("existingLeaseId = %v, want a's lease %s\n%s", e["existingLeaseId"], ga.Lease.ID, r)
	}

	r = awaitResult(t, timeoutRun)
	expectFailure(t, r, 10, "QUEUE_TIMEOUT")
	if r.elapsed < 1950*time.Millisecond || r.elapsed > 15*time.Second {
		t.Errorf("--timeout 2s gave up after %s, want about 2s", r.elapsed)
	}
	if !strings.Contains(r.stderr, `{"push":"progress","stage":"queued","queuePosition":1`) {
		t.Errorf("the timed-out request never showed it was queued\n%s", r)
	}

	// d has left the queue, so b is first in line, and is told what it
	// waits for: a's lease on the one iOS device, and when it ends.
	holderB := h.start("lease", "--platform", "ios", "--agent-id", "b")
	queued := holderB.waitLine(holderB.stderr, "queued at position 1", func(s string) bool {
		p, ok := parseProgress(s)
		return ok && p.Stage == "queued" && p.QueuePosition == 1
	})
	if p, _ := parseProgress(queued.text); p.Wait == nil || p.Wait.LeaseID != ga.Lease.ID || p.Wait.Holder != "a" ||
		p.Wait.EndsAt < ga.Lease.TTLDeadline || p.Wait.InUse != p.Wait.Max {
		t.Errorf("b's queued line %s does not say it waits for a's lease %s (ending at or after %d) under a full limit", queued.text, ga.Lease.ID, ga.Lease.TTLDeadline)
	}
	select {
	case l := <-holderB.stdout.ch:
		t.Fatalf("b was granted while a still holds the only device: %s", l.text)
	default:
	}

	r = h.run("release", ga.Lease.ID)
	if r.code != 0 {
		t.Fatalf("release a's lease\n%s", r)
	}
	var rel struct {
		LeaseID  string `json:"leaseId"`
		Released bool   `json:"released"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &rel); err != nil || rel.LeaseID != ga.Lease.ID || !rel.Released {
		t.Errorf("release printed %q, want {leaseId: %s, released: true}", r.stdout, ga.Lease.ID)
	}
	l := holderB.waitLine(holderB.stdout, "a grant", func(string) bool { return true })
	gb := parseGrant(t, l.text)
	if lag := l.at.Sub(r.ended); lag > time.Second {
		t.Errorf("b's grant came %s after a's release completed, want at most 1s", lag)
	}
	if gb.Lease.RequesterID != "b" || gb.Device.Spec.Platform != "ios" {
		t.Errorf("b's grant: requester %q platform %q", gb.Lease.RequesterID, gb.Device.Spec.Platform)
	}
	if gb.Lease.ID == ga.Lease.ID {
		t.Errorf("b got a's lease id %s", ga.Lease.ID)
	}

	// a's holder is told at once that its lease was ended by someone else.
	lost := holderA.waitLine(holderA.stderr, "a's lease-lost push", func(s string) bool {
		return strings.Contains(s, `"push":"lease-lost"`)
	})
	if !strings.Contains(lost.text, ga.Lease.ID) || !strings.Contains(lost.text, `"reason":"explicit"`) {
		t.Errorf("a's push = %s, want its lease %s with reason explicit", lost.text, ga.Lease.ID)
	}
	if code := holderA.wait(); code != 14 {
		t.Errorf("a's holder exited %d after its lease was released elsewhere, want 14\n%s", code, holderA.dump())
	}
	holderB.signal(syscall.SIGINT)
	if code := holderB.wait(); code != 0 {
		t.Errorf("b's holder exited %d after SIGINT, want 0\n%s", code, holderB.dump())
	}
}

// TTLs: an unrenewed detached lease expires and its device is reclaimed; a
// held lease is renewed by its holder and outlives several TTLs; SIGINT to
// the holder releases it (reason explicit) and exits 0.
func TestLeaseTTL(t *testing.T) {
	t.Parallel()
	h := newHome(t, append([]string{"capacity.strategy", "fixed", "capacity.config.maxRunning", "2", "lease.minTtlMs", "1000"}, fastDemo...)...)
	h.startDaemon()
	f := h.follow()

	detached := h.leaseDetached("x", "ios", "--ttl", "3s")
	if detached.Lease.TTLMs != 3000 || detached.Lease.TTLDeadline-detached.Lease.GrantedAt != 3000 {
		t.Fatalf("--ttl 3s gave ttlMs %d, deadline-granted %d", detached.Lease.TTLMs,
			detached.Lease.TTLDeadline-detached.Lease.GrantedAt)
	}
	holder, held := h.hold("y", "ios", "--ttl", "1s")
	if held.Lease.TTLMs != 1000 {
		t.Fatalf("--ttl 1s gave ttlMs %d", held.Lease.TTLMs)
	}

	// The holder renews every TTL/3: wait until it has renewed at least 3
	// times and a renewal lands 3 TTLs after the grant. Meanwhile the
	// detached lease (3s) expires.
	renewals := 0
	lastRenewal := f.next("3 TTLs of renewals of the held lease", func(ev event) bool {
		if isEvent("lease.expired", "leaseId", held.Lease.ID)(ev) {
			t.Fatalf("the held lease expired: %+v", ev)
		}
		if !isEvent("lease.renewed", "leaseId", held.Lease.ID)(ev) {
			return false
		}
		renewals++
		return renewals >= 3 && ev.Timestamp >= held.Lease.GrantedAt+3*held.Lease.TTLMs
	})
	if _, ok := h.leases()[held.Lease.ID]; !ok {
		t.Fatalf("the held lease is not listed after %d renewals over 3 TTLs", renewals)
	}
	if ddl, _ := lastRenewal.Payload["ttlDeadline"].(float64); int64(ddl) <= held.Lease.TTLDeadline {
		t.Errorf("renewal did not move the deadline: %v <= %d", lastRenewal.Payload["ttlDeadline"], held.Lease.TTLDeadline)
	}

	// The detached lease expired (by now or soon), then its device was
	// reclaimed.
	expired := f.find("lease.expired of the detached lease", isEvent("lease.expired", "leaseId", detached.Lease.ID))
	if dev := expired.str("deviceId"); dev != detached.Device.ID {
		t.Errorf("lease.expired names device %q, want %q", dev, detached.Device.ID)
	}
	if expired.Timestamp < detached.Lease.TTLDeadline {
		t.Errorf("the lease expired at %d, before its deadline %d", expired.Timestamp, detached.Lease.TTLDeadline)
	}
	reclaimed := f.find("device.reclaimed of the detached lease's device", isEvent("device.reclaimed", "deviceId", detached.Device.ID))
	if reclaimed.Seq <= expired.Seq {
		t.Errorf("device.reclaimed (seq %d) is not after lease.expired (seq %d)", reclaimed.Seq, expired.Seq)
	}
	if _, ok := h.leases()[detached.Lease.ID]; ok {
		t.Errorf("the expired lease %s is still listed", detached.Lease.ID)
	}

	// SIGINT: the holder releases its lease and exits 0.
	holder.signal(syscall.SIGINT)
	if code := holder.wait(); code != 0 {
		t.Errorf("holder exited %d after SIGINT, want 0\n%s", code, holder.dump())
	}
	rel := f.next("lease.released of the held lease", func(ev event) bool {
		if isEvent("lease.expired", "leaseId", held.Lease.ID)(ev) {
			t.Fatalf("the held lease expired instead of being released: %+v", ev)
		}
		return isEvent("lease.released", "leaseId", held.Lease.ID)(ev)
	})
	if reason := rel.str("reason"); reason != "explicit" {
		t.Errorf("lease.released reason = %q, want explicit", reason)
	}
	for _, ev := range f.events {
		if isEvent("lease.expired", "leaseId", held.Lease.ID)(ev) {
			t.Errorf("the held lease expired at some point: %+v", ev)
		}
	}
	if _, ok := h.leases()[held.Lease.ID]; ok {
		t.Errorf("the released lease %s is still listed", held.Lease.ID)
	}
}

// kill -9 of the daemon loses no lease: the next command restarts it and the
// leases come back with the same ids and deadlines, and can be renewed.
func TestLeasesSurviveDaemonKill(t *testing.T) {
	t.Parallel()
	h := newHome(t, append([]string{"capacity.strategy", "fixed", "capacity.config.maxRunning", "2"}, fastDemo...)...)
	ga := h.leaseDetached("a", "ios", "--ttl", "10m")
	gb := h.leaseDetached("b", "android", "--ttl", "10m")
	before := h.leases()
	if len(before) != 2 || before[ga.Lease.ID].ID == "" || before[gb.Lease.ID].ID == "" {
		t.Fatalf("want leases %s and %s listed, got %+v", ga.Lease.ID, gb.Lease.ID, before)
	}

	pid := lockPID(h.Dir)
	if pid <= 0 {
		t.Fatalf("no pid in daemon.lock")
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatalf("kill -9 %d: %v", pid, err)
	}
	// The daemon is gone once nobody holds its lock.
	if !waitLockFree(h.Dir, waitBound) {
		t.Fatalf("the daemon (pid %d) still holds its lock after SIGKILL", pid)
	}

	after := h.leases() // starts a new daemon
	if newPID := lockPID(h.Dir); newPID == pid || newPID <= 0 {
		t.Fatalf("list --leases did not start a new daemon (lock pid %d, killed %d)", newPID, pid)
	}
	if len(after) != len(before) {
		t.Errorf("after the restart %d leases are listed, want %d: %+v", len(after), len(before), after)
	}
	for id, was := range before {
		now, ok := after[id]
		switch {
		case !ok:
			t.Errorf("lease %s is gone after kill -9", id)
		case now != was:
			t.Errorf("lease %s changed across kill -9:\nbefore %+v\nafter  %+v", id, was, now)
		}
	}

	for _, id := range []string{ga.Lease.ID, gb.Lease.ID} {
		r := h.run("lease", "renew", id)
		if r.code != 0 {
			t.Fatalf("renew %s after the restart\n%s", id, r)
		}
		var rec leaseRec
		if err := json.Unmarshal([]byte(r.stdout), &rec); err != nil || rec.ID != id {
			t.Fatalf("renew printed no lease record for %s\n%s", id, r)
		}
		if rec.TTLDeadline < before[id].TTLDeadline {
			t.Errorf("renew moved %s's deadline back: %d < %d", id, rec.TTLDeadline, before[id].TTLDeadline)
		}
		if rec.LastRenewedAt < before[id].LastRenewedAt || rec.TTLDeadline-rec.LastRenewedAt != rec.TTLMs {
			t.Errorf("renewed record is inconsistent: %+v", rec)
		}
	}
}
