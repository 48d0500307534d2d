package e2e

import (
	"context"
	"errors"
	"io/fs"
	"net/url"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/simlock/simlock/internal/store/pgtest"
)

// A gateway whose gateway.store is a PostgreSQL URL keeps its state there:
// a lease granted through it is still listed and renews under its id after
// the gateway is killed and started again, and config get shows the URL
// with its password replaced.
func TestAGatewayOnPostgreSQLKeepsItsLeasesAcrossARestart(t *testing.T) {
	t.Parallel()
	pg := pgtest.Start(t)
	u, err := url.Parse(pg.Database(t))
	if err != nil {
		t.Fatal(err)
	}
	// The cluster trusts loopback, so any password connects; it must
	// never be shown.
	const secret = "hunter2-secret"
	u.User = url.UserPassword(u.User.Username(), secret)
	f := newFleet(t, "gateway.store", u.String())

	got := f.gw.run("config", "get", "gateway.store")
	if got.code != 0 {
		t.Fatalf("config get gateway.store\n%s", got)
	}
	if strings.Contains(got.stdout+got.stderr, secret) {
		t.Fatalf("config get gateway.store shows the password: %s", got)
	}
	if !strings.Contains(got.stdout, "127.0.0.1") {
		t.Fatalf("config get gateway.store = %q; want the URL, redacted", got.stdout)
	}

	w := f.worker("worker-a", 1)
	id := instanceID(t, w)
	f.await("the worker connected", 10*time.Second, connected(id))
	lease := f.gw.leaseDetached("holder", "ios").Lease.ID
	// The grant is in PostgreSQL, and the gateway keeps no file of its own.
	conn, err := pgx.Connect(context.Background(), u.String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var grants int
	if err := conn.QueryRow(context.Background(), "SELECT count(*) FROM gateway_grants WHERE $1 IN (key, worker_lease_id)", lease).Scan(&grants); err != nil {
		t.Fatalf("read the grant records: %v", err)
	}
	if grants != 1 {
		t.Fatalf("PostgreSQL holds %d grant records of lease %s; want 1", grants, lease)
	}
	if _, err := os.Stat(f.gw.path("simlock.db")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a gateway on PostgreSQL made a SQLite file in its home (stat: %v)", err)
	}

	if err := syscall.Kill(lockPID(f.gw.Dir), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if !waitLockFree(f.gw.Dir, 10*time.Second) {
		t.Fatal("the gateway still holds its lock 10 s after SIGKILL")
	}
	f.gw.startDaemon()
	f.await("the worker reconnected", 10*time.Second, connected(id))

	list := f.gw.run("list", "--leases")
	if list.code != 0 || !strings.Contains(list.stdout, lease) {
		t.Fatalf("after the restart the gateway's list does not show lease %s\n%s", lease, list)
	}
	if r := f.gw.run("lease", "renew", "--agent-id", "holder", lease); r.code != 0 {
		t.Fatalf("renew of %s after the gateway restarted on PostgreSQL\n%s", lease, r)
	}
	// One lease per requester holds across the restart, from the store.
	expectFailure(t, f.gw.run("lease", "--platform", "ios", "--agent-id", "holder", "--detach", "--no-wait"), 13, "REQUESTER_ALREADY_LEASED")
	if b, _ := os.ReadFile(f.gw.path("daemon.log")); strings.Contains(string(b), secret) {
		t.Fatalf("the gateway's log shows the store's password")
	}
}
