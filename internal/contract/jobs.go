package contract

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// Jobs: a component install, on one worker or across a fleet, as a record
// an operator can watch live and replay afterwards.

// The job operations.
const (
	OpJobList   Op = "job.list"
	OpJobGet    Op = "job.get"
	OpJobFollow Op = "job.follow"
)

// PushJob carries one JobEvent of a running job: to the caller of
// component.install and to a job.follow.
const PushJob = "job"

// JobKindInstall is the kind of a component install's job.
const JobKindInstall = "component.install"

// The phases of an install on one worker, in order: waiting behind another
// install of the platform, the download, the fresh re-read that proves the
// runtime is there, and writing simlock's record of it.
const (
	PhaseQueue    = "queue"
	PhaseDownload = "download"
	PhaseVerify   = "verify"
	PhaseRecord   = "record"
)

// Phases lists the phases in order.
func Phases() []string { return []string{PhaseQueue, PhaseDownload, PhaseVerify, PhaseRecord} }

// What a phase reports.
const (
	PhaseStart    = "start"
	PhaseProgress = "progress"
	PhaseDone     = "done"
	PhaseError    = "error"
)

// Job states.
const (
	JobRunning   = "running"
	JobSucceeded = "succeeded"
	JobFailed    = "failed"
)

// How an install ended on one worker. Unknown is a worker that stopped
// answering before it said.
const (
	OutcomeInstalled = "installed"
	OutcomeFailed    = "failed"
	OutcomeUnknown   = "unknown"
)

// The statuses of a worker event.
const (
	// WorkerAsked: the gateway asked the worker (attempt 1, or again).
	WorkerAsked = "asked"
	// WorkerRetrying: the uplink failed; the worker is asked again after a
	// backoff.
	WorkerRetrying = "retrying"
	// WorkerStale: the worker said nothing for longer than any install
	// may take; its outcome is unknown.
	WorkerStale = "stale"
	// WorkerEnded: the worker's install ended (Outcome says how).
	WorkerEnded = "ended"
)

// Bounds of what a job holds.
const (
	// MaxJobWorkers bounds the workers of one fleet install.
	MaxJobWorkers = 256
	// MaxLogLine bounds one installer line as it is relayed.
	MaxLogLine = 1024
	// MaxJobBytes bounds a download's size (1 PB), as the installer
	// output parser does.
	MaxJobBytes = 1e15
	// MaxJobMessage bounds an error message in a job.
	MaxJobMessage = 2048
)

// ClipText cuts s to at most n bytes on a character boundary: how an
// installer line or a message is bounded before a job carries it.
func ClipText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "")
}

// WorkerChoice names the workers a fleet install runs on: every worker
// ("all" on the wire), or a list of worker ids.
type WorkerChoice struct {
	All bool
	IDs []string
}

func (c WorkerChoice) MarshalJSON() ([]byte, error) {
	if c.All {
		return []byte(`"all"`), nil
	}
	return json.Marshal(nonNilStrings(c.IDs))
}

func (c *WorkerChoice) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		if s != "all" {
			return fmt.Errorf(`want "all" or a list of worker ids, got %q`, clip(s))
		}
		*c = WorkerChoice{All: true}
		return nil
	}
	var ids []string
	if err := json.Unmarshal(b, &ids); err != nil {
		return fmt.Errorf(`want "all" or a list of worker ids`)
	}
	*c = WorkerChoice{IDs: ids}
	return nil
}

// Validate checks a list of ids: 1 to MaxJobWorkers worker ids, none twice.
func (c *WorkerChoice) Validate() error {
	if c.All {
		return nil
	}
	if len(c.IDs) == 0 {
		return BadRequest("workers", `must be "all" or name at least one worker`)
	}
	if len(c.IDs) > MaxJobWorkers {
		return BadRequest("workers", "must name at most %d workers, got %d", MaxJobWorkers, len(c.IDs))
	}
	for i, id := range c.IDs {
		if err := CheckWorkerID("workers", id); err != nil {
			return err
		}
		if slices.Contains(c.IDs[:i], id) {
			return BadRequest("workers", "names %q twice", clip(id))
		}
	}
	return nil
}

