package leasing

import (
	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/core"
	"github.com/simlock/simlock/internal/queue"
)

// PlatformGauges is one platform's present state as a metrics scrape reads
// it.
type PlatformGauges struct {
	Platform contract.Platform
	// QueueDepth and OldestQueuedAt (epoch ms, 0 when none waits) are the
	// platform's line.
	QueueDepth     int
	OldestQueuedAt int64
	// Leases counts the active leases on the platform's devices.
	Leases int
	// Devices counts the platform's devices by state.
	Devices map[contract.DeviceState]int
	// Capacity is the platform's line of the capacity report.
	Capacity contract.PlatformCapacity
}

// Gauges reads each platform's counts in one look under the decision
// lock. It costs a step per platform and device state, never one per
// device, lease or request: the counts are kept by the transitions that
// change them.
func (e *Engine) Gauges() []PlatformGauges {
	var out []PlatformGauges
	e.view(func() {
		capacity := core.Report(e.opts.Limits, e.reg.use, e.reg.warm)
		lines := e.q.LinesLocked(make([]queue.LineCount, 0, contract.NumPlatforms))
		for i, p := range contract.Platforms() {
			g := PlatformGauges{Platform: p, Leases: len(e.due[i]), Capacity: capacity.Platforms[p],
				Devices: make(map[contract.DeviceState]int, len(e.reg.platStates[i]))}
			for s, n := range e.reg.platStates[i] {
				if n > 0 {
					g.Devices[s] = n
				}
			}
			for _, l := range lines {
				if l.Platform == p {
					g.QueueDepth, g.OldestQueuedAt = l.Depth, l.OldestCreatedAt
				}
			}
			out = append(out, g)
		}
	})
	return out
}

// EachLease calls f with each active lease's unique key and platform, in
// one look under the decision lock: an event published after it is of a
// lease f saw or of one granted later, never of one it missed. It walks
// every lease, so it is for a start, not for a scrape. A lease whose
// device is not known is left out.
func (e *Engine) EachLease(f func(key string, p contract.Platform)) {
	e.view(func() {
		for key, l := range e.leases {
			if l.due >= 0 {
				f(key, contract.Platforms()[l.plat])
			}
		}
	})
}
