package android

import (
	"context"
	"os"
	"slices"
	"strings"

	"github.com/simlock/simlock/internal/driver"
)

// ListManaged reports every AVD in the root, whatever its name: an <name>.ini
// file or <name>.avd directory is a device. An AVD runs when an emulator
// known to the private adb server names its directory. While some emulator
// cannot be attributed (it is offline, or its console does not answer), an
// AVD not seen running is reported as transitioning rather than stopped, so
// that a slow answer is never taken for a crash; so is an AVD whose emulator
// this driver started and that is still booting.
func (d *Driver) ListManaged(ctx context.Context) (driver.Reality, error) {
	const op = "list"
	entries, err := os.ReadDir(d.root)
	if err != nil {
		return driver.Reality{}, crash(op, err)
	}
	var names []string
	for _, e := range entries {
		name, isDir := strings.CutSuffix(e.Name(), ".avd")
		if !isDir || !e.IsDir() {
			var isIni bool
			name, isIni = strings.CutSuffix(e.Name(), ".ini")
			if !isIni || !e.Type().IsRegular() {
				continue
			}
		}
		if avdNamePattern.MatchString(name) && !slices.Contains(names, name) {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	devs, err := d.devices(ctx, op)
	if err != nil {
		return driver.Reality{}, err
	}
	serials := map[string]string{}
	unattributable := false
	for _, dv := range devs {
		if dv.state != "device" {
			unattributable = true
			continue
		}
		name, answered := d.avdOf(ctx, op, dv.serial)
		if !answered {
			unattributable = true
			continue
		}
		if slices.Contains(names, name) {
			serials[name] = dv.serial
		}
	}
	d.mu.Lock()
	booting := map[string]bool{}
	for name, e := range d.running {
		booting[name] = !e.exited()
	}
	d.mu.Unlock()
	var r driver.Reality
	for _, name := range names {
		obs := driver.Observed{Device: driver.Device{ID: name}, Name: name, RunState: driver.Stopped}
		switch serial, ok := serials[name]; {
		case ok:
			obs.RunState, obs.Address = driver.Running, serial
		case booting[name] || unattributable:
			obs.RunState = driver.Transitioning
		}
		r.Devices = append(r.Devices, obs)
	}
	return r, nil
}
