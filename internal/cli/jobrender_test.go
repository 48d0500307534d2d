package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"
	"unicode/utf8"

	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/termtest"
)

var jobNow = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

func jobMs(d time.Duration) int64 { return jobNow.Add(d).UnixMilli() }

func fpct(v float64) *float64 { return &v }

// liveJob is a fleet install of iOS 26.4 on three workers, 1m12s in: one
// downloading, one waiting behind another install, one being asked again.
func liveJob() contract.Job {
	return contract.Job{
		ID: "job_0123456789abcdef", Kind: contract.JobKindInstall, CreatedAt: jobMs(-72 * time.Second), State: contract.JobRunning,
		Spec: contract.JobSpec{Platform: "ios", Version: "26.4", Workers: &contract.WorkerChoice{IDs: []string{"wrk_a", "wrk_b", "wrk_c"}}},
		Workers: []contract.JobWorker{
			{WorkerID: "wrk_a", Label: "mac-mini-1", Phase: contract.PhaseDownload, Status: contract.PhaseProgress,
				Percent: fpct(41.7), Bytes: 3_600_000_000, Total: 8_900_000_000, Attempt: 1},
			{WorkerID: "wrk_b", Label: "mac-mini-2", Phase: contract.PhaseQueue, Status: contract.PhaseStart, Attempt: 1},
			{WorkerID: "wrk_c", Label: "mac-studio", Phase: contract.PhaseDownload, Status: contract.WorkerRetrying, Attempt: 2},
		},
	}
}

var liveLines = map[string]string{
	"wrk_a": "Downloading iOS 26.4 Simulator (23E244): 41.7% done (3.60 GB of 8.90 GB) from the Apple developer download servers",
	"wrk_b": "waiting for the install of iOS 26.2 to finish",
}

// endedJob is liveJob ended: mac-mini-1 installed, mac-mini-2 failed in
// its download (not a transport error), mac-studio installed after three
// retries.
func endedJob() contract.Job {
	j := liveJob()
	j.State, j.EndedAt = contract.JobFailed, jobMs(3*time.Minute)
	j.Workers = []contract.JobWorker{
		{WorkerID: "wrk_a", Label: "mac-mini-1", Phase: contract.PhaseRecord, Status: contract.PhaseDone, Attempt: 1,
			Outcome: contract.OutcomeInstalled, Version: "26.4"},
		{WorkerID: "wrk_b", Label: "mac-mini-2", Phase: contract.PhaseDownload, Status: contract.PhaseError, Attempt: 1,
			Percent: fpct(63), Outcome: contract.OutcomeFailed,
			Error: &contract.JobError{Phase: contract.PhaseDownload, WorkerID: "wrk_b", Code: contract.CodeInternal,
				Message: "xcodebuild -downloadPlatform iOS exited with status 70: the downloaded disk image could not be verified", Attempts: 1}},
		{WorkerID: "wrk_c", Label: "mac-studio", Phase: contract.PhaseRecord, Status: contract.PhaseDone, Attempt: 4,
			Outcome: contract.OutcomeInstalled, Version: "26.4"},
	}
	return j
}

func renderJobString(job contract.Job, lines map[string]string, o jobRender) string {
	var b bytes.Buffer
	renderJob(&b, job, lines, o)
	return b.String()
}

