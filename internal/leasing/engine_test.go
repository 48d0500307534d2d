package leasing

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/core"
	"github.com/simlock/simlock/internal/driver"
	"github.com/simlock/simlock/internal/driver/demo"
)

const (
	provisionTime = 1 * time.Second
	bootTime      = 2 * time.Second
	reclaimTime   = 3 * time.Second
)

type harness struct {
	t       *testing.T
	st      *memStore
	e       *Engine
	drivers map[contract.Platform]*demo.Driver
	mu      sync.Mutex
	lost    []string // "leaseID:reason"
}

func fixed(maxRunning int) core.Limits {
	l := core.Limits{Strategy: "fixed", MaxRunning: maxRunning, Platforms: map[contract.Platform]core.PlatformLimits{}}
	for _, p := range contract.Platforms() {
		l.Platforms[p] = core.PlatformLimits{MaxRunning: maxRunning, MaxDevices: maxRunning}
	}
	return l
}

// start makes and starts an engine over st inside the current bubble, with
// fresh demo drivers.
func start(t *testing.T, st *memStore, limits core.Limits) *harness {
	t.Helper()
	return restart(t, st, limits, nil)
}

// restart is start over the drivers of an earlier engine (its simulated
// devices outlive it, as real ones outlive a daemon), or fresh ones.
func restart(t *testing.T, st *memStore, limits core.Limits, prev *harness) *harness {
	t.Helper()
	return build(t, st, limits, prev, nil, nil)
}

// build is the one harness constructor: demo drivers (those of prev, or
// fresh ones shaped by demoOpt), an engine over st whose options configure
// may change (it sees the demo drivers; it may wrap them in opts.Drivers),
// started, and closed at cleanup.
func build(t *testing.T, st *memStore, limits core.Limits, prev *harness, demoOpt func(*demo.Options), configure func(h *harness, opts *Options)) *harness {
	t.Helper()
	h := &harness{t: t, st: st, drivers: map[contract.Platform]*demo.Driver{}}
	drivers := map[contract.Platform]driver.Driver{}
	for _, p := range contract.Platforms() {
		if prev != nil {
			h.drivers[p], drivers[p] = prev.drivers[p], prev.drivers[p]
			continue
		}
		o := demo.Options{Platform: p, ProvisionTime: provisionTime, BootTime: bootTime, ReclaimTime: reclaimTime}
		if demoOpt != nil {
			demoOpt(&o)
		}
		d, err := demo.New(o)
		if err != nil {
			t.Fatal(err)
		}
		h.drivers[p], drivers[p] = d, d
	}
	opts := Options{
		Store: st, Drivers: drivers, Limits: limits, DefaultTTL: time.Minute, MaxTTL: time.Hour,
		LeaseEnded: func(l contract.LeaseRecord, reason string) {
			h.mu.Lock()
			defer h.mu.Unlock()
			h.lost = append(h.lost, l.ID+":"+reason)
		},
	}
	if configure != nil {
		configure(h, &opts)
	}
	h.e = New(opts)
	if err := h.e.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		h.e.Close()
		h.e.wait()
	})
	return h
}

// pending is an Acquire in flight.
type pending struct {
	mu       sync.Mutex
	progress []contract.LeaseProgress
	done     chan struct{}
	grant    contract.LeaseGrant
	err      error
	cancel   context.CancelFunc
}

func (h *harness) acquire(principal string, in contract.LeaseRequestInput) *pending {
	ctx, cancel := context.WithCancel(context.Background())
	p := &pending{done: make(chan struct{}), cancel: cancel}
	go func() {
		defer close(p.done)
		p.grant, p.err = h.e.Acquire(ctx, Caller{Principal: principal}, in, func(pr contract.LeaseProgress) {
			p.mu.Lock()
			defer p.mu.Unlock()
			p.progress = append(p.progress, pr)
		})
	}()
	return p
}

func (p *pending) finished() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// places is ps without what each step says a queued request waits for:
// the stages and places alone.
func places(ps []contract.LeaseProgress) []contract.LeaseProgress {
	out := slices.Clone(ps)
	for i := range out {
		out[i].Wait = nil
	}
	return out
}

func (p *pending) stages() []contract.LeaseProgress {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.progress)
}

