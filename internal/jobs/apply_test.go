package jobs

import (
	"testing"

	"github.com/simlock/simlock/internal/contract"
)

func pct(v float64) *float64 { return &v }

func phase(w, p, s string) contract.JobEvent {
	return contract.JobEvent{Phase: &contract.JobPhase{WorkerID: w, Phase: p, Status: s}}
}

func progress(w string, p float64, bytes, total int64) contract.JobEvent {
	return contract.JobEvent{Progress: &contract.JobProgress{WorkerID: w, Percent: pct(p), Bytes: bytes, Total: total}}
}

func TestAPercentageNeverGoesBackWithinAPhase(t *testing.T) {
	var j contract.Job
	for _, ev := range []contract.JobEvent{phase("a", contract.PhaseDownload, contract.PhaseStart), progress("a", 41, 41, 100), progress("a", 30, 30, 100)} {
		Apply(&j, ev)
	}
	if r := j.Workers[0]; r.Percent == nil || *r.Percent != 41 || r.Bytes != 41 || r.Status != contract.PhaseProgress {
		t.Fatalf("after 41%% then 30%% the row reads %+v, want 41%%, 41 bytes, status progress", r)
	}
}

func TestANewPhaseClearsTheLastPhasesFigures(t *testing.T) {
	var j contract.Job
	for _, ev := range []contract.JobEvent{phase("a", contract.PhaseDownload, contract.PhaseStart), progress("a", 100, 9, 9), phase("a", contract.PhaseVerify, contract.PhaseStart)} {
		Apply(&j, ev)
	}
	if r := j.Workers[0]; r.Percent != nil || r.Bytes != 0 || r.Total != 0 || r.Phase != contract.PhaseVerify {
		t.Fatalf("verify still shows the download's figures: %+v", r)
	}
}

func TestAnErrorFailsTheRowInItsPhaseAndDoneSetsTheState(t *testing.T) {
	var j contract.Job
	Apply(&j, phase("a", contract.PhaseDownload, contract.PhaseStart))
	Apply(&j, phase("b", contract.PhaseDownload, contract.PhaseStart))
	Apply(&j, contract.JobEvent{Error: &contract.JobError{WorkerID: "b", Phase: contract.PhaseDownload, Code: contract.CodeInternal, Message: "boom"}})
	Apply(&j, contract.JobEvent{Worker: &contract.JobWorkerEvent{WorkerID: "a", Status: contract.WorkerEnded, Attempt: 2, Outcome: contract.OutcomeInstalled}})
	Apply(&j, contract.JobEvent{Done: &contract.JobDone{Result: contract.JobFailed, Workers: []contract.JobOutcome{{WorkerID: "a", Outcome: contract.OutcomeInstalled}, {WorkerID: "b", Outcome: contract.OutcomeFailed}}}})
	if j.State != contract.JobFailed {
		t.Fatalf("state %q after a failed done, want failed", j.State)
	}
	b := j.Workers[1]
	if b.Outcome != contract.OutcomeFailed || b.Error == nil || b.Error.Code != contract.CodeInternal || b.Status != contract.PhaseError {
		t.Fatalf("the failed row reads %+v", b)
	}
	if f := Failed(j); len(f) != 1 || f[0].WorkerID != "b" {
		t.Fatalf("Failed lists %+v, want b alone", f)
	}
	if a := j.Workers[0]; a.Attempt != 2 || a.Outcome != contract.OutcomeInstalled {
		t.Fatalf("the retried row reads %+v, want attempt 2, installed", a)
	}
}

func TestASnapshotIsCopiedNotShared(t *testing.T) {
	snap := contract.Job{ID: "job_1", Workers: []contract.JobWorker{{WorkerID: "a", Percent: pct(5)}}}
	var j contract.Job
	Apply(&j, contract.JobEvent{Job: &snap})
	Apply(&j, progress("a", 50, 0, 0))
	if *snap.Workers[0].Percent != 5 {
		t.Fatalf("applying to the copy changed the snapshot: %v", *snap.Workers[0].Percent)
	}
}

func TestARowInstalledAfterAFailedAttemptShowsNoErrorAndNoRetry(t *testing.T) {
	var j contract.Job
	Apply(&j, contract.JobEvent{Error: &contract.JobError{WorkerID: "a", Phase: contract.PhaseDownload, Code: contract.CodeWorkerUnreachable, Transient: true}})
	Apply(&j, contract.JobEvent{Worker: &contract.JobWorkerEvent{WorkerID: "a", Status: contract.WorkerRetrying, Attempt: 1}})
	Apply(&j, contract.JobEvent{Worker: &contract.JobWorkerEvent{WorkerID: "a", Status: contract.WorkerAsked, Attempt: 2}})
	if r := j.Workers[0]; r.Status == contract.WorkerRetrying {
		t.Fatalf("asked again, the row still says retrying: %+v", r)
	}
	Apply(&j, contract.JobEvent{Worker: &contract.JobWorkerEvent{WorkerID: "a", Status: contract.WorkerEnded, Attempt: 2, Outcome: contract.OutcomeInstalled}})
	if r := j.Workers[0]; r.Error != nil || r.Outcome != contract.OutcomeInstalled || r.Attempt != 2 {
		t.Fatalf("installed at the second attempt, the row reads %+v, want installed, attempt 2, no error", r)
	}
}
