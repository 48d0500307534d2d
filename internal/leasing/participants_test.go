package leasing

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/core"
	"github.com/simlock/simlock/internal/driver"
	"github.com/simlock/simlock/internal/driver/demo"
	"github.com/simlock/simlock/internal/store"
)

// endWait is lease.endWaitMs's default, which the engine uses when
// Options.EndWait is 0.
const endWait = 10 * time.Minute

// countingDriver is a demo driver that counts the reclaims it is asked for,
// per driver device id.
type countingDriver struct {
	*demo.Driver
	mu       sync.Mutex
	reclaims map[string]int
}

func (d *countingDriver) Reclaim(ctx context.Context, dev driver.Device) (driver.ReclaimResult, error) {
	d.mu.Lock()
	d.reclaims[dev.ID]++
	d.mu.Unlock()
	return d.Driver.Reclaim(ctx, dev)
}

func (d *countingDriver) count() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	n := 0
	for _, c := range d.reclaims {
		n += c
	}
	return n
}

// logSink keeps what the engine logs.
type logSink struct {
	mu   sync.Mutex
	recs []logRecord
}

type logRecord struct {
	level slog.Level
	msg   string
	attrs map[string]string
}

func (s *logSink) Enabled(context.Context, slog.Level) bool { return true }
func (s *logSink) WithAttrs([]slog.Attr) slog.Handler       { return s }
func (s *logSink) WithGroup(string) slog.Handler            { return s }

func (s *logSink) Handle(_ context.Context, r slog.Record) error {
	rec := logRecord{level: r.Level, msg: r.Message, attrs: map[string]string{}}
	r.Attrs(func(a slog.Attr) bool {
		rec.attrs[a.Key] = a.Value.Resolve().String()
		return true
	})
	s.mu.Lock()
	defer s.mu.Unlock()
	s.recs = append(s.recs, rec)
	return nil
}

// at lists the records logged at level whose message mentions substr.
func (s *logSink) at(level slog.Level, substr string) []logRecord {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []logRecord
	for _, r := range s.recs {
		if r.level == level && strings.Contains(r.msg, substr) {
			out = append(out, r)
		}
	}
	return out
}

// ceilingWarnings lists the warnings that a wait hit lease.endWaitMs.
func (s *logSink) ceilingWarnings() []logRecord {
	return s.at(slog.LevelWarn, "lease.endWaitMs")
}

// endHarness is a harness whose engine has lease-end participants, drivers
// that count reclaims, and a log the test reads.
type endHarness struct {
	*harness
	counting map[contract.Platform]*countingDriver
	logs     *logSink
}

// startEnds makes and starts an engine over st with the participants given,
// inside the current bubble; opts, when not nil, adjusts its options.
func startEnds(t *testing.T, st *memStore, limits core.Limits, opts func(*Options), parts ...LeaseEndParticipant) *endHarness {
	t.Helper()
	h := &endHarness{
		harness:  &harness{t: t, st: st, drivers: map[contract.Platform]*demo.Driver{}},
		counting: map[contract.Platform]*countingDriver{},
		logs:     &logSink{},
	}
	drivers := map[contract.Platform]driver.Driver{}
	for _, p := range contract.Platforms() {
		d, err := demo.New(demo.Options{Platform: p, ProvisionTime: provisionTime, BootTime: bootTime, ReclaimTime: reclaimTime})
		if err != nil {
			t.Fatal(err)
		}
		c := &countingDriver{Driver: d, reclaims: map[string]int{}}
		h.drivers[p], h.counting[p], drivers[p] = d, c, c
	}
	o := Options{
		Store: st, Drivers: drivers, Limits: limits, DefaultTTL: time.Minute, MaxTTL: time.Hour,
		Logger: slog.New(h.logs), LeaseEndParticipants: parts,
		LeaseEnded: func(l contract.LeaseRecord, reason string) {
			h.mu.Lock()
			defer h.mu.Unlock()
			h.lost = append(h.lost, l.ID+":"+reason)
		},
	}
	if opts != nil {
		opts(&o)
	}
	h.e = New(o)
	if err := h.e.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		h.e.Close()
		h.e.wait()
	})
	return h
}

// reclaims counts the driver reclaims of every platform.
func (h *endHarness) reclaims() int {
	n := 0
	for _, c := range h.counting {
		n += c.count()
	}
	return n
}

// reclaimsOf counts the driver reclaims of one of simlock's devices.
func (h *endHarness) reclaimsOf(deviceID string) int {
	var p contract.Platform
	var driverID string
	ok := false
	h.e.view(func() {
		if d, found := h.e.reg.get(deviceID); found {
			p, driverID, ok = d.Platform, d.DriverDeviceID, true
		}
	})
	if !ok {
		return -1
	}
	c := h.counting[p]
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.reclaims[driverID]
}

func (h *endHarness) claim(deviceID string) string {
	out := ""
	h.e.view(func() {
		if d, ok := h.e.reg.get(deviceID); ok {
			out = d.claim.String()
		}
	})
	return out
}

func (h *endHarness) state(deviceID string) contract.DeviceState {
	for _, d := range h.e.devices() {
		if d.ID == deviceID {
			return d.State
		}
	}
	return contract.DeviceDeleted
}

// stored reads a device as the store holds it: what a next start would see.
func stored(st *memStore, deviceID string) store.Device {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.device(deviceID)
}

