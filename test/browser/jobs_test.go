package browser

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/simlock/simlock/internal/bintest"
	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/jobs"
)

// jobsHome is a daemon with its HTTP API on whose demo downloads last
// long enough to be watched: a quiet second and a half with no
// percentage, then five seconds of percentages.
func jobsHome(t *testing.T) *home {
	t.Helper()
	// A fixed port: the page must find the daemon again after a restart.
	port, err := bintest.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	h := newHome(t,
		"http.enabled", "true", "http.port", strconv.Itoa(port),
		"drivers.demo.downloadableRuntimes", `{"ios":["26.4"],"android":["37"]}`,
		"drivers.demo.downloadQuietMs", "1500",
		"drivers.demo.downloadMs", "5000",
	)
	h.startDaemon()
	return h
}

// jobRowJS reads a worker's row on the job page: its state word, bar and
// words; null when there is none.
const jobRowJS = `window.__jobRow = (worker) => {
  const r = document.querySelector('table.job-rows tr[data-worker-id="' + worker + '"]');
  if (!r) return null;
  const bar = r.querySelector('.bar');
  const text = (sel) => { const e = r.querySelector(sel); return e ? e.textContent : ''; };
  return {
    state: r.dataset.state, badge: text('.badge'),
    bar: bar ? { determinate: bar.dataset.determinate === 'true', value: bar.dataset.value === '' ? null : Number(bar.dataset.value) } : null,
    pct: text('.pct'), note: text('.bar-note'), detail: text('.bar-detail'), line: text('.job-line'), attempt: text('.job-attempt'),
    progress: text('.job-progress'),
  };
}; window.__jobSamples = []; window.__jobSampler = 0;
window.__sampleJob = (worker) => { clearInterval(window.__jobSampler); window.__jobSamples = []; window.__jobSampled = worker;
  window.__jobSampler = setInterval(() => { const s = window.__jobRow(worker); if (s) { s.at = performance.now(); window.__jobSamples.push(s); } }, 50); return true; };
true`

// stopJobSamplerJS stops the sampler and returns its samples, the row as
// it is now the last of them.
const stopJobSamplerJS = `(() => { clearInterval(window.__jobSampler); const s = window.__jobRow(window.__jobSampled);
  if (s) { s.at = performance.now(); window.__jobSamples.push(s); } return window.__jobSamples; })()`

type jobRowSample struct {
	At    float64 `json:"at"`
	State string  `json:"state"`
	Badge string  `json:"badge"`
	Bar   *struct {
		Determinate bool     `json:"determinate"`
		Value       *float64 `json:"value"`
	} `json:"bar"`
	Pct      string `json:"pct"`
	Note     string `json:"note"`
	Detail   string `json:"detail"`
	Line     string `json:"line"`
	Attempt  string `json:"attempt"`
	Progress string `json:"progress"`
}

// jobHead is what the job page's header says.
const jobHeadJS = `(() => { const h = document.querySelector('.view[data-view=job] .page-head'); if (!h) return null;
  return { id: h.dataset.jobId, state: h.dataset.state, source: h.dataset.source, title: h.querySelector('h2').textContent,
    facts: document.querySelector('.view[data-view=job] .facts').innerText }; })()`

type jobHeadView struct {
	ID, State, Source, Title, Facts string
}

