// Package pgserver runs a throwaway PostgreSQL server: a cluster made by
// Debian's initdb in a directory of the caller's, served on 127.0.0.1 at a
// port the OS picked, and stopped (pg_ctl stop -m fast) by Stop. The tests'
// clusters (internal/store/pgtest) and the fleet benchmark's (internal/bench)
// both start theirs here, so there is one lookup of the binaries and one way
// to run them.
//
// PostgreSQL refuses to run as root. When the caller is root, initdb and the
// server run as the user nobody, and the directory is given to it;
// otherwise as the caller's own user.
package pgserver

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
)

// InitdbGlob matches Debian's initdb of every installed major version.
const InitdbGlob = "/usr/lib/postgresql/*/bin/initdb"

// Install says how to get the binaries.
const Install = "install Debian's postgresql package (apt-get install postgresql)"

// Superuser is the cluster's superuser. Loopback connections are trusted,
// so it needs no password.
const Superuser = "postgres"

// ErrNotInstalled is Find's error when no initdb matches InitdbGlob.
var ErrNotInstalled = errors.New("no PostgreSQL server binaries (" + InitdbGlob + "): " + Install)

// Find returns the directory of the newest installed initdb, pg_ctl and
// postgres.
func Find() (string, error) {
	ms, _ := filepath.Glob(InitdbGlob)
	if len(ms) == 0 {
		return "", ErrNotInstalled
	}
	sort.Strings(ms)
	return filepath.Dir(ms[len(ms)-1]), nil
}

// Options is how a cluster runs.
type Options struct {
	// Bin is the directory of initdb, pg_ctl and postgres (Find).
	Bin string
	// Dir is an existing directory the cluster may fill (data/ and the
	// server's logs); the caller removes it after Stop.
	Dir string
	// Fast turns off fsync, synchronous commit and full-page writes: for
	// tests, which need no durability. A benchmark leaves it false, so a
	// commit costs what it costs an operator's server.
	Fast bool
}

// Server is a running throwaway PostgreSQL server.
type Server struct {
	opts Options
	port int
	cred *syscall.Credential // nil: run as the caller's own user
}

// Start makes a cluster in opts.Dir and starts it, waiting until it
// accepts connections. On an error nothing is left running.
func Start(opts Options) (*Server, error) {
	s := &Server{opts: opts}
	if os.Geteuid() == 0 {
		var err error
		if s.cred, err = nobody(); err != nil {
			return nil, err
		}
		if err := os.Chown(opts.Dir, int(s.cred.Uid), int(s.cred.Gid)); err != nil {
			return nil, fmt.Errorf("pgserver: give %s to nobody: %w", opts.Dir, err)
		}
	}
	args := []string{"-D", s.data(), "-U", Superuser, "--auth=trust", "-E", "UTF8", "--locale=C"}
	if opts.Fast {
		args = append(args, "--no-sync")
	}
	if out, err := s.run("initdb", args...); err != nil {
		if s.cred != nil && errors.Is(err, fs.ErrPermission) {
			return nil, fmt.Errorf("pgserver: initdb runs as the user nobody, who cannot reach %s (is a directory above it private? set TMPDIR to one it can reach): %w", opts.Dir, err)
		}
		return nil, fmt.Errorf("pgserver: initdb: %w\n%s", err, out)
	}
	// The port is the OS's pick, free when picked; another program may
	// take it before the server binds it, so a failed bind tries another.
	var last error
	for range 5 {
		var err error
		if s.port, err = freePort(); err != nil {
			return nil, fmt.Errorf("pgserver: %w", err)
		}
		if last = s.start(); last == nil {
			return s, nil
		}
		if !strings.Contains(last.Error(), "could not bind") && !strings.Contains(last.Error(), "could not create any TCP/IP sockets") {
			break
		}
	}
	return nil, fmt.Errorf("pgserver: start PostgreSQL: %w", last)
}

func (s *Server) data() string { return filepath.Join(s.opts.Dir, "data") }

// start starts the server on s.port, waiting until it accepts connections.
// Its error holds the server's log.
func (s *Server) start() error {
	logPath := filepath.Join(s.opts.Dir, "server-"+strconv.Itoa(s.port)+".log")
	opts := fmt.Sprintf("-c listen_addresses=127.0.0.1 -p %d -k %s", s.port, s.data())
	if s.opts.Fast {
		opts += " -c fsync=off -c synchronous_commit=off -c full_page_writes=off"
	}
	out, err := s.run("pg_ctl", "start", "-D", s.data(), "-l", logPath, "-w", "-t", "60", "-o", opts)
	if err != nil {
		log, _ := os.ReadFile(logPath)
		return fmt.Errorf("%w\n%s\n%s", err, out, log)
	}
	return nil
}

// Restart starts a server that Stop stopped, on the same port and with the
// same data, waiting until it accepts connections.
func (s *Server) Restart() error { return s.start() }

// Stop stops the server (fast shutdown: sessions are ended), waiting until
// it is gone.
func (s *Server) Stop() error {
	if out, err := s.run("pg_ctl", "stop", "-D", s.data(), "-m", "fast", "-w"); err != nil {
		return fmt.Errorf("pgserver: pg_ctl stop: %w\n%s", err, out)
	}
	return nil
}

// run runs one of the cluster's programs as the cluster's user.
func (s *Server) run(name string, args ...string) ([]byte, error) {
	cmd := exec.Command(filepath.Join(s.opts.Bin, name), args...)
	cmd.Dir = s.opts.Dir
	cmd.Env = append(os.Environ(), "LC_ALL=C")
	if s.cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: s.cred}
	}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.Bytes(), err
}

// Port is the server's port on 127.0.0.1.
func (s *Server) Port() int { return s.port }

// URL is a postgres:// URL of database db as the superuser.
func (s *Server) URL(db string) string {
	u := url.URL{Scheme: "postgres", User: url.User(Superuser), Host: net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port)),
		Path: "/" + db, RawQuery: "sslmode=disable"}
	return u.String()
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
