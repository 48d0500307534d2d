// Package daemontest runs a simlock daemon inside the test process, in a
// temporary SIMLOCK_HOME, and hands the test typed clients (package
// client) on its socket: the harness of the tests of code that talks to a
// daemon (the MCP server, the client, the CLI's commands) and of daemon
// behaviour that needs no binary. By default the daemon is a worker with a
// demo driver per platform whose operations take no time; Gateway makes it
// a gateway, Join a worker of one.
//
// The end-to-end tests run the real binary instead (internal/bintest).
package daemontest

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/simlock/simlock/internal/client"
	"github.com/simlock/simlock/internal/config"
	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/core"
	"github.com/simlock/simlock/internal/daemon"
	"github.com/simlock/simlock/internal/driver"
	"github.com/simlock/simlock/internal/driver/demo"
)

// Option shapes the daemon Start runs.
type Option func(*setup)

type setup struct {
	settings          []string
	provision, boot   time.Duration
	wrap              func(*demo.Driver) driver.Driver
	drivers           map[contract.Platform]driver.Driver
	principal         string
	edit              []func(*daemon.Options)
	gateway           bool
	joinURL, joinTok  string
	joinLabel, prefix string
}

// Set writes config settings (key, value pairs, as `simlock config set`
// takes them) before the daemon starts.
func Set(kv ...string) Option {
	return func(s *setup) { s.settings = append(s.settings, kv...) }
}

// DemoTimes makes the demo drivers take provision to make a device and
// boot to boot one (no time by default).
func DemoTimes(provision, boot time.Duration) Option {
	return func(s *setup) { s.provision, s.boot = provision, boot }
}

// WrapDemo passes each demo driver through wrap before the daemon starts
// (a driver that fails on cue, counts calls, …).
func WrapDemo(wrap func(*demo.Driver) driver.Driver) Option {
	return func(s *setup) { s.wrap = wrap }
}

// Drivers replaces the demo drivers.
func Drivers(d map[contract.Platform]driver.Driver) Option {
	return func(s *setup) { s.drivers = d }
}

// Principal is who Client connects as ("agent" by default).
func Principal(p string) Option {
	return func(s *setup) { s.principal = p }
}

// Gateway makes the daemon a gateway: mode gateway, with the HTTP API its
// workers join on, on a port the OS picks.
func Gateway() Option {
	return func(s *setup) { s.gateway = true }
}

// Join makes the daemon a worker of the gateway at url, joining with the
// worker token secret under label.
func Join(url, secret, label string) Option {
	return func(s *setup) { s.joinURL, s.joinTok, s.joinLabel = url, secret, label }
}

// WithOptions edits the daemon's Options last, for what no other Option
// sets (a process table, a clock, …).
func WithOptions(edit func(*daemon.Options)) Option {
	return func(s *setup) { s.edit = append(s.edit, edit) }
}

// Daemon is a daemon running in the test process.
type Daemon struct {
	T *testing.T
	// Home is the daemon's SIMLOCK_HOME.
	Home string

	d       *daemon.Daemon
	opts    daemon.Options
	client  *client.Client
	who     string
	stopped bool
}

