package daemon

import (
	"context"
	"time"

	"github.com/shirou/gopsutil/v4/disk"

	"github.com/simlock/simlock/internal/components"
	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/driver"
	"github.com/simlock/simlock/internal/ownership"
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

// installComponent runs component.install as a job of one row, this
// worker's: consent is the call itself, so only downloads.policy never
// refuses it. The caller hears the job's events as they happen; the job
// record keeps its phases and its end.
//
// An install asked over the uplink goes on when the uplink drops: the
// gateway asks again once it is back and joins the install under way (or
// finds it done), rather than starting a 9 GB download over.
func (d *Daemon) installComponent(s *session, call []byte, in contract.ComponentInstallInput) (contract.ComponentInstallResult, error) {
	if in.Workers != nil {
		return contract.ComponentInstallResult{}, contract.BadRequest("workers", "chooses the workers of a gateway's fleet install; this daemon is a worker")
	}
	if d.opts.Config.String("downloads.policy") == "never" {
		return contract.ComponentInstallResult{}, contract.Errorf(contract.CodeDownloadsDisabled, "downloads.policy is never: simlock installs no components").
			With("platform", in.Platform)
	}
	if !d.installer.Supports(in.Platform) {
		return contract.ComponentInstallResult{}, contract.Errorf(contract.CodeNoDriver, "no %s driver here can install components", in.Platform).With("platform", in.Platform)
	}
	ctx := s.ctx
	if s.gateway {
		// Not even the daemon's life ends this wait: its own bound
		// (downloads.timeoutMs) does, and so does the installer's Close
		// at a stop, which fails the install with DAEMON_STOPPING, the
		// reason its job should show.
		ctx = context.WithoutCancel(s.ctx)
	}
	self, _ := ownership.LoadInstance(d.opts.Home)
	row := contract.JobWorker{WorkerID: self.ID, Label: d.labelOf(d.opts.Config)}
	run, err := d.jobs.Begin(ctx, contract.JobKindInstall, contract.JobSpec{Platform: in.Platform, Version: in.Version}, []contract.JobWorker{row})
	if err != nil {
		return contract.ComponentInstallResult{}, err
	}
	emit := func(ev contract.JobEvent) {
		run.Emit(ev)
		s.push(contract.Push{Push: contract.PushJob, ID: call, Job: &ev})
	}
	ph := phases{worker: row.WorkerID, platform: in.Platform, component: in.Version, emit: emit}
	ph.enter(contract.PhaseQueue)
	res, err := d.installer.Install(ctx, in.Platform, in.Version, ph.report)
	if err != nil {
		ce := contract.AsError(err)
		ph.fail(ce)
		emit(contract.JobEvent{Worker: &contract.JobWorkerEvent{WorkerID: row.WorkerID, Phase: ph.current, Status: contract.WorkerEnded, Outcome: contract.OutcomeFailed}})
		_, done := run.End()
		s.push(contract.Push{Push: contract.PushJob, ID: call, Job: &contract.JobEvent{Done: &done}})
		return contract.ComponentInstallResult{}, ce.With("jobId", run.ID())
	}
	ph.enter("")
	emit(contract.JobEvent{Worker: &contract.JobWorkerEvent{WorkerID: row.WorkerID, Phase: ph.last, Status: contract.WorkerEnded,
		Outcome: contract.OutcomeInstalled, Version: res.Version, AlreadyInstalled: res.Outcome == components.AlreadyInstalled}})
	_, done := run.End()
	s.push(contract.Push{Push: contract.PushJob, ID: call, Job: &contract.JobEvent{Done: &done}})
	return contract.ComponentInstallResult{Platform: in.Platform, Component: in.Version, Outcome: res.Outcome, Version: res.Version, Name: res.Name, JobID: run.ID()}, nil
}

// phases turns an install's Reports into a job's events: a phase starts
// when the first report of it comes and is done when the next one starts;
// figures are progress events and installer lines log events.
type phases struct {
	worker    string
	platform  contract.Platform
	component string
	emit      func(contract.JobEvent)
	// current is the phase under way ("" once done); last the one before.
	current, last string
}

// enter ends the phase under way and starts p ("" starts none).
func (ph *phases) enter(p string) {
	if p == ph.current {
		return
	}
	if ph.current != "" {
		ph.emit(contract.JobEvent{Phase: &contract.JobPhase{Phase: ph.current, Status: contract.PhaseDone, WorkerID: ph.worker, Platform: ph.platform, Component: ph.component}})
		ph.last = ph.current
	}
	ph.current = p
	if p != "" {
		ph.emit(contract.JobEvent{Phase: &contract.JobPhase{Phase: p, Status: contract.PhaseStart, WorkerID: ph.worker, Platform: ph.platform, Component: ph.component}})
	}
}

func (ph *phases) report(r components.Report) {
	if !r.LogOnly {
		ph.enter(r.Phase)
		if r.Percent != nil {
			v := min(max(*r.Percent, 0), contract.MaxPercent)
			ph.emit(contract.JobEvent{Progress: &contract.JobProgress{WorkerID: ph.worker, Percent: &v, Bytes: r.Bytes, Total: r.Total}})
		}
	}
	if r.Line != "" {
		ph.emit(contract.JobEvent{Log: &contract.JobLog{WorkerID: ph.worker, Stream: r.Stream, Line: contract.ClipText(r.Line, contract.MaxLogLine)}})
	}
}

// fail ends the phase under way with ce, attributed to it.
func (ph *phases) fail(ce *contract.Error) {
	p := ph.current
	if p == "" {
		p = contract.PhaseQueue
	}
	ph.emit(contract.JobEvent{Phase: &contract.JobPhase{Phase: p, Status: contract.PhaseError, WorkerID: ph.worker, Platform: ph.platform, Component: ph.component}})
	ph.emit(contract.JobEvent{Error: &contract.JobError{Phase: p, WorkerID: ph.worker, Code: ce.Code, Message: contract.ClipText(ce.Message, contract.MaxJobMessage)}})
	ph.current = p
}

func (d *Daemon) listComponents(s *session, in contract.ComponentListInput) (contract.ComponentListResult, error) {
	list, err := d.installer.List(s.ctx, in.Platform, d.engine.Maintenance().DevicesOn)
	if err != nil {
		return contract.ComponentListResult{}, err
	}
	return contract.ComponentListResult{Components: list}, nil
}

func (d *Daemon) removeComponent(s *session, in contract.ComponentRemoveInput) (contract.ComponentRemoveResult, error) {
	return d.installer.Remove(s.ctx, in, d.engine.Maintenance().HoldRuntime)
}

// freeBytes is the free space of the volume holding path.
func freeBytes(path string) (int64, error) {
	u, err := disk.Usage(path)
	if err != nil {
		return 0, err
	}
	return int64(u.Free), nil
}
