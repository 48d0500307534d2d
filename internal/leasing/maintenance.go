package leasing

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/queue"
)

// Maintenance is the engine's care of its devices and leases outside the
// request path: what the doctor finds and fixes (stalled transitions,
// leases past their deadline, orphans, foreign and vanished devices, slim
// advisories), quarantine retries, the idle tiers' cleanup and its rules,
// the warm pool's status, the runtimes the component installer may remove,
// a jump of the wall clock, and nuke. It decides through the engine's one
// queue, as every other change does; its methods are safe for concurrent
// use.
type Maintenance struct{ e *Engine }

// Maintenance is the engine's maintenance surface.
func (e *Engine) Maintenance() *Maintenance { return &Maintenance{e: e} }

// NukeResult is what a nuke did: the leases it ended, the requests it
// cancelled and the devices it deleted.
type NukeResult = contract.NukeResult

// nukePoll is how often a nuke that deletes devices looks again at devices
// busy with other work (a boot, a quarantine retry): those claims end in
// many places, none of which says so.
const nukePoll = 100 * time.Millisecond

// Nuke puts the engine in maintenance and clears it: it fences acquisition
// (new requests fail NO_CAPACITY, with maintenance in the details), cancels
// every waiting request (lease.rejected, reason killed), cuts every
// lease-end participant wait short and waits for the reclaims in flight,
// then ends every lease (reason killed; participants get an already
// cancelled context, and the reclaims are awaited). With deleteDevices it
// then deletes every device simlock has (device.deleted, initiator nuke); a
// device that fails to delete is quarantined. maintenance.started and
// maintenance.ended bracket it, and acquisition opens again when it
// returns. ctx bounds the waits: when it ends, Nuke returns what it did so
// far with an error, and the work it started goes on.
func (m *Maintenance) Nuke(ctx context.Context, deleteDevices bool) (NukeResult, error) {
	e := m.e
	res := NukeResult{Released: []string{}, Cancelled: []string{}, Deleted: []string{}, Stopped: []string{}}
	var inflight []chan struct{}
	err := e.try(func(tx *queue.Txn) error {
		if e.stopping || !e.started {
			return contract.Errorf(contract.CodeDaemonStopping, "the daemon is stopping")
		}
		tx.Event(contract.EvMaintenanceStarted, map[string]any{"deleteDevices": deleteDevices})
		e.ends.maintenance++
		e.cutEndsLocked(errMaintenance)
		// Waiters go first, so that none is granted a device a reclaim
		// frees while the nuke runs, only to lose it a moment later. A
		// request whose device is being started keeps the device, ready,
		// and gets no lease from it.
		res.Cancelled = tx.CancelAll(contract.Errorf(contract.CodeCancelled, "simlock nuke cancelled this request"), contract.RejectKilled, true)
		inflight = e.reclaimsLocked()
		return nil
	})
	if err != nil {
		return res, err
	}
	defer e.endMaintenance(&res)
	if err := waitAll(ctx, inflight); err != nil {
		return res, fmt.Errorf("wait for reclaims in flight: %w", err)
	}
	err = e.try(func(tx *queue.Txn) error {
		res.Released = e.endAllLocked(tx, contract.EndKilled)
		inflight = e.reclaimsLocked()
		return nil
	})
	if err != nil {
		return res, fmt.Errorf("end leases: %w", err)
	}
	if err := waitAll(ctx, inflight); err != nil {
		return res, fmt.Errorf("wait for reclaims: %w", err)
	}
	if deleteDevices {
		if err := e.deleteAll(ctx, &res); err != nil {
			return res, err
		}
		return res, nil
	}
	// Without deleting, every simulator and emulator simlock runs is
	// stopped: a nuke leaves nothing of simlock's running.
	var running []*dev
	_ = e.do(func(tx *queue.Txn) error {
		for _, p := range contract.Platforms() {
			for _, d := range e.reg.idleReady(p) {
				e.setClaim(tx, d, claimEviction)
				running = append(running, d)
			}
		}
		return nil
	})
	sort.Slice(running, func(i, j int) bool { return running[i].ID < running[j].ID })
	for _, d := range running {
		if err := e.shutdownDevice(ctx, d, "nuke"); err == nil {
			res.Stopped = append(res.Stopped, d.ID)
		}
	}
	return res, nil
}

