package android

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/shirou/gopsutil/v4/process"

	"github.com/simlock/simlock/internal/atomicfile"
	"github.com/simlock/simlock/internal/homedir"
	"github.com/simlock/simlock/internal/runner"
)

// AdbServerError is a private adb server the driver cannot use.
type AdbServerError struct {
	// Reason is AdbOccupied, AdbStartFailed or AdbInvalidPort.
	Reason string
	Port   int
	Detail string
}

// The reasons an adb server is refused.
const (
	// AdbOccupied: something simlock did not start holds the port, and it
	// is not an adb server an adb client started there, which simlock
	// would replace. simlock never attaches to a server it did not start.
	AdbOccupied = "occupied"
	// AdbStartFailed: the server did not start, or did not listen in time.
	AdbStartFailed = "start-failed"
	// AdbInvalidPort: the configured port is out of range or 5037.
	AdbInvalidPort = "invalid-port"
)

func (e *AdbServerError) Error() string {
	return fmt.Sprintf("android adb server on port %d refused (%s): %s", e.Port, e.Reason, e.Detail)
}

const (
	serverRecordName = "adb-server.json"
	serverLogName    = "adb-server.log"
	// serverStartTimeout bounds the wait for a new server to listen.
	serverStartTimeout = 10 * time.Second
	// serverStopTimeout is how long a server gets to exit on SIGTERM.
	serverStopTimeout = 5 * time.Second
)

// serverRecord is adb-server.json: the server simlock started, recorded so
// that a later simlock can recognise it by pid and full command line.
type serverRecord struct {
	Pid       int      `json:"pid"`
	Port      int      `json:"port"`
	Cmdline   []string `json:"cmdline"`
	StartedAt int64    `json:"startedAt"`
}

// serverIsolation is the private server's environment: no USB, no mDNS, no
// scan of emulator ports (emulators announce themselves, or are announced
// by register), and kill-server refused, so that a user's `adb kill-server`
// on this port cannot take simlock's devices away.
func serverIsolation(port int) []string {
	return []string{
		"ADB_EMU=0",
		"ADB_LOCAL_TRANSPORT_MAX_PORT=5683",
		"ADB_MDNS=0",
		"ADB_REJECT_KILL_SERVER=1",
		"ADB_USB=0",
		"ANDROID_ADB_SERVER_PORT=" + strconv.Itoa(port),
	}
}

// serverCmdline is how the driver starts its server: in the foreground, so
// the pid it gets is the server's own.
func (d *Driver) serverCmdline() []string {
	return []string{d.sdk.adb, "-P", strconv.Itoa(d.port), "nodaemon", "server"}
}

// isServerCmdline reports whether c looks like a command line simlock
// starts servers with; a record naming anything else is not trusted.
func isServerCmdline(c []string) bool {
	return len(c) == 5 && filepath.Base(c[0]) == "adb" && c[1] == "-P" && c[3] == "nodaemon" && c[4] == "server"
}

// ensureServerLocked adopts the server an earlier simlock started when it
// is alive with the same command line and listens, replaces it when it is
// stale, and otherwise starts a new one. A server an adb client started on
// the port is replaced too; anything else holding the port refuses the
// driver.
func (d *Driver) ensureServerLocked(ctx context.Context) error {
	want := d.serverCmdline()
	if rec, ok := readServerRecord(d.home); ok && isServerCmdline(rec.Cmdline) &&
		slices.Equal(processCmdline(ctx, rec.Pid), rec.Cmdline) {
		// The pid is still the process simlock started, not a reused one.
		if slices.Equal(rec.Cmdline, want) && listening(ctx, d.port) {
			d.log.Info("adopted the adb server an earlier simlock started", "pid", rec.Pid, "port", d.port)
			d.adopted = rec
			return nil
		}
		d.log.Info("stopping a stale adb server simlock started", "pid", rec.Pid, "port", rec.Port)
		reapServer(ctx, rec)
	}
	if listening(ctx, d.port) {
		if err := d.replaceForkedServer(ctx); err != nil {
			return err
		}
	}
	return d.startServerLocked(ctx, want)
}

