package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/simlock/simlock/internal/client"
	"github.com/simlock/simlock/internal/config"
	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/core"
	"github.com/simlock/simlock/internal/driver"
	"github.com/simlock/simlock/internal/driver/demo"
	"github.com/simlock/simlock/internal/wire"
)

// tempHome is a short temporary SIMLOCK_HOME (a socket path must stay short).
func tempHome(tb testing.TB) string {
	tb.Helper()
	home, err := os.MkdirTemp("", "sld")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { os.RemoveAll(home) })
	return home
}

func demoDrivers(tb testing.TB) map[contract.Platform]driver.Driver {
	tb.Helper()
	drivers := map[contract.Platform]driver.Driver{}
	for _, p := range contract.Platforms() {
		d, err := demo.New(demo.Options{Platform: p})
		if err != nil {
			tb.Fatal(err)
		}
		drivers[p] = d
	}
	return drivers
}

// A client that connects the moment the socket first accepts, and reads
// admin.token right then, gets the admin role: the token is in place before
// the daemon listens. Each round starts a daemon on the same home while a
// dialer spins on the socket, so a daemon that listened first would be
// caught reading no token (or the last start's).
func TestTheFirstAcceptedClientReadsThisStartsAdminToken(t *testing.T) {
	home := tempHome(t)
	sock := SocketPath(home)
	tokenPath := filepath.Join(home, AdminTokenName)
	for round := range 50 {
		type first struct {
			conn  net.Conn
			token []byte
			err   error
		}
		got := make(chan first, 1)
		spinning := make(chan struct{})
		quit := make(chan struct{})
		go func() {
			// Its own thread, and bare system calls: the loop must be
			// fast enough to land in a gap of microseconds.
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			once := false
			for {
				if nc, ok := dialRaw(sock); ok {
					// Nothing between the accept and the read.
					b, rerr := os.ReadFile(tokenPath)
					got <- first{conn: nc, token: b, err: rerr}
					return
				}
				if !once {
					once = true
					close(spinning)
				}
				select {
				case <-quit:
					got <- first{err: errors.New("the daemon did not start")}
					return
				default:
				}
			}
		}()
		<-spinning
		d, err := Start(context.Background(), Options{Home: home, Version: "test", Config: config.Default(), Host: core.Host{CPUs: 8, RAMBytes: 64 << 30}})
		if err != nil {
			close(quit)
			<-got
			t.Fatalf("round %d: start: %v", round, err)
		}
		f := <-got
		if f.err != nil {
			d.Stop("test over")
			t.Fatalf("round %d: admin.token when the socket first accepted: %v", round, f.err)
		}
		c, err := client.New(context.Background(), f.conn, contract.HelloInput{Principal: "ops", AdminToken: strings.TrimSpace(string(f.token))})
		if err != nil {
			d.Stop("test over")
			t.Fatalf("round %d: hello with the token read at the first accept: %v", round, err)
		}
		if role := c.Hello().Role; role != contract.RoleAdmin {
			t.Errorf("round %d: role = %s with the token read at the first accept, want admin", round, role)
		}
		c.Close()
		if err := d.Stop("test over"); err != nil {
			t.Fatalf("round %d: stop: %v", round, err)
		}
	}
}

// dialRaw connects to a unix socket with bare system calls; ok is false
// while nothing listens.
func dialRaw(path string) (net.Conn, bool) {
	fd, err := syscall.Socket(syscall.AF_UNIX, syscall.SOCK_STREAM, 0)
	if err != nil {
		return nil, false
	}
	if err := syscall.Connect(fd, &syscall.SockaddrUnix{Name: path}); err != nil {
		syscall.Close(fd)
		return nil, false
	}
	f := os.NewFile(uintptr(fd), path)
	defer f.Close()
	nc, err := net.FileConn(f) // a dup of fd
	return nc, err == nil
}

