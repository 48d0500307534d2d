package daemon

import (
	"time"

	"github.com/shirou/gopsutil/v4/disk"

	"github.com/simlock/simlock/internal/components"
	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/driver"
	"github.com/simlock/simlock/internal/store/sqlite"
)

// newInstaller makes the component installer over the drivers that can
// install components. Its events go through the engine, made right after.
func (d *Daemon) newInstaller(db *sqlite.DB) *components.Installer {
	drivers := map[contract.Platform]driver.Installer{}
	for p, drv := range d.opts.Drivers {
		if in, ok := drv.(driver.Installer); ok {
			drivers[p] = in
		}
	}
	return components.New(components.Options{
		Drivers:   drivers,
		Records:   db,
		Timeout:   time.Duration(d.opts.Config.Int("downloads.timeoutMs")) * time.Millisecond,
		FreeBytes: freeBytes,
		Emit:      func(name string, payload map[string]any) { d.engine.Emit(name, payload) },
		Logger:    d.log.With("module", "components"),
	})
}

// installComponent runs component.install: consent is the call itself, so
// only downloads.policy never refuses it.
func (d *Daemon) installComponent(s *session, call []byte, in contract.ComponentInstallInput) (contract.ComponentInstallResult, error) {
	if d.opts.Config.String("downloads.policy") == "never" {
		return contract.ComponentInstallResult{}, contract.Errorf(contract.CodeDownloadsDisabled, "downloads.policy is never: simlock installs no components").
			With("platform", in.Platform)
	}
	last := contract.ComponentProgress{}
	res, err := d.installer.Install(s.ctx, in.Platform, in.Version, func(r components.Report) {
		step := contract.ComponentProgress{Platform: in.Platform, Component: in.Version, State: "downloading",
			BytesDone: r.Bytes, BytesTotal: r.Total}
		if r.Waiting {
			step.State = "waiting"
		}
		if r.Percent != nil {
			pct := min(max(int(*r.Percent), 0), contract.MaxPercent)
			step.Percent = &pct
		}
		if sameStep(step, last) {
			return
		}
		last = step
		s.push(contract.Push{Push: contract.PushComponentProgress, ID: call, Component: &step})
	})
	if err != nil {
		return contract.ComponentInstallResult{}, err
	}
	return contract.ComponentInstallResult{Platform: in.Platform, Component: in.Version, Outcome: res.Outcome, Version: res.Version, Name: res.Name}, nil
}

// sameStep reports whether b says what a does; sizes alone do not make a
// new step (one is sent per percent).
func sameStep(a, b contract.ComponentProgress) bool {
	if (a.Percent == nil) != (b.Percent == nil) || (a.Percent != nil && *a.Percent != *b.Percent) {
		return false
	}
	return a.State == b.State && a.Component == b.Component
}

func (d *Daemon) listComponents(s *session, in contract.ComponentListInput) (contract.ComponentListResult, error) {
	list, err := d.installer.List(s.ctx, in.Platform, d.engine.DevicesOn)
	if err != nil {
		return contract.ComponentListResult{}, err
	}
	return contract.ComponentListResult{Components: list}, nil
}

func (d *Daemon) removeComponent(s *session, in contract.ComponentRemoveInput) (contract.ComponentRemoveResult, error) {
	return d.installer.Remove(s.ctx, in, d.engine.HoldRuntime)
}

// freeBytes is the free space of the volume holding path.
func freeBytes(path string) (int64, error) {
	u, err := disk.Usage(path)
	if err != nil {
		return 0, err
	}
	return int64(u.Free), nil
}