// gate is a participant that records each call and returns only once let
// go, or, when it heeds its context, once that ends. It returns err.
type gate struct {
	heed bool
	err  error
	// onCall, when set, runs at the start of each call.
	onCall func(ctx context.Context, ended EndedLease)

	mu    sync.Mutex
	calls []gateCall
	open  chan struct{}
	once  sync.Once
}

type gateCall struct {
	ended EndedLease
	ctx   context.Context
	at    time.Time
	// cancelled says whether ctx was already cancelled when the call came.
	cancelled bool
	returned  bool
}

// newGate makes a closed gate that opens when the test ends, so no
// participant goroutine outlives the bubble.
func newGate(t *testing.T) *gate {
	g := &gate{open: make(chan struct{})}
	t.Cleanup(g.let)
	return g
}

func (g *gate) let() { g.once.Do(func() { close(g.open) }) }

func (g *gate) LeaseEnded(ctx context.Context, ended EndedLease) error {
	if g.onCall != nil {
		g.onCall(ctx, ended)
	}
	g.mu.Lock()
	i := len(g.calls)
	g.calls = append(g.calls, gateCall{ended: ended, ctx: ctx, at: time.Now(), cancelled: ctx.Err() != nil})
	g.mu.Unlock()
	if g.heed {
		select {
		case <-g.open:
		case <-ctx.Done():
		}
	} else {
		<-g.open
	}
	g.mu.Lock()
	g.calls[i].returned = true
	g.mu.Unlock()
	return g.err
}

func (g *gate) got() []gateCall {
	g.mu.Lock()
	defer g.mu.Unlock()
	return slices.Clone(g.calls)
}

// only returns the single call the gate had, failing the test otherwise.
func (g *gate) only(t *testing.T) gateCall {
	t.Helper()
	calls := g.got()
	if len(calls) != 1 {
		t.Fatalf("participant called %d times, want once", len(calls))
	}
	return calls[0]
}

// participantFunc is a participant made of a function.
type participantFunc func(context.Context, EndedLease) error

func (f participantFunc) LeaseEnded(ctx context.Context, ended EndedLease) error {
	return f(ctx, ended)
}

var android = contract.LeaseRequestInput{Platform: contract.PlatformAndroid}

func TestReleaseAnswersWhileTheParticipantHasNotReturnedAndTellsItTheLease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newGate(t)
		h := startEnds(t, newMemStore(), fixed(2), nil, g)
		grant := h.mustGrant(h.acquire("a", ios))
		done := make(chan error)
		go func() {
			_, err := h.e.Release(Caller{Principal: "a"}, contract.LeaseIDInput{LeaseID: grant.Lease.ID})
			done <- err
		}()
		synctest.Wait()
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
		default:
			t.Fatal("the release did not answer while the participant runs")
		}
		c := g.only(t)
		if c.returned {
			t.Fatal("the participant returned; it should still be running")
		}
		want := EndedLease{LeaseID: grant.Lease.ID, OwnerID: "a", DeviceID: grant.Device.ID, Platform: contract.PlatformIOS, Reason: contract.EndReleased}
		if c.ended != want {
			t.Errorf("participant told %+v, want %+v", c.ended, want)
		}
	})
}

func TestParticipantIsCalledAfterLeaseReleasedWhileTheDeviceReclaimsWithNoLease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var h *endHarness
		var released []string
		var devs []contract.Device
		var leases []contract.LeaseRecord
		g := newGate(t)
		g.onCall = func(context.Context, EndedLease) {
			released = h.st.names("lease.released")
			devs = h.e.devices()
			leases = h.e.Leases(Caller{Admin: true})
		}
		h = startEnds(t, newMemStore(), fixed(2), nil, g)
		grant := h.mustGrant(h.acquire("a", ios))
		h.release("a", grant.Lease.ID)
		synctest.Wait()
		g.only(t)
		if len(released) != 1 {
			t.Errorf("lease.released events when called: %v, want one", released)
		}
		if len(devs) != 1 || devs[0].State != contract.DeviceReclaiming || devs[0].LeaseID != "" {
			t.Errorf("devices when called = %+v, want one reclaiming with no lease", devs)
		}
		if len(leases) != 0 {
			t.Errorf("leases when called = %+v, want none", leases)
		}
	})
}

func TestDriverReclaimDoesNotStartUntilTheParticipantReturns(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newGate(t)
		h := startEnds(t, newMemStore(), fixed(2), nil, g)
		grant := h.mustGrant(h.acquire("a", android))
		h.release("a", grant.Lease.ID)
		time.Sleep(endWait / 2)
		synctest.Wait()
		if n := h.reclaims(); n != 0 {
			t.Fatalf("the driver reclaimed %d times while the participant ran", n)
		}
		if s := h.state(grant.Device.ID); s != contract.DeviceReclaiming {
			t.Fatalf("device is %s while the participant runs, want reclaiming", s)
		}
		g.let()
		synctest.Wait()
		if n := h.reclaims(); n != 1 {
			t.Fatalf("the driver reclaimed %d times once the participant returned, want 1", n)
		}
		time.Sleep(reclaimTime)
		synctest.Wait()
		if s := h.state(grant.Device.ID); s != contract.DeviceReady {
			t.Errorf("device is %s after the reclaim, want ready", s)
		}
	})
}

