package leasing

import (
	"encoding/json"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/simlock/simlock/internal/contract"
)

// jumpable is a wall clock that runs with the bubble's time, set off by a
// jump the test makes.
type jumpable struct{ off atomic.Int64 }

func (j *jumpable) now() time.Time        { return time.Now().Add(time.Duration(j.off.Load())) }
func (j *jumpable) jump(by time.Duration) { j.off.Add(int64(by)) }

// clockEvents are the clock.jumped payloads st holds.
func clockEvents(t *testing.T, st *memStore) []map[string]any {
	t.Helper()
	st.mu.Lock()
	defer st.mu.Unlock()
	var out []map[string]any
	for _, ev := range st.storedEvents() {
		if ev.Event == "clock.jumped" {
			var p map[string]any
			if err := json.Unmarshal(ev.Payload, &p); err != nil {
				t.Fatal(err)
			}
			out = append(out, p)
		}
	}
	return out
}

const tenMinutes = 10 * time.Minute

// A wall clock that jumps while the engine runs, forward or back, neither
// expires a lease early nor keeps it late: the lease expires ten minutes
// after its grant, as its TTL says, and doctor never finds it overdue.
// Told of the jump, the engine moves the stored deadline and the device's
// times by it (clock.jumped), the expiry staying where it was.
func TestAWallClockJumpWhileRunningMovesNoExpiry(t *testing.T) {
	for _, jump := range []time.Duration{time.Hour, -time.Hour} {
		t.Run(jump.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var wall jumpable
				st := newMemStore()
				h := build(t, st, fixed(2), nil, nil, func(_ *harness, o *Options) { o.Wall = wall.now })
				in := ios
				in.TTLMs = tenMinutes.Milliseconds()
				g := h.mustGrant(h.acquire("a", in))
				granted := time.Now()
				dev := h.e.devices()[0]

				time.Sleep(time.Minute)
				wall.jump(jump)
				time.Sleep(time.Second)
				synctest.Wait()
				if n := len(h.e.Leases(Caller{Admin: true})); n != 1 {
					t.Fatalf("the wall clock jumped %s: %d leases a minute into a ten-minute lease, want it kept", jump, n)
				}
				if over := h.e.Maintenance().ExpiredLeases(); len(over) != 0 {
					t.Errorf("the wall clock jumped %s: doctor finds %d leases overdue, want none", jump, len(over))
				}

				h.e.Maintenance().ClockJumped(jump, nil)
				l := h.e.Leases(Caller{Admin: true})[0]
				if l.TTLDeadline != g.Lease.TTLDeadline+jump.Milliseconds() {
					t.Errorf("deadline after clock.jumped: %d, want %d moved by %s", l.TTLDeadline, g.Lease.TTLDeadline, jump)
				}
				if d := h.e.devices()[0]; d.StateSince != dev.StateSince+jump.Milliseconds() || d.LastUsedAt != dev.LastUsedAt+jump.Milliseconds() {
					t.Errorf("device times after clock.jumped: since %d last used %d, want %d and %d", d.StateSince, d.LastUsedAt,
						dev.StateSince+jump.Milliseconds(), dev.LastUsedAt+jump.Milliseconds())
				}
				if evs := clockEvents(t, st); len(evs) != 1 || evs[0]["skewMs"] != float64(jump.Milliseconds()) || evs[0]["at"] != "running" || evs[0]["leases"] != float64(1) {
					t.Errorf("clock.jumped events %v, want one of %s while running, for one lease", evs, jump)
				}

				time.Sleep(time.Until(granted.Add(tenMinutes)) - time.Millisecond)
				synctest.Wait()
				if n := len(h.e.Leases(Caller{Admin: true})); n != 1 {
					t.Fatalf("the wall clock jumped %s: the lease expired before its ten minutes", jump)
				}
				time.Sleep(time.Millisecond)
				synctest.Wait()
				if n := len(h.e.Leases(Caller{Admin: true})); n != 0 {
					t.Fatalf("the wall clock jumped %s: the lease outlived its ten minutes", jump)
				}
			})
		})
	}
}

