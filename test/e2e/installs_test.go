package e2e

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"
)

// jobLine is one JSON line a component install prints on stderr.
type jobLine struct {
	Event    string   `json:"event"`
	WorkerID string   `json:"workerId"`
	Phase    string   `json:"phase"`
	Status   string   `json:"status"`
	Attempt  int      `json:"attempt"`
	Outcome  string   `json:"outcome"`
	Percent  *float64 `json:"percent"`
	Code     string   `json:"code"`
	Result   string   `json:"result"`
}

func jobLines(t *testing.T, stderr string) []jobLine {
	t.Helper()
	var out []jobLine
	for _, l := range strings.Split(strings.TrimSpace(stderr), "\n") {
		var jl jobLine
		if json.Unmarshal([]byte(l), &jl) == nil && jl.Event != "" {
			out = append(out, jl)
		}
	}
	return out
}

// doneResult is a fleet install's answer on stdout.
type doneResult struct {
	JobID   string `json:"jobId"`
	Result  string `json:"result"`
	Workers []struct {
		WorkerID string `json:"workerId"`
		Outcome  string `json:"outcome"`
		Error    *struct {
			Phase     string `json:"phase"`
			Code      string `json:"code"`
			Message   string `json:"message"`
			Transient bool   `json:"transient"`
		} `json:"error"`
	} `json:"workers"`
}

// The scene: three workers behind a gateway, one whose download
// fails part way, one whose uplink is cut mid-install and comes back.
// Each row tells its own story, the command exits 15, and job show
// replays the same story afterwards.
func TestAFleetInstallTellsEachWorkersStoryRetriesACutUplinkAndExitsFifteen(t *testing.T) {
	t.Parallel()
	f := newFleet(t, "gateway.installRetries", "6")
	runtimes := []string{"drivers.demo.downloadableRuntimes", `{"android":["37"]}`}
	a := f.worker("worker-a", 1, append(runtimes, "drivers.demo.downloadMs", "2000")...)
	b := f.worker("worker-b", 1, append(runtimes, "drivers.demo.downloadMs", "2000", "drivers.demo.fail", "install")...)
	c := f.worker("worker-c", 1, append(runtimes, "drivers.demo.downloadMs", "9000")...)
	idA, idB, idC := instanceID(t, a), instanceID(t, b), instanceID(t, c)
	f.await("three workers connected", 10*time.Second, connected(idA, idB, idC))

	p := f.gw.start("component", "install", "android", "37", "--all-workers", "--progress", "json")
	p.waitLine(p.stderr, "worker C downloading", func(l string) bool {
		return strings.Contains(l, `"event":"progress"`) && strings.Contains(l, idC)
	})
	// A new label makes the worker close its uplink and dial again.
	if r := c.run("config", "set", "gateway.label", "worker-c-again"); r.code != 0 {
		t.Fatalf("config set\n%s", r)
	}
	if code := p.wait(); code != 15 {
		t.Fatalf("the install exited %d, want 15 (one worker failed)\n%s", code, p.dump())
	}
	var done doneResult
	if err := json.Unmarshal([]byte(p.stdout.text()), &done); err != nil || done.Result != "failed" || len(done.Workers) != 3 {
		t.Fatalf("the install's answer is not a failed job of three workers: %v\n%s", err, p.dump())
	}
	outcome := map[string]string{}
	for _, w := range done.Workers {
		outcome[w.WorkerID] = w.Outcome
		if w.WorkerID == idB {
			if e := w.Error; e == nil || e.Phase != "download" || e.Code != "INTERNAL" || e.Transient {
				t.Errorf("worker B's error is %+v, want the download's own failure, INTERNAL, not transient", e)
			}
		}
	}
	if outcome[idA] != "installed" || outcome[idB] != "failed" || outcome[idC] != "installed" {
		t.Errorf("outcomes %v, want A installed, B failed, C installed after its uplink came back", outcome)
	}

	lines := jobLines(t, p.stderr.text())
	// Each row's percent rises.
	for _, id := range []string{idA, idC} {
		last := -1.0
		for _, l := range lines {
			if l.Event == "progress" && l.WorkerID == id && l.Percent != nil {
				if *l.Percent < last {
					t.Errorf("worker %s's percent went back from %v to %v", id, last, *l.Percent)
				}
				last = *l.Percent
			}
		}
		if last != 100 {
			t.Errorf("worker %s's percent ended at %v, want 100", id, last)
		}
	}
	// The cut row was asked again, visibly, and then ended installed.
	var asked []int
	retried := false
	for _, l := range lines {
		if l.Event == "worker" && l.WorkerID == idC {
			switch l.Status {
			case "asked":
				asked = append(asked, l.Attempt)
			case "retrying":
				retried = true
			}
		}
	}
	if !retried || len(asked) < 2 || !slices.IsSorted(asked) {
		t.Errorf("worker C was asked at attempts %v (retrying told: %v), want a retry after its uplink was cut", asked, retried)
	}
	// B's failure names its phase before the done event ends the stream.
	if i := slices.IndexFunc(lines, func(l jobLine) bool { return l.Event == "error" && l.WorkerID == idB }); i < 0 || lines[len(lines)-1].Event != "done" {
		t.Errorf("worker B's error event at %d, last event %+v; want the error, and done last", i, lines[len(lines)-1])
	}

	// job show replays the same story from the gateway's record (as JSON
	// off a terminal; the grid it draws on one is golden-tested in the
	// CLI's own tests).
	var rec struct {
		State   string `json:"state"`
		Workers []struct {
			WorkerID string  `json:"workerId"`
			Attempt  int     `json:"attempt"`
			Outcome  string  `json:"outcome"`
			Phase    string  `json:"phase"`
			Percent  float64 `json:"percent"`
			Error    *struct {
				Phase string `json:"phase"`
				Code  string `json:"code"`
			} `json:"error"`
		} `json:"workers"`
	}
	js := f.gw.run("job", "show", done.JobID, "--json")
	if json.Unmarshal([]byte(js.stdout), &rec) != nil || rec.State != "failed" {
		t.Fatalf("job show --json\n%s", js)
	}
	for _, w := range rec.Workers {
		if w.Outcome != outcome[w.WorkerID] {
			t.Errorf("the record says %s ended %s, the live answer %s", w.WorkerID, w.Outcome, outcome[w.WorkerID])
		}
		if w.WorkerID == idC && w.Attempt < 2 {
			t.Errorf("the record keeps worker C at attempt %d, want the retry's", w.Attempt)
		}
		if w.WorkerID == idB && (w.Error == nil || w.Error.Phase != "download" || w.Error.Code != "INTERNAL" || w.Percent <= 0) {
			t.Errorf("the record of worker B is %+v, want its download's error and how far it got", w)
		}
	}
	if list := f.gw.run("job", "list", "--json"); list.code != 0 || !strings.Contains(list.stdout, done.JobID) {
		t.Errorf("job list does not list the job\n%s", list)
	}
}