// An install run on a daemon, watched in the console: the Workers tab's
// card says it is installing and links to its job's page, where the
// daemon's row goes from a bar with no number (the installer has not
// said the size) to a determinate bar that only rises, with its size and
// the installer's latest line, to installed; reopened, the ended job is
// drawn from its record. An install that fails part way is drawn failed
// with the error attributed to its phase and worker, is counted and
// listed under Attention, and is listed under the worker page's Installs.
func TestTheConsoleFollowsAnInstallJobAndShowsAFailedOneWhereItBroke(t *testing.T) {
	h := jobsHome(t)
	base := h.consoleURL()
	self := instanceID(t, h)
	_, ops := h.token("operator", "console")
	p := newPage(t, base)
	p.open("/workers")
	p.signIn(ops)
	p.waitFor("the console connected", 10*time.Second, `document.querySelector('#status-box')?.dataset.state === 'connected'`)
	p.waitFor("nothing under Attention before any install (its badge hidden)", 10*time.Second,
		`window.simlockConsole.store.attention().length === 0 && document.querySelector('[data-count-for="attention"]').hidden`)
	p.must("install the row reader", jobRowJS, nil)

	// --- An install that works, followed live.
	ok := h.start("component", "install", "android", "37", "--progress", "none")
	p.waitFor("the daemon's card saying it installs android 37, linking to the job", 10*time.Second,
		`(() => { const l = document.querySelector('.card-worker .card-install a'); return !!l && /^installing android 37 · /.test(l.textContent) && l.getAttribute('href').startsWith('/jobs/job_'); })()`)
	p.click("the card's install line", ".card-worker .card-install a")
	var okID string
	p.waitValue("the job page of the android install", 10*time.Second,
		`location.pathname.startsWith('/jobs/job_') && document.querySelector('.view[data-view=job] .page-head') ? location.pathname.slice(6) : null`, &okID)
	p.must("sample the daemon's row", fmt.Sprintf(`window.__sampleJob(%q)`, self), nil)
	var head jobHeadView
	p.waitValue("the job's header, live, saying what it installs", 10*time.Second, jobHeadJS, &head)
	if head.ID != okID || head.Title != "Install android 37" || head.State != "running" {
		t.Errorf("the running job's header reads %+v: want job %s, \"Install android 37\", running", head, okID)
	}
	p.waitFor("the header saying the job is followed live", 5*time.Second,
		`document.querySelector('.view[data-view=job] .page-head').dataset.source === 'live'`)
	p.waitFor("the row downloading with a determinate bar past 30%, its size and the installer's line under it", 15*time.Second,
		fmt.Sprintf(`(() => { const r = window.__jobRow(%q); return !!r && r.state === 'downloading' && !!r.bar && r.bar.determinate && r.bar.value >= 30 && / of /.test(r.detail) && r.line.includes('Downloading'); })()`, self))
	p.screenshot("job-running")
	p.waitFor("the row installed, the job succeeded", 15*time.Second,
		fmt.Sprintf(`(() => { const r = window.__jobRow(%q); const h = document.querySelector('.view[data-view=job] .page-head'); return !!r && r.state === 'installed' && h.dataset.state === 'succeeded'; })()`, self))
	var samples []jobRowSample
	p.must("stop sampling", stopJobSamplerJS, &samples)
	checkJobRow(t, samples)
	p.waitFor("the ended job's header saying how long it took", 5*time.Second,
		`/Took\s*\d+s/.test(document.querySelector('.view[data-view=job] .facts').innerText)`)
	if n := p.count(`.view[data-view=job] .job-error`); n != 0 {
		t.Errorf("the succeeded job shows %d error blocks, want none", n)
	}
	if code, out := ok.wait(t, "the android install", 20*time.Second); code != 0 {
		t.Fatalf("the android install exited %d:\n%s", code, out)
	}

	// Opened again, the ended job is drawn from its record.
	p.open("/jobs/" + okID)
	p.must("install the row reader", jobRowJS, nil)
	p.waitFor("the reopened job drawn from its record: succeeded, the row installed with its version", 10*time.Second,
		fmt.Sprintf(`(() => { const h = document.querySelector('.view[data-view=job] .page-head'); const r = window.__jobRow(%q);
		  return !!h && h.dataset.source === 'record' && h.dataset.state === 'succeeded' && !!r && r.state === 'installed' && !r.bar && r.progress === 'installed 37'; })()`, self))

	// --- An install that fails part way: the daemon again, its demo
	// installs failing.
	h.must("stop the daemon", "daemon", "stop")
	h.must("make installs fail", "config", "set", "drivers.demo.fail", `["install"]`)
	h.startDaemon()
	p.waitFor("connected again", 30*time.Second, `document.querySelector('#status-box').dataset.state === 'connected'`)
	// The page reads everything again once it reconnects, which may
	// redraw the job view under the click.
	p.clickUntil("the row's worker link to the worker page, its Installs listing no job (the android one succeeded)",
		fmt.Sprintf(`table.job-rows tr[data-worker-id=%q] td a`, self), 10*time.Second,
		fmt.Sprintf(`location.pathname === '/workers/%s' && !!document.querySelector('.view[data-view=worker]') && document.querySelectorAll('table.jobs tr[data-job-id]').length === 0`, self))
	p.must("install the row reader", jobRowJS, nil)
	bad := h.start("component", "install", "ios", "26.4", "--progress", "none")
	var badID string
	p.waitValue("the ios install under the worker page's Installs, running", 10*time.Second,
		`(() => { const r = document.querySelector('table.jobs tr[data-job-id][data-state="running"]'); return r && r.textContent.includes('ios 26.4') ? r.dataset.jobId : null; })()`, &badID)
	p.click("the running install's link", fmt.Sprintf(`table.jobs tr[data-job-id=%q] a`, badID))
	p.waitFor("the failing install's page, live", 10*time.Second,
		fmt.Sprintf(`location.pathname === '/jobs/%s' && document.querySelector('.view[data-view=job] .page-head')?.dataset.source === 'live'`, badID))
	p.must("sample the daemon's row", fmt.Sprintf(`window.__sampleJob(%q)`, self), nil)
	p.waitFor("the row failed, the job failed", 20*time.Second,
		fmt.Sprintf(`(() => { const r = window.__jobRow(%q); const h = document.querySelector('.view[data-view=job] .page-head'); return !!r && r.state === 'failed' && h.dataset.state === 'failed'; })()`, self))
	p.must("stop sampling", stopJobSamplerJS, &samples)
	checkFailedRow(t, samples)
	checkErrorBlock(t, p, self)
	p.screenshot("job-failed")
	if code, out := bad.wait(t, "the failing install", 20*time.Second); code == 0 {
		t.Fatalf("the failing install exited 0; its download was to fail:\n%s", out)
	}

	// --- Attention counts and lists it, linking to its page.
	p.tab("attention")
	row := fmt.Sprintf(`document.querySelector('tr[data-kind="install"][data-what="failed"][data-id=%q]')`, badID)
	p.waitFor("the failed install under Attention, why it failed, a link to its job", 10*time.Second,
		fmt.Sprintf(`(() => { const r = %s; const a = r && r.querySelector('a'); return !!a && a.textContent === 'Install ios 26.4' && a.getAttribute('href') === '/jobs/%s' &&
		  r.querySelector('.why-cell').textContent.includes('download on') && r.querySelector('.why-cell').textContent.includes('INTERNAL: install: demo: injected failure'); })()`, row, badID))
	p.waitFor("the Attention badge counting the failed install", 5*time.Second,
		`(() => { const c = document.querySelector('[data-count-for="attention"]'); return !c.hidden && c.textContent === '1' && c.classList.contains('tab-alert'); })()`)
	p.screenshot("attention-install")
	p.click("the failed install's link under Attention", fmt.Sprintf(`tr[data-kind="install"][data-id=%q] a`, badID))
	p.waitFor("the failed job drawn from its record, with its error block", 10*time.Second,
		fmt.Sprintf(`location.pathname === '/jobs/%s' && document.querySelector('.view[data-view=job] .page-head')?.dataset.source === 'record' && !!document.querySelector('.job-error[data-worker-id=%q]')`, badID, self))
	checkErrorBlock(t, p, self)

	// --- The worker page lists it under Installs.
	p.open("/workers/" + self)
	p.waitFor("the failed install under the worker page's Installs, saying where it failed, linking to its job", 10*time.Second,
		fmt.Sprintf(`(() => { const r = document.querySelector('table.jobs tr[data-job-id=%q]'); return !!r && r.dataset.state === 'failed' &&
		  r.textContent.includes('failed in download: INTERNAL') && r.querySelector('a').getAttribute('href') === '/jobs/%s'; })()`, badID, badID))
	if n := p.count(`table.jobs tr[data-job-id]`); n != 1 {
		t.Errorf("the worker page's Installs lists %d jobs, want the failed one only (running and failed jobs are listed)", n)
	}
	p.screenshot("worker-installs")

	// --- A later install of the runtime that works makes the failure
	// good: it leaves Attention.
	h.must("stop the daemon", "daemon", "stop")
	h.must("let installs work", "config", "set", "drivers.demo.fail", `[]`)
	h.startDaemon()
	h.must("install ios 26.4 again", "component", "install", "ios", "26.4", "--progress", "none")
	p.tab("attention")
	p.waitFor("the failure made good by the later install gone from Attention, the badge with it", 15*time.Second,
		fmt.Sprintf(`!%s && document.querySelector('[data-count-for="attention"]').hidden`, row))

	// --- A job the daemon does not know.
	p.open("/jobs/job_0000000000000000")
	p.waitFor("an unknown job's page saying the daemon knows no such job", 10*time.Second,
		`(document.querySelector('[data-job-missing]')?.textContent || '').includes('no job job_0000000000000000')`)
}

