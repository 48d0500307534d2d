package cli

import (
	"fmt"
	"os"
	"strings"
	"syscall"
)

// exitReexecFailed is daemon run's exit when a gateway replica deposed as
// leader could not execute itself again to come back as a follower.
const exitReexecFailed = 16

// reexec replaces the process with a new run of the same binary, with the
// same arguments (less the on-demand start's --notify-fd: that pipe was
// answered and closed) and environment. The daemon has stopped by then:
// its home's lock, socket and ports are let go (and every file it opened
// is close-on-exec), so the new run claims them afresh. It returns only
// when the exec failed.
func reexec(args []string) error {
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("find this program to run it again: %w", err)
	}
	if err := syscall.Exec(exe, reexecArgs(args), os.Environ()); err != nil {
		return fmt.Errorf("run %s again: %w", exe, err)
	}
	return nil
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
