package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/jobs"
)

// A job as people read it: a header saying what is installed where, a row
// per worker, and once the job has ended, what went wrong on each worker
// that did not install and the command to run next. renderJob draws it
// from the job's record alone, so the live grid, its last frame and
// simlock job show are the same text.

// jobRender says how a job is drawn.
type jobRender struct {
	// Width is the terminal's columns; 0 is unknown, drawn as 80.
	Width int
	// Terminal draws download bars; without it the rows carry the same
	// words and figures, and no bar characters.
	Terminal bool
	// Now (Unix ms) is the clock a running job's age is counted against;
	// 0 leaves the age out.
	Now int64
}

// jobNameWidth bounds the worker column: a longer label is cut.
const jobNameWidth = 24

// renderJob writes a job: its header, one row per worker in the job's
// order, under a running row the latest installer line lines[workerId],
// and once the job has ended an error block for every worker that did not
// end installed. It reads no clock and sorts nothing.
//
// On a terminal the header, the rows and the installer lines are cut to
// Width, so a redraw in place never wraps; an error block's message is
// wrapped to Width instead, and its commands are never cut.
func renderJob(w io.Writer, job contract.Job, lines map[string]string, o jobRender) {
	width := o.Width
	if width <= 0 {
		width = 80
	}
	fit := func(s string) string {
		if o.Terminal {
			return fitWidth(s, width)
		}
		return s
	}
	for _, l := range jobHeader(job, o.Now, width) {
		fmt.Fprintln(w, fit(l))
	}

	rows := make([]jobRow, len(job.Workers))
	nameW, wordW := 0, 0
	for i, r := range job.Workers {
		rows[i] = newJobRow(job, r)
		nameW = max(nameW, utf8.RuneCountInString(rows[i].name))
		wordW = max(wordW, utf8.RuneCountInString(rows[i].word))
	}
	// One bar width for every row, so the bars line up: what the widest
	// row's figures leave of the line, within bounds.
	barW := 0
	if o.Terminal {
		figW := 0
		for _, r := range rows {
			if r.pct >= 0 {
				figW = max(figW, utf8.RuneCountInString(r.barFigures()))
			}
		}
		barW = min(30, width-1-(2+nameW+2+wordW+2)-2-figW)
		if barW < 6 {
			barW = 0
		}
	}
	for i, r := range rows {
		line := "  " + pad(r.name, nameW) + "  " + pad(r.word, wordW)
		switch {
		case r.pct >= 0 && barW > 0:
			line += "  " + progressBar(r.pct, barW) + r.barFigures()
		case r.figures() != "":
			line += "  " + r.figures()
		}
		fmt.Fprintln(w, fit(strings.TrimRight(line, " ")))
		if l := strings.TrimSpace(printable(lines[job.Workers[i].WorkerID])); l != "" && job.Workers[i].Outcome == "" {
			// Under the state word, cut to Width on a terminal or off
			// it: an installer's line can run on for a kilobyte.
			fmt.Fprintln(w, fitWidth(strings.Repeat(" ", 2+nameW+2)+l, width))
		}
	}
	if jobEnded(job) {
		for _, r := range job.Workers {
			if r.Outcome != contract.OutcomeInstalled {
				fmt.Fprintln(w)
				renderJobFailure(w, job, r, o.Terminal, width)
			}
		}
	}
}

// jobEnded reports whether a job has a final state. A job folded from
// events before its snapshot or its done has no state yet: it is running.
func jobEnded(job contract.Job) bool {
	return job.State != "" && job.State != contract.JobRunning
}

