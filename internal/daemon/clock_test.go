package daemon

import (
	"context"
	"database/sql"
	"encoding/json"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/simlock/simlock/internal/config"
	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/core"
	"github.com/simlock/simlock/internal/wallclock"
)

// A daemon that starts after the wall clock jumped forward an hour while it
// was down does not expire the leases that have time left: it sees the
// jump against the clock reading it stored, moves the deadlines by it, and
// records clock.jumped. The jump is made by writing the stored reading and
// deadline as a clock an hour behind would have.
func TestAStartAfterTheClockJumpedKeepsLeasesWithTimeLeft(t *testing.T) {
	if wallclock.Read().BootID == "" {
		t.Skip("no boot clock on this platform: a jump while down cannot be seen")
	}
	home := tempHome(t)
	opts := Options{Home: home, Version: "test", Config: config.Default(), Drivers: demoDrivers(t), Host: core.Host{CPUs: 8, RAMBytes: 64 << 30}}
	d, err := Start(t.Context(), opts)
	if err != nil {
		t.Fatal(err)
	}
	g, err := dial(t, home, "agent", false).RequestLease(context.Background(), contract.LeaseRequestInput{Platform: contract.PlatformIOS, TTLMs: 30 * 60_000}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Stop("test"); err != nil {
		t.Fatal(err)
	}

	const hour = int64(time.Hour / time.Millisecond)
	raw, err := sql.Open("sqlite", filepath.Join(home, DBName))
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		`UPDATE clock SET wall_ms = wall_ms - 3600000`,
		`UPDATE leases SET ttl_deadline = ttl_deadline - 3600000, last_renewed_at = last_renewed_at - 3600000 WHERE ended_at = 0`,
	} {
		if res, err := raw.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		} else if n, _ := res.RowsAffected(); n != 1 {
			t.Fatalf("%s changed %d rows, want 1", q, n)
		}
	}
	raw.Close()

	// The same drivers: the lease's device still runs, as a real one
	// would across a daemon restart.
	d2, err := Start(t.Context(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d2.Stop("test over") })
	admin := dial(t, home, "ops", true)
	var list contract.LeaseListResult
	if err := admin.Call(context.Background(), contract.OpLeaseList, contract.Empty{}, &list); err != nil {
		t.Fatal(err)
	}
	if len(list.Leases) != 1 || list.Leases[0].ID != g.Lease.ID {
		t.Fatalf("leases after a start an hour after the clock's last reading: %+v, want %s kept (it had 30 minutes left)", list.Leases, g.Lease.ID)
	}
	if off := list.Leases[0].TTLDeadline - g.Lease.TTLDeadline; off < -1000 || off > 1000 {
		t.Errorf("deadline after the start is %d ms off the granted one, want it moved back in step", off)
	}
	var evs contract.EventsReplayResult
	if err := admin.Call(context.Background(), contract.OpEventsReplay, contract.EventsReplayInput{SinceTs: 1}, &evs); err != nil {
		t.Fatal(err)
	}
	var jumped []map[string]any
	for _, ev := range evs.Events {
		switch ev.Event {
		case "clock.jumped":
			var p map[string]any
			_ = json.Unmarshal(ev.Payload, &p)
			jumped = append(jumped, p)
		case "lease.expired":
			t.Errorf("lease.expired after the start: %s", ev.Payload)
		}
	}
	if len(jumped) != 1 || jumped[0]["at"] != "start" {
		t.Fatalf("clock.jumped events %v, want one at start", jumped)
	}
	if skew, _ := jumped[0]["skewMs"].(float64); int64(skew) < hour-1000 || int64(skew) > hour+1000 {
		t.Errorf("clock.jumped skewMs %v, want about an hour", jumped[0]["skewMs"])
	}
}

// A jump of the wall clock while the daemon runs is seen within a check
// and told to the engine: clock.jumped (at running) moves the lease's
// deadline by it, and the reading after the jump is stored with it. The
// clock is a test's, which jumps an hour forward, for the engine's times
// and the daemon's readings alike.
func TestAClockJumpWhileRunningIsSeenAndRecorded(t *testing.T) {
	var jumped atomic.Bool
	boot := time.Now() // the machine's boot, as the test's clock has it
	wall := func() time.Time {
		if jumped.Load() {
			return time.Now().Add(time.Hour)
		}
		return time.Now()
	}
	read := func() wallclock.Reading {
		return wallclock.Reading{WallMs: wall().UnixMilli(), BootNs: time.Since(boot).Nanoseconds(), BootID: "test-boot"}
	}
	d, home := startDaemonOpts(t, Options{ReadClock: read, Wall: wall, Drivers: demoDrivers(t)})
	g, err := dial(t, home, "agent", false).RequestLease(context.Background(), contract.LeaseRequestInput{Platform: contract.PlatformIOS, TTLMs: 30 * 60_000}, nil)
	if err != nil {
		t.Fatal(err)
	}
	admin := dial(t, home, "ops", true)
	events, _, err := admin.Subscribe(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	jumped.Store(true)
	timeout := time.After(10 * time.Second)
	for seen := false; !seen; {
		select {
		case ev := <-events:
			if ev.Event != "clock.jumped" {
				continue
			}
			var p map[string]any
			_ = json.Unmarshal(ev.Payload, &p)
			if skew, _ := p["skewMs"].(float64); p["at"] != "running" || skew < 3_599_000 || skew > 3_601_000 || p["leases"] != float64(1) {
				t.Fatalf("clock.jumped %v, want an hour while running, for one lease", p)
			}
			seen = true
		case <-timeout:
			t.Fatal("no clock.jumped 10s after the wall clock jumped an hour")
		}
	}
	var list contract.LeaseListResult
	if err := admin.Call(context.Background(), contract.OpLeaseList, contract.Empty{}, &list); err != nil {
		t.Fatal(err)
	}
	if len(list.Leases) != 1 || list.Leases[0].TTLDeadline-g.Lease.TTLDeadline < 3_599_000 {
		t.Errorf("leases after the jump: %+v, want %s's deadline an hour later", list.Leases, g.Lease.ID)
	}
	stored, found, err := d.db.Clock(context.Background())
	if now := read(); !found || err != nil || stored.BootID != "test-boot" || now.WallMs-stored.WallMs > 10_000 || now.WallMs < stored.WallMs {
		t.Errorf("stored clock after the jump: %+v, %v, %v; want the reading after it", stored, found, err)
	}
}
