package daemon

import (
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/simlock/simlock/internal/client"
	"github.com/simlock/simlock/internal/config"
	"github.com/simlock/simlock/internal/contract"
)

// bound is how long these tests wait for what must come soon.
const bound = 10 * time.Second

// fifo makes a named pipe in a temporary directory. A command writes to it
// what becomes of it; the test reads it, and reads EOF once every writer
// (the command and what it exec'd) is gone.
func fifo(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "fifo")
	if err := syscall.Mkfifo(p, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// readFifo opens the pipe for reading (which waits for its writer) and
// delivers everything written to it once the last writer has closed it.
func readFifo(path string) <-chan string {
	out := make(chan string, 1)
	go func() {
		f, err := os.Open(path)
		if err != nil {
			out <- "open: " + err.Error()
			return
		}
		defer f.Close()
		b, _ := io.ReadAll(f)
		out <- string(b)
	}()
	return out
}

func within(t *testing.T, ch <-chan string, what string) string {
	t.Helper()
	select {
	case s := <-ch:
		return s
	case <-time.After(bound):
		t.Fatalf("%s: nothing within %s", what, bound)
	}
	return ""
}

// startExec starts a command on lease id over c and returns once the
// command says it is ready (a line "ready" on its stdout: it has set up
// what the test watches), with the call's end to come on done.
func startExec(t *testing.T, ctx context.Context, c *client.Client, id string) (done <-chan error) {
	t.Helper()
	ready := make(chan struct{})
	var once sync.Once
	end := make(chan error, 1)
	go func() {
		_, err := c.Exec(ctx, contract.ExecInput{LeaseID: id, Tool: "simctl", Args: []string{"list"}}, func(o contract.ExecOutput) {
			if strings.Contains(o.Chunk, "ready") {
				once.Do(func() { close(ready) })
			}
		})
		end <- err
	}()
	select {
	case <-ready:
	case err := <-end:
		t.Fatalf("exec ended before its command was ready: %v", err)
	case <-time.After(bound):
		t.Fatalf("the command was not ready within %s", bound)
	}
	return end
}

// A caller that goes away ends its command, whichever way it goes: its
// connection closes, it cancels the call (call.cancel, what the client
// sends when the call's context ends, as a gateway's does when its own
// caller goes), or its HTTP session ends. The command is told with
// SIGTERM.
func TestACallerThatGoesAwayStopsItsCommand(t *testing.T) {
	p := fifo(t)
	d, home := startShellDaemon(t, `trap 'echo term > "`+p+`"; exit 143' TERM; echo ready; while :; do sleep 0.05; done`, nil)
	ctx := context.Background()

	t.Run("connection closed", func(t *testing.T) {
		c, g := execLease(t, home)
		startExec(t, ctx, c, g.Lease.ID)
		got := readFifo(p)
		c.Close()
		if s := within(t, got, "the command after its connection closed"); s != "term\n" {
			t.Errorf("the command said %q, want term: it was not stopped when its caller's connection closed", s)
		}
	})
	t.Run("call cancelled", func(t *testing.T) {
		c := dial(t, home, "b", false)
		g, err := c.RequestLease(ctx, contract.LeaseRequestInput{Platform: contract.PlatformIOS}, nil)
		if err != nil {
			t.Fatal(err)
		}
		callCtx, cancel := context.WithCancel(ctx)
		done := startExec(t, callCtx, c, g.Lease.ID)
		got := readFifo(p)
		cancel()
		if s := within(t, got, "the command after its call was cancelled"); s != "term\n" {
			t.Errorf("the command said %q, want term: it was not stopped when its call was cancelled", s)
		}
		<-done
		// The session lives on.
		if _, err := c.Status(ctx); err != nil {
			t.Errorf("the session after call.cancel: %v", err)
		}
	})
	t.Run("HTTP session ended", func(t *testing.T) {
		admin := dial(t, home, "op", true)
		var tok contract.TokenCreateResult
		if err := admin.Call(ctx, contract.OpTokenCreate, contract.TokenCreateInput{Role: contract.TokenAgent}, &tok); err != nil {
			t.Fatal(err)
		}
		g, err := dial(t, home, tok.Token.ID, false).RequestLease(ctx, contract.LeaseRequestInput{Platform: contract.PlatformIOS}, nil)
		if err != nil {
			t.Fatal(err)
		}
		sctx, end := context.WithCancel(ctx)
		ready := make(chan struct{})
		var once sync.Once
		done := make(chan error, 1)
		go func() {
			_, err := httpBackend{d}.Call(sctx, tok.Token, contract.OpDeviceExec, contract.ExecInput{LeaseID: g.Lease.ID, Tool: "simctl", Args: []string{"list"}},
				func(p contract.Push) {
					if p.Output != nil && strings.Contains(p.Output.Chunk, "ready") {
						once.Do(func() { close(ready) })
					}
				})
			done <- err
		}()
		select {
		case <-ready:
		case err := <-done:
			t.Fatalf("exec over HTTP ended before its command was ready: %v", err)
		case <-time.After(bound):
			t.Fatalf("the command was not ready within %s", bound)
		}
		got := readFifo(p)
		end()
		if s := within(t, got, "the command after its HTTP session ended"); s != "term\n" {
			t.Errorf("the command said %q, want term", s)
		}
		if err := <-done; code(err) != contract.CodeCancelled {
			t.Errorf("the call of a caller that went: %v, want CANCELLED", err)
		}
	})
}

// A command that ignores SIGTERM is killed execStopGrace later.
func TestACommandThatIgnoresSIGTERMIsKilledAfterTheGrace(t *testing.T) {
	p := fifo(t)
	// The pipe stays open in sleep, which inherits it and the ignored
	// TERM: the reader's EOF is sleep's death.
	_, home := startShellDaemon(t, `trap '' TERM; exec 3>"`+p+`"; echo started >&3; echo ready; exec sleep 60`, nil)
	got := readFifo(p)
	c, g := execLease(t, home)
	ctx, cancel := context.WithCancel(context.Background())
	startExec(t, ctx, c, g.Lease.ID)
	t0 := time.Now()
	cancel()
	s := within(t, got, "the command that ignores SIGTERM")
	took := time.Since(t0)
	if s != "started\n" || took < execStopGrace-time.Second {
		t.Errorf("the command ended %s after its call was cancelled (said %q), want killed after the %s grace", took, s, execStopGrace)
	}
}

// A lease runs at most exec.maxConcurrent commands; one more is
// TOO_MANY_STREAMS before anything runs, and a command's end frees its
// place. Other leases have their own.
func TestALeaseRunsAtMostExecMaxConcurrentCommands(t *testing.T) {
	cfg, err := config.Default().Override("exec.maxConcurrent", "2")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	ran, gate := filepath.Join(dir, "ran"), fifo(t)
	// Each run notes its first argument; "wait" ends when the test says
	// (a line on gate), "quick" at once, anything else runs on.
	_, home := startShellDaemon(t, `echo "$1" >> "`+ran+`"; case "$1" in wait) read x < "`+gate+`";; quick) ;; *) exec sleep 60;; esac`, cfg)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c, g := execLease(t, home)
	run := func(c *client.Client, id, arg string) (contract.ExecResult, error) {
		return c.Exec(ctx, contract.ExecInput{LeaseID: id, Tool: "simctl", Args: []string{arg}}, func(contract.ExecOutput) {})
	}
	start := func(c *client.Client, id, arg string) <-chan error {
		t.Helper()
		started := make(chan struct{})
		end := make(chan error, 1)
		go func() {
			_, err := c.ExecStarted(ctx, contract.ExecInput{LeaseID: id, Tool: "simctl", Args: []string{arg}}, func() { close(started) }, func(contract.ExecOutput) {})
			end <- err
		}()
		select {
		case <-started:
		case err := <-end:
			t.Fatalf("exec %s ended before it started: %v", arg, err)
		case <-time.After(bound):
			t.Fatalf("exec %s did not start within %s", arg, bound)
		}
		return end
	}
	waiting := start(c, g.Lease.ID, "wait")
	start(c, g.Lease.ID, "long")

	_, err = run(c, g.Lease.ID, "third")
	ce := contract.AsError(err)
	if ce == nil || ce.Code != contract.CodeTooManyStreams || ce.Details["maxConcurrent"] != float64(2) || ce.Details["leaseId"] != g.Lease.ID {
		t.Fatalf("a third command on the lease: %v, want TOO_MANY_STREAMS naming maxConcurrent 2 and the lease", err)
	}
	// Another lease is not held back by this one's.
	other := dial(t, home, "b", false)
	og, err := other.RequestLease(ctx, contract.LeaseRequestInput{Platform: contract.PlatformIOS}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res, err := run(other, og.Lease.ID, "quick"); err != nil || res.ExitCode != 0 {
		t.Errorf("a command on another lease: %+v, %v; want it run", res, err)
	}

	// The waiting command ends; its place is free by the time its call
	// answers.
	w, err := os.OpenFile(gate, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.WriteString(w, "go\n"); err != nil {
		t.Fatal(err)
	}
	w.Close()
	if err := <-waiting; err != nil {
		t.Fatalf("the waiting command: %v", err)
	}
	if res, err := run(c, g.Lease.ID, "quick"); err != nil || res.ExitCode != 0 {
		t.Errorf("a command once one of the two ended: %+v, %v; want it run", res, err)
	}
	if b, _ := os.ReadFile(ran); strings.Contains(string(b), "third") {
		t.Errorf("the refused command ran: %q", b)
	}
}

// call.cancel names a call of its own session only: another session, of
// the same principal or an admin, naming every id the first could have
// used cancels nothing, and the first session's command runs to its end.
func TestCallCancelReachesNoOtherSessionsCall(t *testing.T) {
	p, gate := fifo(t), fifo(t)
	_, home := startShellDaemon(t, `trap 'echo term > "`+p+`"; exit 143' TERM; echo ready; read x < "`+gate+`"; echo done > "`+p+`"`, nil)
	ctx := context.Background()
	c, g := execLease(t, home)
	done := startExec(t, ctx, c, g.Lease.ID)
	got := readFifo(p)
	for _, other := range []*client.Client{dial(t, home, "a", false), dial(t, home, "op", true)} {
		for n := 1; n <= 64; n++ {
			for _, id := range []string{strconv.Quote(strconv.Itoa(n)), strconv.Itoa(n)} {
				var res contract.CallCancelResult
				if err := other.Call(ctx, contract.OpCallCancel, contract.CallCancelInput{ID: json.RawMessage(id)}, &res); err != nil {
					t.Fatalf("call.cancel %s from another session: %v", id, err)
				}
				if res.Cancelled {
					t.Errorf("call.cancel %s from another session answered cancelled: it reached a call that is not its own", id)
				}
			}
		}
	}
	// Opened read-write, the pipe takes the line whether or not the
	// command is still there to read it.
	w, err := os.OpenFile(gate, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if _, err := io.WriteString(w, "go\n"); err != nil {
		t.Fatal(err)
	}
	if s := within(t, got, "the command after other sessions' call.cancel"); s != "done\n" {
		t.Errorf("the command said %q, want done: another session's call.cancel stopped it", s)
	}
	if err := <-done; err != nil {
		t.Errorf("the exec of the session nobody else may cancel: %v", err)
	}
}

// A lease's end stops its commands before its device is cleaned, whoever
// ends it: a command that ran on would reach a device that is no longer
// its holder's. The call answers UNKNOWN_LEASE; the device's clean comes
// after the command has ended.
func TestALeasesEndStopsItsCommands(t *testing.T) {
	p := fifo(t)
	// The command's TERM trap says so, then takes its time to end, and
	// leaves a mark just before it does: a clean that comes before the
	// mark came while the command still ran.
	ended := filepath.Join(t.TempDir(), "ended")
	_, home := startShellDaemon(t, `trap 'echo term > "`+p+`"; sleep 0.3; : > "`+ended+`"; exit 143' TERM; echo ready; while :; do sleep 0.05; done`, nil)
	ctx := context.Background()
	c, g := execLease(t, home)
	evs, _, err := dial(t, home, "watcher", true).Subscribe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	done := startExec(t, ctx, c, g.Lease.ID)
	got := readFifo(p)
	if _, err := c.Release(ctx, g.Lease.ID); err != nil {
		t.Fatal(err)
	}
	if s := within(t, got, "the command after its lease ended"); s != "term\n" {
		t.Errorf("the command said %q, want term: it ran on after its lease ended", s)
	}
	awaitClean(t, evs, func() {
		if _, err := os.Stat(ended); err != nil {
			t.Errorf("the device was cleaned before its lease's command ended")
		}
	})
	if err := <-done; code(err) != contract.CodeUnknownLease {
		t.Errorf("the exec of a lease that ended: %v, want UNKNOWN_LEASE", err)
	}
}

// awaitClean waits, at most bound, for the next device.reclaimed among evs,
// and runs check as it comes.
func awaitClean(t *testing.T, evs <-chan contract.Event, check func()) {
	t.Helper()
	timeout := time.After(bound)
	for {
		select {
		case ev := <-evs:
			if ev.Event == "device.reclaimed" {
				check()
				return
			}
		case <-timeout:
			t.Fatalf("the device of the lease that ended was not cleaned within %s", bound)
		}
	}
}