// release ends a lease as its owner, failing the test if that is refused.
func (h *harness) release(owner, leaseID string) {
	h.t.Helper()
	if _, err := h.e.Release(Caller{Principal: owner}, contract.LeaseIDInput{LeaseID: leaseID}); err != nil {
		h.t.Fatalf("release %s as %s: %v", leaseID, owner, err)
	}
}

func (h *harness) mustGrant(p *pending) contract.LeaseGrant {
	h.t.Helper()
	<-p.done
	if p.err != nil {
		h.t.Fatalf("acquire failed: %v", p.err)
	}
	return p.grant
}

func wantCode(t *testing.T, err error, code contract.Code) *contract.Error {
	t.Helper()
	var ce *contract.Error
	if !errors.As(err, &ce) || ce.Code != code {
		t.Fatalf("err = %v, want code %s", err, code)
	}
	return ce
}

var ios = contract.LeaseRequestInput{Platform: contract.PlatformIOS}

func TestGrantWalksProvisioningThenBootingAndTakesTheDriversTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := start(t, newMemStore(), fixed(2))
		t0 := time.Now()
		p := h.acquire("a", ios)
		g := h.mustGrant(p)
		if took := time.Since(t0); took != provisionTime+bootTime {
			t.Errorf("grant took %s, want %s", took, provisionTime+bootTime)
		}
		want := []contract.LeaseProgress{
			{Stage: contract.StageProvisioning, EtaMs: (provisionTime + bootTime).Milliseconds()},
			{Stage: contract.StageBooting, EtaMs: bootTime.Milliseconds()},
			// The driver's step, as the boot's detail.
			{Stage: contract.StageBooting, EtaMs: bootTime.Milliseconds(), Detail: "waiting for the simulator to finish booting"},
		}
		if got := p.stages(); !slices.Equal(got, want) {
			t.Errorf("progress = %+v, want %+v", got, want)
		}
		if g.Source != contract.SourceProvisioned || g.Device.Spec.Model != "iPhone 17" || g.Lease.RequesterID != "a" || g.Lease.OwnerID != "a" {
			t.Errorf("grant = %+v", g)
		}
		if g.Lease.TTLMs != time.Minute.Milliseconds() || g.Lease.TTLDeadline != g.Lease.GrantedAt+g.Lease.TTLMs {
			t.Errorf("lease ttl = %d deadline %d granted %d", g.Lease.TTLMs, g.Lease.TTLDeadline, g.Lease.GrantedAt)
		}
		got := h.st.names("lease.requested", "device.provisioned", "device.ready", "lease.granted")
		if !slices.Equal(got, []string{"lease.requested", "device.provisioned", "device.ready", "lease.granted"}) {
			t.Errorf("events = %v", got)
		}
	})
}

func TestSecondRequesterQueuesAndIsServedOnRelease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := start(t, newMemStore(), fixed(1))
		a := h.mustGrant(h.acquire("a", ios))
		b := h.acquire("b", ios)
		synctest.Wait()
		got := b.stages()
		if len(got) != 1 || got[0].Stage != contract.StageQueued || got[0].QueuePosition != 1 {
			t.Fatalf("b progress = %+v, want queued at 1", got)
		}
		// First in line, it is told what it waits for: the one iOS device
		// kept, held by a's lease until its deadline.
		want := contract.QueueWait{Limit: contract.WaitDevices, InUse: 1, Max: 1,
			LeaseID: a.Lease.ID, Holder: "a", EndsAt: a.Lease.TTLDeadline}
		if got[0].Wait == nil || *got[0].Wait != want {
			t.Fatalf("b waits for %+v, want %+v", got[0].Wait, want)
		}
		h.release("a", a.Lease.ID)
		t0 := time.Now()
		g := h.mustGrant(b)
		// iOS reclaim leaves the device shut down: clean, then boot.
		if took := time.Since(t0); took != reclaimTime+bootTime {
			t.Errorf("b waited %s after the release, want %s", took, reclaimTime+bootTime)
		}
		if g.Device.ID != a.Device.ID || g.Source != contract.SourceBooted {
			t.Errorf("b got device %s source %s, want %s booted", g.Device.ID, g.Source, a.Device.ID)
		}
		stages := b.stages()
		if len(stages) < 3 || stages[1].Stage != contract.StageReclaiming || stages[1].EtaMs != reclaimTime.Milliseconds() || stages[2].Stage != contract.StageBooting {
			t.Errorf("b progress = %+v, want queued, reclaiming (eta %d), booting", stages, reclaimTime.Milliseconds())
		}
	})
}