func TestWhileTheParticipantRunsTheDeviceIsNotGrantedUntilReclaimed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newGate(t)
		h := startEnds(t, newMemStore(), fixed(1), nil, g)
		a := h.mustGrant(h.acquire("a", android))
		h.release("a", a.Lease.ID)
		b := h.acquire("b", android)
		time.Sleep(time.Minute)
		synctest.Wait()
		if b.finished() {
			t.Fatalf("b finished (%+v, %v) while the participant ran", b.grant, b.err)
		}
		g.let()
		t0 := time.Now()
		gb := h.mustGrant(b)
		if gb.Device.ID != a.Device.ID || time.Since(t0) != reclaimTime {
			t.Errorf("b got %s after %s, want %s after the reclaim (%s)", gb.Device.ID, time.Since(t0), a.Device.ID, reclaimTime)
		}
	})
}

// reservingStore is a memStore that takes its write lock ahead of each
// decision, as SQLite does (store.Reserver), and counts the decisions that
// took it: each is a BEGIN IMMEDIATE on SQLite, even one that writes
// nothing.
type reservingStore struct {
	*memStore
	reserved atomic.Int32
}

func (r *reservingStore) Reserve(ctx context.Context) (store.Reservation, error) {
	r.reserved.Add(1)
	return r.st.Reserve(ctx)
}

// A hand-off with participants is two decisions: the release, then the
// clean's end with the grant to the next in line. The wait for the
// participants decides nothing, so it takes no write lock.
func TestAHandOffAfterTheParticipantsIsTwoDecisions(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newGate(t)
		st := &reservingStore{memStore: newMemStore()}
		h := startEnds(t, st.memStore, fixed(1), func(o *Options) { o.Store = st }, g)
		a := h.mustGrant(h.acquire("a", android))
		b := h.acquire("b", android)
		synctest.Wait()
		if b.finished() {
			t.Fatalf("b finished (%+v, %v) while a held the only slot", b.grant, b.err)
		}
		before := st.reserved.Load()
		h.release("a", a.Lease.ID)
		g.let()
		if gb := h.mustGrant(b); gb.Device.ID != a.Device.ID {
			t.Fatalf("b got %s, want a's device %s", gb.Device.ID, a.Device.ID)
		}
		synctest.Wait()
		if n := st.reserved.Load() - before; n != 2 {
			t.Errorf("release → grant took %d decisions, want 2 (the release; the clean with the grant)", n)
		}
	})
}

func TestDeviceIsClaimedFromBeforeTheCallUntilTheReclaimEnds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var h *endHarness
		var atCall string
		g := newGate(t)
		g.onCall = func(_ context.Context, ended EndedLease) { atCall = h.claim(ended.DeviceID) }
		h = startEnds(t, newMemStore(), fixed(2), nil, g)
		grant := h.mustGrant(h.acquire("a", ios))
		h.release("a", grant.Lease.ID)
		synctest.Wait()
		if atCall != "reclaim" {
			t.Fatalf("claim when the participant was called = %q, want reclaim", atCall)
		}
		time.Sleep(time.Minute)
		synctest.Wait()
		if c := h.claim(grant.Device.ID); c != "reclaim" {
			t.Fatalf("claim while the participant runs = %q", c)
		}
		g.let()
		time.Sleep(reclaimTime - time.Millisecond)
		synctest.Wait()
		if c := h.claim(grant.Device.ID); c != "reclaim" {
			t.Fatalf("claim during the reclaim = %q", c)
		}
		time.Sleep(time.Millisecond)
		synctest.Wait()
		if c := h.claim(grant.Device.ID); c != "" {
			t.Errorf("claim after the reclaim = %q, want none", c)
		}
	})
}

func TestRenewAndAnotherGrantCompleteWhileTheParticipantRuns(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newGate(t)
		h := startEnds(t, newMemStore(), fixed(3), nil, g)
		a := h.mustGrant(h.acquire("a", ios))
		b := h.mustGrant(h.acquire("b", ios))
		h.release("a", a.Lease.ID)
		synctest.Wait()
		if _, err := h.e.Renew(Caller{Principal: "b"}, contract.LeaseRenewInput{LeaseID: b.Lease.ID}); err != nil {
			t.Fatalf("renew while a participant runs: %v", err)
		}
		t0 := time.Now()
		c := h.mustGrant(h.acquire("c", android))
		if took := time.Since(t0); took != provisionTime+bootTime {
			t.Errorf("grant of another device took %s, want %s", took, provisionTime+bootTime)
		}
		if c.Device.ID == a.Device.ID {
			t.Error("the device waiting for its participant was granted")
		}
		if calls := g.got(); len(calls) != 1 || calls[0].returned {
			t.Errorf("participant calls = %+v, want one still running", calls)
		}
	})
}

func TestParticipantThatNeverReturnsIsCutOffAtTheCeiling(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newGate(t)
		h := startEnds(t, newMemStore(), fixed(2), nil, g)
		grant := h.mustGrant(h.acquire("a", ios))
		h.release("a", grant.Lease.ID)
		time.Sleep(endWait - time.Millisecond)
		synctest.Wait()
		c := g.only(t)
		if n := h.reclaims(); n != 0 || c.ctx.Err() != nil {
			t.Fatalf("1 ms before the ceiling: %d reclaims, context %v; want none, live", n, c.ctx.Err())
		}
		time.Sleep(time.Millisecond)
		synctest.Wait()
		if !errors.Is(context.Cause(c.ctx), errEndWaitCeiling) {
			t.Errorf("context at the ceiling: %v, want cancelled by the ceiling", context.Cause(c.ctx))
		}
		warns := h.logs.ceilingWarnings()
		if len(warns) != 1 || warns[0].attrs["leaseId"] != grant.Lease.ID || warns[0].attrs["deviceId"] != grant.Device.ID {
			t.Errorf("ceiling warnings = %+v, want one naming %s and %s", warns, grant.Lease.ID, grant.Device.ID)
		}
		if n := h.reclaims(); n != 1 {
			t.Fatalf("reclaims at the ceiling = %d, want 1", n)
		}
		time.Sleep(time.Minute)
		g.let()
		time.Sleep(reclaimTime)
		synctest.Wait()
		if n := h.reclaims(); n != 1 {
			t.Errorf("reclaims after the participant returned late = %d, want still 1", n)
		}
		if s := h.state(grant.Device.ID); s != contract.DeviceShutdown {
			t.Errorf("device is %s, want shutdown (iOS, cleaned)", s)
		}
	})
}