// count is how many elements match a selector.
func (p *page) count(selector string) int {
	p.t.Helper()
	var n int
	p.must("count "+selector, fmt.Sprintf(`document.querySelectorAll(%q).length`, selector), &n)
	return n
}

var sizeRE = regexp.MustCompile(`^[\d.]+ (?:[KMG]i)?B of [\d.]+ GiB$`)

// checkJobRow checks what the row of an install that worked showed,
// sample by sample: the states in order; a bar with no number until one
// is known, then a determinate one that never goes down, its number the
// whole part of its value, rising through several values, with its size
// and the installer's line; no bar once installed.
func checkJobRow(t *testing.T, samples []jobRowSample) {
	t.Helper()
	if len(samples) < 50 {
		t.Fatalf("only %d samples of the row", len(samples))
	}
	var states []string
	var values []float64
	quiet, sized, lined := false, false, false
	for i, s := range samples {
		if len(states) == 0 || states[len(states)-1] != s.State {
			states = append(states, s.State)
		}
		if s.Badge != s.State {
			t.Errorf("sample %d: the row's state is %s but its badge says %q", i, s.State, s.Badge)
		}
		if s.State == "installed" {
			if s.Bar != nil || s.Line != "" {
				t.Errorf("sample %d: an installed row still shows a bar (%v) or an installer line %q", i, s.Bar != nil, s.Line)
			}
			continue
		}
		if s.Bar == nil {
			t.Errorf("sample %d: a row %s has no bar", i, s.State)
			continue
		}
		if !s.Bar.Determinate {
			if s.Pct != "" || s.Bar.Value != nil {
				t.Errorf("sample %d: an indeterminate bar shows %q (value %v): no number is known", i, s.Pct, s.Bar.Value)
			}
			if s.State == "downloading" && len(values) == 0 {
				quiet = true
			}
			continue
		}
		if s.State != "downloading" {
			t.Errorf("sample %d: a determinate bar while %s", i, s.State)
		}
		if s.Bar.Value == nil || s.Pct != fmt.Sprintf("%d%%", int(*s.Bar.Value)) {
			t.Errorf("sample %d: a determinate bar with value %v shows %q", i, s.Bar.Value, s.Pct)
			continue
		}
		if n := len(values); n > 0 && *s.Bar.Value < values[n-1] {
			t.Errorf("sample %d: the bar went down from %.1f%% to %.1f%%", i, values[n-1], *s.Bar.Value)
		}
		values = append(values, *s.Bar.Value)
		sized = sized || sizeRE.MatchString(s.Detail)
		lined = lined || strings.HasPrefix(s.Line, "Downloading Android API 37")
	}
	if !slices.Contains(states, "downloading") || states[len(states)-1] != "installed" {
		t.Errorf("the row went through %v: want downloading, then at the end installed", states)
	}
	if i := slices.Index(states, "downloading"); i >= 0 && slices.Index(states, "installed") < i {
		t.Errorf("the row went through %v: installed before downloading", states)
	}
	if !quiet {
		t.Errorf("no sample showed the download's quiet start as a bar with no number")
	}
	if len(slices.Compact(slices.Clone(values))) < 3 {
		t.Errorf("the bar showed %v: want it rising through at least three values", slices.Compact(slices.Clone(values)))
	}
	if !sized {
		t.Errorf("no sample showed the size downloaded (\"3.4 GiB of 8.0 GiB\") under the bar")
	}
	if !lined {
		t.Errorf("no sample showed the installer's latest line under the bar")
	}
}