func (d *Driver) startServerLocked(ctx context.Context, cmdline []string) error {
	fail := func(format string, args ...any) error {
		return &AdbServerError{Reason: AdbStartFailed, Port: d.port, Detail: fmt.Sprintf(format, args...)}
	}
	logPath := filepath.Join(d.home, serverLogName)
	p, err := d.run.Start(runner.Cmd{Path: cmdline[0], Args: cmdline[1:], Env: d.adbEnv}, logPath)
	if err != nil {
		return fail("%v", err)
	}
	srv := newChild(p, d.port, logPath)
	srv.watch(nil)
	// Record the server before it listens: if simlock dies in between, the
	// next start must still recognise the server as its own.
	rec := serverRecord{Pid: p.Pid(), Port: d.port, Cmdline: cmdline, StartedAt: time.Now().UnixMilli()}
	if err := writeServerRecord(d.home, rec); err != nil {
		srv.stop(syscall.SIGTERM, serverStopTimeout)
		return fail("record it: %v", err)
	}
	giveUp := func() {
		srv.stop(syscall.SIGTERM, serverStopTimeout)
		removeServerRecord(d.home, rec.Pid)
	}
	deadline := time.Now().Add(serverStartTimeout)
	for {
		// Exit first: a server that lost the port to someone else exits,
		// and then the port listens, but not for us.
		if srv.exited() {
			removeServerRecord(d.home, rec.Pid)
			return fail("adb exited before it listened: %s", lastLines(tail(logPath, 1024)))
		}
		if listening(ctx, d.port) {
			break
		}
		if time.Now().After(deadline) {
			giveUp()
			return fail("adb did not listen within %s", serverStartTimeout)
		}
		if !pause(ctx, 50*time.Millisecond) {
			giveUp()
			return fail("%v", ctx.Err())
		}
	}
	d.server, d.adopted = srv, serverRecord{}
	d.log.Info("started the private adb server", "pid", rec.Pid, "port", d.port)
	// A new server knows no emulators: announce the ones still running
	// from before, as it does not scan for them.
	d.registerRunning(ctx)
	return nil
}

// superviseServer makes sure the private server runs before adb is used.
// A server that exited or no longer listens is replaced now, before the
// call: adb itself would otherwise start an ordinary server on the port,
// one that knows none of simlock's emulators. A call restarts the server at
// most once, bounded as New's start is (serverStopTimeout to stop what is
// left, serverStartTimeout to listen); a server that cannot be restarted
// fails the call with the reason, and the next call tries again.
func (d *Driver) superviseServer(ctx context.Context, op string) error {
	d.srvMu.Lock()
	defer d.srvMu.Unlock()
	if d.closed {
		return crashf(op, "the android driver is closed")
	}
	if d.serverUpLocked(ctx) {
		return nil
	}
	d.log.Warn("the private adb server is gone; starting another", "port", d.port)
	if s := d.server; s != nil {
		s.stop(syscall.SIGTERM, serverStopTimeout) // alive but deaf
		removeServerRecord(d.home, s.proc.Pid())
	}
	d.server, d.adopted = nil, serverRecord{}
	if err := d.ensureServerLocked(ctx); err != nil {
		return crash(op, err)
	}
	return nil
}

// serverUpLocked reports whether the server the driver uses still runs and
// listens. An adopted server is not our child: it runs while its pid has
// the recorded command line.
func (d *Driver) serverUpLocked(ctx context.Context) bool {
	switch {
	case d.server != nil:
		if d.server.exited() {
			return false
		}
	case d.adopted.Pid != 0:
		if !slices.Equal(processCmdline(ctx, d.adopted.Pid), d.adopted.Cmdline) {
			return false
		}
	default:
		return false
	}
	return listening(ctx, d.port)
}