func TestAndroidReclaimLeavesDeviceWarm(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := start(t, newMemStore(), fixed(1))
		and := contract.LeaseRequestInput{Platform: contract.PlatformAndroid}
		a := h.mustGrant(h.acquire("a", and))
		h.release("a", a.Lease.ID)
		synctest.Wait()
		time.Sleep(reclaimTime) // fake time inside the bubble: the reclaim's length
		synctest.Wait()
		t0 := time.Now()
		g := h.mustGrant(h.acquire("b", and))
		if g.Source != contract.SourceWarm || time.Since(t0) != 0 {
			t.Errorf("source %s after %s, want warm at once", g.Source, time.Since(t0))
		}
	})
}

func TestNoWaitTimeoutAndOneLeasePerRequester(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := start(t, newMemStore(), fixed(1))
		a := h.mustGrant(h.acquire("a", ios))

		nw := ios
		nw.NoWait = true
		p := h.acquire("b", nw)
		<-p.done
		wantCode(t, p.err, contract.CodeNoCapacity)
		if len(p.stages()) != 0 {
			t.Errorf("a no-wait request saw progress %+v", p.stages())
		}

		to := ios
		to.TimeoutMs = 2000
		t0 := time.Now()
		p = h.acquire("b", to)
		<-p.done
		ce := wantCode(t, p.err, contract.CodeQueueTimeout)
		if took := time.Since(t0); took != 2*time.Second {
			t.Errorf("timed out after %s, want 2s", took)
		}
		if ce.Details["requestId"] == "" {
			t.Error("QUEUE_TIMEOUT names no requestId")
		}

		p = h.acquire("a", ios)
		<-p.done
		ce = wantCode(t, p.err, contract.CodeRequesterAlreadyLeased)
		if ce.Details["existingLeaseId"] != a.Lease.ID {
			t.Errorf("details = %v, want existingLeaseId %s", ce.Details, a.Lease.ID)
		}
		if n := len(h.e.requests()); n != 0 {
			t.Errorf("%d requests still open", n)
		}
	})
}

// The first in line is told which lease it waits on and when that lease
// ends; a renewal of that lease moves the end it is told, and when another
// lease becomes due sooner, it is told of that one.
func TestTheFirstInLineHearsWhichLeaseItWaitsOnAndWhenItEnds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := start(t, newMemStore(), fixed(2))
		a := h.mustGrant(h.acquire("a", ios))
		time.Sleep(time.Second)
		b := h.mustGrant(h.acquire("b", ios))
		c := h.acquire("c", ios)
		synctest.Wait()
		last := func() contract.QueueWait {
			t.Helper()
			got := c.stages()
			p := got[len(got)-1]
			if p.Stage != contract.StageQueued || p.Wait == nil {
				t.Fatalf("c's last step %+v, want queued with what it waits for", p)
			}
			return *p.Wait
		}
		if w := last(); w.LeaseID != a.Lease.ID || w.Holder != "a" || w.EndsAt != a.Lease.TTLDeadline || w.InUse != 2 || w.Max != 2 {
			t.Fatalf("c waits for %+v, want a's lease %s (2 of 2 in use) ending at %d", w, a.Lease.ID, a.Lease.TTLDeadline)
		}
		time.Sleep(time.Second)
		// a renews: its end moves past b's, so b's lease is now due first.
		ra, err := h.e.Renew(Caller{Principal: "a"}, contract.LeaseRenewInput{LeaseID: a.Lease.ID})
		if err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if w := last(); w.LeaseID != b.Lease.ID || w.EndsAt != b.Lease.TTLDeadline {
			t.Fatalf("after a's renewal c waits for %+v, want b's lease %s ending at %d", w, b.Lease.ID, b.Lease.TTLDeadline)
		}
		// b renews with a longer TTL: a's is due first again, at its
		// renewed end.
		rb, err := h.e.Renew(Caller{Principal: "b"}, contract.LeaseRenewInput{LeaseID: b.Lease.ID, TTLMs: 10 * 60_000})
		if err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if w := last(); w.LeaseID != a.Lease.ID || w.EndsAt != ra.TTLDeadline || ra.TTLDeadline >= rb.TTLDeadline {
			t.Fatalf("after b's renewal c waits for %+v, want a's lease ending at %d (b's ends at %d)", w, ra.TTLDeadline, rb.TTLDeadline)
		}
		h.release("a", a.Lease.ID)
		h.release("b", b.Lease.ID)
		h.mustGrant(c)
	})
}

