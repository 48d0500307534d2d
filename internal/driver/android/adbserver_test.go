package android_test

import (
	"errors"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/shirou/gopsutil/v4/process"

	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/driver"
	"github.com/simlock/simlock/internal/driver/android"
	"github.com/simlock/simlock/internal/runner"
	"github.com/simlock/simlock/internal/shimtest"
)

// serverStarts counts the adb servers the driver started.
func serverStarts(t *testing.T, f *fixture) []string {
	t.Helper()
	var out []string
	for _, c := range findCalls(t, f.shims, "adb", "nodaemon", "server") {
		out = append(out, c.Args[1])
	}
	return out
}

func TestAdbServerIsPrivateAndAdoptedOnRestart(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	d1 := newDriver(t, f.opts)
	port := strconv.Itoa(f.port)

	starts := findCalls(t, f.shims, "adb", "nodaemon", "server")
	if len(starts) != 1 || !slices.Equal(starts[0].Args, []string{"-P", port, "nodaemon", "server"}) {
		t.Fatalf("server starts = %v, want one `adb -P %s nodaemon server`", starts, port)
	}
	for k, v := range map[string]string{"ADB_MDNS": "0", "ADB_USB": "0", "ADB_EMU": "0", "ADB_REJECT_KILL_SERVER": "1",
		"ADB_LOCAL_TRANSPORT_MAX_PORT": "5683", "ANDROID_ADB_SERVER_PORT": port} {
		if got := starts[0].Env[k]; got != v {
			t.Errorf("server env %s = %q, want %q", k, got, v)
		}
	}
	rec, ok := readRecord(t, f.home)
	if !ok || rec.Port != f.port || !alive(rec.Pid) || !slices.Equal(rec.Cmdline, []string{f.tool("adb"), "-P", port, "nodaemon", "server"}) {
		t.Fatalf("adb-server.json = %+v (present %v), want the live server's pid and command line", rec, ok)
	}
	if !listening(f.port) {
		t.Fatal("the server does not listen")
	}

	// A user's kill-server against simlock's server is refused.
	res := runCommand(t, driver.Command{Path: f.tool("adb"), Args: []string{"kill-server"},
		Env: append(f.shimEnv(), "ANDROID_ADB_SERVER_PORT="+port)})
	if res.ExitCode == 0 || !listening(f.port) || !alive(rec.Pid) {
		t.Errorf("adb kill-server stopped simlock's server (exit %d: %s)", res.ExitCode, res.Stderr)
	}

	// A second driver on the same home, as after a daemon restart, adopts
	// the running server instead of starting another.
	d2 := newDriver(t, f.opts)
	if got := serverStarts(t, f); len(got) != 1 {
		t.Errorf("the restarted driver started a server: %d starts", len(got))
	}
	if rec2, _ := readRecord(t, f.home); rec2.Pid != rec.Pid {
		t.Errorf("adb-server.json names pid %d after adoption, want %d", rec2.Pid, rec.Pid)
	}
	if env := d2.LeaseEnvironment(); env["ANDROID_ADB_SERVER_PORT"] != port {
		t.Errorf("LeaseEnvironment = %v", env)
	}

	// The adopting driver did not start the server, so closing it leaves
	// the server for the next simlock; the starting driver stops it.
	if err := d2.Close(); err != nil {
		t.Fatal(err)
	}
	if !listening(f.port) || !alive(rec.Pid) {
		t.Fatal("closing the adopting driver stopped the server")
	}
	if err := d1.Close(); err != nil {
		t.Fatal(err)
	}
	if listening(f.port) || alive(rec.Pid) {
		t.Error("Close did not stop the server its driver started")
	}
	if _, ok := readRecord(t, f.home); ok {
		t.Error("adb-server.json outlived its server")
	}
}

func TestAdbServerReplacesStaleRecords(t *testing.T) {
	t.Parallel()
	f := newFixture(t)

	// A record whose server has exited.
	d1 := newDriver(t, f.opts)
	stale, _ := readRecord(t, f.home)
	if err := d1.Close(); err != nil {
		t.Fatal(err)
	}
	writeRecord(t, f.home, stale)
	newDriver(t, f.opts)
	rec, _ := readRecord(t, f.home)
	if rec.Pid == stale.Pid || !alive(rec.Pid) || !listening(f.port) || len(serverStarts(t, f)) != 2 {
		t.Fatalf("after a stale record: record %+v, %d starts; want a new live server", rec, len(serverStarts(t, f)))
	}

	// A record naming a live process that is not an adb server (its pid
	// was reused): the process is left alone.
	g := newFixture(t)
	writeRecord(t, g.home, serverRecord{Pid: os.Getpid(), Port: g.port,
		Cmdline: []string{g.tool("adb"), "-P", strconv.Itoa(g.port), "nodaemon", "server"}})
	newDriver(t, g.opts)
	if rec, _ := readRecord(t, g.home); rec.Pid == os.Getpid() || !listening(g.port) {
		t.Errorf("after a reused pid: record %+v; want a new server", rec)
	}

	// simlock's own server from before, but on another port than now
	// configured: it is stopped and one on the new port started.
	h := newFixture(t)
	newDriver(t, h.opts)
	old, _ := readRecord(t, h.home)
	h.opts.AdbPort = freePort(t)
	newDriver(t, h.opts)
	if listening(old.Port) || alive(old.Pid) {
		t.Error("the server on the old port still runs")
	}
	if rec, _ := readRecord(t, h.home); rec.Port != h.opts.AdbPort || !listening(rec.Port) {
		t.Errorf("record %+v, want a server on %d", rec, h.opts.AdbPort)
	}
}