// Start runs a daemon in a fresh temporary home and returns once it
// serves its socket (startup convergence may still run: StatusWith
// WaitReady waits for it). The test's cleanup stops it and removes the
// home.
func Start(t *testing.T, opts ...Option) *Daemon {
	t.Helper()
	s := setup{principal: "agent", prefix: "sdt"}
	for _, o := range opts {
		o(&s)
	}
	cfg := config.Default()
	var err error
	set := func(k, v string) {
		if cfg, err = cfg.Override(k, v); err != nil {
			t.Fatalf("daemontest: config %s = %s: %v", k, v, err)
		}
	}
	if s.gateway {
		set("mode", "gateway")
		set("http.enabled", "true")
		set("http.port", "0")
	}
	if s.joinURL != "" {
		set("gateway.url", s.joinURL)
		set("gateway.token", s.joinTok)
		set("gateway.label", s.joinLabel)
	}
	if len(s.settings)%2 != 0 {
		t.Fatalf("daemontest: Set takes key, value pairs")
	}
	for i := 0; i < len(s.settings); i += 2 {
		set(s.settings[i], s.settings[i+1])
	}
	drivers := s.drivers
	if drivers == nil && !s.gateway {
		drivers = map[contract.Platform]driver.Driver{}
		for _, p := range contract.Platforms() {
			dd, err := demo.New(demo.Options{Platform: p, ProvisionTime: s.provision, BootTime: s.boot})
			if err != nil {
				t.Fatal(err)
			}
			drivers[p] = dd
			if s.wrap != nil {
				drivers[p] = s.wrap(dd)
			}
		}
	}
	// Not t.TempDir(): its path is too long for a unix socket.
	home, err := os.MkdirTemp("", s.prefix)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(home) })
	o := daemon.Options{Home: home, Version: "test", Config: cfg, Drivers: drivers, Host: core.Host{CPUs: 8, RAMBytes: 64 << 30}}
	for _, e := range s.edit {
		e(&o)
	}
	d := &Daemon{T: t, Home: home, opts: o, who: s.principal}
	d.start()
	t.Cleanup(d.Stop)
	return d
}

func (d *Daemon) start() {
	d.T.Helper()
	dd, err := daemon.Start(context.Background(), d.opts)
	if err != nil {
		d.T.Fatalf("daemontest: start: %v", err)
	}
	d.d, d.stopped, d.client = dd, false, nil
}

// Daemon is the running daemon.
func (d *Daemon) Daemon() *daemon.Daemon { return d.d }

// Socket is the daemon's socket.
func (d *Daemon) Socket() string { return daemon.SocketPath(d.Home) }

// HTTPURL is where the daemon serves HTTP ("" when it does not).
func (d *Daemon) HTTPURL() string { return d.d.HTTPURL() }

// Client is a session as the Principal (one per start of the daemon,
// opened on first use and closed by the test's cleanup).
func (d *Daemon) Client() *client.Client {
	d.T.Helper()
	if d.client == nil {
		d.client = d.Dial(d.who)
	}
	return d.client
}

// Dial opens a new session as principal, closed by the test's cleanup.
func (d *Daemon) Dial(principal string) *client.Client {
	d.T.Helper()
	return d.dial(contract.HelloInput{Principal: principal})
}

// Admin opens a new session with the admin role (this start's admin
// token), closed by the test's cleanup.
func (d *Daemon) Admin() *client.Client {
	d.T.Helper()
	b, err := os.ReadFile(filepath.Join(d.Home, daemon.AdminTokenName))
	if err != nil {
		d.T.Fatalf("daemontest: admin token: %v", err)
	}
	return d.dial(contract.HelloInput{Principal: "operator", AdminToken: strings.TrimSpace(string(b))})
}

func (d *Daemon) dial(hello contract.HelloInput) *client.Client {
	d.T.Helper()
	c, err := client.Dial(context.Background(), d.Socket(), hello)
	if err != nil {
		d.T.Fatalf("daemontest: dial as %q: %v", hello.Principal, err)
	}
	d.T.Cleanup(func() { c.Close() })
	return c
}

// WorkerToken makes a worker join token on this daemon (a gateway) and
// returns its secret.
func (d *Daemon) WorkerToken() string {
	d.T.Helper()
	var tok contract.TokenCreateResult
	if err := d.Admin().Call(context.Background(), contract.OpTokenCreate, contract.TokenCreateInput{Role: contract.TokenWorker}, &tok); err != nil {
		d.T.Fatalf("daemontest: worker token: %v", err)
	}
	return tok.Secret
}

// Stop stops the daemon gracefully; stopping a stopped one does nothing.
func (d *Daemon) Stop() {
	if d.stopped {
		return
	}
	d.stopped = true
	if err := d.d.Stop("test over"); err != nil {
		d.T.Logf("daemontest: stop: %v", err)
	}
}

// Restart stops the daemon and starts it again on the same home, with the
// same options: what survives a restart is what the home kept. Sessions
// of the earlier start are closed by the daemon; Client opens a new one.
func (d *Daemon) Restart() {
	d.T.Helper()
	d.Stop()
	d.start()
}
