package daemon

import (
	"context"
	"database/sql"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/simlock/simlock/internal/config"
	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/core"
)

// outsideLock takes the database's write lock from a second connection, as
// `sqlite3 simlock.db 'BEGIN EXCLUSIVE; …'` in another process does, and
// returns what gives it back.
func outsideLock(t *testing.T, path string) (release func()) {
	t.Helper()
	other, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := other.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{"PRAGMA busy_timeout = 5000", "BEGIN EXCLUSIVE", "INSERT INTO events (id, timestamp, event) VALUES ('evt_outside', 1, 'outside.write')"} {
		if _, err := conn.ExecContext(context.Background(), q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	done := false
	release = func() {
		if !done {
			done = true
			if _, err := conn.ExecContext(context.Background(), "ROLLBACK"); err != nil {
				t.Errorf("ROLLBACK: %v", err)
			}
			conn.Close()
			other.Close()
		}
	}
	t.Cleanup(release)
	return release
}

// A database another process holds locked past busy_timeout fails the
// calls that need to save a decision with INTERNAL, those calls only, and
// changes nothing: the daemon keeps serving, reads answer meanwhile, a
// lease that expires under the lock expires once it is given back, and
// the calls that failed work when made again.
func TestALockedDatabaseFailsTheCallNotTheDaemon(t *testing.T) {
	home := tempHome(t)
	cfg, err := config.Parse([]byte(`{"lease":{"minTtlMs":1000}}`)) // b's lease is to expire soon
	if err != nil {
		t.Fatal(err)
	}
	d, err := Start(t.Context(), Options{Home: home, Version: "test", Config: cfg, Drivers: demoDrivers(t),
		Host: core.Host{CPUs: 8, RAMBytes: 64 << 30}, StoreBusyTimeout: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Stop("test over") })
	ctx := context.Background()
	a := dial(t, home, "agent-a", false)
	ga, err := a.RequestLease(ctx, contract.LeaseRequestInput{Platform: contract.PlatformIOS, TTLMs: 60_000}, nil)
	if err != nil {
		t.Fatal(err)
	}
	b := dial(t, home, "agent-b", false)
	gb, err := b.RequestLease(ctx, contract.LeaseRequestInput{Platform: contract.PlatformAndroid, TTLMs: 1000}, nil)
	if err != nil {
		t.Fatal(err)
	}
	admin := dial(t, home, "ops", true)
	events, _, err := admin.Subscribe(ctx)
	if err != nil {
		t.Fatal(err)
	}

	release := outsideLock(t, filepath.Join(home, DBName))
	var renewed contract.LeaseRecord
	err = a.Call(ctx, contract.OpLeaseRenew, contract.LeaseRenewInput{LeaseID: ga.Lease.ID}, &renewed)
	if code(err) != contract.CodeInternal || !strings.Contains(err.Error(), "locked by another process") {
		t.Errorf("renew while another process holds the database: %v, want INTERNAL saying the database is locked", err)
	}
	c := dial(t, home, "agent-c", false)
	if _, err := c.RequestLease(ctx, contract.LeaseRequestInput{Platform: contract.PlatformIOS, NoWait: true}, nil); code(err) != contract.CodeInternal {
		t.Errorf("lease request while another process holds the database: %v, want INTERNAL", err)
	}
	if st, err := admin.StatusWith(ctx, contract.StatusGetInput{Summary: true}); err != nil || st.Counts == nil || st.Counts.Leases != 2 {
		t.Errorf("status while the database is locked: %+v, %v; want an answer counting the 2 leases", st.Counts, err)
	}
	// Agent B's lease passes its deadline under the lock: its expiry
	// waits for the lock, and is not lost.
	wait := time.After(time.Until(time.UnixMilli(gb.Lease.TTLDeadline)) + 500*time.Millisecond)
	for waiting := true; waiting; {
		select {
		case ev := <-events:
			if ev.Event == "lease.expired" {
				t.Fatalf("a lease expired while the database was locked: %s", ev.Payload)
			}
		case <-wait:
			waiting = false
		}
	}
	select {
	case <-d.Stopped():
		t.Fatal("the daemon stopped because another process held its database")
	default:
	}
	release()

	timeout := time.After(10 * time.Second)
	for expired := false; !expired; {
		select {
		case ev := <-events:
			expired = ev.Event == "lease.expired" && strings.Contains(string(ev.Payload), gb.Lease.ID)
		case <-timeout:
			t.Fatalf("lease %s, past its deadline under the lock, did not expire once the lock was given back", gb.Lease.ID)
		}
	}
	if err := a.Call(ctx, contract.OpLeaseRenew, contract.LeaseRenewInput{LeaseID: ga.Lease.ID}, &renewed); err != nil {
		t.Errorf("renew once the lock is given back: %v", err)
	}
	if _, err := c.RequestLease(ctx, contract.LeaseRequestInput{Platform: contract.PlatformIOS, NoWait: true}, nil); err != nil {
		t.Errorf("lease request once the lock is given back: %v", err)
	}
	if err := d.engine.Err(); err != nil {
		t.Errorf("the engine stopped deciding: %v", err)
	}
}

// On a gateway too, a database another process holds locked fails the
// call that needed it, and only that call: the fleet queue decides nothing
// it could not save, so once the lock is given back the same request is
// decided as ever, and the gateway never stops.
func TestALockedDatabaseFailsTheGatewaysCallNotItsQueue(t *testing.T) {
	gcfg, err := config.Parse([]byte(`{"mode":"gateway","http":{"enabled":true,"port":0}}`))
	if err != nil {
		t.Fatal(err)
	}
	gw, home := startDaemonOpts(t, Options{Config: gcfg, StoreBusyTimeout: 200 * time.Millisecond})
	ctx := context.Background()
	agent := dial(t, home, "agent-a", false)
	if _, err := agent.StatusWith(ctx, contract.StatusGetInput{WaitReady: true}); err != nil {
		t.Fatal(err)
	}
	ask := contract.LeaseRequestInput{Platform: contract.PlatformIOS, NoWait: true}
	_, before := agent.RequestLease(ctx, ask, nil)
	if code(before) == "" || code(before) == contract.CodeInternal {
		t.Fatalf("a request to a gateway with no worker: %v, want its refusal", before)
	}

	release := outsideLock(t, filepath.Join(home, DBName))
	if _, err := agent.RequestLease(ctx, ask, nil); code(err) != contract.CodeInternal || !strings.Contains(err.Error(), "locked by another process") {
		t.Errorf("a request while another process holds the gateway's database: %v, want INTERNAL saying the database is locked", err)
	}
	release()

	if _, err := agent.RequestLease(ctx, ask, nil); code(err) != code(before) {
		t.Errorf("the same request once the lock was given back: %v, want %s as before the lock", err, code(before))
	}
	select {
	case <-gw.Stopped():
		t.Fatal("the gateway stopped because another process held its database")
	default:
	}
}