// status.get with waitReady parks while the drivers are still starting and
// answers the full status once they have; without the flag it answers
// "starting" meanwhile.
func TestStatusWaitReadyParksUntilStartupConverged(t *testing.T) {
	home := tempHome(t)
	entered := make(chan struct{})
	release := make(chan struct{})
	drivers := demoDrivers(t)
	setup := func(ctx context.Context, _ map[contract.Platform][]string) (DriverSetup, error) {
		close(entered)
		select {
		case <-release:
		case <-ctx.Done():
			return DriverSetup{}, ctx.Err()
		}
		return DriverSetup{Drivers: drivers}, nil
	}
	// t.Context ends before the cleanups run, which unblocks setup if the
	// test stops early, so Stop does not wait for it forever.
	d, err := Start(t.Context(), Options{Home: home, Version: "test", Config: config.Default(), SetupDrivers: setup, Host: core.Host{CPUs: 8, RAMBytes: 64 << 30}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Stop("test over") })
	<-entered

	// Frames by hand, in one write, so the daemon reads the waitReady call
	// before the plain ones: their answers prove it has had it meanwhile.
	nc, err := net.Dial("unix", SocketPath(home))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	r := wire.NewReader(nc, 1<<20)
	next := func() contract.Response {
		t.Helper()
		_ = nc.SetReadDeadline(time.Now().Add(10 * time.Second))
		b, err := r.Next()
		if err != nil {
			t.Fatalf("read a frame: %v", err)
		}
		var resp contract.Response
		if err := json.Unmarshal(b, &resp); err != nil {
			t.Fatalf("%s: %v", b, err)
		}
		return resp
	}
	frames := `{"id":"h","op":"hello","input":{"protocol":{"min":1,"max":1},"principal":"a"}}` + "\n"
	if _, err := nc.Write([]byte(frames)); err != nil {
		t.Fatal(err)
	}
	if resp := next(); string(resp.ID) != `"h"` || resp.Error != nil {
		t.Fatalf("hello: %+v", resp)
	}
	frames = `{"id":"wait","op":"status.get","input":{"waitReady":true}}` + "\n" +
		`{"id":"now","op":"status.get"}` + "\n" + `{"id":"again","op":"status.get","input":{}}` + "\n"
	if _, err := nc.Write([]byte(frames)); err != nil {
		t.Fatal(err)
	}
	// The two plain answers come in either order.
	for range 2 {
		resp := next()
		if string(resp.ID) == `"wait"` {
			t.Fatalf("status.get{waitReady} answered while the drivers were still starting: %s", resp.Result)
		}
		var st contract.Status
		if resp.Error != nil || json.Unmarshal(resp.Result, &st) != nil {
			t.Fatalf("want a plain status answer, got %s %s %+v", resp.ID, resp.Result, resp.Error)
		}
		if st.Daemon.Health != "starting" || st.Drivers != nil || st.Capacity != nil {
			t.Errorf("status.get during startup: health %q, drivers %v, capacity %v; want starting and neither", st.Daemon.Health, st.Drivers, st.Capacity)
		}
	}

	close(release)
	resp := next()
	var st contract.Status
	if string(resp.ID) != `"wait"` || resp.Error != nil || json.Unmarshal(resp.Result, &st) != nil {
		t.Fatalf("want the answer to the waitReady call, got %s %s %+v", resp.ID, resp.Result, resp.Error)
	}
	if st.Daemon.Health != "running" {
		t.Errorf("status.get{waitReady} health = %q, want running", st.Daemon.Health)
	}
	if len(st.Drivers) != 2 || !st.Drivers[0].Enabled || !st.Drivers[1].Enabled || st.Capacity == nil {
		t.Errorf("status.get{waitReady} drivers %+v, capacity %v; want both platforms served and capacity", st.Drivers, st.Capacity)
	}
}

// A startup that fails answers status.get{waitReady} with
// DAEMON_STARTUP_FAILED and the reason.
func TestStatusWaitReadyReportsAFailedStartup(t *testing.T) {
	home := tempHome(t)
	entered := make(chan struct{})
	release := make(chan struct{})
	setup := func(ctx context.Context, _ map[contract.Platform][]string) (DriverSetup, error) {
		close(entered)
		select {
		case <-release:
		case <-ctx.Done():
		}
		return DriverSetup{}, errors.New("the drivers refused to start")
	}
	d, err := Start(t.Context(), Options{Home: home, Version: "test", Config: config.Default(), SetupDrivers: setup, Host: core.Host{CPUs: 8, RAMBytes: 64 << 30}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Stop("test over") })
	<-entered
	c := dial(t, home, "a", false)
	close(release)
	_, err = c.StatusWith(context.Background(), contract.StatusGetInput{WaitReady: true})
	if code(err) != contract.CodeDaemonStartupFailed || !strings.Contains(err.Error(), "the drivers refused to start") {
		t.Errorf("status.get{waitReady} after a failed startup: %v, want DAEMON_STARTUP_FAILED with the reason", err)
	}
	select {
	case <-d.Stopped():
	default:
		t.Errorf("a failed startup did not ask the daemon to stop")
	}
}

// A caller that goes away while status.get{waitReady} is parked ends the
// call at once: the wait is bounded by the session, not by startup.
func TestStatusWaitReadyEndsWithItsSession(t *testing.T) {
	home := tempHome(t)
	entered, setup := setupUntilDone()
	d, err := Start(t.Context(), Options{Home: home, Version: "test", Config: config.Default(), SetupDrivers: setup, Host: core.Host{CPUs: 8, RAMBytes: 64 << 30}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Stop("test over") })
	<-entered
	// An HTTP request's session is its context: the dispatcher answers
	// only when the call ends, so a wait that ignored the session would
	// keep Call from returning until startup is done (never, here).
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := httpBackend{d}.Call(ctx, contract.TokenRecord{ID: "tok_a", Role: contract.TokenAgent}, contract.OpStatusGet, contract.StatusGetInput{WaitReady: true}, nil)
		done <- err
	}()
	cancel()
	select {
	case err := <-done:
		if code(err) != contract.CodeDaemonConnectionLost {
			t.Errorf("status.get{waitReady} of a session that ended: %v, want DAEMON_CONNECTION_LOST", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("status.get{waitReady} still parked 10s after its session ended")
	}
}

// A signal during startup is the stop it asks for, not a failed start:
// Wait returns no error though convergence was cut short.
func TestASignalDuringStartupStopsCleanly(t *testing.T) {
	home := tempHome(t)
	entered, setup := setupUntilDone()
	ctx, signal := context.WithCancel(context.Background())
	d, err := Start(ctx, Options{Home: home, Version: "test", Config: config.Default(), SetupDrivers: setup, Host: core.Host{CPUs: 8, RAMBytes: 64 << 30}})
	if err != nil {
		t.Fatal(err)
	}
	<-entered
	signal()
	if err := d.Wait(ctx); err != nil {
		t.Errorf("Wait after a signal during startup: %v, want nil (a clean stop)", err)
	}
}

// setupUntilDone is a driver setup that starts (entered closes) and then
// waits until startup's context ends.
func setupUntilDone() (entered chan struct{}, setup func(context.Context, map[contract.Platform][]string) (DriverSetup, error)) {
	entered = make(chan struct{})
	return entered, func(ctx context.Context, _ map[contract.Platform][]string) (DriverSetup, error) {
		close(entered)
		<-ctx.Done()
		return DriverSetup{}, ctx.Err()
	}
}