func TestReclaimWaitsForTheSlowerOfTwoParticipants(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fast, slow := newGate(t), newGate(t)
		h := startEnds(t, newMemStore(), fixed(2), nil, fast, slow)
		grant := h.mustGrant(h.acquire("a", ios))
		h.release("a", grant.Lease.ID)
		synctest.Wait()
		if len(fast.got()) != 1 || len(slow.got()) != 1 {
			t.Fatalf("calls before either returned: %d and %d, want both called", len(fast.got()), len(slow.got()))
		}
		time.Sleep(time.Minute)
		fast.let()
		time.Sleep(time.Minute)
		synctest.Wait()
		if n := h.reclaims(); n != 0 {
			t.Fatalf("reclaimed before the slower participant returned")
		}
		slow.let()
		synctest.Wait()
		if n := h.reclaims(); n != 1 {
			t.Errorf("reclaims once both returned = %d, want 1", n)
		}
	})
}

func TestOneCeilingCountedFromTheCallCoversBothParticipants(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const wait = 3 * time.Minute // a configured lease.endWaitMs
		first, never := newGate(t), newGate(t)
		h := startEnds(t, newMemStore(), fixed(2), func(o *Options) { o.EndWait = wait }, first, never)
		grant := h.mustGrant(h.acquire("a", ios))
		h.release("a", grant.Lease.ID)
		time.Sleep(2 * time.Minute)
		first.let() // must not restart the budget
		time.Sleep(wait - 2*time.Minute - time.Millisecond)
		synctest.Wait()
		if n := h.reclaims(); n != 0 {
			t.Fatalf("reclaimed before the ceiling")
		}
		time.Sleep(time.Millisecond)
		synctest.Wait()
		if n := h.reclaims(); n != 1 {
			t.Fatalf("reclaims at %s from the call = %d, want 1", wait, n)
		}
		if c := never.only(t); !errors.Is(context.Cause(c.ctx), errEndWaitCeiling) {
			t.Errorf("the participant still running was not cancelled at the ceiling: %v", context.Cause(c.ctx))
		}
		if n := len(h.logs.ceilingWarnings()); n != 1 {
			t.Errorf("%d ceiling warnings, want 1", n)
		}
	})
}

func TestFailingParticipantsAreLoggedAndTheOtherIsStillAwaited(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rejects := participantFunc(func(context.Context, EndedLease) error { return errors.New("session store unreachable") })
		throws := participantFunc(func(context.Context, EndedLease) error { panic("nil session") })
		slow := newGate(t)
		h := startEnds(t, newMemStore(), fixed(2), nil, rejects, throws, slow)
		grant := h.mustGrant(h.acquire("a", android))
		h.release("a", grant.Lease.ID)
		time.Sleep(time.Minute)
		synctest.Wait()
		errs := h.logs.at(slog.LevelError, "participant")
		if len(errs) != 2 {
			t.Fatalf("errors logged = %+v, want two", errs)
		}
		for _, msg := range []string{"session store unreachable", "nil session"} {
			found := false
			for _, r := range errs {
				if strings.Contains(r.attrs["err"], msg) && r.attrs["leaseId"] == grant.Lease.ID && r.attrs["deviceId"] == grant.Device.ID {
					found = true
				}
			}
			if !found {
				t.Errorf("no error logged with %q, the lease and the device: %+v", msg, errs)
			}
		}
		if n := h.reclaims(); n != 0 {
			t.Fatal("reclaimed before the remaining participant returned")
		}
		slow.let()
		time.Sleep(reclaimTime)
		synctest.Wait()
		if s := h.state(grant.Device.ID); s != contract.DeviceReady {
			t.Errorf("device is %s, want ready", s)
		}
	})
}

func TestParticipantFailingAfterTheWaitEndedIsLogged(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		late := newGate(t)
		late.err = errors.New("gave up late")
		h := startEnds(t, newMemStore(), fixed(2), nil, late)
		long := ios
		long.TTLMs = time.Hour.Milliseconds()
		a := h.mustGrant(h.acquire("a", ios))
		b := h.mustGrant(h.acquire("b", long))
		h.release("a", a.Lease.ID)
		time.Sleep(endWait) // a's wait ends at the ceiling
		synctest.Wait()
		h.release("b", b.Lease.ID)
		synctest.Wait()
		if _, err := h.e.Maintenance().Nuke(context.Background(), false); err != nil { // b's wait is cut short
			t.Fatal(err)
		}
		late.let()
		synctest.Wait()
		errs := h.logs.at(slog.LevelError, "participant")
		var leases []string
		for _, r := range errs {
			if strings.Contains(r.attrs["err"], "gave up late") {
				leases = append(leases, r.attrs["leaseId"])
			}
		}
		slices.Sort(leases)
		want := []string{a.Lease.ID, b.Lease.ID}
		slices.Sort(want)
		if !slices.Equal(leases, want) {
			t.Errorf("late failures logged for %v, want %v", leases, want)
		}
	})
}