// checkFailedRow checks the row of an install that failed part way: a
// rising bar while it downloaded, then failed with no bar, saying where
// the download stopped.
func checkFailedRow(t *testing.T, samples []jobRowSample) {
	t.Helper()
	if len(samples) == 0 {
		t.Fatal("no samples of the failing row")
	}
	var max float64
	for i, s := range samples {
		if s.State == "failed" {
			if s.Bar != nil || s.Line != "" {
				t.Errorf("sample %d: a failed row still shows a bar (%v) or an installer line %q", i, s.Bar != nil, s.Line)
			}
			continue
		}
		if s.Bar != nil && s.Bar.Value != nil {
			if *s.Bar.Value < max {
				t.Errorf("sample %d: the bar went down from %.1f%% to %.1f%%", i, max, *s.Bar.Value)
			}
			max = *s.Bar.Value
		}
	}
	last := samples[len(samples)-1]
	if last.State != "failed" || !strings.HasPrefix(last.Progress, "stopped at 41%") {
		t.Errorf("the failed row reads %q (%s): want it failed, saying the download stopped at 41%%", last.Progress, last.State)
	}
}

// checkErrorBlock checks the failed job's error block for a worker: the
// phase, the worker, the code and message, and that it was not retried.
func checkErrorBlock(t *testing.T, p *page, worker string) {
	t.Helper()
	var fields map[string]string
	p.waitValue("the error block of the failed row", 10*time.Second, fmt.Sprintf(`(() => {
	  const b = document.querySelector('.job-error[data-worker-id=%q]'); if (!b) return null;
	  const out = {};
	  for (const dd of b.querySelectorAll('dd[data-field]')) out[dd.dataset.field] = dd.textContent;
	  out.link = b.querySelector('dd[data-field=worker] a')?.getAttribute('href') || '';
	  return out; })()`, worker), &fields)
	want := map[string]string{
		"phase": "download", "code": "INTERNAL", "message": "install: demo: injected failure", "retries": "not retried",
		"link": "/workers/" + worker,
	}
	for k, v := range want {
		if fields[k] != v {
			t.Errorf("the error block's %s reads %q, want %q (block: %v)", k, fields[k], v, fields)
		}
	}
	if fields["worker"] == "" {
		t.Errorf("the error block names no worker: %v", fields)
	}
	if n := p.count(`.view[data-view=job] .job-error`); n != 1 {
		t.Errorf("the failed job shows %d error blocks, want one, for its one worker", n)
	}
}

