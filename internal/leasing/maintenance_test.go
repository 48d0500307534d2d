package leasing

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/core"
)

// nuking is a Nuke in flight.
type nuking struct {
	done chan struct{}
	res  NukeResult
	err  error
}

func (h *harness) nuke(deleteDevices bool) *nuking {
	n := &nuking{done: make(chan struct{})}
	go func() {
		defer close(n.done)
		n.res, n.err = h.e.Maintenance().Nuke(context.Background(), deleteDevices)
	}()
	return n
}

func (n *nuking) wait(t *testing.T) NukeResult {
	t.Helper()
	<-n.done
	if n.err != nil {
		t.Fatalf("nuke: %v", n.err)
	}
	return n.res
}

// payloads decodes the payloads of the stored events named name.
func payloads(t *testing.T, st *memStore, name string) []map[string]any {
	t.Helper()
	st.mu.Lock()
	defer st.mu.Unlock()
	var out []map[string]any
	for _, ev := range st.storedEvents() {
		if ev.Event != name {
			continue
		}
		var p map[string]any
		if err := json.Unmarshal(ev.Payload, &p); err != nil {
			t.Fatal(err)
		}
		out = append(out, p)
	}
	return out
}

func TestNukeCutsAParticipantWaitShortAndReclaimsAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newGate(t)
		h := startEnds(t, newMemStore(), fixed(2), nil, g)
		grant := h.mustGrant(h.acquire("a", ios))
		h.release("a", grant.Lease.ID)
		time.Sleep(time.Minute)
		t0 := time.Now()
		h.nuke(false).wait(t)
		if took := time.Since(t0); took != reclaimTime {
			t.Errorf("nuke took %s, want only the reclaim's %s", took, reclaimTime)
		}
		c := g.only(t)
		if !errors.Is(context.Cause(c.ctx), errMaintenance) {
			t.Errorf("participant context = %v, want cancelled by the nuke", context.Cause(c.ctx))
		}
		if s := h.state(grant.Device.ID); s != contract.DeviceShutdown {
			t.Errorf("device is %s after the nuke, want shutdown (cleaned)", s)
		}
		time.Sleep(endWait)
		g.let()
		time.Sleep(reclaimTime)
		synctest.Wait()
		if w := h.logs.ceilingWarnings(); len(w) != 0 {
			t.Errorf("ceiling warnings after a nuke: %+v", w)
		}
		if n := h.reclaims(); n != 1 {
			t.Errorf("reclaims = %d, want 1", n)
		}
	})
}

func TestNukeCallsParticipantsWithAnAlreadyCancelledContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newGate(t) // never returns by itself, whatever its context says
		h := startEnds(t, newMemStore(), fixed(2), nil, g)
		a := h.mustGrant(h.acquire("a", ios))
		b := h.mustGrant(h.acquire("b", android))
		t0 := time.Now()
		res := h.nuke(false).wait(t)
		// The reclaims, then stopping the Android device its clean left
		// running (a quarter of the reclaim time): never the participant.
		if took, want := time.Since(t0), reclaimTime+reclaimTime/4; took != want {
			t.Errorf("nuke took %s, want only the reclaims' and the stop's %s", took, want)
		}
		want := []string{a.Lease.ID, b.Lease.ID}
		slices.Sort(want)
		if !slices.Equal(res.Released, want) {
			t.Errorf("released = %v, want %v", res.Released, want)
		}
		calls := g.got()
		if len(calls) != 2 {
			t.Fatalf("participant calls = %+v, want two", calls)
		}
		for _, c := range calls {
			if !c.cancelled || c.ended.Reason != contract.EndKilled {
				t.Errorf("call %+v: want reason killed with an already cancelled context", c)
			}
		}
		time.Sleep(endWait)
		synctest.Wait()
		if w := h.logs.ceilingWarnings(); len(w) != 0 {
			t.Errorf("ceiling warnings after a nuke: %+v", w)
		}
	})
}