func TestJobRenderGolden(t *testing.T) {
	term := jobRender{Width: 80, Terminal: true, Now: jobMs(0)}

	t.Run("live", func(t *testing.T) {
		got := renderJobString(liveJob(), liveLines, term)
		termtest.Golden(t, "job-live", []byte(got))
		for _, want := range []string{
			"Installing iOS 26.4 on 3 workers, 1m12s so far  (job_0123456789abcdef)\n",
			"]  41% · 3.6 GB of 8.9 GB",
			"mac-mini-2  waiting",
			"mac-studio  retrying     attempt 2",
			"            Downloading iOS 26.4 Simulator",
		} {
			if !strings.Contains(got, want) {
				t.Errorf("the live grid lacks %q:\n%s", want, got)
			}
		}
		if strings.Contains(got, "✗") {
			t.Errorf("a running job shows an error block:\n%s", got)
		}
		assertFitsWidth(t, got, 80)
	})

	t.Run("ended", func(t *testing.T) {
		got := renderJobString(endedJob(), liveLines, term)
		termtest.Golden(t, "job-ended", []byte(got))
		for _, want := range []string{
			"iOS 26.4 failed after 4m12s: 2 of 3 workers installed  (job_0123456789abcdef)\n",
			"mac-studio  installed  attempt 4",
			"✗ mac-mini-2 (wrk_b) failed in download [INTERNAL]",
			"  not a transport error: not retried",
			"  try it again:  simlock component install ios 26.4 --workers wrk_b",
		} {
			if !strings.Contains(got, want) {
				t.Errorf("the ended job lacks %q:\n%s", want, got)
			}
		}
		if n := strings.Count(got, "✗"); n != 1 {
			t.Errorf("the ended job has %d error blocks, want 1 (only mac-mini-2 did not install):\n%s", n, got)
		}
		if strings.Contains(got, "Downloading iOS 26.4 Simulator") {
			t.Errorf("an ended row still shows its installer line:\n%s", got)
		}
	})

	t.Run("ended unknown", func(t *testing.T) {
		j := endedJob()
		j.Workers[2] = contract.JobWorker{WorkerID: "wrk_c", Label: "mac-studio", Phase: contract.PhaseDownload, Status: contract.PhaseProgress,
			Attempt: 4, Stale: true, Outcome: contract.OutcomeUnknown,
			Error: &contract.JobError{Phase: contract.PhaseDownload, WorkerID: "wrk_c", Code: contract.CodeWorkerUnreachable,
				Message: "the worker's uplink closed and it did not come back", Transient: true, Attempts: 4}}
		got := renderJobString(j, nil, term)
		termtest.Golden(t, "job-ended-unknown", []byte(got))
		for _, want := range []string{
			"mac-studio  unknown    in download  attempt 4",
			"✗ mac-studio (wrk_c) stopped answering in download, outcome unknown [WORKER_UNREACHABLE]",
			"  transport error, retried 3 times (4 attempts)",
			"  check the worker first:  simlock worker show wrk_c",
			"  then try it again:       simlock component install ios 26.4 --workers wrk_c",
		} {
			if !strings.Contains(got, want) {
				t.Errorf("the unknown row's block lacks %q:\n%s", want, got)
			}
		}
	})

	t.Run("remedies", func(t *testing.T) {
		j := endedJob()
		j.Workers = []contract.JobWorker{
			{WorkerID: "wrk_d", Phase: contract.PhaseQueue, Outcome: contract.OutcomeFailed,
				Error: &contract.JobError{Phase: contract.PhaseQueue, WorkerID: "wrk_d", Code: contract.CodeDownloadsDisabled, Message: "downloads.policy is never on this machine"}},
			{WorkerID: "wrk_e", Label: "ci-mac-3", Phase: contract.PhaseDownload, Outcome: contract.OutcomeFailed,
				Error: &contract.JobError{Phase: contract.PhaseDownload, WorkerID: "wrk_e", Code: contract.CodeInsufficientDiskSpace, Message: "iOS 26.4 needs 17.8 GB free; 6.1 GB is"}},
			{WorkerID: "wrk_f", Label: "ci-mac-4", Phase: contract.PhaseVerify, Stale: true, Outcome: contract.OutcomeUnknown},
		}
		got := renderJobString(j, nil, term)
		termtest.Golden(t, "job-ended-remedies", []byte(got))
		for _, want := range []string{
			"  allow downloads, run on that worker:  simlock config set downloads.policy on-request",
			"  then try it again:                    simlock component install ios 26.4 --workers wrk_d",
			"  free disk space on that worker first\n  then try it again:  simlock component install ios 26.4 --workers wrk_e",
			"  it may or may not have installed: it stopped answering before it said",
			"  check the worker first:  simlock worker show wrk_f",
		} {
			if !strings.Contains(got, want) {
				t.Errorf("the remedies lack %q:\n%s", want, got)
			}
		}
	})

	t.Run("plain", func(t *testing.T) {
		plain := jobRender{Width: 80, Now: jobMs(0)}
		got := renderJobString(liveJob(), liveLines, plain) + "\n" + renderJobString(endedJob(), nil, plain)
		termtest.Golden(t, "job-plain", []byte(got))
		if strings.ContainsAny(got, "█░") {
			t.Errorf("off a terminal the grid draws bar characters:\n%s", got)
		}
		if !strings.Contains(got, "downloading  41% · 3.6 GB of 8.9 GB") {
			t.Errorf("off a terminal the download's figures are missing:\n%s", got)
		}
	})

	t.Run("single worker", func(t *testing.T) {
		j := contract.Job{ID: "job_00000000000000aa", Kind: contract.JobKindInstall, CreatedAt: jobMs(-20 * time.Second), State: contract.JobRunning,
			Spec: contract.JobSpec{Platform: "android", Version: "36"},
			Workers: []contract.JobWorker{{WorkerID: "local", Phase: contract.PhaseDownload, Status: contract.PhaseProgress,
				Percent: fpct(12), Bytes: 180_000_000, Total: 1_500_000_000}}}
		got := renderJobString(j, map[string]string{"local": "[=====                        ] 12% Downloading system-images;android-36"}, term)
		j.State, j.EndedAt = contract.JobFailed, jobMs(30*time.Second)
		j.Workers[0].Outcome = contract.OutcomeFailed
		j.Workers[0].Error = &contract.JobError{Phase: contract.PhaseDownload, WorkerID: "local", Code: contract.CodeInsufficientDiskSpace,
			Message: "system-images;android-36 needs 4.2 GB free; 1.1 GB is"}
		got += "\n" + renderJobString(j, nil, term)
		termtest.Golden(t, "job-single", []byte(got))
		if !strings.Contains(got, "Installing Android 36 on local, 20s so far  (job_00000000000000aa)\n") {
			t.Errorf("a single worker's header does not name it:\n%s", got)
		}
		if strings.Contains(got, "attempt") || strings.Contains(got, "--workers") {
			t.Errorf("a single worker's install shows an attempt or a --workers flag:\n%s", got)
		}
	})

	t.Run("narrow", func(t *testing.T) {
		got := renderJobString(liveJob(), liveLines, jobRender{Width: 40, Terminal: true})
		assertFitsWidth(t, got, 40)
		if strings.ContainsAny(got, "█░") {
			t.Errorf("at 40 columns a bar is drawn with no room for it:\n%s", got)
		}
	})
}

