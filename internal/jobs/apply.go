// Package jobs keeps the records of component installs, on one worker or
// across a fleet: each job's state, folded from the events its installs
// report, written to the store as it changes (a phase at once, a
// percentage at most once a second per worker, the end always), and
// streamed to whoever follows it, a late follower getting the current
// state first.
//
// Apply is the one fold from event to state: the daemon's record, the
// CLI's live grid and the console's page all read a job through it.
package jobs

import (
	"slices"

	"github.com/simlock/simlock/internal/contract"
)

// Apply folds one event into job. A row is made for a worker the job has
// not heard of. A new phase clears the last one's figures, so no phase
// shows another's percentage; within a phase a percentage never goes back.
// Log lines and snapshots other than Job change nothing here.
func Apply(job *contract.Job, ev contract.JobEvent) {
	switch {
	case ev.Job != nil:
		*job = clone(*ev.Job)
	case ev.Phase != nil:
		r := row(job, ev.Phase.WorkerID)
		if r.Phase != ev.Phase.Phase {
			r.Percent, r.Bytes, r.Total = nil, 0, 0
		}
		r.Phase, r.Status = ev.Phase.Phase, ev.Phase.Status
	case ev.Progress != nil:
		p := ev.Progress
		r := row(job, p.WorkerID)
		if p.Percent != nil && (r.Percent == nil || *p.Percent >= *r.Percent) {
			v := *p.Percent
			r.Percent = &v
		}
		if p.Total > 0 {
			r.Bytes, r.Total = max(p.Bytes, r.Bytes), p.Total
		}
		if r.Status == contract.PhaseStart {
			r.Status = contract.PhaseProgress
		}
	case ev.Worker != nil:
		w := ev.Worker
		r := row(job, w.WorkerID)
		r.Attempt = max(r.Attempt, w.Attempt)
		switch w.Status {
		case contract.WorkerStale:
			r.Stale = true
		case contract.WorkerRetrying:
			r.Status = w.Status
		case contract.WorkerAsked:
			r.Stale = false
			if r.Status == contract.WorkerRetrying {
				r.Status = ""
			}
		}
		if w.Outcome != "" {
			r.Outcome = w.Outcome
		}
		// A row that ended installed after a failed attempt has no
		// error left to show.
		if w.Outcome == contract.OutcomeInstalled {
			r.Error = nil
		}
		if w.Version != "" {
			r.Version, r.AlreadyInstalled = w.Version, w.AlreadyInstalled
		}
	case ev.Error != nil:
		e := *ev.Error
		r := row(job, e.WorkerID)
		r.Error = &e
		r.Status = contract.PhaseError
		if e.Phase != "" {
			r.Phase = e.Phase
		}
		if r.Outcome == "" {
			r.Outcome = contract.OutcomeFailed
		}
	case ev.Done != nil:
		job.State = ev.Done.Result
		for _, o := range ev.Done.Workers {
			r := row(job, o.WorkerID)
			r.Outcome = o.Outcome
			if o.Error != nil && r.Error == nil {
				e := *o.Error
				r.Error = &e
			}
		}
	}
}

// row is the job's row for a worker, made at the end when it has none.
func row(job *contract.Job, workerID string) *contract.JobWorker {
	i := slices.IndexFunc(job.Workers, func(w contract.JobWorker) bool { return w.WorkerID == workerID })
	if i < 0 {
		job.Workers = append(job.Workers, contract.JobWorker{WorkerID: workerID})
		i = len(job.Workers) - 1
	}
	return &job.Workers[i]
}

// clone copies a job deeply enough that changing the copy's rows leaves
// the original as it was.
func clone(j contract.Job) contract.Job {
	j.Workers = slices.Clone(j.Workers)
	for i := range j.Workers {
		w := &j.Workers[i]
		if w.Percent != nil {
			v := *w.Percent
			w.Percent = &v
		}
		if w.Error != nil {
			e := *w.Error
			w.Error = &e
		}
	}
	if j.Spec.Workers != nil {
		c := *j.Spec.Workers
		c.IDs = slices.Clone(c.IDs)
		j.Spec.Workers = &c
	}
	return j
}

// Clone copies a job, rows and all.
func Clone(j contract.Job) contract.Job { return clone(j) }

// Failed lists the rows that did not end installed.
func Failed(job contract.Job) []contract.JobWorker {
	var out []contract.JobWorker
	for _, w := range job.Workers {
		if w.Outcome != contract.OutcomeInstalled {
			out = append(out, w)
		}
	}
	return out
}
