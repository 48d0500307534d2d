package bintest

import (
	"errors"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// LockHeld reports whether a process holds the daemon lock of the
// SIMLOCK_HOME dir, i.e. whether a daemon runs for it. Only call it when no
// daemon can be starting: probing takes the lock for an instant.
func LockHeld(dir string) bool {
	f, err := os.OpenFile(filepath.Join(dir, "daemon.lock"), os.O_RDWR, 0)
	if err != nil {
		return false
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		return true
	}
	_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
	return false
}

// FreePort is a local TCP port that was free a moment ago. It is taken
// from 20000-29999, below the kernel's ephemeral range (32768 and up on
// Linux, 49152 and up on macOS): every port-0 listener and outgoing
// connection of the tests running beside this one gets its port from that
// range, so none of them can take this one between now and its use.
func FreePort() (int, error) {
	const base, span = 20000, 10000
	start := rand.IntN(span)
	for i := range span {
		port := base + (start+i)%span
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err == nil {
			l.Close()
			return port, nil
		}
	}
	return 0, errors.New("no free TCP port in 20000-29999")
}

// Env is the test process's environment without anything that would
// change simlock's behaviour (its own SIMLOCK_* settings, an agent
// session's id), plus the SIMLOCK_HOME dir and the demo driver: what a
// test runs the binary with.
func Env(dir string) []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "SIMLOCK_") || k == "CLAUDE_CODE_SESSION_ID" || k == "CODEX_SESSION_ID" {
			continue
		}
		env = append(env, kv)
	}
	return append(env, "SIMLOCK_HOME="+dir, "SIMLOCK_DRIVERS=demo")
}
