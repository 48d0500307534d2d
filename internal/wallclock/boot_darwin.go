package wallclock

import (
	"strings"

	"golang.org/x/sys/unix"
)

// bootClock is CLOCK_MONOTONIC, which on macOS counts the time the machine
// slept, and the boot session's uuid.
func bootClock() (ns int64, id string, err error) {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		return 0, "", err
	}
	id, err = unix.Sysctl("kern.bootsessionuuid")
	if err != nil {
		return 0, "", err
	}
	return ts.Nano(), strings.TrimSpace(id), nil
}