// stopServer stops the server this driver started and keeps any other from
// being started.
func (d *Driver) stopServer() error {
	d.srvMu.Lock()
	defer d.srvMu.Unlock()
	d.closed = true
	s := d.server
	if s == nil {
		return nil
	}
	d.server = nil
	s.stop(syscall.SIGTERM, serverStopTimeout)
	removeServerRecord(d.home, s.proc.Pid())
	d.log.Info("stopped the private adb server", "pid", s.proc.Pid(), "port", d.port)
	return nil
}

// replaceForkedServer stops the adb server an adb client started on the
// port, as adb does when no server answers it: a lease holder's adb, or
// `simlock adb`, while simlock's server was down. It knows none of
// simlock's emulators and may lack the server's isolation, and it is adb
// run by this user (see forkedServer), so it is safe to stop. Whatever else
// holds the port is left alone and refuses the driver (AdbOccupied).
func (d *Driver) replaceForkedServer(ctx context.Context) error {
	occupied := &AdbServerError{Reason: AdbOccupied, Port: d.port,
		Detail: "another program listens on it, and simlock only uses an adb server it started"}
	rec, ok := d.findForkedServer(ctx)
	if !ok {
		return occupied
	}
	d.log.Warn("stopping the adb server an adb client started on simlock's port", "pid", rec.Pid, "cmdline", strings.Join(rec.Cmdline, " "))
	reapServer(ctx, rec)
	if listening(ctx, d.port) {
		occupied.Detail = fmt.Sprintf("it still listens after the adb server an adb client started there (pid %d) was stopped", rec.Pid)
		return occupied
	}
	return nil
}

// findForkedServer looks through this user's processes for an adb server
// forked for the driver's port.
func (d *Driver) findForkedServer(ctx context.Context) (serverRecord, bool) {
	procs, err := process.ProcessesWithContext(ctx)
	if err != nil {
		return serverRecord{}, false
	}
	uid := os.Getuid()
	for _, p := range procs {
		// The command line first: it rules out nearly every process.
		args, err := p.CmdlineSliceWithContext(ctx)
		if err != nil || !isForkedServerCmdline(args, d.port) {
			continue
		}
		uids, err := p.UidsWithContext(ctx)
		if err != nil || len(uids) == 0 {
			continue
		}
		exe, err := p.ExeWithContext(ctx)
		if err != nil {
			continue
		}
		if forkedServer(procInfo{exe: exe, uid: int(uids[0]), args: args}, d.port, d.sdk.adb, uid) {
			return serverRecord{Pid: int(p.Pid), Port: d.port, Cmdline: args}, true
		}
	}
	return serverRecord{}, false
}

// procInfo is what findForkedServer reads of a process.
type procInfo struct {
	exe  string // the executable's path
	uid  int
	args []string
}

// forkedServer reports whether p is provably an adb server an adb client
// started for port: it runs as uid, its executable is the SDK's adb
// (sdkAdb) or another program named adb, and its command line is the one
// adb starts servers with.
func forkedServer(p procInfo, port int, sdkAdb string, uid int) bool {
	if p.uid != uid || !isForkedServerCmdline(p.args, port) {
		return false
	}
	return filepath.Base(p.exe) == "adb" || sameFile(p.exe, sdkAdb)
}

// isForkedServerCmdline reports whether args is how an adb client starts a
// server for port: adb -L tcp:<port> fork-server server --reply-fd <fd>,
// or -P <port> in place of -L in older adb.
func isForkedServerCmdline(args []string, port int) bool {
	if len(args) == 0 || filepath.Base(args[0]) != "adb" {
		return false
	}
	p := strconv.Itoa(port)
	forked, serves, onPort := false, false, false
	for i := 1; i < len(args); i++ {
		switch a := args[i]; {
		case a == "fork-server":
			forked = true
		case a == "server":
			serves = forked
		case a == "-L" && i+1 < len(args):
			i++
			onPort = slices.Contains([]string{"tcp:" + p, "tcp:localhost:" + p, "tcp:127.0.0.1:" + p}, args[i])
		case a == "-P" && i+1 < len(args):
			i++
			onPort = args[i] == p
		}
	}
	return forked && serves && onPort
}

