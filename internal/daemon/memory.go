package daemon

import (
	"runtime/debug"
	"time"
)

// giveBackQuiet is how long after a session was dropped for not reading the
// daemon gives its memory back; drops meanwhile share that collection, so
// a flood of them costs at most one forced collection per giveBackQuiet.
const giveBackQuiet = 200 * time.Millisecond

// freedSessionMemory is told that a session dropped for not reading has let
// go of its queued frames (up to outboxBytes of them).
func (d *Daemon) freedSessionMemory() {
	select {
	case d.freed <- struct{}{}:
	default: // a give-back is already due
	}
}

// giveBackMemory returns the memory dropped sessions held to the operating
// system. The runtime gives freed memory back only gradually, so without
// this a burst of sessions that never read leaves the daemon's resident
// size at its peak for minutes after they are gone. It runs until the
// daemon stops.
func (d *Daemon) giveBackMemory() {
	for {
		select {
		case <-d.life.Done():
			return
		case <-d.freed:
		}
		quiet := time.NewTimer(giveBackQuiet)
		select {
		case <-d.life.Done():
			quiet.Stop()
			return
		case <-quiet.C:
		}
		debug.FreeOSMemory()
	}
}