// A jump found at start (the wall clock set forward an hour while the
// daemon was down) moves the stored deadlines by it before anything is
// compared with the clock: a lease with time left is kept, not expired,
// and ends when its TTL says; clock.jumped records it.
func TestAClockJumpFoundAtStartMovesDeadlinesInsteadOfExpiring(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := newMemStore()
		var wall jumpable
		h := build(t, st, fixed(2), nil, nil, func(_ *harness, o *Options) { o.Wall = wall.now })
		in := ios
		in.TTLMs = tenMinutes.Milliseconds()
		g := h.mustGrant(h.acquire("a", in))
		granted := time.Now()
		h.e.Close() // the daemon stops
		h.e.wait()

		time.Sleep(time.Minute) // down a minute, during which the clock is set an hour on
		wall.jump(time.Hour)
		h2 := build(t, st, fixed(2), h, nil, func(_ *harness, o *Options) {
			o.Wall, o.StartClockSkew = wall.now, time.Hour
		})
		leases := h2.e.Leases(Caller{Admin: true})
		if len(leases) != 1 {
			t.Fatalf("a start after the clock jumped an hour: %d leases, want the nine-minute one kept", len(leases))
		}
		if want := g.Lease.TTLDeadline + time.Hour.Milliseconds(); leases[0].TTLDeadline != want {
			t.Errorf("deadline after the start: %d, want %d", leases[0].TTLDeadline, want)
		}
		if evs := clockEvents(t, st); len(evs) != 1 || evs[0]["at"] != "start" || evs[0]["skewMs"] != float64(time.Hour.Milliseconds()) {
			t.Errorf("clock.jumped events %v, want one of an hour at start", evs)
		}
		if got := st.names("lease.expired"); len(got) != 0 {
			t.Errorf("lease.expired at start: %v", got)
		}
		time.Sleep(time.Until(granted.Add(tenMinutes)) - time.Millisecond)
		synctest.Wait()
		if len(h2.e.Leases(Caller{Admin: true})) != 1 {
			t.Fatal("the lease expired before its ten minutes")
		}
		time.Sleep(time.Millisecond)
		synctest.Wait()
		if len(h2.e.Leases(Caller{Admin: true})) != 0 {
			t.Fatal("the lease outlived its ten minutes")
		}
	})
}

// A lease renewed after the wall clock jumped but before the engine is told
// of the jump (the daemon reads its clocks once a second) has its deadline
// in the clock's new time already: clock.jumped must not move it a second
// time. Its expiry stays where the renewal put it, ten minutes on, and its
// shown deadline stays on it. Moved by the skew, a jump back an hour would
// expire it at once and a jump forward keep it an hour late.
func TestALeaseRenewedBeforeAJumpIsToldKeepsItsExpiry(t *testing.T) {
	for _, jump := range []time.Duration{time.Hour, -time.Hour} {
		t.Run(jump.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var wall jumpable
				st := newMemStore()
				h := build(t, st, fixed(2), nil, nil, func(_ *harness, o *Options) { o.Wall = wall.now })
				in := ios
				in.TTLMs = tenMinutes.Milliseconds()
				g := h.mustGrant(h.acquire("a", in))

				time.Sleep(time.Minute)
				wall.jump(jump)
				time.Sleep(200 * time.Millisecond)
				renewed, err := h.e.Renew(Caller{Principal: "a"}, contract.LeaseRenewInput{LeaseID: g.Lease.ID})
				if err != nil {
					t.Fatal(err)
				}
				renewedAt := time.Now()
				time.Sleep(800 * time.Millisecond)
				h.e.Maintenance().ClockJumped(jump, nil)
				synctest.Wait()

				leases := h.e.Leases(Caller{Admin: true})
				if len(leases) != 1 {
					t.Fatalf("the wall clock jumped %s: the lease renewed after the jump ended when the jump was told", jump)
				}
				if leases[0].TTLDeadline != renewed.TTLDeadline {
					t.Errorf("deadline after clock.jumped: %d, want %d, where the renewal after the jump put it", leases[0].TTLDeadline, renewed.TTLDeadline)
				}
				time.Sleep(time.Until(renewedAt.Add(tenMinutes)) - time.Millisecond)
				synctest.Wait()
				if n := len(h.e.Leases(Caller{Admin: true})); n != 1 {
					t.Fatalf("the wall clock jumped %s: the lease expired before the ten minutes of its renewal", jump)
				}
				time.Sleep(time.Millisecond)
				synctest.Wait()
				if n := len(h.e.Leases(Caller{Admin: true})); n != 0 {
					t.Fatalf("the wall clock jumped %s: the lease outlived the ten minutes of its renewal", jump)
				}
			})
		})
	}
}
