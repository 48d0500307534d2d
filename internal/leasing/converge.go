package leasing

import (
	"context"
	"sort"
	"sync"
	"time"

	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/driver"
	"github.com/simlock/simlock/internal/store"
)

// startupReadBound bounds each platform's read at startup; a platform that
// does not answer in time is unreadable for this start.
const startupReadBound = time.Minute

// reality is what each platform's driver reported at startup.
type reality struct {
	devices    map[contract.Platform]map[string]driver.RunState
	unreadable map[contract.Platform]bool
}

func (r reality) readable(p contract.Platform) bool {
	_, ok := r.devices[p]
	return ok && !r.unreadable[p]
}

// state is how the device was found: its run state, and whether it exists.
func (r reality) state(d *store.Device) (driver.RunState, bool) {
	s, ok := r.devices[d.Platform][d.DriverDeviceID]
	return s, ok
}

// readReality reads every platform once, in parallel, each bounded.
func (e *Engine) readReality(ctx context.Context) reality {
	r := reality{devices: map[contract.Platform]map[string]driver.RunState{}, unreadable: map[contract.Platform]bool{}}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for p, drv := range e.opts.Drivers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rctx, cancel := context.WithTimeout(ctx, startupReadBound)
			defer cancel()
			got, err := drv.ListManaged(rctx)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				e.log.Warn("platform unreadable at startup; its leases end and its devices wait for a start that can read it", "platform", p, "err", err)
				r.unreadable[p] = true
				return
			}
			m := map[string]driver.RunState{}
			for _, o := range got.Devices {
				m[o.ID] = o.RunState
			}
			r.devices[p] = m
		}()
	}
	wg.Wait()
	return r
}

// convergeLeasesLocked checks each lease kept over the restart against
// what its platform showed: a device that runs keeps its lease; one that
// stopped ends it as device-lost and is cleaned; one gone ends it and is
// marked deleted; on an unreadable platform the lease ends and the device
// stays reclaiming, marked for a full clean, until a start that can read
// the platform cleans it. Restart never proves a holder dead, so running
// devices' leases are never ended here.
func (e *Engine) convergeLeasesLocked(r reality) {
	ids := make([]string, 0, len(e.leases))
	for id := range e.leases {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		l, ok := e.leases[id]
		if !ok {
			continue
		}
		d, ok := e.devices[l.DeviceID]
		if !ok {
			continue
		}
		state, present := r.state(d)
		switch {
		case r.unreadable[d.Platform]:
			e.endAtStartupLocked(id, d.ID, "unreadable")
		case r.devices[d.Platform] == nil:
			// No driver for the platform this start: nothing to read, nothing
			// to decide.
		case !present:
			e.endAtStartupLocked(id, d.ID, "missing")
		case state == driver.Stopped:
			if err := e.endLocked(id, ReasonDeviceLost); err != nil {
				e.log.Error("could not end the lease of a stopped device", "leaseId", id, "err", err)
			}
		}
	}
}

// endAtStartupLocked ends a lease as device-lost without cleaning its
// device: gone (marked deleted) or unreadable (left reclaiming with the
// full-clean marker).
func (e *Engine) endAtStartupLocked(leaseID, devID, why string) {
	e.noReclaim[devID] = true
	defer delete(e.noReclaim, devID)
	if err := e.endLocked(leaseID, ReasonDeviceLost); err != nil {
		e.log.Error("could not end a lease at startup", "leaseId", leaseID, "err", err)
		return
	}
	d, ok := e.devices[devID]
	if !ok {
		return
	}
	tx := e.begin()
	if why == "missing" {
		tx.setState(devID, contract.DeviceDeleted)
		tx.event("device.deleted", map[string]any{"deviceId": devID, "initiator": "missing"})
	} else {
		nd := *d
		nd.DeferredReclaim = true
		tx.putDevice(nd)
	}
	if _, err := e.commitLocked(tx); err != nil {
		e.log.Error("could not record a device at startup", "deviceId", devID, "err", err)
	}
}