func TestQueueIsFIFOAndHeadIsNeverBypassed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := start(t, newMemStore(), fixed(1))
		a := h.mustGrant(h.acquire("a", ios))
		b := h.acquire("b", ios)
		synctest.Wait()
		c := h.acquire("c", contract.LeaseRequestInput{Platform: contract.PlatformAndroid})
		synctest.Wait()
		if got := places(c.stages()); !slices.Equal(got, []contract.LeaseProgress{{Stage: contract.StageQueued, QueuePosition: 2}}) {
			t.Fatalf("c progress = %+v, want queued at 2", got)
		}
		h.release("a", a.Lease.ID)
		gb := h.mustGrant(b)
		synctest.Wait()
		if c.finished() {
			t.Fatal("c was served before b released: the global limit is 1")
		}
		if got := places(c.stages()); got[len(got)-1] != (contract.LeaseProgress{Stage: contract.StageQueued, QueuePosition: 1}) {
			t.Errorf("c's last progress = %+v, want queued at 1", got[len(got)-1])
		}
		h.release("b", gb.Lease.ID)
		gc := h.mustGrant(c)
		if gc.Device.Spec.Platform != contract.PlatformAndroid || gc.Source != contract.SourceProvisioned {
			t.Errorf("c got %+v from %s", gc.Device.Spec, gc.Source)
		}
	})
}

func TestIdleRunningDeviceIsEvictedForAnotherPlatform(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := start(t, newMemStore(), fixed(1))
		and := contract.LeaseRequestInput{Platform: contract.PlatformAndroid}
		a := h.mustGrant(h.acquire("a", and))
		h.release("a", a.Lease.ID)
		time.Sleep(reclaimTime) // the Android device comes back ready: it holds the one slot
		synctest.Wait()
		g := h.mustGrant(h.acquire("b", ios))
		if g.Source != contract.SourceProvisioned {
			t.Errorf("b's source = %s", g.Source)
		}
		if got := h.st.names("device.shutdown"); len(got) != 1 {
			t.Errorf("device.shutdown events = %v, want one eviction", got)
		}
		for _, d := range h.e.devices() {
			if d.ID == a.Device.ID && d.State != contract.DeviceShutdown {
				t.Errorf("evicted device is %s", d.State)
			}
		}
	})
}

func TestExpiryAtDeadlineAndRenewMovesIt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := start(t, newMemStore(), fixed(2))
		in := ios
		in.TTLMs = 3000
		g := h.mustGrant(h.acquire("a", in))

		time.Sleep(2 * time.Second)
		rec, err := h.e.Renew(Caller{Principal: "a"}, contract.LeaseRenewInput{LeaseID: g.Lease.ID})
		if err != nil {
			t.Fatal(err)
		}
		if rec.TTLDeadline != time.Now().UnixMilli()+3000 || rec.TTLMs != 3000 {
			t.Fatalf("renewed deadline %d ttl %d", rec.TTLDeadline, rec.TTLMs)
		}
		time.Sleep(2 * time.Second) // past the first deadline, before the new one
		synctest.Wait()
		if len(h.e.Leases(Caller{Admin: true})) != 1 {
			t.Fatal("lease expired at its old deadline after a renew")
		}
		rec, err = h.e.Renew(Caller{Principal: "a"}, contract.LeaseRenewInput{LeaseID: g.Lease.ID, TTLMs: 5000})
		if err != nil || rec.TTLMs != 5000 {
			t.Fatalf("renew with ttl: %+v, %v", rec, err)
		}
		time.Sleep(5*time.Second - time.Millisecond)
		synctest.Wait()
		if len(h.e.Leases(Caller{Admin: true})) != 1 {
			t.Fatal("expired early")
		}
		time.Sleep(time.Millisecond)
		synctest.Wait()
		if len(h.e.Leases(Caller{Admin: true})) != 0 {
			t.Fatal("not expired at its deadline")
		}
		h.mu.Lock()
		lost := slices.Clone(h.lost)
		h.mu.Unlock()
		if !slices.Equal(lost, []string{g.Lease.ID + ":expired"}) {
			t.Errorf("holder told %v", lost)
		}
		time.Sleep(reclaimTime)
		synctest.Wait()
		if got := h.st.names("lease.expired", "device.reclaimed"); !slices.Equal(got, []string{"lease.expired", "device.reclaimed"}) {
			t.Errorf("events = %v", got)
		}
		if d := h.e.devices()[0]; d.State != contract.DeviceShutdown {
			t.Errorf("device state %s after reclaim, want shutdown", d.State)
		}
	})
}

