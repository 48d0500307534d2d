package bintest

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
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

// FreePort is a local TCP port the OS handed out a moment ago: it listens
// on 127.0.0.1:0, reads the port it was given and closes the listener. A
// test asks for one only where the daemon cannot bind port 0 and report
// what it bound (a port it must find again after a restart, or the port of
// a program it starts, such as its own adb server); everywhere else it
// hands the daemon port 0. The port is in the kernel's ephemeral range,
// where Linux gives a listener on port 0 odd ports first and an outgoing
// connection even ones, so the connections of the tests beside this one
// seldom take it before its use.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("no free TCP port on 127.0.0.1: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// Env is the test process's environment without anything that would
// change simlock's behaviour (its own SIMLOCK_* settings, an agent
// session's id), plus the SIMLOCK_HOME dir and the demo driver: what a
// test runs the binary with.
func Env(dir string) []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "SIMLOCK_") || k == "CLAUDE_CODE_SESSION_ID" || k == "CODEX_THREAD_ID" {
			continue
		}
		env = append(env, kv)
	}
	return append(env, "SIMLOCK_HOME="+dir, "SIMLOCK_DRIVERS=demo")
}
