package wallclock

import (
	"os"
	"strings"

	"golang.org/x/sys/unix"
)

// bootClock is CLOCK_BOOTTIME, which counts suspend, and the kernel's boot
// id.
func bootClock() (ns int64, id string, err error) {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_BOOTTIME, &ts); err != nil {
		return 0, "", err
	}
	b, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return 0, "", err
	}
	return ts.Nano(), strings.TrimSpace(string(b)), nil
}
