package postgres

import (
	"context"
	"strings"
	"testing"

	"github.com/simlock/simlock/internal/store/pgtest"
	"github.com/simlock/simlock/internal/store/storetest"
)

func openTemp(t *testing.T, c *pgtest.Cluster) *DB {
	t.Helper()
	db, err := Open(context.Background(), c.Database(t), Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// The PostgreSQL backend gives the answers every backend gives.
func TestConformance(t *testing.T) {
	c := pgtest.Start(t)
	storetest.Run(t, func(t *testing.T) storetest.Backend { return openTemp(t, c) })
}

// A URL's password is never in an error: not when the URL cannot be read,
// not when the server cannot be reached.
func TestAnErrorNeverPrintsTheURLsPassword(t *testing.T) {
	const secret = "hunter2-secret"
	for _, u := range []string{
		"postgres://simlock:" + secret + "@127.0.0.1:notaport/db",
		"postgres://simlock:" + secret + "@127.0.0.1:1/db?sslmode=disable&connect_timeout=2",
		"postgres://simlock@127.0.0.1:1/db?sslmode=disable&connect_timeout=2&password=" + secret,
		"host=127.0.0.1 port=1 password=" + secret + " sslmode=disable connect_timeout=2",
	} {
		db, err := Open(context.Background(), u, Options{})
		if err == nil {
			db.Close()
			t.Errorf("Open(%s) succeeded; want an error", Redact(u))
			continue
		}
		if strings.Contains(err.Error(), secret) {
			t.Errorf("Open's error prints the password: %v", err)
		}
	}
}

// Opening a database twice (as two replicas do) migrates it once, and a
// second store on it sees what the first committed.
func TestASecondOpenFindsTheSchemaAndTheData(t *testing.T) {
	c := pgtest.Start(t)
	url := c.Database(t)
	a, err := Open(context.Background(), url, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if err := a.PutWorker(context.Background(), storetestWorker); err != nil {
		t.Fatal(err)
	}
	b, err := Open(context.Background(), url, Options{})
	if err != nil {
		t.Fatalf("a second Open of a migrated database: %v", err)
	}
	defer b.Close()
	ws, err := b.Workers(context.Background())
	if err != nil || len(ws) != 1 || ws[0] != storetestWorker {
		t.Errorf("the second store's Workers = %+v, %v; want the worker the first wrote", ws, err)
	}
}
