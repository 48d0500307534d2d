package cli

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// exitReexecFailed is daemon run's exit when a gateway replica deposed as
// leader could not execute itself again to come back as a follower.
const exitReexecFailed = 16

// lockFDEnv names, to the next run of a deposed gateway replica, the
// descriptor of the home's lock, still held: the home is never without its
// daemon while the process runs itself again, so an on-demand start by the
// CLI meanwhile finds the home taken rather than starting a daemon of its
// own. The daemon takes it only if it is the home's lock file.
const lockFDEnv = "SIMLOCK_DAEMON_LOCK_FD"

// reexec replaces the process with a new run of the same binary, with the
// same arguments (less the on-demand start's --notify-fd: that pipe was
// answered and closed) and environment. The daemon has stopped by then:
// its socket and ports are let go (every file it opened is close-on-exec),
// so the new run claims them afresh; lock, the home's lock file still
// locked, is handed over (lockFDEnv) when not nil. It returns only when
// the exec failed.
func reexec(args []string, lock *os.File) error {
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("find this program to run it again: %w", err)
	}
	env := withoutEnv(os.Environ(), lockFDEnv)
	if lock != nil {
		// Kept open across the exec: a lock held by an open file
		// description survives it.
		if _, _, errno := syscall.Syscall(syscall.SYS_FCNTL, lock.Fd(), syscall.F_SETFD, 0); errno != 0 {
			return fmt.Errorf("keep the home's lock across the run again: %w", errno)
		}
		env = append(env, fmt.Sprintf("%s=%d", lockFDEnv, lock.Fd()))
	}
	if err := syscall.Exec(exe, reexecArgs(args), env); err != nil {
		return fmt.Errorf("run %s again: %w", exe, err)
	}
	return nil
}

// inheritedLock is the lock file the run before this one handed over
// (lockFDEnv's value), nil when there is none. The descriptor is taken
// for close-on-exec again at once; the daemon checks it is the home's lock
// file before it relies on it.
func inheritedLock(value string) *os.File {
	if value == "" {
		return nil
	}
	fd, err := strconv.Atoi(value)
	if err != nil || fd < 3 {
		return nil
	}
	syscall.CloseOnExec(fd)
	return os.NewFile(uintptr(fd), "simlock daemon lock")
}

// withoutEnv is env without the variable name.
func withoutEnv(env []string, name string) []string {
	out := env[:0:0]
	for _, kv := range env {
		if !strings.HasPrefix(kv, name+"=") {
			out = append(out, kv)
		}
	}
	return out
}

// reexecArgs is args without --notify-fd and its value.
func reexecArgs(args []string) []string {
	out := make([]string, 0, len(args))
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			return append(out, args[i:]...)
		case a == "--notify-fd" || a == "-notify-fd":
			i++ // its value
		case strings.HasPrefix(a, "--notify-fd=") || strings.HasPrefix(a, "-notify-fd="):
		default:
			out = append(out, a)
		}
	}
	return out
}