func TestAFleetInstallThatMatchesNoWorkerIsRefusedWithTheReason(t *testing.T) {
	t.Parallel()
	f := newFleet(t)
	r := f.gw.run("component", "install", "android", "37", "--all-workers")
	expectFailure(t, r, 12, "UNKNOWN_WORKER")
	if !strings.Contains(r.stderr, "no worker has joined") {
		t.Errorf("the refusal does not say why\n%s", r)
	}
	a := f.worker("worker-a", 1)
	f.await("worker A connected", 10*time.Second, connected(instanceID(t, a)))
	r = f.gw.run("component", "install", "android", "37", "--workers", "nobody,nor-this-one")
	expectFailure(t, r, 12, "UNKNOWN_WORKER")
	if !strings.Contains(r.stderr, "nobody, nor-this-one") || !strings.Contains(r.stderr, "started nowhere") {
		t.Errorf("the refusal does not name the unknown workers\n%s", r)
	}
	expectFailure(t, f.gw.run("component", "install", "android", "37"), 2, "BAD_REQUEST")
	if list := f.gw.run("job", "list", "--json"); !strings.Contains(list.stdout, `"jobs":[]`) {
		t.Errorf("a refused install left a job behind\n%s", list)
	}
}

// The install's HTTP answer is an event stream only for a client that asks
// for one, read here with Go's own HTTP client as raw SSE; any other gets
// one JSON answer.
func TestAnInstallStreamsItsPhasesInOrderToAnSSEClientAndAnswersJSONWithoutTheHeader(t *testing.T) {
	t.Parallel()
	h, a := httpHome(t, "drivers.demo.downloadableRuntimes", `{"android":["37"]}`, "drivers.demo.downloadMs", "500")
	_, op := h.token("operator", "installs")
	s := a.streamBody("POST", "/v1/components/install", op, `{"platform":"android","version":"37"}`)
	var names []string
	var phases []string
	var jobID string
	for {
		ev, ok := s.next(t)
		if !ok {
			break
		}
		names = append(names, ev.name)
		m := ev.json(t)
		switch ev.name {
		case "phase":
			phases = append(phases, m["phase"].(string)+":"+m["status"].(string))
		case "done":
			jobID, _ = m["jobId"].(string)
			if m["result"] != "succeeded" {
				t.Errorf("done says %v, want succeeded", m)
			}
		}
		if ev.name == "done" {
			break
		}
	}
	want := []string{"queue:start", "queue:done", "download:start", "download:done", "verify:start", "verify:done", "record:start", "record:done"}
	if !slices.Equal(phases, want) {
		t.Errorf("phases %v, want %v", phases, want)
	}
	if len(names) == 0 || names[len(names)-1] != "done" || !slices.Contains(names, "progress") || !slices.Contains(names, "log") {
		t.Errorf("events %v, want progress and log events and done last", names)
	}
	if jobID == "" {
		t.Fatal("the done event names no job")
	}
	r := a.do("POST", "/v1/components/install", op, `{"platform":"android","version":"37"}`)
	if r.status != 200 || r.body["outcome"] != "already-installed" || r.body["jobId"] == nil || strings.HasPrefix(r.header.Get("Content-Type"), "text/event-stream") {
		t.Errorf("without Accept: text/event-stream the answer is %d %s %s, want one JSON result", r.status, r.header.Get("Content-Type"), r.raw)
	}
	j := a.do("GET", "/v1/jobs/"+jobID, op, "")
	rows, _ := j.body["workers"].([]any)
	if j.status != 200 || j.body["state"] != "succeeded" || len(rows) != 1 || rows[0].(map[string]any)["outcome"] != "installed" {
		t.Errorf("GET /v1/jobs/%s = %d %s, want the succeeded job of one installed row", jobID, j.status, j.raw)
	}
	replay := a.stream("/v1/jobs/"+jobID+"/events", op)
	first, _ := replay.next(t)
	second, _ := replay.next(t)
	if first.name != "job" || second.name != "done" {
		t.Errorf("an ended job's stream is %s then %s, want job then done", first.name, second.name)
	}
	if r := a.do("GET", "/v1/jobs/job_0000000000000000", op, ""); r.status != 404 || r.errCode() != "UNKNOWN_JOB" {
		t.Errorf("an unknown job answers %d %s, want 404 UNKNOWN_JOB", r.status, r.raw)
	}
	if r := a.do("POST", "/v1/components/install", op, `{"platform":"android","version":"37","workers":"all"}`); r.status != 400 || r.errCode() != "BAD_REQUEST" {
		t.Errorf("workers on a worker answers %d %s, want 400 BAD_REQUEST", r.status, r.raw)
	}
}

