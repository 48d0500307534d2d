package leasing

import (
	"slices"

	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/queue"
)

// Emit commits one event outside any other decision (the component
// installer's), so it gets its seq and reaches subscribers like the rest.
func (e *Engine) Emit(name string, payload map[string]any) {
	err := e.do(func(tx *queue.Txn) error {
		tx.Event(name, payload)
		return nil
	})
	if err != nil {
		e.log.Error("could not record an event", "event", name, "err", err)
	}
}

// DevicesOn lists simlock's devices (in any state) on a runtime.
func (m *Maintenance) DevicesOn(p contract.Platform, version string) []string {
	e := m.e
	var out []string
	e.view(func() { out = e.devicesOnLocked(p, version) })
	return out
}

func (e *Engine) devicesOnLocked(p contract.Platform, version string) []string {
	var out []string
	e.reg.each(func(d *dev) bool {
		if d.Platform == p && d.OSVersion == version {
			out = append(out, d.ID)
		}
		return true
	})
	slices.Sort(out)
	return out
}

func runtimeKey(p contract.Platform, version string) string { return string(p) + "/" + version }

// HoldRuntime marks a runtime as being removed, once no device of simlock's
// uses it: from then until release, no request resolves to it, so no new
// device is made on it while it goes.
func (m *Maintenance) HoldRuntime(p contract.Platform, version string) (release func(), err error) {
	e := m.e
	var cerr *contract.Error
	k := runtimeKey(p, version)
	e.view(func() {
		if devs := e.devicesOnLocked(p, version); len(devs) > 0 {
			cerr = contract.Errorf(contract.CodeComponentInUse, "%d simlock device(s) use %s %s; they must be deleted first", len(devs), p, version).
				With("devices", devs).With("foreignDevices", 0)
			return
		}
		if e.removing[k] {
			cerr = contract.Errorf(contract.CodeComponentBusy, "%s %s is already being removed", p, version).With("platform", p)
			return
		}
		e.removing[k] = true
	})
	if cerr != nil {
		return nil, cerr
	}
	return func() { e.view(func() { delete(e.removing, k) }) }, nil
}

// removingLocked reports whether spec's runtime is being removed.
func (e *Engine) removingLocked(spec contract.DeviceSpec) bool {
	return e.removing[runtimeKey(spec.Platform, spec.OSVersion)]
}
