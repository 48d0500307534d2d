package leasing

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/driver"
	"github.com/simlock/simlock/internal/queue"
	"github.com/simlock/simlock/internal/store"
)

// booted records in tx what a boot of d returned (MakeReady or Recover):
// the address to use now, the driver's data (kept when it returned none),
// whether the device runs slim, and, when the boot ran a slim pass or its
// pass failed, the event that says so. change, when set, adds what the
// caller's boot changes besides (its state, its last use). Every boot's
// result goes through here, so a device's slim state cannot be kept by one
// path and forgotten by another.
func (e *Engine) booted(tx *queue.Txn, d *dev, ready driver.Device, change func(r *store.Device)) {
	e.changeDevice(tx, d, func(r *store.Device) {
		r.Address = ready.Address
		if ready.Data != nil {
			r.DriverData = ready.Data
		}
		r.Slimmed = r.Mode == contract.DeviceModeSlim && ready.Slim != nil && ready.Slim.Slimmed
		if change != nil {
			change(r)
		}
	})
	s := ready.Slim
	switch {
	case s == nil:
	case s.Err != nil:
		tx.Event(contract.EvDeviceSlimFailed, map[string]any{"deviceId": d.ID, "platform": d.Platform, "error": clipDetail(s.Err.Error())})
	case s.Applied:
		unknown := s.UnknownLabels
		if unknown == nil {
			unknown = []string{}
		}
		tx.Event(contract.EvDeviceSlimmed, map[string]any{
			"deviceId": d.ID, "address": ready.Address, "platform": d.Platform, "categories": s.Categories,
			"labelCount": s.Labels, "duration": s.Duration.Milliseconds(), "signature": s.Signature, "unknownLabels": unknown,
		})
	}
}

// reclaimed records in tx that a clean of d left it in state (ready or
// shut down) and wiped: nothing put off remains, and a slim pass is undone
// (iOS's erase takes it; the next boot for a lease runs it again). change,
// when set, adds what the caller's clean changes besides.
func (e *Engine) reclaimed(tx *queue.Txn, d *dev, res driver.ReclaimResult, change func(r *store.Device)) contract.DeviceState {
	state := res.State
	if state != contract.DeviceReady {
		state = contract.DeviceShutdown
	}
	e.changeDevice(tx, d, func(r *store.Device) {
		r.State = state
		r.LastUsedAt = e.now()
		r.DeferredReclaim = false
		r.Slimmed = false
		if state == contract.DeviceShutdown {
			r.Address = ""
		}
		if change != nil {
			change(r)
		}
	})
	return state
}

// grantMode is the mode a grant of d says it serves: slim only while its
// slim pass is in effect.
func grantMode(d *dev) contract.DeviceMode {
	if d.Slimmed {
		return contract.DeviceModeSlim
	}
	return contract.DeviceModeFull
}

// noteSlimRefused remembers the runtime of an iOS need that asks slim
// where the driver resolved a full spec: the runtime cannot be slimmed,
// and doctor says so.
func (e *Engine) noteSlimRefused(n *need, cat driver.Catalog) {
	// Android is always full, and says so in its grants; only iOS has
	// runtimes too old to slim.
	if n.spec.Platform != contract.PlatformIOS || n.want.ModeIn(cat) != contract.DeviceModeSlim || n.spec.Mode == contract.DeviceModeSlim {
		return
	}
	e.view(func() { e.slimRefused[string(n.spec.Platform)+"/"+n.spec.OSVersion] = true })
}

// SlimAdvisories are doctor's slim-runtime-unsupported findings: each
// runtime a slim request was served full on since the start, and, when
// the platform's default mode is slim, each installed runtime that cannot
// be slimmed.
func (m *Maintenance) SlimAdvisories() []contract.Finding {
	e := m.e
	seen := map[string]bool{}
	e.view(func() {
		for k := range e.slimRefused {
			seen[k] = true
		}
		for p, cat := range e.catalogs {
			if cat.Mode("") != contract.DeviceModeSlim {
				continue
			}
			for _, rt := range cat.Runtimes {
				if !slices.Contains(cat.SlimRuntimes, rt) {
					seen[string(p)+"/"+rt] = true
				}
			}
		}
	})
	keys := make([]string, 0, len(seen))
	for k := range seen {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make([]contract.Finding, 0, len(keys))
	for _, k := range keys {
		p, rt, _ := strings.Cut(k, "/")
		out = append(out, contract.Finding{Kind: "driver-advisory", Platform: contract.Platform(p), Reason: "slim-runtime-unsupported",
			Message: fmt.Sprintf("%s %s cannot be slimmed (slim needs iOS 18.5 or later): slim requests on it are served full devices", p, rt),
			Remedy:  "ask for an OS version of 18.5 or later (simlock catalog lists the installed ones) to get a slim device, or --mode full to say what you get"})
	}
	return out
}