// assertFitsWidth checks every line leaves the last column free.
func assertFitsWidth(t *testing.T, text string, width int) {
	t.Helper()
	for _, l := range strings.Split(strings.TrimSuffix(text, "\n"), "\n") {
		if n := utf8.RuneCountInString(l); n > width-1 {
			t.Errorf("line of %d columns at width %d: %q", n, width, l)
		}
	}
}

func TestJobListGolden(t *testing.T) {
	live := liveJob()
	ended := endedJob()
	single := contract.Job{ID: "job_00000000000000aa", Kind: contract.JobKindInstall, CreatedAt: jobMs(-2 * time.Hour), EndedAt: jobMs(-2*time.Hour + 95*time.Second),
		State: contract.JobSucceeded, Spec: contract.JobSpec{Platform: "android", Version: "36"},
		Workers: []contract.JobWorker{{WorkerID: "local", Outcome: contract.OutcomeInstalled}}}
	ended.CreatedAt, ended.EndedAt = jobMs(-10*time.Minute), jobMs(-6*time.Minute)
	var b bytes.Buffer
	renderJobList(&b, []contract.Job{live, ended, single}, jobMs(0))
	renderJobList(&b, nil, jobMs(0))
	got := b.String()
	termtest.Golden(t, "job-list", b.Bytes())
	for _, want := range []string{"0/3 installed", "2/3 installed", "1/1 installed", "1m12s so far", "4m00s", "No jobs."} {
		if !strings.Contains(got, want) {
			t.Errorf("the job list lacks %q:\n%s", want, got)
		}
	}
}