func TestTTLAboveMaxIsRefusedNotClamped(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := start(t, newMemStore(), fixed(2))
		in := ios
		in.TTLMs = (time.Hour + time.Millisecond).Milliseconds()
		p := h.acquire("a", in)
		<-p.done
		ce := wantCode(t, p.err, contract.CodeBadRequest)
		if ce.Details["field"] != "ttlMs" {
			t.Errorf("details = %v, want field ttlMs", ce.Details)
		}
		g := h.mustGrant(h.acquire("a", ios))
		_, err := h.e.Renew(Caller{Principal: "a"}, contract.LeaseRenewInput{LeaseID: g.Lease.ID, TTLMs: in.TTLMs})
		wantCode(t, err, contract.CodeBadRequest)
	})
}

func TestOwnership(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := start(t, newMemStore(), fixed(2))
		g := h.mustGrant(h.acquire("a", ios))
		_, err := h.e.Renew(Caller{Principal: "b"}, contract.LeaseRenewInput{LeaseID: g.Lease.ID})
		wantCode(t, err, contract.CodeForbidden)
		_, err = h.e.Release(Caller{Principal: "b"}, contract.LeaseIDInput{LeaseID: g.Lease.ID})
		wantCode(t, err, contract.CodeForbidden)
		_, err = h.e.Release(Caller{Principal: "a"}, contract.LeaseIDInput{LeaseID: "lse_nope"})
		wantCode(t, err, contract.CodeUnknownLease)
		if got := h.e.Leases(Caller{Principal: "b"}); len(got) != 0 {
			t.Errorf("b sees %d of a's leases", len(got))
		}
		if _, err := h.e.Release(Caller{Principal: "b", Admin: true}, contract.LeaseIDInput{LeaseID: g.Lease.ID}); err != nil {
			t.Errorf("admin release: %v", err)
		}
	})
}

func TestCancelAndAbandonWithdrawQueuedRequests(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := start(t, newMemStore(), fixed(1))
		h.mustGrant(h.acquire("a", ios))
		b := h.acquire("b", ios)
		c := h.acquire("c", ios)
		synctest.Wait()
		res, err := h.e.Cancel(context.Background(), Caller{Principal: "b"}, contract.LeaseCancelInput{})
		if err != nil || res.Outcome != contract.CancelCancelled {
			t.Fatalf("cancel = %+v, %v", res, err)
		}
		<-b.done
		wantCode(t, b.err, contract.CodeCancelled)
		synctest.Wait()
		if got := c.stages(); got[len(got)-1].QueuePosition != 1 {
			t.Errorf("c did not move up: %+v", got)
		}
		c.cancel()
		<-c.done
		wantCode(t, c.err, contract.CodeCancelled)
		if n := len(h.e.requests()); n != 0 {
			t.Errorf("%d requests open after cancel and abandon", n)
		}
		res, _ = h.e.Cancel(context.Background(), Caller{Principal: "b"}, contract.LeaseCancelInput{})
		if res.Outcome != contract.CancelNotFound {
			t.Errorf("second cancel = %s", res.Outcome)
		}
		if got := h.st.names("lease.rejected"); len(got) != 2 {
			t.Errorf("lease.rejected events = %d, want 2", len(got))
		}
	})
}

func TestAbandonWhileStartingKeepsDeviceForNextRequester(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := start(t, newMemStore(), fixed(1))
		a := h.acquire("a", ios)
		time.Sleep(provisionTime / 2)
		a.cancel()
		<-a.done
		wantCode(t, a.err, contract.CodeCancelled)
		synctest.Wait()
		if n := len(h.e.Leases(Caller{Admin: true})); n != 0 {
			t.Fatalf("%d leases made for a requester that left", n)
		}
		g := h.mustGrant(h.acquire("b", ios))
		if g.Source != contract.SourceWarm {
			t.Errorf("b's grant source = %s, want warm (a's device)", g.Source)
		}
	})
}