// The fleet form over HTTP: each worker's phases come tagged with its id,
// in order, and done ends the stream with the job's result.
func TestAFleetInstallStreamsEveryWorkersPhasesTaggedWithItsIDToAnSSEClient(t *testing.T) {
	t.Parallel()
	f := newFleet(t)
	runtimes := []string{"drivers.demo.downloadableRuntimes", `{"android":["37"]}`, "drivers.demo.downloadMs", "300"}
	a, b := f.worker("worker-a", 1, runtimes...), f.worker("worker-b", 1, runtimes...)
	idA, idB := instanceID(t, a), instanceID(t, b)
	f.await("two workers connected", 10*time.Second, connected(idA, idB))
	_, op := f.gw.token("operator", "installs")
	s := f.api.streamBody("POST", "/v1/components/install", op, `{"platform":"android","version":"37","workers":["`+idA+`","`+idB+`"]}`)
	phases := map[string][]string{}
	var last string
	var done map[string]any
	for {
		ev, ok := s.next(t)
		if !ok {
			break
		}
		last = ev.name
		m := ev.json(t)
		if ev.name == "phase" {
			id, _ := m["workerId"].(string)
			phases[id] = append(phases[id], m["phase"].(string)+":"+m["status"].(string))
		}
		if ev.name == "done" {
			done = m
			break
		}
	}
	want := []string{"queue:start", "queue:done", "download:start", "download:done", "verify:start", "verify:done", "record:start", "record:done"}
	for _, id := range []string{idA, idB} {
		if !slices.Equal(phases[id], want) {
			t.Errorf("worker %s's phases %v, want %v", id, phases[id], want)
		}
	}
	if len(phases) != 2 {
		t.Errorf("phases came tagged with %d worker ids, want the two chosen: %v", len(phases), phases)
	}
	if last != "done" || done["result"] != "succeeded" {
		t.Errorf("the stream ended with %s %v, want done, succeeded", last, done)
	}
}