func writeRecord(t *testing.T, home string, rec serverRecord) {
	t.Helper()
	b := []byte(`{"pid":` + strconv.Itoa(rec.Pid) + `,"port":` + strconv.Itoa(rec.Port) + `,"cmdline":[`)
	for i, a := range rec.Cmdline {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendQuote(b, a)
	}
	b = append(b, "]}"...)
	if err := os.WriteFile(filepath.Join(home, "adb-server.json"), b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// foreignListener holds a port the way a server simlock did not start
// would.
func foreignListener(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	return l.Addr().(*net.TCPAddr).Port
}

func TestAdbServerRefusesAForeignPort(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.opts.AdbPort = foreignListener(t)
	// Even with a record naming a dead server of simlock's on that port.
	writeRecord(t, f.home, serverRecord{Pid: 1 << 22, Port: f.opts.AdbPort,
		Cmdline: []string{f.tool("adb"), "-P", strconv.Itoa(f.opts.AdbPort), "nodaemon", "server"}})
	err := newRefused(t, f.opts)
	var serr *android.AdbServerError
	if !errors.As(err, &serr) || serr.Reason != android.AdbOccupied || serr.Port != f.opts.AdbPort {
		t.Fatalf("New on a port held by a stranger = %v, want *AdbServerError occupied on %d", err, f.opts.AdbPort)
	}
	if len(serverStarts(t, f)) != 0 || len(calls(t, f.shims, "adb")) != 0 {
		t.Error("New ran adb against a port it does not own")
	}
	if !listening(f.opts.AdbPort) {
		t.Error("the stranger's listener was disturbed")
	}
}

func TestAdbPortValidation(t *testing.T) {
	t.Parallel()
	for _, port := range []int{5037, 80, 1023, 65536, -1} {
		f := newFixture(t)
		f.opts.AdbPort = port
		err := newRefused(t, f.opts)
		var serr *android.AdbServerError
		if !errors.As(err, &serr) || serr.Reason != android.AdbInvalidPort || serr.Port != port {
			t.Errorf("New with adb port %d = %v, want *AdbServerError invalid-port", port, err)
		}
		if _, err := os.Stat(f.root); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("New with adb port %d claimed the root before refusing", port)
		}
	}
}

// noStarts runs tools but refuses to start long-lived programs, recording
// what it was asked to start.
type noStarts struct {
	runner.OS
	mu      sync.Mutex
	started []runner.Cmd
}

func (r *noStarts) Start(c runner.Cmd, _ string) (runner.Process, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.started = append(r.started, c)
	return nil, errors.New("this test starts no programs")
}

// TestDefaultAdbPort checks that port 0 means 5038, without touching that
// port: other tests run simlock's server there.
func TestDefaultAdbPort(t *testing.T) {
	t.Parallel()
	if android.DefaultAdbPort != 5038 {
		t.Errorf("DefaultAdbPort = %d, want 5038", android.DefaultAdbPort)
	}
	f := newFixture(t)
	run := &noStarts{}
	f.opts.AdbPort, f.opts.Runner = 0, run
	err := newRefused(t, f.opts)
	var serr *android.AdbServerError
	if !errors.As(err, &serr) || serr.Port != 5038 {
		t.Fatalf("New with the default port = %v, want an *AdbServerError on 5038 from a runner that starts nothing", err)
	}
	// 5038 is either free, and the driver tried to start its server
	// there, or someone else's, and the driver refused it.
	run.mu.Lock()
	defer run.mu.Unlock()
	switch serr.Reason {
	case android.AdbStartFailed:
		if len(run.started) != 1 || !slices.Equal(run.started[0].Args, []string{"-P", "5038", "nodaemon", "server"}) {
			t.Errorf("started %v, want adb -P 5038 nodaemon server", run.started)
		}
	case android.AdbOccupied:
		if len(run.started) != 0 {
			t.Errorf("started %v on a port held by another program", run.started)
		}
	default:
		t.Errorf("reason %q", serr.Reason)
	}
}

// TestCloseStopsOnlyItsServer closes one driver while another driver's
// server, a stranger's listener and a running emulator are about, then
// shows that a restarted driver finds the emulator again.
func TestCloseStopsOnlyItsServer(t *testing.T) {
	t.Parallel()
	f, g := newFixture(t), newFixture(t)
	stranger := foreignListener(t)
	d := newDriver(t, f.opts)
	other := newDriver(t, g.opts)
	ctx := t.Context()
	dev := provision(t, ctx, d, driver.Request{Model: "Pixel 8", OSVersion: "34"})
	ready, err := d.MakeReady(ctx, dev)
	if err != nil {
		t.Fatal(err)
	}
	emus := liveEmulators(t, f.shims)
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if listening(f.port) {
		t.Error("Close left its server running")
	}
	if !listening(g.port) || !listening(stranger) {
		t.Error("Close stopped a server it did not start")
	}
	if after := liveEmulators(t, f.shims); len(emus) != 1 || len(after) != 1 || after[0].Pid != emus[0].Pid {
		t.Errorf("emulators before Close %+v, after %+v; Close must leave them running", emus, after)
	}
	if _, err := other.ListManaged(ctx); err != nil {
		t.Errorf("the other driver lost its server: %v", err)
	}

	// A new driver, as after a restart, starts a new server, sees the
	// emulator running and can stop it.
	d2 := newDriver(t, f.opts)
	var servers map[int]struct{ Announced []int }
	readJSON(t, filepath.Join(f.shims.State, "android-adb-servers.json"), &servers)
	if console := consolePort(t, ready.Address); !slices.Contains(servers[f.port].Announced, console+1) {
		t.Errorf("the new server heard of adb ports %v, want the running emulator's %d", servers[f.port].Announced, console+1)
	}
	r, err := d2.ListManaged(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Devices) != 1 || r.Devices[0].RunState != driver.Running || r.Devices[0].Address != ready.Address {
		t.Fatalf("ListManaged after a restart = %+v, want %s running at %s", r.Devices, dev.ID, ready.Address)
	}
	if again, err := d2.MakeReady(ctx, dev); err != nil || again.Address != ready.Address {
		t.Errorf("MakeReady after a restart = %+v, %v; want the running emulator at %s", again, err, ready.Address)
	}
	if err := d2.Destroy(ctx, ready); err != nil {
		t.Fatalf("Destroy after a restart: %v", err)
	}
	if ems := liveEmulators(t, f.shims); len(ems) != 0 {
		t.Errorf("emulators after Destroy: %+v", ems)
	}
	if est := d2.Estimate(driver.OpBoot, contract.DeviceSpec{}); est.Seconds() != 70 {
		t.Errorf("boot estimate = %s", est)
	}
}

// TestAdbServerRestartsAfterItDies kills the private server under a running
// emulator: the next operation starts another, announces the emulator to it
// and works, whether the driver started the dead server or adopted it.
func TestAdbServerRestartsAfterItDies(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	d := newDriver(t, f.opts)
	ctx := ctxTimeout(t, 60*time.Second)
	dev := provision(t, ctx, d, driver.Request{Model: "Pixel 8"})
	ready, err := d.MakeReady(ctx, dev)
	if err != nil {
		t.Fatal(err)
	}
	first, _ := readRecord(t, f.home)
	killAndReap(t, ctx, first.Pid, "the adb server")

	r, err := d.ListManaged(ctx)
	if err != nil {
		t.Fatalf("ListManaged after the adb server died: %v", err)
	}
	if len(r.Devices) != 1 || r.Devices[0].RunState != driver.Running || r.Devices[0].Address != ready.Address {
		t.Errorf("ListManaged after the adb server died = %+v, want %s running at %s", r.Devices, dev.ID, ready.Address)
	}
	second, ok := readRecord(t, f.home)
	if !ok || second.Pid == first.Pid || !alive(second.Pid) || !listening(f.port) || len(serverStarts(t, f)) != 2 {
		t.Fatalf("after the server died: record %+v, %d starts; want a second live server", second, len(serverStarts(t, f)))
	}
	var servers map[int]struct{ Announced []int }
	readJSON(t, filepath.Join(f.shims.State, "android-adb-servers.json"), &servers)
	if console := consolePort(t, ready.Address); !slices.Contains(servers[f.port].Announced, console+1) {
		t.Errorf("the new server heard of adb ports %v, want the running emulator's %d", servers[f.port].Announced, console+1)
	}

	// A driver that adopted the server restarts it too, and the driver
	// that started the dead one then adopts the new one.
	d2 := newDriver(t, f.opts)
	killAndReap(t, ctx, second.Pid, "the adb server")
	if _, err := d2.ListManaged(ctx); err != nil {
		t.Fatalf("ListManaged of the adopting driver after the adb server died: %v", err)
	}
	third, _ := readRecord(t, f.home)
	if _, err := d.ListManaged(ctx); err != nil {
		t.Fatalf("ListManaged of the first driver after another restarted the server: %v", err)
	}
	if n := len(serverStarts(t, f)); n != 3 || third.Pid == second.Pid || !alive(third.Pid) {
		t.Errorf("record %+v after %d starts; want the adopting driver's one new server, shared", third, n)
	}

	// The server belongs to the driver that started it: closing the other
	// leaves it, closing that one stops it, and a closed driver starts no
	// other.
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if !alive(third.Pid) {
		t.Error("closing the driver that adopted the new server stopped it")
	}
	if err := d2.Close(); err != nil {
		t.Fatal(err)
	}
	if alive(third.Pid) || listening(f.port) {
		t.Error("Close did not stop the server its driver restarted")
	}
	if _, err := d2.ListManaged(ctx); err == nil || len(serverStarts(t, f)) != 3 {
		t.Errorf("ListManaged after Close = %v with %d server starts; want an error and no new server", err, len(serverStarts(t, f)))
	}
}

// cmdlineOf is the command line of process pid; nil when it has none.
func cmdlineOf(pid int) []string {
	p, err := process.NewProcess(int32(pid))
	if err != nil {
		return nil
	}
	args, _ := p.CmdlineSlice()
	return args
}

// TestAdbServerReplacesOneAnAdbClientStarted: while the private server is
// down, a plain adb call (a lease holder's, say) starts an ordinary server on
// the port, as adb does when none answers. The driver stops it and starts
// its own, at its next call and at its next start; a port held by anything
// that is not adb still refuses it.
func TestAdbServerReplacesOneAnAdbClientStarted(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.shims.Set(t, shimtest.SettingAdbAutoStart, "1")
	ctx := ctxTimeout(t, 60*time.Second)
	port := strconv.Itoa(f.port)
	d := newDriver(t, f.opts)

	// forkServer kills the private server and lets a plain adb call start
	// one in its place.
	forkServer := func() int {
		t.Helper()
		rec, _ := readRecord(t, f.home)
		killAndReap(t, ctx, rec.Pid, "the adb server")
		res := runCommand(t, driver.Command{Path: f.tool("adb"), Args: []string{"devices"},
			Env: append(f.shimEnv(), "ANDROID_ADB_SERVER_PORT="+port)})
		var servers map[int]struct{ Pid int }
		readJSON(t, filepath.Join(f.shims.State, "android-adb-servers.json"), &servers)
		pid := servers[f.port].Pid
		if res.ExitCode != 0 || pid == rec.Pid || !alive(pid) || !listening(f.port) {
			t.Fatalf("adb devices (exit %d: %s) started no server on %d: %+v", res.ExitCode, res.Stderr, f.port, servers)
		}
		if args := cmdlineOf(pid); !has(args, "-L", "tcp:"+port, "fork-server", "server") {
			t.Fatalf("the server adb started runs %q, not adb's fork-server command line", args)
		}
		return pid
	}
	replaced := func(when string, stray int) {
		t.Helper()
		rec, ok := readRecord(t, f.home)
		if alive(stray) || !ok || rec.Pid == stray || !alive(rec.Pid) || !listening(f.port) {
			t.Errorf("%s: the server adb started (pid %d) alive %v; record %+v; want it replaced by simlock's", when, stray, alive(stray), rec)
		}
	}

	stray := forkServer()
	if _, err := d.ListManaged(ctx); err != nil {
		t.Fatalf("ListManaged with a server adb started on the port: %v", err)
	}
	replaced("at the next call", stray)

	stray = forkServer()
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	d2, err := android.New(ctx, f.opts)
	if err != nil {
		t.Fatalf("New with a server adb started on the port = %v, want that server replaced", err)
	}
	t.Cleanup(func() { d2.Close() })
	replaced("at the next start", stray)
	if n := len(serverStarts(t, f)); n != 3 {
		t.Errorf("the driver started %d servers, want 3", n)
	}

	// Something that is not adb keeps the port, and the driver refuses it.
	g := newFixture(t)
	g.shims.Set(t, shimtest.SettingAdbAutoStart, "1")
	g.opts.AdbPort = foreignListener(t)
	err = newRefused(t, g.opts)
	var serr *android.AdbServerError
	if !errors.As(err, &serr) || serr.Reason != android.AdbOccupied || !listening(g.opts.AdbPort) {
		t.Errorf("New on a port a non-adb program holds = %v, want *AdbServerError occupied and the program left alone", err)
	}
}
