// Package pgtest runs a throwaway PostgreSQL server for tests: a cluster
// made by Debian's initdb in a temporary directory, served on loopback at a
// port the OS picked, a fresh database per test, and stopped (pg_ctl stop
// -m fast) and deleted when the test that started it ends; Stop and Restart
// take it down and up again in between, as an operator's restart does.
//
// Without PostgreSQL's binaries (Debian's postgresql package) a test
// skips, except under CI=true, where it fails (testtool.FindGlob).
//
// PostgreSQL refuses to run as root. When the tests run as root, initdb and
// the server run as the user nobody, in a directory given to it; otherwise
// as the test's own user.
package pgtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/simlock/simlock/internal/testtool"
)

// install says how to get the binaries.
const install = "install Debian's postgresql package (apt-get install postgresql)"

// superuser is the cluster's superuser, which the tests connect as (trust
// authentication on loopback, so no password).
const superuser = "postgres"

// Cluster is a running throwaway PostgreSQL server.
type Cluster struct {
	bin  string // the directory of initdb, pg_ctl and postgres
	dir  string // holds data/ and the server's log
	port int
	cred *syscall.Credential // nil: run as the test's own user
	dbs  atomic.Int64
	// down is set while Stop has the server stopped.
	down atomic.Bool
}

// Start starts a cluster that lives until t ends.
func Start(t testing.TB) *Cluster {
	t.Helper()
	initdb := testtool.FindGlob(t, install, "/usr/lib/postgresql/*/bin/initdb")
	c := &Cluster{bin: filepath.Dir(initdb)}
	dir, err := os.MkdirTemp("", "simlock-pgtest-")
	if err != nil {
		t.Fatal(err)
	}
	c.dir = dir
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	if os.Geteuid() == 0 {
		c.cred, err = nobody()
		if err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(dir, int(c.cred.Uid), int(c.cred.Gid)); err != nil {
			t.Fatal(err)
		}
	}
	if out, err := c.run("initdb", "-D", c.data(), "-U", superuser, "--auth=trust", "--no-sync", "-E", "UTF8", "--locale=C"); err != nil {
		t.Fatalf("initdb: %v\n%s", err, out)
	}
	// The port is the OS's pick, free when picked; another program may
	// take it before the server binds it, so a failed bind tries another.
	var last error
	for range 5 {
		if c.port, err = freePort(); err != nil {
			t.Fatal(err)
		}
		if last = c.start(); last == nil {
			break
		}
		if !strings.Contains(last.Error(), "could not bind") && !strings.Contains(last.Error(), "could not create any TCP/IP sockets") {
			break
		}
	}
	if last != nil {
		t.Fatalf("start PostgreSQL: %v", last)
	}
	t.Cleanup(func() {
		if c.down.Load() {
			return
		}
		if out, err := c.run("pg_ctl", "stop", "-D", c.data(), "-m", "fast", "-w"); err != nil {
			t.Errorf("pg_ctl stop: %v\n%s", err, out)
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
	if out, err := c.run("pg_ctl", "stop", "-D", c.data(), "-m", "fast", "-w"); err != nil {
		t.Fatalf("pg_ctl stop: %v\n%s", err, out)
	}
	c.down.Store(true)
}

// Restart starts the server Stop stopped, on the same port and with the
// same data, waiting until it accepts connections.
func (c *Cluster) Restart(t testing.TB) {
	t.Helper()
	if err := c.start(); err != nil {
		t.Fatalf("restart PostgreSQL: %v", err)
	}
	c.down.Store(false)
}

func (c *Cluster) data() string { return filepath.Join(c.dir, "data") }

// start starts the server on c.port, waiting until it accepts connections.
// Its error holds the server's log.
func (c *Cluster) start() error {
	logPath := filepath.Join(c.dir, "server-"+strconv.Itoa(c.port)+".log")
	opts := fmt.Sprintf("-c listen_addresses=127.0.0.1 -p %d -k %s -c fsync=off -c synchronous_commit=off -c full_page_writes=off",
		c.port, c.data())
	out, err := c.run("pg_ctl", "start", "-D", c.data(), "-l", logPath, "-w", "-t", "60", "-o", opts)
	if err != nil {
		log, _ := os.ReadFile(logPath)
		return fmt.Errorf("%w\n%s\n%s", err, out, log)
	}
	return nil
}

// run runs one of the cluster's programs as the cluster's user.
func (c *Cluster) run(name string, args ...string) ([]byte, error) {
	cmd := exec.Command(filepath.Join(c.bin, name), args...)
	cmd.Dir = c.dir
	cmd.Env = append(os.Environ(), "LC_ALL=C")
	if c.cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: c.cred}
	}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.Bytes(), err
}

// Port is the server's port on 127.0.0.1.
func (c *Cluster) Port() int { return c.port }

// URL is a postgres:// URL of database db as the superuser.
func (c *Cluster) URL(db string) string {
	u := url.URL{Scheme: "postgres", User: url.User(superuser), Host: net.JoinHostPort("127.0.0.1", strconv.Itoa(c.port)),
		Path: "/" + db, RawQuery: "sslmode=disable"}
	return u.String()
}

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

// nobody is the credential of the user nobody.
func nobody() (*syscall.Credential, error) {
	u, err := user.Lookup("nobody")
	if err != nil {
		return nil, fmt.Errorf("PostgreSQL will not run as root, and there is no user nobody to run it as: %w", err)
	}
	uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
	gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
	if err := errors.Join(err1, err2); err != nil {
		return nil, fmt.Errorf("user nobody: %w", err)
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}

// freePort is a port on 127.0.0.1 the OS reports free.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