func TestRestartRestoresLeasesAndExpiresPassedDeadlines(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := newMemStore()
		h := start(t, st, fixed(2))
		short := ios
		short.TTLMs = 5000
		g1 := h.mustGrant(h.acquire("a", short))
		long := contract.LeaseRequestInput{Platform: contract.PlatformAndroid, TTLMs: 60000}
		g2 := h.mustGrant(h.acquire("b", long))
		waiting := h.acquire("c", ios)
		synctest.Wait()
		h.e.Close() // the daemon dies: nothing more is written
		h.e.wait()
		<-waiting.done

		time.Sleep(10 * time.Second) // down past g1's deadline, not g2's
		h2 := restart(t, st, fixed(2), h)
		leases := h2.e.Leases(Caller{Admin: true})
		if len(leases) != 1 || leases[0].ID != g2.Lease.ID || leases[0].TTLDeadline != g2.Lease.TTLDeadline {
			t.Fatalf("after restart leases = %+v, want only %s with its deadline", leases, g2.Lease.ID)
		}
		if _, err := h2.e.Renew(Caller{Principal: "b"}, contract.LeaseRenewInput{LeaseID: g2.Lease.ID}); err != nil {
			t.Errorf("renew after restart: %v", err)
		}
		var failed int
		for _, r := range st.storedRequests() {
			if r.RequesterID == "c" && r.State == contract.RequestFailed {
				failed++
			}
		}
		if failed != 1 {
			t.Errorf("c's open request not settled as failed at restart")
		}
		synctest.Wait()
		if got := st.names("lease.expired"); len(got) != 1 {
			t.Errorf("lease.expired events = %v, want g1's at start", got)
		}
		_ = g1
	})
}

func TestAFailedCommitStopsTheEngineTellsNobodyAndARestartConverges(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := newMemStore()
		fatal := make(chan error, 1)
		h := build(t, st, fixed(2), nil, nil, func(_ *harness, o *Options) { o.Fatal = func(err error) { fatal <- err } })
		g := h.mustGrant(h.acquire("a", ios))
		st.mu.Lock()
		st.failNext = true
		st.mu.Unlock()
		_, err := h.e.Release(Caller{Principal: "a"}, contract.LeaseIDInput{LeaseID: g.Lease.ID})
		wantCode(t, err, contract.CodeInternal)
		if err := <-fatal; !errors.Is(err, errInjected) {
			t.Fatalf("Fatal was told %v, want the commit error", err)
		}
		h.mu.Lock()
		lost := slices.Clone(h.lost)
		h.mu.Unlock()
		if len(lost) != 0 {
			t.Fatalf("holders were told %v of an end that was never saved", lost)
		}
		st.mu.Lock()
		saved, _ := st.lease(g.Lease.ID)
		st.mu.Unlock()
		if saved.EndedAt != 0 {
			t.Fatal("the store holds the end whose commit failed")
		}
		_, err = h.e.Renew(Caller{Principal: "a"}, contract.LeaseRenewInput{LeaseID: g.Lease.ID})
		wantCode(t, err, contract.CodeInternal)
		_, err = h.e.Acquire(context.Background(), Caller{Principal: "b"}, ios, nil)
		wantCode(t, err, contract.CodeInternal)

		// The next start converges from what was saved: the lease is there.
		h.e.Close()
		h.e.wait()
		h2 := restart(t, st, fixed(2), h)
		if l := h2.e.Leases(Caller{Admin: true}); len(l) != 1 || l[0].ID != g.Lease.ID {
			t.Fatalf("after the restart: leases %+v, want the saved one", l)
		}
		if _, err := h2.e.Release(Caller{Principal: "a"}, contract.LeaseIDInput{LeaseID: g.Lease.ID}); err != nil {
			t.Errorf("release after the restart: %v", err)
		}
	})
}

func TestFailedBootFailsRequestAndRemovesDevice(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := start(t, newMemStore(), fixed(1))
		h.drivers[contract.PlatformIOS].FailOn("boot", 1)
		p := h.acquire("a", ios)
		<-p.done
		wantCode(t, p.err, contract.CodeInternal)
		time.Sleep(reclaimTime) // the failed device is deleted in the background
		synctest.Wait()
		if n := len(h.e.devices()); n != 0 {
			t.Errorf("%d devices left after a failed start", n)
		}
		// The slot is free again.
		h.mustGrant(h.acquire("b", ios))
	})
}