func TestAfterANukeAReleaseWaitsForItsParticipantAgain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newGate(t)
		h := startEnds(t, newMemStore(), fixed(2), nil, g)
		h.nuke(false).wait(t)
		grant := h.mustGrant(h.acquire("a", ios))
		h.release("a", grant.Lease.ID)
		time.Sleep(time.Minute)
		synctest.Wait()
		if c := g.only(t); c.cancelled || c.ctx.Err() != nil {
			t.Errorf("participant context after the nuke ended: %v, want live", c.ctx.Err())
		}
		if n := h.reclaims(); n != 0 {
			t.Fatalf("reclaimed while the participant runs, after a nuke")
		}
		g.let()
		synctest.Wait()
		if n := h.reclaims(); n != 1 {
			t.Errorf("reclaims = %d, want 1", n)
		}
	})
}

func TestNukeEndsEveryLeaseAsKilled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := start(t, newMemStore(), fixed(2))
		a := h.mustGrant(h.acquire("a", ios))
		b := h.mustGrant(h.acquire("b", android))
		res := h.nuke(false).wait(t)
		if n := len(h.e.Leases(Caller{Admin: true})); n != 0 {
			t.Errorf("%d leases after the nuke", n)
		}
		if len(res.Released) != 2 {
			t.Errorf("released = %v", res.Released)
		}
		for _, p := range payloads(t, h.st, "lease.released") {
			if p["reason"] != string(contract.EndKilled) {
				t.Errorf("lease.released %v, want reason killed", p)
			}
		}
		h.mu.Lock()
		lost := slices.Sorted(slices.Values(h.lost))
		h.mu.Unlock()
		want := []string{a.Lease.ID + ":killed", b.Lease.ID + ":killed"}
		slices.Sort(want)
		if !slices.Equal(lost, want) {
			t.Errorf("holders told %v, want %v", lost, want)
		}
		for _, d := range h.e.devices() {
			if d.State == contract.DeviceReclaiming || d.State == contract.DeviceLeased {
				t.Errorf("device %s is %s after the nuke: its reclaim was not awaited", d.ID, d.State)
			}
		}
	})
}

func TestNukeFailsEveryWaitingRequest(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := start(t, newMemStore(), perPlatform(1, 2))
		h.mustGrant(h.acquire("a", ios))
		queued := h.acquire("b", ios) // iOS is full: it queues
		starting := h.acquire("c", android)
		time.Sleep(provisionTime / 2) // c's device is being made
		synctest.Wait()
		if queued.finished() || starting.finished() {
			t.Fatal("a request finished before the nuke")
		}
		res := h.nuke(false).wait(t)
		for _, p := range []*pending{queued, starting} {
			<-p.done
			wantCode(t, p.err, contract.CodeCancelled)
		}
		if len(res.Cancelled) != 2 {
			t.Errorf("cancelled = %v, want both", res.Cancelled)
		}
		rejected := payloads(t, h.st, "lease.rejected")
		if len(rejected) != 2 {
			t.Fatalf("lease.rejected = %v, want two", rejected)
		}
		for _, p := range rejected {
			if p["reason"] != string(contract.EndKilled) {
				t.Errorf("lease.rejected %v, want reason killed", p)
			}
		}
		time.Sleep(provisionTime + bootTime)
		synctest.Wait()
		if n := len(h.e.Leases(Caller{Admin: true})); n != 0 {
			t.Errorf("%d leases made after the nuke", n)
		}
	})
}

// perPlatform is a fixed limit of global running devices, and of n
// devices per platform.
func perPlatform(n, global int) core.Limits {
	l := fixed(global)
	for p, pl := range l.Platforms {
		pl.MaxRunning, pl.MaxDevices = n, n
		l.Platforms[p] = pl
	}
	return l
}

