package gateway

import (
	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/queue"
)

// FleetGauges is what a metrics scrape reads of the fleet: its workers by
// connection, and the running slots the connected workers last reported,
// summed per platform.
type FleetGauges struct {
	Workers  map[contract.WorkerConnection]int
	Capacity map[contract.Platform]contract.PlatformCapacity
}

// Gauges reads the fleet's counts under its lock: a step per worker and
// platform, never one per device or lease.
func (f *Fleet) Gauges() FleetGauges {
	f.mu.Lock()
	defer f.mu.Unlock()
	g := FleetGauges{Workers: map[contract.WorkerConnection]int{}, Capacity: map[contract.Platform]contract.PlatformCapacity{}}
	for _, w := range f.workers {
		g.Workers[w.view.Connection]++
		if w.view.Connection != contract.WorkerConnected || w.view.Capacity == nil {
			continue
		}
		for p, pc := range w.view.Capacity.Platforms {
			sum := g.Capacity[p]
			sum.Running += pc.Running
			sum.Reserved += pc.Reserved
			sum.MaxRunning += pc.MaxRunning
			g.Capacity[p] = sum
		}
	}
	return g
}

// Lines reads the fleet queue's line of each platform: its depth and its
// oldest waiter's arrival, a step per platform.
func (l *Leasing) Lines() []queue.LineCount {
	var out []queue.LineCount
	l.q.View(func() { out = l.q.LinesLocked(nil) })
	return out
}
