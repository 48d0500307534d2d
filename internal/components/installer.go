// Package components is the one component installer: the only caller of
// the drivers' component operations (find, install, list, remove). It keeps
// one FIFO queue of installs per platform, so the two platforms download in
// parallel while one platform never runs two installs at once; a call for a
// component already queued or installing joins that install. Each caller
// has its own deadline, counted from its arrival; an install still running
// when the oldest of its callers runs out of time is stopped, and all of
// them fail with DOWNLOAD_TIMEOUT.
//
// Progress reaches each caller directly, as Reports of the install's
// phases: waiting behind another install (queue), the download with the
// percentages and lines the installer prints, the fresh re-read that finds
// the component installed (verify), and simlock's record of it (record). A
// caller that joins a running install gets its latest report at once.
package components

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/driver"
	"github.com/simlock/simlock/internal/store"
)

// Record is the proof that simlock installed a component: only a component
// whose current receipt matches its record may be removed by simlock. It is
// the store's record, so a store backend needs nothing of this package.
type Record = store.ComponentRecord

// Records keeps the records.
type Records interface {
	PutComponent(ctx context.Context, r Record) error
	Components(ctx context.Context) ([]Record, error)
	DeleteComponent(ctx context.Context, p contract.Platform, version string) error
}

// Options configure an Installer.
type Options struct {
	Drivers map[contract.Platform]driver.Installer
	Records Records
	// Timeout is each caller's budget from its arrival (downloads.timeoutMs).
	Timeout time.Duration
	// FreeBytes reports the free space of the volume holding path; nil
	// skips the disk check.
	FreeBytes func(path string) (int64, error)
	// Emit records an event (component.install-started, .installed,
	// .install-failed, .removed).
	Emit   func(name string, payload map[string]any)
	Logger *slog.Logger
}

// Report is one step of an install as a caller sees it.
type Report struct {
	// Phase is contract.PhaseQueue (queued behind another install on the
	// platform), PhaseDownload (the install runs; Percent may still be
	// unknown), PhaseVerify or PhaseRecord.
	Phase   string
	Percent *float64
	// Bytes and Total are the download's size so far and in all, when the
	// installer prints them (0 otherwise).
	Bytes, Total int64
	// Line is the installer's line the report came with, and Stream where
	// it printed it. A LogOnly report is a line with no figure on it: its
	// figures repeat the last report's.
	Line, Stream string
	LogOnly      bool
}

// Outcomes of Install.
const (
	Installed        = "installed"
	AlreadyInstalled = "already-installed"
)

// Result is what an install did.
type Result struct {
	Outcome string
	driver.ComponentInfo
}

// Installer is the component installer. Its methods are safe for
// concurrent use.
type Installer struct {
	opts Options
	log  *slog.Logger
	ctx  context.Context // ends at Close: running installs stop
	stop context.CancelFunc

	mu     sync.Mutex
	queues map[contract.Platform][]*job
}

// job is one install, with the callers waiting on it.
type job struct {
	platform  contract.Platform
	component string
	queuedAt  time.Time
	startedAt time.Time
	started   bool
	last      Report
	callers   []*caller
	cancel    context.CancelCauseFunc // set while running
	done      chan struct{}
	res       Result
	err       error
}

type caller struct {
	progress func(Report)
	deadline time.Time
}

// New makes an installer.
func New(opts Options) *Installer {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Emit == nil {
		opts.Emit = func(string, map[string]any) {}
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 20 * time.Minute
	}
	ctx, stop := context.WithCancel(context.Background())
	return &Installer{opts: opts, log: opts.Logger, ctx: ctx, stop: stop, queues: map[contract.Platform][]*job{}}
}

// Close stops every running install; their callers fail.
func (in *Installer) Close() { in.stop() }

// Supports reports whether the platform's driver can install components.
func (in *Installer) Supports(p contract.Platform) bool {
	_, ok := in.opts.Drivers[p]
	return ok
}

var errDownloadTimeout = errors.New("download timeout")