// jobEvents is a fleet install as a gateway reports it: mac-mini-1
// installs, mac-mini-2 fails its download, wrk_c is asked twice.
func jobEvents() []contract.JobEvent {
	snap := liveJob()
	snap.Workers = []contract.JobWorker{{WorkerID: "wrk_a", Label: "mac-mini-1"}, {WorkerID: "wrk_b", Label: "mac-mini-2"}, {WorkerID: "wrk_c"}}
	phase := func(w, p, s string) contract.JobEvent {
		return contract.JobEvent{Phase: &contract.JobPhase{WorkerID: w, Phase: p, Status: s, Platform: "ios", Component: "26.4"}}
	}
	return []contract.JobEvent{
		{Job: &snap},
		phase("wrk_a", contract.PhaseDownload, contract.PhaseStart),
		phase("wrk_b", contract.PhaseDownload, contract.PhaseStart),
		{Worker: &contract.JobWorkerEvent{WorkerID: "wrk_c", Status: contract.WorkerRetrying, Attempt: 1}},
		{Progress: &contract.JobProgress{WorkerID: "wrk_a", Bytes: 3_600_000_000, Total: 8_900_000_000, Percent: fpct(41.7)}},
		{Log: &contract.JobLog{WorkerID: "wrk_a", Stream: "stdout", Line: "Downloading iOS 26.4 Simulator (23E244): 41.7% done"}},
		{Worker: &contract.JobWorkerEvent{WorkerID: "wrk_c", Status: contract.WorkerAsked, Attempt: 2}},
		phase("wrk_c", contract.PhaseQueue, contract.PhaseStart),
		{Error: &contract.JobError{Phase: contract.PhaseDownload, WorkerID: "wrk_b", Code: contract.CodeInternal, Message: "the installer exited with status 70"}},
		phase("wrk_a", contract.PhaseRecord, contract.PhaseDone),
		{Worker: &contract.JobWorkerEvent{WorkerID: "wrk_a", Status: contract.WorkerEnded, Attempt: 1, Outcome: contract.OutcomeInstalled}},
		{Worker: &contract.JobWorkerEvent{WorkerID: "wrk_c", Status: contract.WorkerEnded, Attempt: 2, Outcome: contract.OutcomeInstalled}},
		{Done: &contract.JobDone{JobID: snap.ID, Result: contract.JobFailed, Workers: []contract.JobOutcome{
			{WorkerID: "wrk_a", Outcome: contract.OutcomeInstalled}, {WorkerID: "wrk_b", Outcome: contract.OutcomeFailed}, {WorkerID: "wrk_c", Outcome: contract.OutcomeInstalled}}}},
	}
}

func TestTheJSONPrinterWritesOneLineNamedByEachEvent(t *testing.T) {
	var b bytes.Buffer
	p := newJobPrinter(&b, "json", nil, false)
	evs := jobEvents()
	p.show(contract.JobEvent{}) // no field set: no line
	for _, ev := range evs {
		p.show(ev)
	}
	p.stop()
	lines := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
	if len(lines) != len(evs) {
		t.Fatalf("%d lines for %d events:\n%s", len(lines), len(evs), b.String())
	}
	for i, l := range lines {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("line %d is not JSON (%v): %s", i, err, l)
		}
		if m["event"] != evs[i].Name() {
			t.Errorf("line %d is event %v, want %q: %s", i, m["event"], evs[i].Name(), l)
		}
	}
	if want := `{"event":"phase","phase":"download","status":"start","workerId":"wrk_a","platform":"ios","component":"26.4"}`; lines[1] != want {
		t.Errorf("the phase line reads\n%s\nwant\n%s", lines[1], want)
	}
	if strings.Contains(b.String(), "\x1b") {
		t.Errorf("the json printer wrote a terminal escape")
	}
}