// jobHeader says what the job installs where and how long it has run, or
// once it has ended its state, how long it took and how many workers
// installed; then the job's id, on a line of its own when both do not fit
// in width (an id is never cut):
//
//	Installing iOS 26.4 on 3 workers, 1m12s so far  (job_…)
//	iOS 26.4 failed after 4m12s: 2 of 3 workers installed  (job_…)
func jobHeader(job contract.Job, now int64, width int) []string {
	where := ""
	switch n := len(job.Workers); n {
	case 0:
	case 1:
		where = " on " + jobWorkerName(job.Workers[0])
	default:
		where = fmt.Sprintf(" on %d workers", n)
	}
	var line string
	switch {
	case !jobEnded(job):
		line = "Installing " + jobWhat(job) + where
		if now > 0 && job.CreatedAt > 0 {
			line += ", " + roundDur(time.Duration(now-job.CreatedAt)*time.Millisecond) + " so far"
		}
	default:
		line = jobWhat(job) + " " + job.State
		if job.CreatedAt > 0 && job.EndedAt >= job.CreatedAt {
			line += " after " + roundDur(time.Duration(job.EndedAt-job.CreatedAt)*time.Millisecond)
		}
		if len(job.Workers) > 1 {
			line += fmt.Sprintf(": %d of %d workers installed", jobInstalled(job), len(job.Workers))
		} else {
			line += where
		}
	}
	if job.ID == "" {
		return []string{line}
	}
	id := "(" + job.ID + ")"
	if utf8.RuneCountInString(line+"  "+id) <= width-1 {
		return []string{line + "  " + id}
	}
	return []string{line, id}
}

// jobWhat names what a job installs: "iOS 26.4", or "a runtime" before
// the job's spec is known.
func jobWhat(job contract.Job) string {
	if job.Spec.Platform == "" && job.Spec.Version == "" {
		return "a runtime"
	}
	return strings.TrimSpace(platformName(job.Spec.Platform) + " " + printable(job.Spec.Version))
}

// jobInstalled counts the workers that ended installed.
func jobInstalled(job contract.Job) int {
	n := 0
	for _, r := range job.Workers {
		if r.Outcome == contract.OutcomeInstalled {
			n++
		}
	}
	return n
}

// jobWorkerName is how a row is named: the worker's label, else its id.
func jobWorkerName(r contract.JobWorker) string {
	name := printable(r.Label)
	if name == "" {
		name = r.WorkerID
	}
	if rs := []rune(name); len(rs) > jobNameWidth {
		name = string(rs[:jobNameWidth-1]) + "…"
	}
	return name
}

// jobWord is the one word a row's state is said in.
func jobWord(r contract.JobWorker) string {
	switch r.Outcome {
	case contract.OutcomeInstalled:
		if r.AlreadyInstalled {
			return "already installed"
		}
		return "installed"
	case contract.OutcomeFailed:
		return "failed"
	case contract.OutcomeUnknown:
		return "unknown"
	}
	if r.Stale {
		return "stale"
	}
	// jobs.Apply keeps a worker event's status out of the row, so today a
	// re-asked worker shows its phase and "attempt N"; a record that says
	// retrying is read as such.
	if r.Status == contract.WorkerRetrying {
		return "retrying"
	}
	switch r.Phase {
	case contract.PhaseQueue:
		return "waiting"
	case contract.PhaseDownload:
		return "downloading"
	case contract.PhaseVerify:
		return "verifying"
	case contract.PhaseRecord:
		return "recording"
	}
	return "starting"
}

// jobRow is a row's cells, in words.
type jobRow struct {
	name, word string
	// pct is the download's percentage (0-100) while the row runs, -1
	// when it is not known.
	pct int
	// sizes says the bytes ("3.6 GB of 8.9 GB"), "" when not known.
	sizes string
	// note follows the figures: where a row failed, the version it
	// installed, the attempt.
	note string
}

func newJobRow(job contract.Job, r contract.JobWorker) jobRow {
	row := jobRow{name: jobWorkerName(r), word: jobWord(r), pct: -1}
	var notes []string
	switch r.Outcome {
	case "":
		row.pct = jobPercent(r)
		row.sizes = contract.SizeWords(r.Bytes, r.Total)
	case contract.OutcomeInstalled:
		if v := printable(r.Version); v != "" && v != job.Spec.Version {
			notes = append(notes, v)
		}
	default:
		if p := jobFailedPhase(r); p != "" {
			notes = append(notes, "in "+p)
		}
	}
	if r.Attempt > 1 {
		notes = append(notes, fmt.Sprintf("attempt %d", r.Attempt))
	}
	row.note = strings.Join(notes, "  ")
	return row
}

// jobPercent is how far a row's download is, from the installer's own
// percentage or else its bytes; -1 when it printed neither.
func jobPercent(r contract.JobWorker) int {
	switch {
	case r.Percent != nil:
		return min(max(int(*r.Percent), 0), 100)
	case r.Total > 0:
		return int(min(max(r.Bytes*100/r.Total, 0), 100))
	}
	return -1
}