func TestEveryLeaseEndCallsTheParticipantBeforeTheReclaimWithItsReason(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var h *endHarness
		type call struct {
			ended    EndedLease
			reclaims int // the device's reclaims when the participant was called
		}
		var mu sync.Mutex
		var calls []call
		record := participantFunc(func(_ context.Context, ended EndedLease) error {
			n := h.reclaimsOf(ended.DeviceID)
			mu.Lock()
			defer mu.Unlock()
			calls = append(calls, call{ended, n})
			return nil
		})
		h = startEnds(t, newMemStore(), fixed(8), func(o *Options) {
			o.Health = HealthPolicy{Enabled: true, ProbeInterval: time.Second, StableObservations: 2}
		}, record)
		in := ios
		in.TTLMs = 30000
		expiring := h.mustGrant(h.acquire("expiring", in))
		explicit := h.mustGrant(h.acquire("explicit", ios))
		lost := h.mustGrant(h.acquire("lost", ios))
		k1 := h.mustGrant(h.acquire("k1", ios))
		k2 := h.mustGrant(h.acquire("k2", android))

		h.release("explicit", explicit.Lease.ID)
		synctest.Wait()
		// The health monitor's device-lost release.
		if err := h.drivers[contract.PlatformIOS].Inject(lost.Device.DriverDeviceID, demo.FaultVanish); err != nil {
			t.Fatal(err)
		}
		time.Sleep(3 * time.Second)
		synctest.Wait()
		time.Sleep(30 * time.Second) // past the expiring lease's deadline
		synctest.Wait()
		if _, err := h.e.ReleaseAll(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(reclaimTime)
		synctest.Wait()

		mu.Lock()
		defer mu.Unlock()
		want := map[string]EndedLease{
			explicit.Lease.ID: {explicit.Lease.ID, "explicit", explicit.Device.ID, contract.PlatformIOS, contract.EndReleased},
			lost.Lease.ID:     {lost.Lease.ID, "lost", lost.Device.ID, contract.PlatformIOS, contract.EndDeviceLost},
			expiring.Lease.ID: {expiring.Lease.ID, "expiring", expiring.Device.ID, contract.PlatformIOS, contract.EndExpired},
			k1.Lease.ID:       {k1.Lease.ID, "k1", k1.Device.ID, contract.PlatformIOS, contract.EndKilled},
			k2.Lease.ID:       {k2.Lease.ID, "k2", k2.Device.ID, contract.PlatformAndroid, contract.EndKilled},
		}
		if len(calls) != len(want) {
			t.Fatalf("participant calls = %+v, want one per ended lease (%d)", calls, len(want))
		}
		for _, c := range calls {
			if w := want[c.ended.LeaseID]; c.ended != w {
				t.Errorf("participant told %+v, want %+v", c.ended, w)
			}
			if c.reclaims != 0 {
				t.Errorf("lease %s (%s): the device had been reclaimed %d times when the participant was called", c.ended.LeaseID, c.ended.Reason, c.reclaims)
			}
			// The vanished device's reclaim fails, and quarantine retries it.
			if n := h.reclaimsOf(c.ended.DeviceID); n != 1 && (c.ended.Reason != contract.EndDeviceLost || n < 1) {
				t.Errorf("lease %s (%s): device reclaimed %d times after, want 1", c.ended.LeaseID, c.ended.Reason, n)
			}
		}
	})
}

func TestStartupExpiryCallsTheParticipantAndStartLeavesTheDeviceToIt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := newMemStore()
		h1 := start(t, st, fixed(2))
		in := ios
		in.TTLMs = 3000
		grant := h1.mustGrant(h1.acquire("a", in))
		h1.e.Close()
		h1.e.wait()
		time.Sleep(5 * time.Second) // the deadline passes while the daemon is down

		g := newGate(t)
		h := startEnds(t, st, fixed(2), nil, g)
		synctest.Wait()
		c := g.only(t)
		if c.ended.LeaseID != grant.Lease.ID || c.ended.Reason != contract.EndExpired {
			t.Fatalf("participant told %+v, want lease %s expired", c.ended, grant.Lease.ID)
		}
		before := len(h.st.names())
		time.Sleep(time.Minute)
		synctest.Wait()
		if n := h.reclaims(); n != 0 {
			t.Fatalf("the device was reclaimed %d times while its participant ran", n)
		}
		if got := h.st.names("device.shutdown", "device.reclaimed"); len(got) != 0 {
			t.Fatalf("the start touched the device: %v", got)
		}
		if c := h.claim(grant.Device.ID); c != "reclaim" {
			t.Errorf("claim while the participant runs = %q, want reclaim", c)
		}
		g.let()
		time.Sleep(reclaimTime)
		synctest.Wait()
		if n := h.reclaims(); n != 1 || h.state(grant.Device.ID) != contract.DeviceShutdown {
			t.Errorf("after the participant returned: %d reclaims, device %s; want 1, shutdown", n, h.state(grant.Device.ID))
		}
		if got := h.st.names()[before:]; !slices.Contains(got, "device.reclaimed") {
			t.Errorf("events after the participant returned = %v, want device.reclaimed", got)
		}
	})
}