// Install installs component on platform p, or joins the install of it
// already queued or running, and waits until it is done, the caller's
// budget runs out (DOWNLOAD_TIMEOUT) or ctx ends. progress, when not nil,
// gets each Report for this caller; it must not block for long.
func (in *Installer) Install(ctx context.Context, p contract.Platform, component string, progress func(Report)) (Result, error) {
	if _, ok := in.opts.Drivers[p]; !ok {
		return Result{}, contract.Errorf(contract.CodeNoDriver, "no %s driver here can install components", p).With("platform", p)
	}
	if progress == nil {
		progress = func(Report) {}
	}
	c := &caller{progress: progress, deadline: time.Now().Add(in.opts.Timeout)}
	in.mu.Lock()
	var j *job
	q := in.queues[p]
	pos := slices.IndexFunc(q, func(j *job) bool { return j.component == component })
	if pos >= 0 {
		j = q[pos]
	} else {
		j = &job{platform: p, component: component, queuedAt: time.Now(), done: make(chan struct{})}
		in.queues[p] = append(q, j)
		pos = len(in.queues[p]) - 1
		if pos == 0 {
			go in.run(p)
		}
	}
	j.callers = append(j.callers, c)
	var first *Report
	switch {
	case j.last.Phase != "":
		r := j.last
		first = &r
	case pos > 0:
		first = &Report{Phase: contract.PhaseQueue}
	}
	in.mu.Unlock()
	if first != nil {
		progress(*first)
	}

	timer := time.NewTimer(time.Until(c.deadline))
	defer timer.Stop()
	select {
	case <-j.done:
		return j.res, j.err
	case <-timer.C:
		if in.leave(j, c, errDownloadTimeout) {
			<-j.done
			if j.err == nil {
				return j.res, nil // finished as the budget ran out
			}
		}
		return Result{}, in.timeoutError(p, component)
	case <-ctx.Done():
		in.leave(j, c, context.Canceled)
		return Result{}, contract.Errorf(contract.CodeCancelled, "stopped waiting for %s %s: %v", p, component, ctx.Err())
	}
}

func (in *Installer) timeoutError(p contract.Platform, component string) error {
	return contract.Errorf(contract.CodeDownloadTimeout, "%s %s was not installed within downloads.timeoutMs (%d)", p, component, in.opts.Timeout.Milliseconds()).
		With("platform", p).With("component", component).With("timeoutMs", in.opts.Timeout.Milliseconds())
}

// leave takes a caller off a job. A caller out of time stops a running
// install (the oldest caller's deadline bounds it) and reports true: the
// job's end is then the caller's answer. A queued install, or a running
// one, that nobody waits for any more is dropped.
func (in *Installer) leave(j *job, c *caller, why error) (stopped bool) {
	in.mu.Lock()
	defer in.mu.Unlock()
	select {
	case <-j.done:
		return true
	default:
	}
	if j.started && errors.Is(why, errDownloadTimeout) {
		j.cancel(errDownloadTimeout)
		return true
	}
	j.callers = slices.DeleteFunc(j.callers, func(x *caller) bool { return x == c })
	if len(j.callers) > 0 {
		return false
	}
	if j.started {
		j.cancel(context.Canceled)
		return false
	}
	q := in.queues[j.platform]
	if len(q) > 0 && q[0] == j {
		// At the front but not started: run will find it empty.
		return false
	}
	in.queues[j.platform] = slices.DeleteFunc(q, func(x *job) bool { return x == j })
	j.err = contract.Errorf(contract.CodeCancelled, "nobody waits for it")
	close(j.done)
	return false
}

// run works through a platform's queue until it is empty.
func (in *Installer) run(p contract.Platform) {
	for {
		in.mu.Lock()
		q := in.queues[p]
		if len(q) == 0 {
			delete(in.queues, p)
			in.mu.Unlock()
			return
		}
		j := q[0]
		if len(j.callers) == 0 {
			in.queues[p] = q[1:]
			in.mu.Unlock()
			j.err = contract.Errorf(contract.CodeCancelled, "nobody waits for it")
			close(j.done)
			continue
		}
		in.mu.Unlock()
		in.execute(j)
		in.mu.Lock()
		in.queues[p] = in.queues[p][1:]
		in.mu.Unlock()
		close(j.done)
	}
}