// figures are a row's words after the state word, off a terminal or
// without a bar: "41% · 3.6 GB of 8.9 GB  attempt 2".
func (r jobRow) figures() string {
	var parts []string
	if r.pct >= 0 {
		parts = append(parts, fmt.Sprintf("%d%%", r.pct))
	}
	if r.sizes != "" {
		parts = append(parts, r.sizes)
	}
	s := strings.Join(parts, " · ")
	if r.note != "" {
		s = strings.TrimSpace(s + "  " + r.note)
	}
	return s
}

// barFigures follow a bar: the percentage right-aligned, so the figures
// of every row start in one column.
func (r jobRow) barFigures() string {
	s := fmt.Sprintf(" %3d%%", r.pct)
	if r.sizes != "" {
		s += " · " + r.sizes
	}
	if r.note != "" {
		s += "  " + r.note
	}
	return s
}

// jobFailedPhase is the phase a row ended in: its error's, else its own.
func jobFailedPhase(r contract.JobWorker) string {
	if r.Error != nil && r.Error.Phase != "" {
		return r.Error.Phase
	}
	return r.Phase
}

// renderJobFailure writes what went wrong on one worker that did not end
// installed, and what to run next:
//
//	✗ mac-mini-2 (wrk_b) failed in download [INTERNAL]
//	  the installer exited with status 70
//	  not a transport error: not retried
//	  try it again:  simlock component install ios 26.4 --workers wrk_b
//
// "retried N times" counts the asks after the first: Attempts (every time
// the worker was asked) less one.
func renderJobFailure(w io.Writer, job contract.Job, r contract.JobWorker, terminal bool, width int) {
	who := r.WorkerID
	if l := jobWorkerName(r); l != r.WorkerID {
		who = l + " (" + r.WorkerID + ")"
	}
	// A row that did not end failed (unknown, or with no outcome at all)
	// is one whose worker stopped answering before it said.
	unknown := r.Outcome != contract.OutcomeFailed
	in := ""
	if p := jobFailedPhase(r); p != "" {
		in = " in " + p
	}
	head := "✗ " + who + " failed" + in
	if unknown {
		head = "✗ " + who + " stopped answering" + in + ", outcome unknown"
	}
	e := r.Error
	if e != nil && e.Code != "" {
		head += " [" + string(e.Code) + "]"
	}
	fmt.Fprintln(w, head)
	say := func(s string) {
		if !terminal {
			fmt.Fprintln(w, "  "+s)
			return
		}
		for _, l := range wrapWords(s, width-1-2) {
			fmt.Fprintln(w, "  "+l)
		}
	}
	switch {
	case e != nil:
		if m := strings.TrimSpace(printable(e.Message)); m != "" {
			say(m)
		}
		if e.Transient {
			attempts := e.Attempts
			if attempts == 0 {
				attempts = r.Attempt
			}
			switch n := attempts - 1; {
			case n <= 0:
				say("transport error, not retried")
			case n == 1:
				say(fmt.Sprintf("transport error, retried once (%d attempts)", attempts))
			default:
				say(fmt.Sprintf("transport error, retried %d times (%d attempts)", n, attempts))
			}
		} else {
			say("not a transport error: not retried")
		}
	case unknown:
		say("it may or may not have installed: it stopped answering before it said")
	default:
		say("the worker reported no error")
	}

	fleet := job.Spec.Workers != nil
	again := fmt.Sprintf("simlock component install %s %s", job.Spec.Platform, job.Spec.Version)
	if fleet {
		again += " --workers " + r.WorkerID
	}
	var steps [][2]string
	switch {
	case e != nil && e.Code == contract.CodeDownloadsDisabled:
		allow := "allow downloads:"
		if fleet {
			allow = "allow downloads, run on that worker:"
		}
		steps = [][2]string{{allow, "simlock config set downloads.policy on-request"}, {"then try it again:", again}}
	case e != nil && e.Code == contract.CodeRuntimeMissing:
		// The same again is refused the same way: see what can be had.
		steps = [][2]string{{"see what it offers:", strings.TrimSpace("simlock catalog --platform " + string(job.Spec.Platform))}}
	case e != nil && e.Code == contract.CodeInsufficientDiskSpace:
		if fleet {
			say("free disk space on that worker first")
		} else {
			say("free disk space first")
		}
		steps = [][2]string{{"then try it again:", again}}
	case unknown && fleet:
		steps = [][2]string{
			{"check the worker first:", "simlock worker show " + r.WorkerID},
			{"then try it again:", again},
		}
	default:
		steps = [][2]string{{"try it again:", again}}
	}
	labelW := 0
	for _, s := range steps {
		labelW = max(labelW, utf8.RuneCountInString(s[0]))
	}
	for _, s := range steps {
		fmt.Fprintln(w, "  "+pad(s[0], labelW)+"  "+s[1])
	}
}

