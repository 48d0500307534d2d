//go:build !linux && !darwin

package wallclock

import "errors"

// bootClock is not known here: no reading compares, and no jump is seen.
func bootClock() (int64, string, error) {
	return 0, "", errors.New("no boot clock on this platform")
}
