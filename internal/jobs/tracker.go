package jobs

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/ids"
)

// Store keeps the job records.
type Store interface {
	PutJob(ctx context.Context, j contract.Job) error
	Job(ctx context.Context, id string) (contract.Job, bool, error)
	// Jobs lists the newest limit jobs in state ("" is any), newest
	// first.
	Jobs(ctx context.Context, state string, limit int) ([]contract.Job, error)
	DeleteJobsBefore(ctx context.Context, ts int64) (int, error)
}

// Options configure a Tracker.
type Options struct {
	Store Store
	// Coalesce is the least time between two writes of one worker's
	// percentage (1 s when 0). Phase changes and the end are written at
	// once.
	Coalesce time.Duration
	Logger   *slog.Logger
}

// maxBacklog bounds what a follower may be behind: one further behind is
// cut off, so a stalled reader never holds a job's memory.
const maxBacklog = 10000

// Tracker keeps the running jobs and reads the ended ones from the store.
// Its methods are safe for concurrent use.
type Tracker struct {
	opts Options
	log  *slog.Logger

	mu   sync.Mutex
	live map[string]*Run
}

// New makes a tracker.
func New(opts Options) *Tracker {
	if opts.Coalesce <= 0 {
		opts.Coalesce = time.Second
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	return &Tracker{opts: opts, log: opts.Logger, live: map[string]*Run{}}
}

// Recover ends the jobs an earlier run of the daemon left running: they
// fail, and each row that had not ended is unknown, since nobody saw how it
// ended.
func (t *Tracker) Recover(ctx context.Context) error {
	running, err := t.opts.Store.Jobs(ctx, contract.JobRunning, contract.MaxJobList)
	if err != nil {
		return err
	}
	now := time.Now().UnixMilli()
	for _, j := range running {
		for i := range j.Workers {
			if j.Workers[i].Outcome == "" {
				j.Workers[i].Outcome = contract.OutcomeUnknown
			}
		}
		j.State, j.EndedAt = contract.JobFailed, now
		if err := t.opts.Store.PutJob(ctx, j); err != nil {
			return err
		}
	}
	return nil
}

// Prune deletes the jobs that ended more than retention before now.
func (t *Tracker) Prune(ctx context.Context, now time.Time, retention time.Duration) (int, error) {
	return t.opts.Store.DeleteJobsBefore(ctx, now.Add(-retention).UnixMilli())
}

// Begin makes a running job with a row per worker and writes it before it
// returns, so the job exists once anyone hears of it.
func (t *Tracker) Begin(ctx context.Context, kind string, spec contract.JobSpec, rows []contract.JobWorker) (*Run, error) {
	job := contract.Job{ID: ids.New("job_", ids.Short), Kind: kind, Spec: spec,
		CreatedAt: time.Now().UnixMilli(), State: contract.JobRunning, Workers: slices.Clone(rows)}
	if job.Workers == nil {
		job.Workers = []contract.JobWorker{}
	}
	if err := t.opts.Store.PutJob(ctx, job); err != nil {
		return nil, contract.Errorf(contract.CodeInternal, "record the job: %v", err)
	}
	r := &Run{t: t, job: job, written: map[string]time.Time{}}
	t.mu.Lock()
	t.live[job.ID] = r
	t.mu.Unlock()
	return r, nil
}

// Get reads a job: a running one as it is now.
func (t *Tracker) Get(ctx context.Context, id string) (contract.Job, error) {
	if r := t.running(id); r != nil {
		return r.Job(), nil
	}
	j, found, err := t.opts.Store.Job(ctx, id)
	if err != nil {
		return contract.Job{}, contract.Errorf(contract.CodeInternal, "read job %s: %v", id, err)
	}
	if !found {
		return contract.Job{}, unknownJob(id)
	}
	return j, nil
}

func unknownJob(id string) error {
	return contract.Errorf(contract.CodeUnknownJob, "no job %s here (jobs are kept jobs.retentionDays)", id).With("jobId", id)
}

// List lists the newest jobs in state ("" is any), newest first, a
// running one as it is now.
func (t *Tracker) List(ctx context.Context, state string, limit int) ([]contract.Job, error) {
	if limit <= 0 {
		limit = 50
	}
	list, err := t.opts.Store.Jobs(ctx, state, limit)
	if err != nil {
		return nil, contract.Errorf(contract.CodeInternal, "list jobs: %v", err)
	}
	for i, j := range list {
		if r := t.running(j.ID); r != nil {
			list[i] = r.Job()
		}
	}
	return list, nil
}

func (t *Tracker) running(id string) *Run {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.live[id]
}

// Follow tells fn the job's state first (a JobEvent with Job set), then
// each event until its done event, which is the last fn gets. A job that
// ended is its state and its done event. It returns when the job is done,
// ctx ends, or fn fell more than maxBacklog events behind (CANCELLED).
func (t *Tracker) Follow(ctx context.Context, id string, fn func(contract.JobEvent)) error {
	r := t.running(id)
	if r == nil {
		j, err := t.Get(ctx, id)
		if err != nil {
			return err
		}
		fn(contract.JobEvent{Job: &j})
		fn(contract.JobEvent{Done: doneOf(j)})
		return nil
	}
	f, snap, ok := r.follow()
	if !ok {
		// It ended between the two reads: the store has it whole.
		return t.Follow(ctx, id, fn)
	}
	defer r.unfollow(f)
	fn(contract.JobEvent{Job: &snap})
	for {
		select {
		case <-ctx.Done():
			return contract.Errorf(contract.CodeCancelled, "stopped following job %s: %v", id, ctx.Err())
		case <-f.signal:
		}
		evs, over, overflow := f.take()
		for _, ev := range evs {
			fn(ev)
		}
		if overflow {
			return contract.Errorf(contract.CodeCancelled, "the follower of job %s fell more than %d events behind", id, maxBacklog)
		}
		if over {
			return nil
		}
	}
}

// Run is one running job.
type Run struct {
	t *Tracker

	mu sync.Mutex
	// mu guards the fields below; a write to the store happens under it,
	// so the store sees the job's states in order.
	job       contract.Job
	followers []*follower
	written   map[string]time.Time // when each worker's row was last written
	flush     *time.Timer          // a coalesced write due
	ended     bool
}

// ID is the job's id.
func (r *Run) ID() string { return r.job.ID }

// Job is the job as it is now.
func (r *Run) Job() contract.Job {
	r.mu.Lock()
	defer r.mu.Unlock()
	return clone(r.job)
}

// Emit folds ev into the job and tells the followers. A phase, worker or
// error event is written before anyone is told; a percentage is written at
// most once per Coalesce per worker, the last one always; a log line is
// never written. An event after End is dropped.
func (r *Run) Emit(ev contract.JobEvent) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.ended || ev.Job != nil || ev.Done != nil {
		return
	}
	Apply(&r.job, ev)
	switch {
	case ev.Log != nil:
	case ev.Progress != nil:
		r.writeSoonLocked(ev.Progress.WorkerID)
	default:
		r.writeLocked()
	}
	r.tellLocked(ev)
}