// renderJobList writes jobs as a table, newest first as the daemon lists
// them: what each installs, how it stands, and when.
func renderJobList(w io.Writer, list []contract.Job, now int64) {
	rows := make([][]string, 0, len(list))
	for _, j := range list {
		took := roundDur(time.Duration(now-j.CreatedAt)*time.Millisecond) + " so far"
		if jobEnded(j) {
			took = "-"
			if j.EndedAt >= j.CreatedAt && j.CreatedAt > 0 {
				took = roundDur(time.Duration(j.EndedAt-j.CreatedAt) * time.Millisecond)
			}
		}
		what := strings.TrimSpace(string(j.Spec.Platform) + " " + printable(j.Spec.Version))
		rows = append(rows, []string{j.ID, dash(j.Kind), dash(what), dash(j.State),
			fmt.Sprintf("%d/%d installed", jobInstalled(j), len(j.Workers)),
			roundDur(time.Duration(now-j.CreatedAt)*time.Millisecond) + " ago", took})
	}
	table(w, "No jobs.", []string{"JOB", "KIND", "WHAT", "STATE", "WORKERS", "CREATED", "TOOK"}, rows)
}

// pad fills s with spaces to width columns.
func pad(s string, width int) string {
	return s + strings.Repeat(" ", max(width-utf8.RuneCountInString(s), 0))
}

// printable makes text from a worker or an installer safe to draw: every
// control character (a carriage return, an escape, a newline) becomes a
// space, so no line moves the cursor or recolours the terminal.
func printable(s string) string {
	if !strings.ContainsFunc(s, unicode.IsControl) {
		return s
	}
	return strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return ' '
		}
		return r
	}, s)
}

// wrapWords breaks s into lines of at most width columns at spaces; a
// word longer than width has a line of its own.
func wrapWords(s string, width int) []string {
	words := strings.Fields(s)
	if width <= 0 || len(words) == 0 {
		return []string{s}
	}
	var out []string
	cur := words[0]
	for _, wd := range words[1:] {
		if utf8.RuneCountInString(cur)+1+utf8.RuneCountInString(wd) > width {
			out = append(out, cur)
			cur = wd
			continue
		}
		cur += " " + wd
	}
	return append(out, cur)
}

// jobPrinter shows a job's events as they come, on stderr: "json", one
// JSON line per event ({"event":"phase",...the event's fields}); "human",
// a grid of the workers redrawn in place on a terminal; "none", nothing.
//
// The human grid is renderJob of the job folded from the events with
// jobs.Apply, under each running row the latest installer line (with
// verbose, every installer line is printed above the grid instead, as
// "<worker>: <line>"). Redraws are at most one per redrawEvery; stop draws
// the last state whatever the time, and leaves it on the terminal, error
// block and all once the job has ended. A caller that knows the job before
// its first event can show a contract.JobEvent{Job: &job} first, for the
// header to say what is installed from the start.
//
// show, stop, job and lastLines are safe for concurrent use.
type jobPrinter struct {
	w       io.Writer
	mode    string
	width   func() int // the terminal's columns; 0 when unknown
	verbose bool
	// now is the clock the header's age is counted against.
	now func() time.Time

	mu sync.Mutex
	// mu guards the fields below.
	state contract.Job
	// lines is the latest installer line of each worker.
	lines map[string]string
	// above are the installer lines to print above the grid at the next
	// frame (verbose).
	above []string
	seen  bool
	// rows is the terminal rows the last frame took, to move up over.
	rows    int
	drawnAt time.Time
	// due is the redraw a throttled event set, nil when none is due.
	due     *time.Timer
	stopped bool
}

// redrawEvery is the least time between two frames of the live grid.
const redrawEvery = 100 * time.Millisecond