func TestNukeWithDeleteDevicesLeavesNoDevice(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var hold string // the lease whose participant runs until cut short
		p := participantFunc(func(ctx context.Context, ended EndedLease) error {
			if ended.LeaseID == hold {
				<-ctx.Done()
			}
			return nil
		})
		h := startEnds(t, newMemStore(), fixed(4), nil, p)
		h.mustGrant(h.acquire("a", ios)) // stays leased
		waiting := h.mustGrant(h.acquire("b", android))
		hold = waiting.Lease.ID
		idle := h.mustGrant(h.acquire("c", android))
		h.release("c", idle.Lease.ID)
		time.Sleep(reclaimTime + time.Second) // ready and idle
		h.release("b", waiting.Lease.ID)
		starting := h.acquire("d", ios) // its device is being made when the nuke comes
		time.Sleep(provisionTime / 2)
		res := h.nuke(true).wait(t)
		<-starting.done
		wantCode(t, starting.err, contract.CodeCancelled)
		if d := h.e.devices(); len(d) != 0 {
			t.Fatalf("devices after a nuke that deletes them = %+v, want none", d)
		}
		if len(res.Deleted) != 4 {
			t.Errorf("deleted = %v, want 4 devices", res.Deleted)
		}
		deleted := payloads(t, h.st, "device.deleted")
		if len(deleted) != 4 {
			t.Errorf("device.deleted events = %v, want 4", deleted)
		}
		for _, p := range deleted {
			if p["initiator"] != "nuke" {
				t.Errorf("device.deleted %v, want initiator nuke", p)
			}
		}
	})
}

func TestNukeQuarantinesADeviceThatFailsToDelete(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := start(t, newMemStore(), fixed(2))
		a := h.mustGrant(h.acquire("a", ios))
		h.drivers[contract.PlatformIOS].FailOn("destroy", 1)
		res := h.nuke(true).wait(t)
		if len(res.Deleted) != 0 {
			t.Errorf("deleted = %v, want none", res.Deleted)
		}
		if s := h.e.devices(); len(s) != 1 || s[0].ID != a.Device.ID || s[0].State != contract.DeviceQuarantined {
			t.Errorf("devices = %+v, want %s quarantined", s, a.Device.ID)
		}
	})
}

func TestNewRequestsFailWhileANukeRunsAndSucceedAfterIt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := start(t, newMemStore(), fixed(2))
		h.mustGrant(h.acquire("a", ios))
		n := h.nuke(false)
		time.Sleep(reclaimTime / 2) // the nuke waits for the reclaim
		p := h.acquire("b", ios)
		<-p.done
		ce := wantCode(t, p.err, contract.CodeNoCapacity)
		if ce.Details["maintenance"] != true {
			t.Errorf("details = %v, want maintenance: true", ce.Details)
		}
		_, err := h.e.Submit(context.Background(), Caller{Principal: "b"}, ios)
		wantCode(t, err, contract.CodeNoCapacity)
		n.wait(t)
		h.mustGrant(h.acquire("b", ios))
	})
}

func TestNukeIsBracketedByMaintenanceEvents(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := start(t, newMemStore(), perPlatform(1, 2))
		h.mustGrant(h.acquire("a", ios))
		h.acquire("b", ios)
		synctest.Wait()
		h.nuke(true).wait(t)
		names := h.st.names("maintenance.started", "lease.released", "lease.rejected", "device.deleted", "maintenance.ended")
		want := []string{"maintenance.started", "lease.rejected", "lease.released", "device.deleted", "maintenance.ended"}
		if !slices.Equal(names, want) {
			t.Errorf("events = %v, want %v", names, want)
		}
		if p := payloads(t, h.st, "maintenance.started"); len(p) != 1 || p[0]["deleteDevices"] != true {
			t.Errorf("maintenance.started = %v", p)
		}
		p := payloads(t, h.st, "maintenance.ended")
		if len(p) != 1 || p[0]["released"] != 1.0 || p[0]["cancelled"] != 1.0 || p[0]["deleted"] != 1.0 {
			t.Errorf("maintenance.ended = %v, want one of each", p)
		}
	})
}

func TestNukeWithoutDeletingStopsEveryRunningDevice(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := start(t, newMemStore(), fixed(2))
		a := h.mustGrant(h.acquire("a", contract.LeaseRequestInput{Platform: contract.PlatformAndroid}))
		res, err := h.e.Maintenance().Nuke(context.Background(), false)
		if err != nil {
			t.Fatal(err)
		}
		// Android cleans leave the device running; the nuke stops it.
		if len(res.Stopped) != 1 || res.Stopped[0] != a.Device.ID {
			t.Errorf("stopped = %v, want %s", res.Stopped, a.Device.ID)
		}
		for _, d := range h.e.devices() {
			if d.State != contract.DeviceShutdown {
				t.Errorf("device %s is %s after the nuke, want shutdown", d.ID, d.State)
			}
		}
	})
}