func TestReleaseAllEndsLeasesAndCancelsWaiters(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := start(t, newMemStore(), fixed(1))
		g := h.mustGrant(h.acquire("a", ios))
		b := h.acquire("b", ios)
		synctest.Wait()
		res, err := h.e.ReleaseAll()
		if err != nil || !slices.Equal(res.Released, []string{g.Lease.ID}) || len(res.Cancelled) != 1 {
			t.Fatalf("release-all = %+v, %v", res, err)
		}
		<-b.done
		wantCode(t, b.err, contract.CodeCancelled)
		h.mu.Lock()
		defer h.mu.Unlock()
		if !slices.Equal(h.lost, []string{g.Lease.ID + ":killed"}) {
			t.Errorf("holder told %v", h.lost)
		}
	})
}

func TestEventsCarryCapacityChanges(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := newMemStore()
		h := start(t, st, fixed(2))
		h.mustGrant(h.acquire("a", ios))
		st.mu.Lock()
		defer st.mu.Unlock()
		var last contract.Capacity
		for _, ev := range st.storedEvents() {
			if ev.Event == "capacity.changed" {
				if err := json.Unmarshal(ev.Payload, &last); err != nil {
					t.Fatal(err)
				}
			}
		}
		if last.Global.Running != 1 || last.Platforms[contract.PlatformIOS].Running != 1 || last.Global.MaxRunning != 2 {
			t.Errorf("last capacity.changed = %+v", last)
		}
	})
}

func TestIdempotencyKeyReturnsTheSameAnswer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := start(t, newMemStore(), fixed(2))
		in := ios
		in.IdempotencyKey = "k1"
		first := h.acquire("a", in)
		second := h.acquire("a", in) // joins the open request
		g1, g2 := h.mustGrant(first), h.mustGrant(second)
		if g1.Lease.ID != g2.Lease.ID {
			t.Fatalf("two leases %s and %s for one key", g1.Lease.ID, g2.Lease.ID)
		}
		g3 := h.mustGrant(h.acquire("a", in)) // settled: the stored answer
		if g3.Lease.ID != g1.Lease.ID {
			t.Errorf("replay gave lease %s, want %s", g3.Lease.ID, g1.Lease.ID)
		}
		other := in
		other.Model = "iPhone 16"
		p := h.acquire("a", other)
		<-p.done
		wantCode(t, p.err, contract.CodeIdempotencyConflict)
		if n := len(h.e.Leases(Caller{Admin: true})); n != 1 {
			t.Errorf("%d leases, want 1", n)
		}
	})
}

func TestClassWithUninstalledVersionIsRuntimeMissing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := start(t, newMemStore(), fixed(1))
		p := h.acquire("a", contract.LeaseRequestInput{Platform: contract.PlatformIOS, Class: contract.ClassPhone, OSVersion: "12"})
		<-p.done
		ce := wantCode(t, p.err, contract.CodeRuntimeMissing)
		if ce.Details["osVersion"] != "12" {
			t.Errorf("details = %v", ce.Details)
		}
		p = h.acquire("a", contract.LeaseRequestInput{Platform: contract.PlatformIOS, Class: contract.ClassDesktop})
		<-p.done
		wantCode(t, p.err, contract.CodeUnknownModel)
	})
}

func TestQuarantinedDeviceIsDeletedToMakeRoom(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := start(t, newMemStore(), fixed(1))
		h.drivers[contract.PlatformIOS].FailOn("reclaim", 1)
		g := h.mustGrant(h.acquire("a", ios))
		h.release("a", g.Lease.ID)
		time.Sleep(reclaimTime)
		synctest.Wait()
		if d := h.e.devices(); len(d) != 1 || d[0].State != contract.DeviceQuarantined {
			t.Fatalf("devices after a failed clean = %+v, want one quarantined", d)
		}
		g2 := h.mustGrant(h.acquire("b", ios))
		if g2.Device.ID == g.Device.ID || g2.Source != contract.SourceProvisioned {
			t.Errorf("b got %s from %s, want a new device", g2.Device.ID, g2.Source)
		}
		if got := h.st.names("device.purge-failed", "device.quarantined", "device.deleted"); !slices.Equal(got, []string{"device.purge-failed", "device.quarantined", "device.deleted"}) {
			t.Errorf("events = %v", got)
		}
	})
}