func TestEndThatLeavesNoDeviceToCleanCallsTheParticipantWithoutWaiting(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// A lease whose device record is gone: its end starts no reclaim.
		st := newMemStore()
		t0 := time.Now().UnixMilli()
		st.put(store.Change{Leases: []store.Lease{{LeaseRecord: contract.LeaseRecord{
			ID: "lse_orphan", DeviceID: "dev_gone", RequesterID: "a", OwnerID: "a",
			GrantedAt: t0, TTLMs: time.Hour.Milliseconds(), LastRenewedAt: t0, TTLDeadline: t0 + time.Hour.Milliseconds(),
		}}}})
		running := newGate(t)
		running.heed = true
		rejects := participantFunc(func(context.Context, EndedLease) error { return errors.New("no such session") })
		h := startEnds(t, st, fixed(2), nil, running, rejects)
		h.release("a", "lse_orphan")
		synctest.Wait()
		c := running.only(t)
		if c.ended.Reason != contract.EndReleased || c.ended.DeviceID != "dev_gone" {
			t.Errorf("participant told %+v", c.ended)
		}
		errs := h.logs.at(slog.LevelError, "participant")
		if len(errs) != 1 || errs[0].attrs["leaseId"] != "lse_orphan" || !strings.Contains(errs[0].attrs["err"], "no such session") {
			t.Errorf("errors logged = %+v, want the rejection", errs)
		}
		time.Sleep(endWait - time.Millisecond)
		synctest.Wait()
		if c.ctx.Err() != nil {
			t.Fatal("cancelled before the ceiling")
		}
		time.Sleep(time.Millisecond)
		synctest.Wait()
		if !errors.Is(context.Cause(c.ctx), errEndWaitCeiling) {
			t.Errorf("context at the ceiling: %v, want cancelled by it", context.Cause(c.ctx))
		}
		if n := h.reclaims(); n != 0 {
			t.Errorf("%d reclaims for a lease with no device", n)
		}
	})
}

func TestUnknownLeaseAndMovedExpiryCallNoParticipant(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newGate(t)
		h := startEnds(t, newMemStore(), fixed(2), nil, g)
		_, err := h.e.Release(Caller{Principal: "a"}, contract.LeaseIDInput{LeaseID: "lse_nope"})
		wantCode(t, err, contract.CodeUnknownLease)
		in := ios
		in.TTLMs = 3000
		grant := h.mustGrant(h.acquire("a", in))
		time.Sleep(2 * time.Second)
		if _, err := h.e.Renew(Caller{Principal: "a"}, contract.LeaseRenewInput{LeaseID: grant.Lease.ID}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(2 * time.Second) // past the old deadline
		synctest.Wait()
		if calls := g.got(); len(calls) != 0 {
			t.Fatalf("participant called %+v", calls)
		}
		time.Sleep(time.Second) // the new deadline
		synctest.Wait()
		if c := g.only(t); c.ended.Reason != contract.EndExpired {
			t.Errorf("reason = %s, want expired", c.ended.Reason)
		}
	})
}

func TestShutdownCutsTheWaitShortAndReturnsOnceTheReclaimSettles(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newGate(t)
		h := startEnds(t, newMemStore(), fixed(2), nil, g)
		grant := h.mustGrant(h.acquire("a", ios))
		h.release("a", grant.Lease.ID)
		time.Sleep(time.Minute)
		t0 := time.Now()
		if err := h.e.Shutdown(context.Background(), "test"); err != nil {
			t.Fatal(err)
		}
		if took := time.Since(t0); took != reclaimTime {
			t.Errorf("shutdown took %s, want the reclaim's %s", took, reclaimTime)
		}
		c := g.only(t)
		if !errors.Is(context.Cause(c.ctx), errStopping) {
			t.Errorf("participant context = %v, want cancelled by the stop", context.Cause(c.ctx))
		}
		if s := stored(h.st, grant.Device.ID); s.State != contract.DeviceShutdown || s.DeferredReclaim {
			t.Errorf("stored device %s marker %v, want shutdown without marker", s.State, s.DeferredReclaim)
		}
		g.let()
		time.Sleep(endWait)
		synctest.Wait()
		if n := h.reclaims(); n != 1 {
			t.Errorf("reclaims = %d, want 1", n)
		}
		if w := h.logs.ceilingWarnings(); len(w) != 0 {
			t.Errorf("ceiling warnings after a stop: %+v", w)
		}
	})
}

func TestReleaseAfterShutdownBeganCallsTheParticipantCancelledAndReclaimsAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newGate(t)
		h := startEnds(t, newMemStore(), fixed(2), nil, g)
		a := h.mustGrant(h.acquire("a", ios))
		b := h.mustGrant(h.acquire("b", ios))
		h.release("a", a.Lease.ID)
		synctest.Wait()
		stopped := make(chan error, 1)
		go func() { stopped <- h.e.Shutdown(context.Background(), "test") }()
		synctest.Wait() // the stop has begun: a's reclaim runs
		h.release("b", b.Lease.ID)
		synctest.Wait()
		calls := g.got()
		if len(calls) != 2 || calls[1].ended.LeaseID != b.Lease.ID || !calls[1].cancelled {
			t.Fatalf("calls = %+v, want b's with an already cancelled context", calls)
		}
		if n := h.reclaimsOf(b.Device.ID); n != 1 {
			t.Errorf("b's device reclaims right after the release = %d, want 1 (at once)", n)
		}
		if err := <-stopped; err != nil {
			t.Fatal(err)
		}
	})
}