// writeSoonLocked writes the job now if the worker's row was not written
// within Coalesce, else once that time is up.
func (r *Run) writeSoonLocked(workerID string) {
	due := r.written[workerID].Add(r.t.opts.Coalesce)
	if wait := time.Until(due); wait > 0 {
		if r.flush == nil {
			r.flush = time.AfterFunc(wait, func() {
				r.mu.Lock()
				defer r.mu.Unlock()
				r.flush = nil
				if !r.ended {
					r.writeLocked()
				}
			})
		}
		return
	}
	r.writeLocked()
}

func (r *Run) writeLocked() {
	if r.flush != nil {
		r.flush.Stop()
		r.flush = nil
	}
	now := time.Now()
	for _, w := range r.job.Workers {
		r.written[w.WorkerID] = now
	}
	if err := r.t.opts.Store.PutJob(context.Background(), r.job); err != nil {
		r.t.log.Error("could not write a job record", "job", r.job.ID, "err", err)
	}
}

func (r *Run) tellLocked(ev contract.JobEvent) {
	for _, f := range r.followers {
		f.put(ev)
	}
}

// End ends the job: a row that has no outcome yet is unknown; the job
// succeeded when it has rows and every one ended installed. The final
// state is written, then the done event told, and the followers end.
func (r *Run) End() (contract.Job, contract.JobDone) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.ended {
		return clone(r.job), *doneOf(r.job)
	}
	for i := range r.job.Workers {
		if r.job.Workers[i].Outcome == "" {
			r.job.Workers[i].Outcome = contract.OutcomeUnknown
		}
	}
	r.job.State = contract.JobSucceeded
	if len(Failed(r.job)) > 0 || len(r.job.Workers) == 0 {
		r.job.State = contract.JobFailed
	}
	r.job.EndedAt = max(time.Now().UnixMilli(), r.job.CreatedAt)
	r.writeLocked()
	r.ended = true
	done := doneOf(r.job)
	r.tellLocked(contract.JobEvent{Done: done})
	for _, f := range r.followers {
		f.end()
	}
	r.followers = nil
	r.t.mu.Lock()
	delete(r.t.live, r.job.ID)
	r.t.mu.Unlock()
	return clone(r.job), *done
}

// doneOf is a job's done event, read from its rows.
func doneOf(j contract.Job) *contract.JobDone {
	d := &contract.JobDone{JobID: j.ID, Result: j.State, Workers: []contract.JobOutcome{}}
	for _, w := range j.Workers {
		o := contract.JobOutcome{WorkerID: w.WorkerID, Outcome: w.Outcome}
		if w.Error != nil {
			e := *w.Error
			o.Error = &e
		}
		d.Workers = append(d.Workers, o)
	}
	return d
}

// Result is the job's end as its done event says it.
func Result(j contract.Job) contract.JobDone { return *doneOf(j) }

func (r *Run) follow() (*follower, contract.Job, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.ended {
		return nil, contract.Job{}, false
	}
	f := &follower{signal: make(chan struct{}, 1)}
	r.followers = append(r.followers, f)
	return f, clone(r.job), true
}

func (r *Run) unfollow(f *follower) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.followers = slices.DeleteFunc(r.followers, func(x *follower) bool { return x == f })
}

// follower is one Follow's queue of events.
type follower struct {
	signal chan struct{}

	mu       sync.Mutex
	queue    []contract.JobEvent
	over     bool
	overflow bool
}

func (f *follower) put(ev contract.JobEvent) {
	f.mu.Lock()
	if len(f.queue) >= maxBacklog {
		f.overflow = true
	} else {
		f.queue = append(f.queue, ev)
	}
	f.mu.Unlock()
	f.wake()
}

func (f *follower) end() {
	f.mu.Lock()
	f.over = true
	f.mu.Unlock()
	f.wake()
}

func (f *follower) wake() {
	select {
	case f.signal <- struct{}{}:
	default:
	}
}

func (f *follower) take() (evs []contract.JobEvent, over, overflow bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	evs, f.queue = f.queue, nil
	return evs, f.over, f.overflow
}
