package bintest

import (
	"net"
	"os"
	"path/filepath"
	"strconv"
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

// FreePort is a local TCP port that was free a moment ago.
func FreePort() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return strconv.Itoa(l.Addr().(*net.TCPAddr).Port), nil
}