// execute runs one job: still needed? room on disk? then the driver.
func (in *Installer) execute(j *job) {
	drv := in.opts.Drivers[j.platform]
	ctx, cancel := context.WithCancelCause(in.ctx)
	defer cancel(nil)
	if info, found, err := drv.FindComponent(ctx, j.component); err == nil && found {
		j.res = Result{Outcome: AlreadyInstalled, ComponentInfo: info}
		return
	}
	// The disk check is the download's first step: a refusal for want of
	// room is the download's failure.
	in.report(j, Report{Phase: contract.PhaseDownload})
	if err := in.checkDisk(j, drv); err != nil {
		j.err = err
		in.failed(j, err)
		return
	}
	in.mu.Lock()
	if len(j.callers) == 0 {
		in.mu.Unlock()
		j.err = contract.Errorf(contract.CodeCancelled, "nobody waits for it")
		return
	}
	j.started, j.startedAt, j.cancel = true, time.Now(), cancel
	in.mu.Unlock()
	in.opts.Emit(contract.EvComponentInstallStarted, map[string]any{"platform": j.platform, "component": j.component})
	res, err := drv.InstallComponent(ctx, j.component, func(p driver.InstallProgress) {
		switch p.Step {
		case driver.InstallVerify:
			in.report(j, Report{Phase: contract.PhaseVerify})
		case driver.InstallLine:
			in.mu.Lock()
			r := j.last
			in.mu.Unlock()
			r.Line, r.Stream, r.LogOnly = p.Line, p.Stream, true
			in.report(j, r)
		default:
			v := p.Percent
			in.report(j, Report{Phase: contract.PhaseDownload, Percent: &v, Bytes: p.Bytes, Total: p.Total, Line: p.Line, Stream: p.Stream})
		}
	})
	if cause := context.Cause(ctx); err != nil && cause != nil {
		switch {
		case errors.Is(cause, errDownloadTimeout):
			err = in.timeoutError(j.platform, j.component)
		case in.ctx.Err() != nil:
			err = contract.Errorf(contract.CodeDaemonStopping, "the daemon stopped during the install of %s %s", j.platform, j.component)
		default:
			err = contract.Errorf(contract.CodeCancelled, "the install of %s %s was stopped: nobody waits for it", j.platform, j.component)
		}
	}
	if err != nil {
		j.err = driver.ContractError(err)
		in.failed(j, j.err)
		return
	}
	if res.AlreadyInstalled {
		j.res = Result{Outcome: AlreadyInstalled, ComponentInfo: res.ComponentInfo}
		return
	}
	in.report(j, Report{Phase: contract.PhaseRecord})
	if in.opts.Records != nil {
		rec := Record{Platform: j.platform, Version: res.Version, Name: res.Name, Receipt: res.Receipt, InstalledAt: time.Now().UnixMilli()}
		if err := in.opts.Records.PutComponent(in.ctx, rec); err != nil {
			in.log.Error("could not record an installed component", "platform", j.platform, "version", res.Version, "err", err)
		}
	}
	in.opts.Emit(contract.EvComponentInstalled, map[string]any{
		"platform": j.platform, "component": j.component, "version": res.Version, "name": res.Name,
		"duration": time.Since(j.startedAt).Milliseconds(),
	})
	in.opts.Emit(contract.EvCatalogChanged, map[string]any{"platform": j.platform, "component": j.component, "cause": contract.EvComponentInstalled})
	j.res = Result{Outcome: Installed, ComponentInfo: res.ComponentInfo}
}

// report tells every caller of j the step r; a step that is more than a
// line is the one a caller joining later gets first.
func (in *Installer) report(j *job, r Report) {
	in.mu.Lock()
	if !r.LogOnly {
		j.last = r
	}
	callers := slices.Clone(j.callers)
	in.mu.Unlock()
	for _, c := range callers {
		c.progress(r)
	}
}

func (in *Installer) failed(j *job, err error) {
	ce := contract.AsError(err)
	in.log.Warn("component install failed", "platform", j.platform, "component", j.component, "err", err)
	in.opts.Emit(contract.EvComponentInstallFailed, map[string]any{
		"platform": j.platform, "component": j.component, "code": ce.Code, "message": ce.Message,
	})
}

// checkDisk refuses an install the volume has no room for, counting the
// space other platforms' running installs will take.
func (in *Installer) checkDisk(j *job, drv driver.Installer) error {
	dir := drv.ComponentDir()
	if in.opts.FreeBytes == nil || dir == "" {
		return nil
	}
	free, err := in.opts.FreeBytes(dir)
	if err != nil {
		in.log.Warn("could not read free disk space; installing anyway", "dir", dir, "err", err)
		return nil
	}
	need := drv.ComponentFootprint(j.component)
	in.mu.Lock()
	for p, q := range in.queues {
		if p != j.platform && len(q) > 0 && q[0].started {
			free -= in.opts.Drivers[p].ComponentFootprint(q[0].component)
		}
	}
	in.mu.Unlock()
	if free < need {
		return contract.Errorf(contract.CodeInsufficientDiskSpace, "installing %s %s needs %s free, and only %s is available",
			j.platform, j.component, gib(need), gib(max(free, 0))).
			With("platform", j.platform).With("requiredBytes", need).With("availableBytes", max(free, 0))
	}
	return nil
}

func gib(b int64) string { return fmt.Sprintf("%.1f GiB", float64(b)/(1<<30)) }

// Busy reports whether an install runs or waits on platform p.
func (in *Installer) Busy(p contract.Platform) bool {
	in.mu.Lock()
	defer in.mu.Unlock()
	return len(in.queues[p]) > 0
}

// Installs lists the installs running or waiting, oldest first, at most
// 16.
func (in *Installer) Installs() []contract.InstallStatus {
	in.mu.Lock()
	defer in.mu.Unlock()
	var out []contract.InstallStatus
	for _, p := range contract.Platforms() {
		for _, j := range in.queues[p] {
			st := contract.InstallStatus{Platform: p, Component: j.component, State: "waiting", Since: j.queuedAt.UnixMilli(), Waiters: len(j.callers)}
			if j.started {
				st.State, st.Since = "downloading", j.startedAt.UnixMilli()
				if j.last.Percent != nil {
					pct := int(*j.last.Percent)
					st.Percent = &pct
				}
			}
			out = append(out, st)
		}
	}
	slices.SortStableFunc(out, func(a, b contract.InstallStatus) int { return int(a.Since - b.Since) })
	if len(out) > 16 {
		out = out[:16]
	}
	return out
}
