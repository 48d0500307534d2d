package leasing

import (
	"slices"

	"github.com/simlock/simlock/internal/contract"
)

// Emit commits one event outside any other decision (the component
// installer's), so it gets its seq and reaches subscribers like the rest.
func (e *Engine) Emit(name string, payload map[string]any) {
	e.mu.Lock()
	defer e.mu.Unlock()
	tx := e.begin()
	tx.event(name, payload)
	if _, err := e.commitLocked(tx); err != nil {
		e.log.Error("could not record an event", "event", name, "err", err)
	}
}

// DevicesOn lists simlock's devices (in any state) on a runtime.
func (e *Engine) DevicesOn(p contract.Platform, version string) []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.devicesOnLocked(p, version)
}

func (e *Engine) devicesOnLocked(p contract.Platform, version string) []string {
	var out []string
	for id, d := range e.devices {
		if d.Platform == p && d.OSVersion == version {
			out = append(out, id)
		}
	}
	slices.Sort(out)
	return out
}

func runtimeKey(p contract.Platform, version string) string { return string(p) + "/" + version }

// HoldRuntime marks a runtime as being removed, once no device of simlock's
// uses it: from then until release, no request resolves to it, so no new
// device is made on it while it goes.
func (e *Engine) HoldRuntime(p contract.Platform, version string) (release func(), err error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if devs := e.devicesOnLocked(p, version); len(devs) > 0 {
		return nil, contract.Errorf(contract.CodeComponentInUse, "%d simlock device(s) use %s %s; they must be deleted first", len(devs), p, version).
			With("devices", devs).With("foreignDevices", 0)
	}
	k := runtimeKey(p, version)
	if e.removing[k] {
		return nil, contract.Errorf(contract.CodeComponentBusy, "%s %s is already being removed", p, version).With("platform", p)
	}
	e.removing[k] = true
	return func() {
		e.mu.Lock()
		defer e.mu.Unlock()
		delete(e.removing, k)
	}, nil
}

// removingLocked reports whether spec's runtime is being removed.
func (e *Engine) removingLocked(spec contract.DeviceSpec) bool {
	return e.removing[runtimeKey(spec.Platform, spec.OSVersion)]
}
