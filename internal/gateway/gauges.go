package gateway

import (
	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/queue"
)

// FleetGauges is what a metrics scrape reads of the fleet: its workers by
// connection, and the running slots, devices by state and active leases
// the connected workers last reported, summed per platform.
type FleetGauges struct {
	Workers  map[contract.WorkerConnection]int
	Capacity map[contract.Platform]contract.PlatformCapacity
	Devices  map[contract.Platform]map[contract.DeviceState]int
	Leases   map[contract.Platform]int
}

// viewCounts are one platform's devices by state and active leases in a
// worker's status.
type viewCounts struct {
	devices map[contract.DeviceState]int
	leases  int
}

// countView counts a status's devices by platform and state, and its
// leases by their device's platform.
func countView(devices []contract.Device, leases []contract.LeaseRecord) map[contract.Platform]viewCounts {
	out := map[contract.Platform]viewCounts{}
	platformOf := make(map[string]contract.Platform, len(devices))
	for _, d := range devices {
		platformOf[d.ID] = d.Spec.Platform
		c := out[d.Spec.Platform]
		if c.devices == nil {
			c.devices = map[contract.DeviceState]int{}
		}
		c.devices[d.State]++
		out[d.Spec.Platform] = c
	}
	for _, l := range leases {
		if p, ok := platformOf[l.DeviceID]; ok {
			c := out[p]
			c.leases++
			out[p] = c
		}
	}
	return out
}

// Gauges reads the fleet's counts under its lock: a step per worker and
// platform, never one per device or lease.
func (f *Fleet) Gauges() FleetGauges {
	f.mu.Lock()
	defer f.mu.Unlock()
	g := FleetGauges{Workers: map[contract.WorkerConnection]int{}, Capacity: map[contract.Platform]contract.PlatformCapacity{},
		Devices: map[contract.Platform]map[contract.DeviceState]int{}, Leases: map[contract.Platform]int{}}
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
		for p, c := range w.counts {
			if g.Devices[p] == nil {
				g.Devices[p] = map[contract.DeviceState]int{}
			}
			for st, n := range c.devices {
				g.Devices[p][st] += n
			}
			g.Leases[p] += c.leases
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
