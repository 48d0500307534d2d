// Package wallclock tells when the wall clock jumped: a clock set by hand
// or stepped by NTP moves wall time without real time passing (or the
// other way), and the deadlines simlock stores as wall time (a lease's
// ttlDeadline, a device's last use) would then come early or late.
//
// A Reading pairs the wall clock with a clock that counts real time since
// the machine booted, suspend included (Linux CLOCK_BOOTTIME, macOS
// CLOCK_MONOTONIC), and the boot's id. Two readings of the same boot say
// how far the wall clock moved beyond real time between them (Skew); a
// reading saved to a file (Save, Load) lets a daemon that starts compare
// with the last run. Readings of different boots cannot be compared: the
// real time between them is not known.
//
// Its functions hold no state and are safe for concurrent use.
package wallclock

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"time"

	"github.com/simlock/simlock/internal/atomicfile"
	"github.com/simlock/simlock/internal/homedir"
)

// Reading is the wall clock and the boot clock read together.
type Reading struct {
	// WallMs is the wall clock, epoch milliseconds.
	WallMs int64 `json:"wallMs"`
	// BootNs is real time since the machine booted, suspend included.
	BootNs int64 `json:"bootNs"`
	// BootID names the boot: readings of two boots are not compared.
	BootID string `json:"bootId"`
}

// Threshold is the least skew that is a jump. NTP slews a clock by at most
// half a millisecond a second; a step of a second or more is someone
// setting it.
const Threshold = time.Second

// Skew is how far the wall clock moved beyond real time from prev to now:
// positive when it jumped forward (wall time passed that did not), negative
// when it went back, at most a Duration's range either way. ok is false
// when the readings cannot be compared: another boot, an unknown one, or a
// boot clock that went back.
func Skew(prev, now Reading) (skew time.Duration, ok bool) {
	if prev.BootID == "" || prev.BootID != now.BootID || now.BootNs < prev.BootNs {
		return 0, false
	}
	// In milliseconds: a wall clock set centuries away moves it further
	// than a Duration holds, and must not wrap round to the other sign.
	wallMs := now.WallMs - prev.WallMs
	realMs := time.Duration(now.BootNs - prev.BootNs).Round(time.Millisecond).Milliseconds()
	skewMs := wallMs - realMs
	switch {
	case skewMs > int64(math.MaxInt64/time.Millisecond):
		return math.MaxInt64, true
	case skewMs < int64(math.MinInt64/time.Millisecond):
		return math.MinInt64, true
	}
	return time.Duration(skewMs) * time.Millisecond, true
}

// Jumped reports whether a skew is a jump (at least Threshold either way).
func Jumped(skew time.Duration) bool {
	return skew >= Threshold || skew <= -Threshold
}

// Read reads the clocks now. Where the boot clock cannot be read, the
// reading has no BootID and never compares.
func Read() Reading {
	wall := time.Now()
	boot, id, err := bootClock()
	if err != nil {
		return Reading{WallMs: wall.UnixMilli()}
	}
	return Reading{WallMs: wall.UnixMilli(), BootNs: boot, BootID: id}
}

// Load reads a saved reading; found is false when there is none.
func Load(path string) (r Reading, found bool, err error) {
	b, err := homedir.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return Reading{}, false, nil
	}
	if err != nil {
		return Reading{}, false, err
	}
	if err := json.Unmarshal(b, &r); err != nil {
		return Reading{}, false, fmt.Errorf("%s is not a clock reading: %w", path, err)
	}
	return r, true, nil
}

// Save replaces the reading at path with r.
func Save(path string, r Reading) error {
	b, _ := json.Marshal(r)
	return atomicfile.Write(path, append(b, '\n'), 0o600)
}