func newJobPrinter(w io.Writer, mode string, width func() int, verbose bool) *jobPrinter {
	if width == nil {
		width = func() int { return 0 }
	}
	return &jobPrinter{w: w, mode: mode, width: width, verbose: verbose, now: time.Now, lines: map[string]string{}}
}

// show prints or folds one event. After stop it does nothing.
func (p *jobPrinter) show(ev contract.JobEvent) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stopped {
		return
	}
	switch p.mode {
	case "json":
		if line, ok := jobEventJSON(ev); ok {
			fmt.Fprintln(p.w, line)
		}
	case "human":
		jobs.Apply(&p.state, ev)
		if l := ev.Log; l != nil {
			p.lines[l.WorkerID] = l.Line
			if p.verbose {
				p.above = append(p.above, p.workerNameLocked(l.WorkerID)+": "+printable(l.Line))
			}
		}
		p.seen = true
		p.drawSoonLocked()
	}
}

// workerNameLocked names a worker as its row does.
func (p *jobPrinter) workerNameLocked(id string) string {
	for _, r := range p.state.Workers {
		if r.WorkerID == id {
			return jobWorkerName(r)
		}
	}
	return id
}

// drawSoonLocked draws now, or once redrawEvery has passed since the last
// frame: a burst of events makes one frame, of the latest state.
func (p *jobPrinter) drawSoonLocked() {
	wait := redrawEvery - time.Since(p.drawnAt)
	if wait <= 0 {
		p.drawLocked()
		return
	}
	if p.due == nil {
		p.due = time.AfterFunc(wait, func() {
			p.mu.Lock()
			defer p.mu.Unlock()
			p.due = nil
			if !p.stopped {
				p.drawLocked()
			}
		})
	}
}

// drawLocked replaces the last frame with the current one. It erases to
// the end of the screen rather than line by line: a line that wrapped
// (a long installer line above the grid, an error's command) leaves no
// row of itself behind.
func (p *jobPrinter) drawLocked() {
	width := p.width()
	if width <= 0 {
		width = 80
	}
	lines := p.lines
	if p.verbose {
		lines = nil
	}
	var frame bytes.Buffer
	renderJob(&frame, p.state, lines, jobRender{Width: width, Terminal: true, Now: p.now().UnixMilli()})
	var b bytes.Buffer
	if p.rows > 0 {
		fmt.Fprintf(&b, "\x1b[%dA", p.rows)
	}
	b.WriteString("\r\x1b[J")
	for _, l := range p.above {
		b.WriteString(l + "\n")
	}
	p.above = nil
	p.rows = 0
	for _, l := range strings.SplitAfter(frame.String(), "\n") {
		if l == "" {
			continue
		}
		b.WriteString(l)
		p.rows += screenRows(strings.TrimSuffix(l, "\n"), width)
	}
	_, _ = p.w.Write(b.Bytes())
	p.drawnAt = time.Now()
}

// screenRows is the rows a line takes on a terminal of width columns.
func screenRows(line string, width int) int {
	return max(1, (utf8.RuneCountInString(line)+width-1)/width)
}

// stop draws the last state (human) and ends the printer.
func (p *jobPrinter) stop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stopped {
		return
	}
	p.stopped = true
	if p.due != nil {
		p.due.Stop()
		p.due = nil
	}
	if p.mode == "human" && p.seen {
		p.drawLocked()
	}
}

// job is the job as folded from the events so far (human).
func (p *jobPrinter) job() contract.Job {
	p.mu.Lock()
	defer p.mu.Unlock()
	return jobs.Clone(p.state)
}

// lastLines is the latest installer line of each worker (human).
func (p *jobPrinter) lastLines() map[string]string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return maps.Clone(p.lines)
}

// jobEventJSON is the machine form of one event, one line:
// {"event":"phase","phase":"download","status":"start","workerId":"w1"}.
// An event with no field set has no line.
func jobEventJSON(ev contract.JobEvent) (string, bool) {
	name := ev.Name()
	if name == "" {
		return "", false
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(ev.Body()); err != nil {
		return "", false
	}
	body := bytes.TrimSpace(buf.Bytes())
	head := `{"event":"` + name + `"`
	if len(body) <= 2 {
		return head + "}", true
	}
	return head + "," + string(body[1:]), true
}