func TestReleaseAllCancelsARequestWhoseDeviceIsStarting(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := start(t, newMemStore(), fixed(1))
		p := h.acquire("a", ios)
		time.Sleep(provisionTime / 2)
		res, err := h.e.ReleaseAll()
		if err != nil || len(res.Cancelled) != 1 {
			t.Fatalf("release-all = %+v, %v", res, err)
		}
		<-p.done
		wantCode(t, p.err, contract.CodeCancelled)
		if n := len(h.e.Leases(Caller{Admin: true})); n != 0 {
			t.Errorf("%d leases after release-all", n)
		}
		if d := h.e.devices(); len(d) != 1 || d[0].State != contract.DeviceReady {
			t.Errorf("devices = %+v, want the started one kept ready", d)
		}
	})
}

func TestFailedMakeRoomDoesNotOvershootCapacity(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := start(t, newMemStore(), fixed(1))
		g := h.mustGrant(h.acquire("a", ios))
		h.release("a", g.Lease.ID)
		time.Sleep(reclaimTime) // the iPhone 17 is shut down, holding the one device slot
		synctest.Wait()
		h.drivers[contract.PlatformIOS].FailOn("destroy", 1)
		b := h.acquire("b", contract.LeaseRequestInput{Platform: contract.PlatformIOS, Model: "iPhone 16"})
		time.Sleep(reclaimTime)
		synctest.Wait()
		if b.finished() {
			t.Fatalf("b finished (%v) although no room could be made", b.err)
		}
		devs := h.e.devices()
		if len(devs) != 1 || devs[0].State != contract.DeviceQuarantined {
			t.Fatalf("devices = %+v, want only the quarantined one", devs)
		}
		if got := places(b.stages()); got[len(got)-1] != (contract.LeaseProgress{Stage: contract.StageQueued, QueuePosition: 1}) {
			t.Errorf("b's last progress = %+v, want queued at 1", got[len(got)-1])
		}
	})
}

func TestRangesAndClassesPickAsTheReferenceSays(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := start(t, newMemStore(), fixed(4))
		g := h.mustGrant(h.acquire("a", contract.LeaseRequestInput{Platform: contract.PlatformIOS, OSVersion: ">=18 <26"}))
		if g.Device.Spec.Model != "iPhone 16 Pro" && g.Device.Spec.Model != "iPhone 16" || g.Device.Spec.OSVersion != "18.6" {
			t.Errorf("phone in >=18 <26 = %+v, want an iPhone 16 on 18.6 (iPhone 17 needs 26)", g.Device.Spec)
		}
		g = h.mustGrant(h.acquire("b", contract.LeaseRequestInput{Platform: contract.PlatformIOS, Class: contract.ClassTablet}))
		if g.Device.Spec.Model != "iPad Pro 11-inch (M5)" {
			t.Errorf("tablet = %s, want the first of the preference list", g.Device.Spec.Model)
		}
		p := h.acquire("c", contract.LeaseRequestInput{Platform: contract.PlatformIOS, OSVersion: ">=19 <26"})
		<-p.done
		ce := wantCode(t, p.err, contract.CodeRuntimeMissing)
		if ce.Details["downloadable"] != false {
			t.Errorf("a range never downloads: %v", ce.Details)
		}
		p = h.acquire("d", contract.LeaseRequestInput{Platform: contract.PlatformIOS, Model: "iPhone 99"})
		<-p.done
		wantCode(t, p.err, contract.CodeUnknownModel)
	})
}

func TestConfiguredClassPreferenceComesFirst(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := newMemStore()
		h := start(t, st, fixed(2))
		h.e.opts.ClassDefaults = map[contract.Platform]map[contract.DeviceClass][]string{
			contract.PlatformAndroid: {contract.ClassPhone: {"Pixel 8"}},
		}
		g := h.mustGrant(h.acquire("a", contract.LeaseRequestInput{Platform: contract.PlatformAndroid}))
		if g.Device.Spec.Model != "Pixel 8" {
			t.Errorf("phone = %s, want the configured Pixel 8", g.Device.Spec.Model)
		}
	})
}

func TestDoctorDoesNotCallRootlessDevicesMissing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := newMemStore()
		h := start(t, st, fixed(2))
		h.mustGrant(h.acquire("a", ios))
		h.e.Close()
		h.e.wait()
		// A new demo driver never saw the device: it has no root to lose it
		// from, so it is not reported missing (and --fix deletes nothing).
		h2 := start(t, st, fixed(2))
		gone, err := h2.e.Maintenance().Vanished(context.Background())
		if err != nil || len(gone) != 0 {
			t.Errorf("vanished = %+v, %v; want none", gone, err)
		}
	})
}
