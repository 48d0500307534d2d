package leasing

import (
	"context"
	"sort"
	"time"

	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/core"
	"github.com/simlock/simlock/internal/driver"
	"github.com/simlock/simlock/internal/store"
)

func (e *Engine) sortedRequestsLocked() []*request {
	out := make([]*request, 0, len(e.requests))
	for _, r := range e.requests {
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].rec.CreatedAt != out[j].rec.CreatedAt {
			return out[i].rec.CreatedAt < out[j].rec.CreatedAt
		}
		return out[i].rec.ID < out[j].rec.ID
	})
	return out
}

// Leases lists active leases the caller may see: an agent its own, an admin
// all of them. Oldest first.
func (e *Engine) Leases(c Caller) []contract.LeaseRecord {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := []contract.LeaseRecord{}
	for _, l := range e.leases {
		if c.Admin || l.OwnerID == c.Principal {
			out = append(out, l.LeaseRecord)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].GrantedAt != out[j].GrantedAt {
			return out[i].GrantedAt < out[j].GrantedAt
		}
		return out[i].ID < out[j].ID
	})
	return out
}

// Devices lists every device that is not deleted, oldest first.
func (e *Engine) Devices() []contract.Device {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := make([]contract.Device, 0, len(e.devices))
	for _, d := range e.devices {
		out = append(out, e.deviceViewLocked(d))
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].CreatedAt != out[j].CreatedAt {
			return out[i].CreatedAt < out[j].CreatedAt
		}
		return out[i].ID < out[j].ID
	})
	return out
}

func (e *Engine) deviceViewLocked(d *store.Device) contract.Device {
	return contract.Device{
		ID: d.ID, DriverDeviceID: d.DriverDeviceID, Driver: d.Driver, Spec: specOf(d), State: d.State,
		Address: d.Address, LeaseID: e.byDevice[d.ID], CreatedAt: d.CreatedAt, StateSince: d.StateSince,
		LastUsedAt: d.LastUsedAt,
	}
}

// Requests lists open requests in arrival order.
func (e *Engine) Requests() []contract.LeaseRequestRecord {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := []contract.LeaseRequestRecord{}
	for _, r := range e.sortedRequestsLocked() {
		out = append(out, r.rec)
	}
	return out
}

// WaitingList lists open requests as status shows them: queued ones with
// their place, and those whose device is being started.
func (e *Engine) WaitingList() []contract.WaitingRequest {
	e.mu.Lock()
	defer e.mu.Unlock()
	t := time.Now().UnixMilli()
	out := []contract.WaitingRequest{}
	for _, r := range e.sortedRequestsLocked() {
		w := contract.WaitingRequest{RequestID: r.rec.ID, RequesterID: r.rec.RequesterID, Spec: r.rec.Spec, WaitingMs: t - r.rec.CreatedAt}
		switch {
		case r.downloading:
			w.Stage = "downloading"
		case r.rec.State == contract.RequestQueued:
			w.Stage, w.QueuePosition = "queued", r.rec.QueuePosition
		default:
			w.Stage = "starting"
		}
		out = append(out, w)
	}
	return out
}

// Limits are the engine's capacity limits.
func (e *Engine) Limits() core.Limits { return e.opts.Limits }

// Catalog lists what each platform's driver offers, in platform order.
func (e *Engine) Catalog(ctx context.Context, only contract.Platform) ([]driver.Catalog, error) {
	out := []driver.Catalog{}
	for _, p := range contract.Platforms() {
		if only != "" && p != only {
			continue
		}
		d, ok := e.opts.Drivers[p]
		if !ok {
			continue
		}
		cat, err := d.ListCatalog(ctx)
		if err != nil {
			return nil, driver.ContractError(err)
		}
		out = append(out, cat)
	}
	return out, nil
}

// Vanished lists registry devices that their driver's root no longer holds.
// Devices with work in flight are left out: their state is about to change.
func (e *Engine) Vanished(ctx context.Context) ([]contract.Device, error) {
	var out []contract.Device
	for _, p := range contract.Platforms() {
		d, ok := e.opts.Drivers[p]
		if !ok || d.Root() == "" {
			continue // a driver with no root (demo) holds nothing that can vanish
		}
		reality, err := d.ListManaged(ctx)
		if err != nil {
			return nil, driver.ContractError(err)
		}
		present := map[string]bool{}
		for _, o := range reality.Devices {
			present[o.ID] = true
		}
		e.mu.Lock()
		for id, dev := range e.devices {
			if dev.Platform != p || e.claims[id] != "" || dev.DriverDeviceID == "" || dev.State == contract.DeviceProvisioning {
				continue
			}
			if !present[dev.DriverDeviceID] {
				out = append(out, e.deviceViewLocked(dev))
			}
		}
		e.mu.Unlock()
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

// MarkMissing records that a device is gone from its root: it becomes
// deleted (device.deleted, initiator doctor). A leased or busy device is
// never touched.
func (e *Engine) MarkMissing(id string) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	d, ok := e.devices[id]
	if !ok || e.byDevice[id] != "" || e.claims[id] != "" {
		return nil
	}
	switch d.State {
	case contract.DeviceReady, contract.DeviceShutdown, contract.DeviceQuarantined:
	default:
		return nil // mid-transition: the next look decides
	}
	tx := e.begin()
	if d.State == contract.DeviceReady {
		tx.setState(id, contract.DeviceShutdown)
	}
	tx.setState(id, contract.DeviceDeleted)
	tx.event("device.deleted", map[string]any{"deviceId": id, "initiator": "doctor"})
	if _, err := e.commitLocked(tx); err != nil {
		return err
	}
	e.serveLocked() // its slots are free: a waiter may start now
	return nil
}