func nonNilStrings(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// JobSpec is what a job was asked to do.
type JobSpec struct {
	Platform Platform `json:"platform"`
	Version  string   `json:"version"`
	// Workers is how the workers were chosen, on a gateway.
	Workers *WorkerChoice `json:"workers,omitempty"`
}

// Job is the record of one install: its spec, and where it is (or ended)
// on each worker. A single worker's own install has one row, its own.
type Job struct {
	ID        string      `json:"id"`
	Kind      string      `json:"kind"`
	Spec      JobSpec     `json:"spec"`
	CreatedAt int64       `json:"createdAt"`
	EndedAt   int64       `json:"endedAt,omitempty"`
	State     string      `json:"state"`
	Workers   []JobWorker `json:"workers"`
}

// JobWorker is one worker's row of a job.
type JobWorker struct {
	WorkerID string `json:"workerId"`
	// Label is the worker's label, when the gateway knows it.
	Label string `json:"label,omitempty"`
	// Phase and Status are the phase reached and what it last reported;
	// "" before the worker reported anything.
	Phase  string `json:"phase,omitempty"`
	Status string `json:"status,omitempty"`
	// Percent, Bytes and Total are the download's, when the installer
	// printed them.
	Percent *float64 `json:"percent,omitempty"`
	Bytes   int64    `json:"bytes,omitempty"`
	Total   int64    `json:"total,omitempty"`
	// Attempt counts the times the worker was asked (a retry after a
	// transport failure is attempt 2, …); 0 on a single worker.
	Attempt int `json:"attempt,omitempty"`
	// Stale is set once the worker stopped reporting for too long.
	Stale bool `json:"stale,omitempty"`
	// Outcome is set once the install ended on this worker.
	Outcome string `json:"outcome,omitempty"`
	// AlreadyInstalled: the runtime was there before the install.
	AlreadyInstalled bool `json:"alreadyInstalled,omitempty"`
	// Version is the installed runtime's version, once installed.
	Version string    `json:"version,omitempty"`
	Error   *JobError `json:"error,omitempty"`
}

// JobError is a failure, attributed: the phase it broke, the worker, the
// code and message, and whether it was a transport failure the gateway
// retried (Attempts times) before it gave up.
type JobError struct {
	Phase     string `json:"phase"`
	WorkerID  string `json:"workerId"`
	Code      Code   `json:"code"`
	Message   string `json:"message"`
	Transient bool   `json:"transient"`
	Attempts  int    `json:"attempts,omitempty"`
}

// JobPhase is a phase event: a phase started, moved on, ended or failed on
// a worker.
type JobPhase struct {
	Phase    string `json:"phase"`
	Status   string `json:"status"`
	WorkerID string `json:"workerId"`
	// Platform and Component name what is installed.
	Platform  Platform `json:"platform,omitempty"`
	Component string   `json:"component,omitempty"`
}

// JobProgress is how far a download is on a worker; each figure only when
// the installer printed it.
type JobProgress struct {
	WorkerID string   `json:"workerId"`
	Bytes    int64    `json:"bytes,omitempty"`
	Total    int64    `json:"total,omitempty"`
	Percent  *float64 `json:"percent,omitempty"`
}

// JobLog is one line an installer printed: relayed live, never stored.
type JobLog struct {
	WorkerID string `json:"workerId"`
	Stream   string `json:"stream"`
	Line     string `json:"line"`
}

// JobWorkerEvent is what the gateway did with a worker: asked it, will ask
// it again, gave up on a silent one, or saw its install end.
type JobWorkerEvent struct {
	WorkerID string `json:"workerId"`
	Phase    string `json:"phase,omitempty"`
	Status   string `json:"status"`
	Attempt  int    `json:"attempt"`
	Outcome  string `json:"outcome,omitempty"`
	// Version and AlreadyInstalled say what an install that ended
	// installed found.
	Version          string `json:"version,omitempty"`
	AlreadyInstalled bool   `json:"alreadyInstalled,omitempty"`
}

// JobOutcome is one worker's end, in the done event.
type JobOutcome struct {
	WorkerID string    `json:"workerId"`
	Outcome  string    `json:"outcome"`
	Error    *JobError `json:"error,omitempty"`
}

// JobDone ends a job's stream: succeeded when every worker ended
// installed, else failed.
type JobDone struct {
	JobID   string       `json:"jobId"`
	Result  string       `json:"result"`
	Workers []JobOutcome `json:"workers"`
}

// JobEvent is one thing a job reports, exactly one field set: its name is
// the SSE event it is sent as. Job is the whole record, the first push of
// a job.follow (a stream joined late starts from the current state).
type JobEvent struct {
	Job      *Job            `json:"job,omitempty"`
	Phase    *JobPhase       `json:"phase,omitempty"`
	Progress *JobProgress    `json:"progress,omitempty"`
	Log      *JobLog         `json:"log,omitempty"`
	Worker   *JobWorkerEvent `json:"worker,omitempty"`
	Error    *JobError       `json:"error,omitempty"`
	Done     *JobDone        `json:"done,omitempty"`
}

// Name is the event's SSE name: job, phase, progress, log, worker, error
// or done.
func (e JobEvent) Name() string {
	switch {
	case e.Job != nil:
		return "job"
	case e.Phase != nil:
		return "phase"
	case e.Progress != nil:
		return "progress"
	case e.Log != nil:
		return "log"
	case e.Worker != nil:
		return "worker"
	case e.Error != nil:
		return "error"
	case e.Done != nil:
		return "done"
	}
	return ""
}

// Body is the event's one field, the SSE event's data.
func (e JobEvent) Body() any {
	switch {
	case e.Job != nil:
		return e.Job
	case e.Phase != nil:
		return e.Phase
	case e.Progress != nil:
		return e.Progress
	case e.Log != nil:
		return e.Log
	case e.Worker != nil:
		return e.Worker
	case e.Error != nil:
		return e.Error
	case e.Done != nil:
		return e.Done
	}
	return nil
}

// JobListInput lists jobs, newest first.
type JobListInput struct {
	// State keeps the jobs in that state: running, succeeded or failed
	// ("" is any).
	State string `json:"state,omitempty"`
	// Limit is 1 to MaxJobList (default 50).
	Limit int `json:"limit,omitempty"`
}

// MaxJobList bounds a job.list.
const MaxJobList = 500

// Validate checks the input's fields.
func (in *JobListInput) Validate() error {
	switch in.State {
	case "", JobRunning, JobSucceeded, JobFailed:
	default:
		return BadRequest("state", "must be running, succeeded or failed, got %q", clip(in.State))
	}
	if in.Limit < 0 || in.Limit > MaxJobList {
		return BadRequest("limit", "must be 1 to %d, got %d", MaxJobList, in.Limit)
	}
	return nil
}

// JobListResult answers job.list.
type JobListResult struct {
	Jobs []Job `json:"jobs"`
}

// JobIDInput names a job.
type JobIDInput struct {
	JobID string `json:"jobId"`
}

// MaxJobIDLen bounds a job id ("job_" and 16 hex digits).
const MaxJobIDLen = 64

// Validate checks the input's fields.
func (in *JobIDInput) Validate() error {
	if len(in.JobID) > MaxJobIDLen {
		return BadRequest("jobId", "must be at most %d characters, got %d", MaxJobIDLen, len(in.JobID))
	}
	return checkID("jobId", in.JobID, true)
}