// lastFrame is what the human printer drew last: everything after its
// last erase.
func lastFrame(out string) string {
	i := strings.LastIndex(out, "\x1b[J")
	if i < 0 {
		return ""
	}
	return out[i+len("\x1b[J"):]
}

func TestTheHumanPrintersLastFrameIsRenderJobOfTheFoldedJob(t *testing.T) {
	var b bytes.Buffer
	p := newJobPrinter(&b, "human", func() int { return 80 }, false)
	p.now = func() time.Time { return jobNow }
	for _, ev := range jobEvents() {
		p.show(ev)
	}
	p.stop()
	job := p.job()
	if job.State != contract.JobFailed || len(job.Workers) != 3 || job.Workers[1].Error == nil {
		t.Fatalf("the printer folded %+v, want a failed job of 3 workers with mac-mini-2's error", job)
	}
	if got := p.lastLines()["wrk_a"]; got != "Downloading iOS 26.4 Simulator (23E244): 41.7% done" {
		t.Errorf("lastLines()[wrk_a] = %q, want the installer's line", got)
	}
	want := renderJobString(job, p.lastLines(), jobRender{Width: 80, Terminal: true, Now: jobNow.UnixMilli()})
	if got := lastFrame(b.String()); got != want {
		t.Errorf("the last frame reads\n%s\nwant renderJob of the folded job\n%s", got, want)
	}
	if !strings.Contains(want, "✗ mac-mini-2 (wrk_b) failed in download [INTERNAL]") {
		t.Errorf("the last frame of an ended job lacks its error block:\n%s", want)
	}
	// The first event drew a frame at once (the snapshot's); the last
	// moves up over as many rows as it took.
	out := b.String()
	first, _, _ := strings.Cut(strings.TrimPrefix(out, "\r\x1b[J"), "\x1b[")
	if rows := strings.Count(first, "\n"); rows < 4 || !strings.Contains(out, fmt.Sprintf("\n\x1b[%dA\r\x1b[J", rows)) {
		t.Errorf("the last frame does not move up over the first frame's %d rows: %q", rows, out)
	}
	n := b.Len()
	p.show(jobEvents()[1])
	p.stop()
	if b.Len() != n {
		t.Errorf("the printer drew after stop")
	}
}

// lockedBuffer is a bytes.Buffer safe to write from the printer's timer
// and read from the test.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func TestTheLiveGridRedrawsAtMostTenTimesASecond(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var b lockedBuffer
		p := newJobPrinter(&b, "human", func() int { return 80 }, true)
		frames := func() int { return strings.Count(b.String(), "\x1b[J") }
		evs := jobEvents()
		p.show(evs[0])
		if n := frames(); n != 1 {
			t.Fatalf("%d frames after the first event, want 1 drawn at once", n)
		}
		for _, ev := range evs[1:6] {
			p.show(ev)
		}
		if n := frames(); n != 1 {
			t.Fatalf("%d frames after a burst in the same instant, want still 1", n)
		}
		time.Sleep(redrawEvery)
		synctest.Wait()
		if n := frames(); n != 2 {
			t.Fatalf("%d frames %v after the burst, want 2: the burst's one redraw", n, redrawEvery)
		}
		if !strings.Contains(b.String(), "\x1b[Jmac-mini-1: Downloading iOS 26.4 Simulator (23E244): 41.7% done\n") {
			t.Errorf("verbose does not print the installer's line above the grid as <worker>: <line>: %q", b.String())
		}
		if strings.Count(lastFrame(b.String()), "Downloading iOS 26.4 Simulator") != 1 {
			t.Errorf("verbose also shows the installer's line under its row: %q", lastFrame(b.String()))
		}
		p.show(evs[6])
		p.stop()
		if n := frames(); n != 3 {
			t.Fatalf("%d frames after stop, want 3: stop draws the last state at once", n)
		}
		time.Sleep(time.Second)
		synctest.Wait()
		if n := frames(); n != 3 {
			t.Fatalf("%d frames a second after stop, want 3: a throttled redraw came after stop", n)
		}
	})
}
