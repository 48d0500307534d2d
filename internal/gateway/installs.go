package gateway

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/jobs"
)

// InstallPolicy bounds a fleet install.
type InstallPolicy struct {
	// Retries is how many times a worker is asked again after its uplink
	// failed (gateway.installRetries).
	Retries int
	// Silence is how long a worker may say nothing before it is taken
	// for stale and its outcome is unknown: downloads.timeoutMs, which
	// bounds any install, and a minute.
	Silence time.Duration
	// Backoff is the wait before attempt n+1 (1 s doubling to 10 s when
	// nil).
	Backoff func(n int) time.Duration
}

func (p InstallPolicy) backoff(n int) time.Duration {
	if p.Backoff != nil {
		return p.Backoff(n)
	}
	return min(time.Second<<(n-1), 10*time.Second)
}

// Install runs a component install on the workers in.Workers chooses,
// drained ones included, all at once, as one job: each worker's phases are
// relayed tagged with its id, a transport failure is retried with backoff
// up to the policy's Retries (each attempt told), and the worker's own
// failure is final. events gets each event as the job records it. A choice
// that names a worker this gateway does not know, or that reaches no
// worker, is refused before anything starts.
func (f *Fleet) Install(ctx context.Context, tracker *jobs.Tracker, pol InstallPolicy, in contract.ComponentInstallInput, events func(contract.JobEvent)) (contract.JobDone, error) {
	rows, err := f.chosen(in.Workers)
	if err != nil {
		return contract.JobDone{}, err
	}
	spec := contract.JobSpec{Platform: in.Platform, Version: in.Version, Workers: in.Workers}
	run, err := tracker.Begin(ctx, contract.JobKindInstall, spec, rows)
	if err != nil {
		return contract.JobDone{}, err
	}
	emit := func(ev contract.JobEvent) {
		run.Emit(ev)
		events(ev)
	}
	var wg sync.WaitGroup
	for _, r := range rows {
		wg.Go(func() {
			w := &workerInstall{f: f, pol: pol, id: r.WorkerID, in: contract.ComponentInstallInput{Platform: in.Platform, Version: in.Version}, emit: emit}
			w.run(ctx)
		})
	}
	wg.Wait()
	_, done := run.End()
	events(contract.JobEvent{Done: &done})
	return done, nil
}

// chosen is the job's rows for a choice of workers.
func (f *Fleet) chosen(c *contract.WorkerChoice) ([]contract.JobWorker, error) {
	if c == nil {
		return nil, contract.BadRequest("workers", `is required on a gateway: "all", or the ids of the workers to install on`)
	}
	all := f.Summaries()
	var rows []contract.JobWorker
	var unknown []string
	if c.All {
		for _, s := range all {
			rows = append(rows, contract.JobWorker{WorkerID: s.ID, Label: s.Label})
		}
	} else {
		for _, id := range c.IDs {
			i := slices.IndexFunc(all, func(s contract.WorkerSummary) bool { return s.ID == id })
			if i < 0 {
				unknown = append(unknown, id)
				continue
			}
			rows = append(rows, contract.JobWorker{WorkerID: id, Label: all[i].Label})
		}
	}
	switch {
	case len(unknown) > 0:
		return nil, contract.Errorf(contract.CodeUnknownWorker, "no worker %s is known to this gateway; the install started nowhere (simlock worker list shows the workers)",
			strings.Join(unknown, ", ")).With("workerIds", unknown)
	case len(rows) == 0:
		return nil, contract.Errorf(contract.CodeUnknownWorker, "no worker has joined this gateway: the install would reach no worker")
	}
	if len(rows) > contract.MaxJobWorkers {
		return nil, contract.BadRequest("workers", "an install reaches at most %d workers; this fleet has %d: name them in groups", contract.MaxJobWorkers, len(rows))
	}
	return rows, nil
}

// workerInstall is one worker's part of a fleet install.
type workerInstall struct {
	f    *Fleet
	pol  InstallPolicy
	id   string
	in   contract.ComponentInstallInput
	emit func(contract.JobEvent)

	mu sync.Mutex
	// phase is the last phase the worker reported; failed is set once it
	// reported its own error.
	phase  string
	failed bool
}

func (w *workerInstall) tell(status string, attempt int, outcome string) {
	w.emit(contract.JobEvent{Worker: &contract.JobWorkerEvent{WorkerID: w.id, Phase: w.current(), Status: status, Attempt: attempt, Outcome: outcome}})
}

func (w *workerInstall) current() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.phase
}

