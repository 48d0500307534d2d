// Package pgtest runs a throwaway PostgreSQL server for tests: a cluster
// made by Debian's initdb in a temporary directory, served on loopback at a
// port the OS picked, a fresh database per test, and stopped (pg_ctl stop
// -m fast) and deleted when the test that started it ends; Stop and Restart
// take it down and up again in between, as an operator's restart does.
//
// Without PostgreSQL's binaries (Debian's postgresql package) a test
// skips, except under CI=true, where it fails (testtool.FindGlob).
//
// The server itself is internal/pgserver's (which runs it as the user
// nobody when the tests run as root), in its fast mode: no fsync.
package pgtest

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/simlock/simlock/internal/pgserver"
	"github.com/simlock/simlock/internal/testtool"
)

// Cluster is a running throwaway PostgreSQL server.
type Cluster struct {
	srv *pgserver.Server
	dir string // the cluster's directory, removed when its test ends
	dbs atomic.Int64
	// down is set while Stop has the server stopped.
	down atomic.Bool
}

// Start starts a cluster that lives until t ends.
func Start(t testing.TB) *Cluster {
	t.Helper()
	initdb := testtool.FindGlob(t, pgserver.Install, pgserver.InitdbGlob)
	dir, err := os.MkdirTemp("", "simlock-pgtest-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	srv, err := pgserver.Start(pgserver.Options{Bin: filepath.Dir(initdb), Dir: dir, Fast: true})
	if err != nil {
		t.Fatal(err)
	}
	c := &Cluster{srv: srv, dir: dir}
	t.Cleanup(func() {
		if c.down.Load() {
			return
		}
		if err := srv.Stop(); err != nil {
			t.Error(err)
		}
	})
	return c
}

// Stop stops the server as an operator's restart does (pg_ctl stop -m
// fast: every session is ended, its transactions rolled back), keeping its
// data for Restart. A test that stops the server restarts it before it
// ends: the databases' cleanup needs it running.
func (c *Cluster) Stop(t testing.TB) {
	t.Helper()
	if err := c.srv.Stop(); err != nil {
		t.Fatal(err)
	}
	c.down.Store(true)
}

// Restart starts the server Stop stopped, on the same port and with the
// same data, waiting until it accepts connections.
func (c *Cluster) Restart(t testing.TB) {
	t.Helper()
	if err := c.srv.Restart(); err != nil {
		t.Fatalf("restart PostgreSQL: %v", err)
	}
	c.down.Store(false)
}

// Port is the server's port on 127.0.0.1.
func (c *Cluster) Port() int { return c.srv.Port() }

// URL is a postgres:// URL of database db as the superuser.
func (c *Cluster) URL(db string) string { return c.srv.URL(db) }

// Database creates an empty database for t, dropped when t ends, and
// returns its URL.
func (c *Cluster) Database(t testing.TB) string {
	t.Helper()
	name := "t" + strconv.FormatInt(c.dbs.Add(1), 10)
	c.admin(t, "CREATE DATABASE "+name)
	t.Cleanup(func() { c.admin(t, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)") })
	return c.URL(name)
}

// admin runs sql in the postgres database.
func (c *Cluster) admin(t testing.TB, sql string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, c.URL("postgres"))
	if err != nil {
		t.Fatalf("connect to the test cluster: %v", err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, sql); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}