func TestParticipantReturningBeforeTheCeilingLeavesNoTimerBehind(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newGate(t)
		h := startEnds(t, newMemStore(), fixed(2), nil, g)
		grant := h.mustGrant(h.acquire("a", ios))
		h.release("a", grant.Lease.ID)
		time.Sleep(time.Minute)
		g.let()
		time.Sleep(endWait)
		synctest.Wait()
		if w := h.logs.ceilingWarnings(); len(w) != 0 {
			t.Errorf("ceiling warnings: %+v", w)
		}
		if err := g.only(t).ctx.Err(); err != nil {
			t.Errorf("context of a participant that returned in time: %v, want never cancelled", err)
		}
		if n := h.reclaims(); n != 1 {
			t.Errorf("reclaims = %d, want 1", n)
		}
	})
}

func TestCloseCancelsTheParticipantAndStartsNoReclaim(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newGate(t)
		h := startEnds(t, newMemStore(), fixed(2), nil, g)
		grant := h.mustGrant(h.acquire("a", ios))
		h.release("a", grant.Lease.ID)
		time.Sleep(time.Minute)
		h.e.Close()
		synctest.Wait()
		if err := g.only(t).ctx.Err(); err == nil {
			t.Fatal("Close left the participant's context live")
		}
		time.Sleep(endWait)
		g.let()
		synctest.Wait()
		h.e.wait()
		if n := h.reclaims(); n != 0 {
			t.Errorf("reclaims after Close = %d, want none", n)
		}
		if w := h.logs.ceilingWarnings(); len(w) != 0 {
			t.Errorf("ceiling warnings after Close: %+v", w)
		}
		if s := stored(h.st, grant.Device.ID); s.State != contract.DeviceReclaiming || !s.DeferredReclaim {
			t.Errorf("stored device %s marker %v, want reclaiming with the marker", s.State, s.DeferredReclaim)
		}
	})
}

func TestWithNoParticipantTheReclaimStartsAtOnceWithNoMarker(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := startEnds(t, newMemStore(), fixed(2), nil)
		grant := h.mustGrant(h.acquire("a", ios))
		h.release("a", grant.Lease.ID)
		synctest.Wait()
		if n := h.reclaims(); n != 1 {
			t.Fatalf("reclaims right after the release = %d, want 1", n)
		}
		if s := stored(h.st, grant.Device.ID); s.State != contract.DeviceReclaiming || s.DeferredReclaim {
			t.Errorf("stored device %s marker %v, want reclaiming with no marker", s.State, s.DeferredReclaim)
		}
		time.Sleep(reclaimTime)
		synctest.Wait()
		if s := h.state(grant.Device.ID); s != contract.DeviceShutdown {
			t.Errorf("device is %s after the reclaim's own time, want shutdown", s)
		}
	})
}

func TestMarkerIsSetWhileTheParticipantRunsAndGoneOnceClean(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newGate(t)
		h := startEnds(t, newMemStore(), fixed(2), nil, g)
		grant := h.mustGrant(h.acquire("a", android))
		h.release("a", grant.Lease.ID)
		synctest.Wait()
		if s := stored(h.st, grant.Device.ID); s.State != contract.DeviceReclaiming || !s.DeferredReclaim {
			t.Fatalf("stored device %s marker %v while the participant runs, want reclaiming with the marker", s.State, s.DeferredReclaim)
		}
		g.let()
		time.Sleep(reclaimTime)
		synctest.Wait()
		if s := stored(h.st, grant.Device.ID); s.State != contract.DeviceReady || s.DeferredReclaim {
			t.Errorf("stored device %s marker %v once clean, want ready with no marker", s.State, s.DeferredReclaim)
		}
	})
}

func TestWaitingDeviceKeepsItsRunningSlotUntilWaitAndWipeEnd(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newGate(t)
		h := startEnds(t, newMemStore(), fixed(1), nil, g)
		a := h.mustGrant(h.acquire("a", ios))
		h.release("a", a.Lease.ID)
		nw := android
		nw.NoWait = true
		p := h.acquire("b", nw)
		<-p.done
		wantCode(t, p.err, contract.CodeNoCapacity)
		q := h.acquire("b", android)
		time.Sleep(5 * time.Minute)
		synctest.Wait()
		if q.finished() {
			t.Fatalf("the queued request finished (%v) while the participant waited", q.err)
		}
		g.let()
		t0 := time.Now()
		gq := h.mustGrant(q)
		if took := time.Since(t0); took != reclaimTime+provisionTime+bootTime {
			t.Errorf("granted %s after the participant returned, want the wipe then a new device (%s)", took, reclaimTime+provisionTime+bootTime)
		}
		if gq.Device.Spec.Platform != contract.PlatformAndroid {
			t.Errorf("granted %+v", gq.Device.Spec)
		}
	})
}

func TestDaemonStoppedWhileTheParticipantRunsIsWipedInFullAtTheNextStart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := newMemStore()
		g := newGate(t)
		h := startEnds(t, st, fixed(2), nil, g)
		grant := h.mustGrant(h.acquire("a", ios))
		h.release("a", grant.Lease.ID)
		time.Sleep(time.Minute)
		h.e.Close() // the daemon dies mid-wait
		h.e.wait()
		// The marker is what tells the next start this device must be
		// wiped in full, not only shut down.
		if s := stored(st, grant.Device.ID); s.State != contract.DeviceReclaiming || !s.DeferredReclaim {
			t.Fatalf("stored device %s marker %v after the stop, want reclaiming with the marker", s.State, s.DeferredReclaim)
		}

		fresh := newGate(t)
		h2 := startEnds(t, st, fixed(2), nil, fresh)
		synctest.Wait()
		if n := h2.reclaims(); n != 1 {
			t.Fatalf("the next start ran %d driver reclaims, want the full wipe once", n)
		}
		time.Sleep(reclaimTime)
		synctest.Wait()
		if s := stored(st, grant.Device.ID); s.State != contract.DeviceShutdown || s.DeferredReclaim {
			t.Errorf("stored device %s marker %v after recovery, want shutdown with no marker", s.State, s.DeferredReclaim)
		}
		if calls := fresh.got(); len(calls) != 0 {
			t.Errorf("the new engine's participant was called: %+v", calls)
		}
	})
}