// reapServer stops a server an earlier simlock started; its identity was
// just checked. It is not our child, so its exit is seen by its command line
// going away.
func reapServer(ctx context.Context, rec serverRecord) {
	gone := func() bool { return !slices.Equal(processCmdline(ctx, rec.Pid), rec.Cmdline) }
	for _, step := range []struct {
		sig  syscall.Signal
		wait time.Duration
	}{{syscall.SIGTERM, serverStopTimeout}, {syscall.SIGKILL, 2 * time.Second}} {
		_ = syscall.Kill(rec.Pid, step.sig)
		for deadline := time.Now().Add(step.wait); time.Now().Before(deadline); {
			if gone() {
				return
			}
			if !pause(ctx, 50*time.Millisecond) {
				return
			}
		}
	}
}

// processCmdline is the command line of a live process; nil when there is
// no such process or it has exited (a zombie has none).
func processCmdline(ctx context.Context, pid int) []string {
	if pid <= 0 {
		return nil
	}
	p, err := process.NewProcessWithContext(ctx, int32(pid))
	if err != nil {
		return nil
	}
	args, err := p.CmdlineSliceWithContext(ctx)
	if err != nil {
		return nil
	}
	return args
}

func readServerRecord(home string) (serverRecord, bool) {
	b, err := homedir.ReadFile(filepath.Join(home, serverRecordName))
	if err != nil {
		return serverRecord{}, false
	}
	var rec serverRecord
	if err := json.Unmarshal(b, &rec); err != nil {
		return serverRecord{}, false
	}
	return rec, true
}

// writeServerRecord replaces the record atomically, so a reader never sees
// half of it.
func writeServerRecord(home string, rec serverRecord) error {
	b, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	return atomicfile.Write(filepath.Join(home, serverRecordName), b, 0o600)
}

// removeServerRecord removes the record if it still names pid; a newer
// server's record is left alone.
func removeServerRecord(home string, pid int) {
	if rec, ok := readServerRecord(home); ok && rec.Pid == pid {
		os.Remove(filepath.Join(home, serverRecordName))
	}
}

// register announces the emulator on console port console to the private
// server, through the adb host service host:emulator:<adb port>. Emulators
// announce themselves when they start; this covers a server that started
// after them.
func (d *Driver) register(ctx context.Context, console int) error {
	dl := net.Dialer{Timeout: time.Second}
	c, err := dl.DialContext(ctx, "tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(d.port)))
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(time.Second))
	msg := "host:emulator:" + strconv.Itoa(console+1)
	if _, err := fmt.Fprintf(c, "%04x%s", len(msg), msg); err != nil {
		return err
	}
	var status [4]byte
	if _, err := io.ReadFull(c, status[:]); err != nil {
		return nil // some adb versions answer nothing
	}
	if string(status[:]) != "FAIL" {
		return nil
	}
	var n [4]byte
	if _, err := io.ReadFull(c, n[:]); err != nil {
		return fmt.Errorf("adb refused %s", msg)
	}
	size, _ := strconv.ParseUint(string(n[:]), 16, 16)
	why := make([]byte, size)
	_, _ = io.ReadFull(c, why)
	return fmt.Errorf("adb refused %s: %s", msg, why)
}

// registerRunning announces every emulator whose adb port listens in
// simlock's console range.
func (d *Driver) registerRunning(ctx context.Context) {
	var wg sync.WaitGroup
	for p := firstConsolePort; p <= lastConsolePort; p += 2 {
		if !listening(ctx, p+1) {
			continue
		}
		wg.Go(func() {
			if err := d.register(ctx, p); err != nil {
				d.log.Debug("could not announce an emulator to the adb server", "console", p, "err", err)
			}
		})
	}
	wg.Wait()
}
