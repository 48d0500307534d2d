package e2e

import (
	"bytes"
	"errors"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/creack/pty"

	"github.com/simlock/simlock/internal/termtest"
)

// A person waiting at a 50-column terminal sees one live line that never
// wraps, and each step it finishes (the wait in line, the clean of the
// released device, the boot) leaves exactly one line in the scrollback.
func TestTheLiveLineInANarrowTerminalLeavesOneLinePerFinishedStep(t *testing.T) {
	h := newHome(t, "drivers.demo.provisionMs", "100", "drivers.demo.bootMs", "700", "drivers.demo.reclaimMs", "700",
		"capacity.strategy", "fixed", "capacity.config.maxRunning", "1", "capacity.config.ios.maxRunning", "1",
		"capacity.config.ios.maxDevices", "1")
	holder := h.leaseDetached("holder", "ios")

	cmd := exec.Command(simlockBin, "lease", "--platform", "ios", "--agent-id", "watcher", "--detach")
	cmd.Env = h.Env
	var stdout bytes.Buffer
	cmd.Stdout = &stdout // the grant's JSON; stderr is the terminal
	tty, err := pty.StartWithSize(cmd, &pty.Winsize{Rows: 24, Cols: 50})
	if err != nil {
		t.Fatal(err)
	}
	defer tty.Close()
	chunks := make(chan []byte, 1024)
	go func() {
		defer close(chunks)
		for {
			b := make([]byte, 4096)
			n, err := tty.Read(b)
			if n > 0 {
				chunks <- b[:n]
			}
			if err != nil {
				return // EIO once the command has exited
			}
		}
	}()
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()

	var raw bytes.Buffer
	bound := time.NewTimer(30 * time.Second)
	defer bound.Stop()
	released := false
	for done := false; !done; {
		select {
		case b, ok := <-chunks:
			if !ok {
				done = true
				break
			}
			raw.Write(b)
			if !released && strings.Contains(raw.String(), "Queued 1st") {
				// In line behind the holder: free the device.
				if r := h.run("release", holder.Lease.ID, "--agent-id", "holder"); r.code != 0 {
					t.Fatalf("release: %s", r)
				}
				released = true
			}
		case <-bound.C:
			_ = cmd.Process.Kill()
			t.Fatalf("the lease did not finish within 30s; the terminal shows:\n%s", raw.String())
		}
	}
	if err := <-exited; err != nil {
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).ExitStatus() != 0 {
			t.Fatalf("simlock lease: %v; the terminal shows:\n%s", err, raw.String())
		}
	}
	if !released {
		t.Fatalf("the request never showed it was queued; the terminal shows:\n%s", raw.String())
	}
	g := parseGrant(t, strings.TrimSpace(stdout.String()))

	screen := &termtest.Screen{Width: 50}
	screen.Write(raw.Bytes())
	lines := screen.Lines()
	var steps []string
	for _, l := range lines {
		if strings.HasPrefix(l, "✓ Leased") {
			break // the grant's own line, which may wrap like any printed line
		}
		if n := utf8.RuneCountInString(l); n >= 50 {
			t.Errorf("a live line reached the last column (%d runes), so it wrapped: %q", n, l)
		}
		steps = append(steps, l)
	}
	want := []string{"✓ Waited ", "✓ Cleaned a released iOS device (", "✓ Booted the iOS device ("}
	if len(steps) != len(want) {
		t.Fatalf("the scrollback before the grant holds %d lines, want one per finished step (%d):\n%s",
			len(steps), len(want), strings.Join(lines, "\n"))
	}
	for i, prefix := range want {
		if !strings.HasPrefix(steps[i], prefix) {
			t.Errorf("line %d is %q, want it to start %q; the scrollback:\n%s", i+1, steps[i], prefix, strings.Join(lines, "\n"))
		}
	}
	if last := lines[len(lines)-1]; !strings.Contains(strings.Join(lines, ""), g.Lease.ID) {
		t.Errorf("the grant line does not name lease %s; last line %q", g.Lease.ID, last)
	}
}

// ptyRun runs simlock with stdout and stderr on a terminal of 100 columns
// and returns what it wrote there, once it has exited.
func ptyRun(t *testing.T, h *home, args ...string) string {
	t.Helper()
	cmd := exec.Command(simlockBin, args...)
	cmd.Env = h.Env
	tty, err := pty.StartWithSize(cmd, &pty.Winsize{Rows: 24, Cols: 100})
	if err != nil {
		t.Fatal(err)
	}
	defer tty.Close()
	var out bytes.Buffer
	read := make(chan struct{})
	go func() {
		defer close(read)
		_, _ = out.ReadFrom(tty) // ends with EIO once the command exits
	}()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("simlock %v under a terminal: %v\n%s", args, err, out.String())
	}
	<-read
	return strings.ReplaceAll(out.String(), "\r\n", "\n")
}

// On a terminal a result is a table for people; --json keeps it JSON, and
// shell completion offers the daemon's lease ids.
func TestResultsAreTablesOnATerminalAndJSONWithTheFlag(t *testing.T) {
	h := newHome(t, fastDemo...)
	g := h.leaseDetached("agent-t", "ios")

	table := ptyRun(t, h, "list", "--leases")
	if !strings.Contains(table, "LEASE") || !strings.Contains(table, "EXPIRES IN") || !strings.Contains(table, g.Lease.ID) {
		t.Errorf("list --leases on a terminal is not a table naming %s:\n%s", g.Lease.ID, table)
	}
	asJSON := strings.TrimSpace(ptyRun(t, h, "list", "--leases", "--json"))
	if !strings.HasPrefix(asJSON, `{"leases":[`) || !strings.Contains(asJSON, g.Lease.ID) {
		t.Errorf("list --leases --json on a terminal is not JSON:\n%s", asJSON)
	}
	if r := h.run("__complete", "release", ""); r.code != 0 || !strings.HasPrefix(r.stdout, g.Lease.ID+"\t") {
		t.Errorf("release completes no lease id %s\n%s", g.Lease.ID, r)
	}
}