func TestDaemonStoppedDuringTheWipeAfterTheWaitIsWipedInFullAtTheNextStart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := newMemStore()
		g := newGate(t)
		h := startEnds(t, st, fixed(2), nil, g)
		grant := h.mustGrant(h.acquire("a", ios))
		h.release("a", grant.Lease.ID)
		time.Sleep(time.Minute)
		g.let()
		time.Sleep(reclaimTime / 2)
		synctest.Wait()
		if n := h.reclaims(); n != 1 {
			t.Fatalf("reclaims = %d, want the wipe under way", n)
		}
		h.e.Close()
		h.e.wait()
		if s := stored(st, grant.Device.ID); s.State != contract.DeviceReclaiming || !s.DeferredReclaim {
			t.Fatalf("stored device %s marker %v after a stop mid-wipe, want reclaiming with the marker", s.State, s.DeferredReclaim)
		}
		h2 := startEnds(t, st, fixed(2), nil)
		time.Sleep(reclaimTime)
		synctest.Wait()
		if n := h2.reclaims(); n != 1 || h2.state(grant.Device.ID) != contract.DeviceShutdown {
			t.Errorf("next start: %d reclaims, device %s; want one full wipe, shutdown", n, h2.state(grant.Device.ID))
		}
	})
}

func TestReleaseWithAParticipantEmitsTheSameEventsInTheSameOrder(t *testing.T) {
	run := func(t *testing.T, parts ...LeaseEndParticipant) []string {
		var names []string
		synctest.Test(t, func(t *testing.T) {
			h := startEnds(t, newMemStore(), fixed(2), nil, parts...)
			grant := h.mustGrant(h.acquire("a", ios))
			h.release("a", grant.Lease.ID)
			time.Sleep(reclaimTime)
			synctest.Wait()
			names = h.st.names()
		})
		return names
	}
	without := run(t)
	with := run(t, participantFunc(func(context.Context, EndedLease) error { return nil }))
	if !slices.Equal(with, without) {
		t.Errorf("events with a participant = %v\nwithout = %v", with, without)
	}
	i, j := slices.Index(with, "lease.released"), slices.Index(with, "device.reclaimed")
	if i < 0 || j < i {
		t.Errorf("events = %v, want lease.released then device.reclaimed", with)
	}
}

// idler is a gate that is a LeaseEndIdler: idle for the leases idle says.
type idler struct {
	*gate
	idle  func(EndedLease) bool
	asked atomic.Int32
}

func (i *idler) IdleFor(ended EndedLease) bool {
	i.asked.Add(1)
	return i.idle(ended)
}

// A participant idle for a lease is asked, after the end, and not called:
// the clean starts without waiting and the device goes to the next in
// line. One that is not idle for a lease is called and awaited, beside an
// idle one that is not.
func TestAParticipantIdleForTheLeaseIsNotCalledAndOneThatIsNotIs(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var busy atomic.Value
		busy.Store("")
		quiet := &idler{gate: newGate(t), idle: func(EndedLease) bool { return true }}
		picky := &idler{gate: newGate(t), idle: func(e EndedLease) bool { return e.OwnerID != busy.Load() }}
		h := startEnds(t, newMemStore(), fixed(1), nil, quiet, picky)
		a := h.mustGrant(h.acquire("a", android))
		b := h.acquire("b", android)
		synctest.Wait()
		h.release("a", a.Lease.ID)
		// Neither participant is let go: had either been called, the clean
		// would wait for it, and b would not be granted.
		if gb := h.mustGrant(b); gb.Device.ID != a.Device.ID {
			t.Fatalf("b got %s, want a's device %s", gb.Device.ID, a.Device.ID)
		}
		if n := len(quiet.got()) + len(picky.got()); n != 0 {
			t.Errorf("participants idle for the lease were called %d times, want none", n)
		}
		if q, p := quiet.asked.Load(), picky.asked.Load(); q != 1 || p != 1 {
			t.Errorf("participants asked whether idle %d and %d times, want once each", q, p)
		}

		busy.Store("b")
		h.release("b", h.mustGrant(b).Lease.ID)
		synctest.Wait()
		if n := len(quiet.got()); n != 0 {
			t.Errorf("the idle participant was called %d times, want none", n)
		}
		if c := picky.only(t); c.ended.OwnerID != "b" {
			t.Errorf("the participant with work was called for %q, want b", c.ended.OwnerID)
		}
		if n := h.reclaimsOf(a.Device.ID); n != 1 {
			t.Errorf("reclaims while the participant with work runs = %d, want 1 (a's)", n)
		}
		picky.let()
		synctest.Wait()
		if n := h.reclaimsOf(a.Device.ID); n != 2 {
			t.Errorf("reclaims once it returned = %d, want 2", n)
		}
	})
}