// endMaintenance opens acquisition again and records what the nuke did.
func (e *Engine) endMaintenance(res *NukeResult) {
	sort.Strings(res.Deleted)
	err := e.do(func(tx *queue.Txn) error {
		e.ends.maintenance--
		tx.Event(contract.EvMaintenanceEnded, map[string]any{
			"released": len(res.Released), "cancelled": len(res.Cancelled), "deleted": len(res.Deleted),
		})
		return nil
	})
	if err != nil {
		e.log.Error("could not record maintenance.ended", "err", err)
	}
}

// maintenanceLocked reports whether a nuke is running: background
// upkeep (warm pool, idle tiers) should leave devices alone meanwhile.
func (e *Engine) maintenanceLocked() bool { return e.ends.maintenance > 0 }

// maintenanceFenceLocked is the error a new request gets while a nuke runs.
func (e *Engine) maintenanceFenceLocked() *contract.Error {
	if !e.maintenanceLocked() {
		return nil
	}
	return contract.Errorf(contract.CodeNoCapacity, "maintenance (nuke) in progress; try again").With("maintenance", true)
}

// deleteAll deletes every device, each once: those free now at once, those
// busy with other work once it ends. It waits only for devices there when
// it began, so work that keeps making devices (a warm pool refilling)
// cannot keep it going; those are deleted when found free. A device in a
// state that cannot be deleted (one left reclaiming with no reclaim
// running) is left as it is.
func (e *Engine) deleteAll(ctx context.Context, res *NukeResult) error {
	tried := map[string]bool{}
	var first map[string]bool
	for {
		var batch []*dev
		busy, stopping := false, false
		_ = e.do(func(tx *queue.Txn) error {
			if e.stopping {
				stopping = true
				return nil
			}
			if first == nil {
				first = make(map[string]bool, e.reg.len())
				e.reg.each(func(d *dev) bool {
					first[d.ID] = true
					return true
				})
			}
			e.reg.each(func(d *dev) bool {
				if tried[d.ID] {
					return true
				}
				if !d.idle() {
					busy = busy || first[d.ID]
					return true
				}
				tried[d.ID] = true
				switch d.State {
				case contract.DeviceReady, contract.DeviceShutdown, contract.DeviceQuarantined:
					batch = append(batch, d)
				}
				return true
			})
			for _, d := range batch {
				e.setClaim(tx, d, claimNuke)
			}
			return nil
		})
		if stopping {
			// A delete cut off by the stop would quarantine a healthy
			// device; the next nuke deletes what is left.
			return fmt.Errorf("delete devices: %w", errStopping)
		}
		deleted := make([]bool, len(batch))
		dones := make([]chan struct{}, len(batch))
		for i, d := range batch {
			done := make(chan struct{})
			dones[i] = done
			// As work, so a stop waits for a delete under way rather than
			// cutting it off half done.
			e.goWork(func() {
				defer close(done)
				deleted[i] = e.removeDevice(e.ctx, d, "nuke") == nil
			})
		}
		if err := waitAll(ctx, dones); err != nil {
			return fmt.Errorf("delete devices: %w", err)
		}
		for i, d := range batch {
			if deleted[i] {
				res.Deleted = append(res.Deleted, d.ID)
			}
		}
		if !busy {
			return nil
		}
		if len(batch) == 0 {
			select {
			case <-time.After(nukePoll):
			case <-ctx.Done():
				return fmt.Errorf("delete devices: %w", ctx.Err())
			}
		}
	}
}

// waitAll waits until every channel is closed or ctx ends.
func waitAll(ctx context.Context, chans []chan struct{}) error {
	for _, c := range chans {
		select {
		case <-c:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}
