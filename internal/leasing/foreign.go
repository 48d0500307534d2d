package leasing

import (
	"context"
	"sort"

	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/driver"
	"github.com/simlock/simlock/internal/queue"
	"github.com/simlock/simlock/internal/store"
)

// The kinds of change outside simlock that Foreign finds.
const (
	// ForeignProvenance: the device's provenance marks show it was
	// erased, replaced or tampered with (Foreign.Drift says which).
	ForeignProvenance = "foreign-provenance"
	// ForeignState: simlock has the device shut down, but it runs: it was
	// booted outside simlock.
	ForeignState = "foreign-state-change"
)

// Foreign is a registry device found changed outside simlock.
type Foreign struct {
	Kind   string
	Device contract.Device
	// Drift is what the marks show (ForeignProvenance).
	Drift driver.Drift
	// Expected is the state simlock holds, Observed what the driver sees
	// (ForeignState).
	Expected contract.DeviceState
	Observed driver.RunState
	// Fixed: this call quarantined the device.
	Fixed bool
}

// foreignCandidate is a device Foreign looks at, as it was before the read.
type foreignCandidate struct {
	d    *dev
	rec  store.Device
	view contract.Device
	// lease is the lease that held it then, "" for none.
	lease string
}

// Foreign looks, per platform, for registry devices changed outside
// simlock: one whose provenance marks drifted (ForeignProvenance), and one
// simlock has shut down that runs (ForeignState). A device with work in
// flight, or in a transition, is left out, as its marks or run state may be
// simlock's own work half done; so is one that moved on while the platform
// was read. Each device found is reported with an event in one commit
// (device.foreign-provenance-detected, device.foreign-state-detected). With
// fix, a device found that nobody leases or works on, ready or shut down,
// is quarantined in that commit, so it is never granted: its quarantine
// retries clean it, which brings an erased device back marked, while a
// device that is not simlock's is refused every clean and delete and stays
// quarantined. A leased device is only reported: the health monitor ends
// its lease when it sees the drift on the running device. A platform whose
// devices cannot be listed fails the call, as it does for Vanished.
func (m *Maintenance) Foreign(ctx context.Context, fix bool) ([]Foreign, error) {
	e := m.e
	var found []Foreign
	cands := map[string]foreignCandidate{}
	for _, p := range contract.Platforms() {
		drv, ok := e.opts.Drivers[p]
		if !ok {
			continue
		}
		var mine []foreignCandidate
		e.view(func() {
			e.reg.each(func(d *dev) bool {
				if d.Platform != p || d.claim != claimNone || d.DriverDeviceID == "" {
					return true
				}
				switch d.State {
				case contract.DeviceReady, contract.DeviceShutdown, contract.DeviceLeased, contract.DeviceQuarantined:
					mine = append(mine, foreignCandidate{d: d, rec: d.Device, view: deviceView(d), lease: d.lease})
				}
				return true
			})
		})
		if len(mine) == 0 {
			continue
		}
		reality, err := drv.ListManaged(ctx)
		if err != nil {
			return nil, driver.ContractError(err)
		}
		seen := map[string]driver.Observed{}
		for _, o := range reality.Devices {
			seen[o.ID] = o
		}
		pr, marks := drv.(driver.ProvenanceReader)
		for _, c := range mine {
			o, present := seen[c.rec.DriverDeviceID]
			if !present {
				continue // doctor's device-missing
			}
			if c.rec.State == contract.DeviceShutdown && o.RunState == driver.Running {
				found = append(found, Foreign{Kind: ForeignState, Device: c.view, Expected: contract.DeviceShutdown, Observed: o.RunState})
				cands[c.rec.ID] = c
			}
			if !marks {
				continue
			}
			dd := driver.Device{ID: c.rec.DriverDeviceID, Address: o.Address, Data: c.rec.DriverData}
			if o.RunState != driver.Running {
				dd.Address = ""
			}
			prov, err := pr.Provenance(ctx, dd)
			if err != nil {
				e.log.Warn("doctor could not read a device's provenance marks", "deviceId", c.rec.ID, "err", err)
				continue
			}
			if drift := prov.Drift(); drift != driver.DriftNone {
				found = append(found, Foreign{Kind: ForeignProvenance, Device: c.view, Drift: drift})
				cands[c.rec.ID] = c
			}
		}
	}
	if len(found) == 0 {
		return nil, nil
	}
	var out []Foreign
	err := e.try(func(tx *queue.Txn) error {
		out = out[:0]
		quarantined := map[string]bool{}
		for _, f := range found {
			c := cands[f.Device.ID]
			d := c.d
			moved := d.at == nil || d.claim != claimNone || d.lease != c.lease || d.State != c.rec.State || d.StateSince != c.rec.StateSince
			if moved && !quarantined[d.ID] {
				continue // it moved on meanwhile: the next look decides
			}
			if f.Kind == ForeignState {
				tx.Event(contract.EvDeviceForeignStateDetected, map[string]any{"deviceId": d.ID, "platform": d.Platform,
					"expected": f.Expected, "observed": f.Observed})
			} else {
				tx.Event(contract.EvDeviceForeignProvenanceDetected, map[string]any{"deviceId": d.ID, "platform": d.Platform, "detail": f.Drift})
			}
			if fix && d.idle() && (d.State == contract.DeviceReady || d.State == contract.DeviceShutdown) {
				// The state machine quarantines only from shutdown; a
				// ready device passes through it in the same commit, as
				// MarkMissing's does.
				if d.State == contract.DeviceReady {
					e.setState(tx, d, contract.DeviceShutdown)
				}
				payload := map[string]any{"detail": f.Drift}
				if f.Kind == ForeignState {
					payload = map[string]any{"observed": f.Observed}
				}
				e.quarantineLocked(tx, d, f.Kind, payload)
				quarantined[d.ID] = true
			}
			// A device with two findings is quarantined for the first,
			// which fixes the second too.
			f.Fixed = quarantined[d.ID]
			out = append(out, f)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Device.ID < out[j].Device.ID })
	return out, nil
}