// The page's fold of a job's events is the daemon's: after each event of
// a fleet install (asked, queued, downloading, a percentage that goes
// back, a new phase, a worker retried, gone stale and failed, a row made
// by an event, a worker installed after a failed attempt, the end) the
// page's js/jobs.js holds the record
// jobs.Apply makes of it. The page keeps an installer's latest line for
// as long as its phase lasts; an install that starts or ends has the job
// lists read again.
func TestTheConsoleFoldsJobEventsAsTheDaemonDoes(t *testing.T) {
	pct := func(v float64) *float64 { return &v }
	events := []contract.JobEvent{
		{Job: &contract.Job{ID: "job_1", Kind: contract.JobKindInstall, CreatedAt: 1000, State: contract.JobRunning,
			Spec:    contract.JobSpec{Platform: contract.PlatformIOS, Version: "26.4", Workers: &contract.WorkerChoice{All: true}},
			Workers: []contract.JobWorker{{WorkerID: "w1", Label: "mac-1"}, {WorkerID: "w2"}}}},
		{Worker: &contract.JobWorkerEvent{WorkerID: "w1", Status: contract.WorkerAsked, Attempt: 1}},
		{Phase: &contract.JobPhase{Phase: contract.PhaseQueue, Status: contract.PhaseStart, WorkerID: "w1"}},
		{Phase: &contract.JobPhase{Phase: contract.PhaseDownload, Status: contract.PhaseStart, WorkerID: "w1"}},
		{Progress: &contract.JobProgress{WorkerID: "w1"}},
		{Progress: &contract.JobProgress{WorkerID: "w1", Bytes: 100, Total: 1000, Percent: pct(10)}},
		{Progress: &contract.JobProgress{WorkerID: "w1", Bytes: 50, Total: 1000, Percent: pct(5)}},
		{Log: &contract.JobLog{WorkerID: "w1", Stream: "stdout", Line: "Downloading 10%"}},
		{Progress: &contract.JobProgress{WorkerID: "w1", Percent: pct(41.7)}},
		{Phase: &contract.JobPhase{Phase: contract.PhaseVerify, Status: contract.PhaseStart, WorkerID: "w1"}},
		{Phase: &contract.JobPhase{Phase: contract.PhaseDownload, Status: contract.PhaseStart, WorkerID: "w2"}},
		{Progress: &contract.JobProgress{WorkerID: "w2", Bytes: 300, Total: 1000, Percent: pct(30)}},
		{Worker: &contract.JobWorkerEvent{WorkerID: "w2", Status: contract.WorkerRetrying, Attempt: 1}},
		{Worker: &contract.JobWorkerEvent{WorkerID: "w2", Status: contract.WorkerAsked, Attempt: 2}},
		{Worker: &contract.JobWorkerEvent{WorkerID: "w2", Status: contract.WorkerStale, Attempt: 1}},
		{Error: &contract.JobError{Phase: contract.PhaseDownload, WorkerID: "w2", Code: contract.CodeWorkerUnreachable, Message: "the uplink was lost", Transient: true, Attempts: 2}},
		{Phase: &contract.JobPhase{Phase: contract.PhaseRecord, Status: contract.PhaseStart, WorkerID: "w1"}},
		{Phase: &contract.JobPhase{Phase: contract.PhaseRecord, Status: contract.PhaseDone, WorkerID: "w1"}},
		{Worker: &contract.JobWorkerEvent{WorkerID: "w1", Phase: contract.PhaseRecord, Status: contract.WorkerEnded, Attempt: 1,
			Outcome: contract.OutcomeInstalled, Version: "26.4", AlreadyInstalled: true}},
		{Progress: &contract.JobProgress{WorkerID: "w3", Percent: pct(12), Bytes: 5, Total: 50}},
		{Error: &contract.JobError{Phase: contract.PhaseDownload, WorkerID: "w4", Code: contract.CodeWorkerUnreachable, Message: "the uplink was lost", Transient: true, Attempts: 1}},
		{Worker: &contract.JobWorkerEvent{WorkerID: "w4", Status: contract.WorkerRetrying, Attempt: 1}},
		{Worker: &contract.JobWorkerEvent{WorkerID: "w4", Status: contract.WorkerAsked, Attempt: 2}},
		{Worker: &contract.JobWorkerEvent{WorkerID: "w4", Phase: contract.PhaseRecord, Status: contract.WorkerEnded, Attempt: 2,
			Outcome: contract.OutcomeInstalled, Version: "26.4"}},
		{Done: &contract.JobDone{JobID: "job_1", Result: contract.JobFailed, Workers: []contract.JobOutcome{
			{WorkerID: "w1", Outcome: contract.OutcomeInstalled},
			{WorkerID: "w2", Outcome: contract.OutcomeFailed, Error: &contract.JobError{Phase: contract.PhaseQueue, WorkerID: "w2", Code: contract.CodeInternal, Message: "not this one"}},
			{WorkerID: "w3", Outcome: contract.OutcomeUnknown, Error: &contract.JobError{Phase: contract.PhaseDownload, WorkerID: "w3", Code: contract.CodeWorkerUnreachable, Message: "gone"}},
			{WorkerID: "w4", Outcome: contract.OutcomeInstalled},
		}}},
	}
	type wire struct {
		Name string `json:"name"`
		Data any    `json:"data"`
	}
	var in []wire
	var want []string
	var job contract.Job
	for _, ev := range events {
		in = append(in, wire{ev.Name(), ev.Body()})
		jobs.Apply(&job, ev)
		want = append(want, canonicalJob(t, mustJSON(t, job)))
	}

	f := newFakeDaemon(t)
	p := newPage(t, f.srv.URL)
	p.open("/")
	var out struct {
		After  []json.RawMessage   `json:"after"`
		Lines  []string            `json:"lines"`
		Routes map[string][]string `json:"routes"`
	}
	p.must("fold the events in the page's module", fmt.Sprintf(`(async () => {
	  const m = await import('/js/jobs.js');
	  const live = await import('/js/live.js');
	  const after = [];
	  let job = null;
	  for (const e of %s) { job = m.apply(job, e.name, e.data); after.push(JSON.parse(JSON.stringify(job))); }

	  const w = new m.JobWatch('job_2');
	  const lines = [];
	  const line = () => lines.push(w.lines.get('w1') || '');
	  w.take('job', { id: 'job_2', state: 'running', spec: {}, workers: [{ workerId: 'w1' }] });
	  w.take('phase', { phase: 'download', status: 'start', workerId: 'w1' });
	  w.take('log', { workerId: 'w1', stream: 'stdout', line: 'Downloading 10%%' }); line();
	  w.take('progress', { workerId: 'w1', percent: 20 }); line();
	  w.take('phase', { phase: 'download', status: 'done', workerId: 'w1' }); line();
	  w.take('phase', { phase: 'verify', status: 'start', workerId: 'w1' }); line();
	  w.take('log', { workerId: 'w1', stream: 'stdout', line: 'Checking' }); line();
	  w.take('worker', { workerId: 'w1', status: 'ended', attempt: 1, outcome: 'installed' }); line();

	  const routes = {};
	  for (const name of ['component.install-started', 'component.installed', 'component.install-failed', 'lease.granted']) {
	    routes[name] = live.jobRoutesFor({ event: name, payload: {} });
	  }
	  return { after, lines, routes };
	})()`, mustJSON(t, in)), &out)
	if len(out.After) != len(want) {
		t.Fatalf("the page folded %d events, want %d", len(out.After), len(want))
	}
	for i := range want {
		if got := canonicalJob(t, out.After[i]); got != want[i] {
			t.Errorf("after event %d (%s) the page holds\n  %s\nthe daemon's fold holds\n  %s", i, in[i].Name, got, want[i])
		}
	}
	wantLines := []string{"Downloading 10%", "Downloading 10%", "Downloading 10%", "", "Checking", ""}
	if !slices.Equal(out.Lines, wantLines) {
		t.Errorf("the installer's latest line read %q as the phase moved on, want %q (kept within a phase, gone with it and at the end)", out.Lines, wantLines)
	}
	wantRoutes := map[string]string{
		"component.install-started": "jobs:running",
		"component.installed":       "jobs:running",
		"component.install-failed":  "jobs:running jobs:failed",
		"lease.granted":             "",
	}
	for k, w := range wantRoutes {
		if got := strings.Join(out.Routes[k], " "); got != w {
			t.Errorf("a %s event reads the job lists %q again, want %q", k, got, w)
		}
	}
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// canonicalJob reads a job's JSON as the contract does and writes it
// again, so an absent field and its zero value compare equal.
func canonicalJob(t *testing.T, b []byte) string {
	t.Helper()
	var j contract.Job
	if err := json.Unmarshal(b, &j); err != nil {
		t.Fatalf("a job that does not read as one: %v: %s", err, b)
	}
	return string(mustJSON(t, j))
}