// run asks the worker, again after each transport failure while retries
// are left, and ends its row with one outcome.
func (w *workerInstall) run(ctx context.Context) {
	for attempt := 1; ; attempt++ {
		w.tell(contract.WorkerAsked, attempt, "")
		res, err, stale := w.attempt(ctx)
		if err == nil {
			w.emit(contract.JobEvent{Worker: &contract.JobWorkerEvent{WorkerID: w.id, Phase: w.current(), Status: contract.WorkerEnded, Attempt: attempt,
				Outcome: contract.OutcomeInstalled, Version: res.Version, AlreadyInstalled: res.Outcome == "already-installed"}})
			return
		}
		if stale {
			w.tell(contract.WorkerStale, attempt, contract.OutcomeUnknown)
			return
		}
		ce, transient := w.classify(ctx, err)
		if !transient {
			w.mu.Lock()
			told := w.failed
			w.mu.Unlock()
			if !told {
				w.fail(ce, false, attempt)
			}
			w.tell(contract.WorkerEnded, attempt, contract.OutcomeFailed)
			return
		}
		if attempt > w.pol.Retries || ctx.Err() != nil {
			w.fail(ce, true, attempt)
			w.tell(contract.WorkerEnded, attempt, contract.OutcomeUnknown)
			return
		}
		w.tell(contract.WorkerRetrying, attempt, "")
		t := time.NewTimer(w.pol.backoff(attempt))
		select {
		case <-ctx.Done():
		case <-t.C:
		}
		t.Stop()
	}
}

// classify says whether err, an attempt's failure, is the worker's own
// (final) or the way to it failing (transient: asked again). A worker
// stopping is transient too: it comes back.
func (w *workerInstall) classify(ctx context.Context, err error) (*contract.Error, bool) {
	ce, refused := forwardError(ctx, w.id, "component.install", err)
	if refused && ce.Code != contract.CodeDaemonStopping {
		return ce, false
	}
	if ce.Code == contract.CodeInternal && !errors.Is(err, errNotConnected) {
		return ce, false
	}
	if ce.Code != contract.CodeWorkerUnreachable {
		ce = contract.Errorf(contract.CodeWorkerUnreachable, "worker %s: %s", w.id, ce.Message).With("workerId", w.id)
	}
	return ce, true
}

// errNotConnected is an attempt on a worker whose uplink is down.
var errNotConnected = errors.New("the worker's uplink is down")

// fail tells the job the worker's row failed with ce in its current phase.
func (w *workerInstall) fail(ce *contract.Error, transient bool, attempts int) {
	p := w.current()
	if p == "" {
		p = contract.PhaseQueue
	}
	e := &contract.JobError{Phase: p, WorkerID: w.id, Code: ce.Code, Message: contract.ClipText(ce.Message, contract.MaxJobMessage), Transient: transient}
	if transient {
		e.Attempts = attempts
	}
	w.emit(contract.JobEvent{Phase: &contract.JobPhase{Phase: p, Status: contract.PhaseError, WorkerID: w.id, Platform: w.in.Platform, Component: w.in.Version}})
	w.emit(contract.JobEvent{Error: e})
}

// attempt asks the worker once. The call is given up once the worker says
// nothing for the policy's Silence (stale).
func (w *workerInstall) attempt(ctx context.Context) (res contract.ComponentInstallResult, err error, stale bool) {
	c := w.f.clientOf(w.id)
	if c == nil {
		return res, contract.Errorf(contract.CodeDaemonConnectionLost, "%v", errNotConnected), false
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	errStale := fmt.Errorf("worker %s said nothing for %v", w.id, w.pol.Silence)
	silent := time.AfterFunc(w.pol.Silence, func() { cancel(errStale) })
	defer silent.Stop()
	res, err = c.InstallComponent(ctx, w.in, func(ev contract.JobEvent) {
		silent.Reset(w.pol.Silence)
		w.relay(ev)
	})
	if err != nil && errors.Is(context.Cause(ctx), errStale) {
		return res, err, true
	}
	if err == nil {
		if cerr := checkInstallResult(res); cerr != nil {
			return res, fmt.Errorf("%w: %v", errBadAnswer, cerr), false
		}
	}
	return res, err, false
}

// relay passes on one event of the worker's own job, tagged with the id
// the gateway knows it by, once it is checked. The worker's worker and
// done events are its own bookkeeping: the gateway tells its own.
func (w *workerInstall) relay(ev contract.JobEvent) {
	if err := checkJobEvent(ev); err != nil {
		w.f.log.Warn("a worker sent an install event out of bounds; dropped", "worker", w.id, "err", err)
		return
	}
	switch {
	case ev.Phase != nil:
		p := *ev.Phase
		p.WorkerID = w.id
		w.mu.Lock()
		w.phase = p.Phase
		w.mu.Unlock()
		w.emit(contract.JobEvent{Phase: &p})
	case ev.Progress != nil:
		p := *ev.Progress
		p.WorkerID = w.id
		w.emit(contract.JobEvent{Progress: &p})
	case ev.Log != nil:
		l := *ev.Log
		l.WorkerID = w.id
		w.emit(contract.JobEvent{Log: &l})
	case ev.Error != nil && ev.Error.Code == contract.CodeDaemonStopping:
		// The worker stopping is the way to it failing, not its install:
		// the attempt's end decides, and the worker is asked again.
	case ev.Error != nil:
		e := *ev.Error
		e.WorkerID, e.Transient, e.Attempts = w.id, false, 0
		w.mu.Lock()
		w.failed = true
		w.mu.Unlock()
		w.emit(contract.JobEvent{Error: &e})
	}
}
