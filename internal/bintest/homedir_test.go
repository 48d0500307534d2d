package bintest

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// fakeBin is a stand-in for the binary: a script that records its
// arguments and runs a "daemon" holding the home's lock.
func fakeBin(t *testing.T) string {
	t.Helper()
	bin, err := filepath.Abs(filepath.Join("testdata", "fakesimlock"))
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

func calls(t *testing.T, dir string) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "calls"))
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSpace(string(b)), "\n")
}

// alive reports whether pid is a running process (not a zombie).
func alive(pid int) bool {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return syscall.Kill(pid, 0) == nil
	}
	// The state follows the command name in parentheses.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] != 'Z'
}

// A Home writes its settings before anything else runs, starts the daemon
// and knows its pid, and at the end stops it and removes the directory.
func TestAHomeSetsUpStartsAndCleansUp(t *testing.T) {
	var dir string
	var pid int
	t.Run("home", func(t *testing.T) {
		h := NewHome(t, fakeBin(t), HomeOptions{}, "lease.defaultTtlMs", "60000", "http.enabled", "true")
		dir = h.Dir
		if got := calls(t, dir); len(got) != 2 || got[0] != "config set lease.defaultTtlMs 60000" || got[1] != "config set http.enabled true" {
			t.Fatalf("calls before any test command = %q, want the two settings in order", got)
		}
		pid = h.StartDaemon()
		if pid != h.PID || pid <= 0 || !LockHeld(dir) || LockPID(dir) != pid {
			t.Fatalf("StartDaemon = %d (PID %d, lock pid %d, held %v), want the daemon's pid holding the lock", pid, h.PID, LockPID(dir), LockHeld(dir))
		}
		if id, secret := h.Token("agent", "ci"); id != "tok_1" || secret != "slk_secret" {
			t.Errorf("Token = %q, %q", id, secret)
		}
	})
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("the home %s is still there after the test (%v)", dir, err)
	}
	if alive(pid) {
		t.Errorf("the daemon (pid %d) still runs after the test's cleanup", pid)
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
}

// A daemon that ignores daemon stop is killed at cleanup; with
// StopQuietly that is a log line, not a failure.
func TestAStubbornDaemonIsKilledAtCleanup(t *testing.T) {
	var pid int
	start := time.Now()
	ok := t.Run("home", func(t *testing.T) {
		h := NewHome(t, fakeBin(t), HomeOptions{StopQuietly: true})
		pid = h.StartDaemon()
		if err := os.WriteFile(h.Path("stubborn"), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	})
	if !ok {
		t.Fatal("the home's test failed: StopQuietly should make a killed daemon a log line")
	}
	if alive(pid) {
		t.Errorf("the stubborn daemon (pid %d) still runs after cleanup", pid)
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	if took := time.Since(start); took > 2*stopBound+5*time.Second {
		t.Errorf("cleanup took %s", took)
	}
}
