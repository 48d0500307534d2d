package e2e

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/simlock/simlock/internal/shimtest"
)

// downloadHome is a home whose demo driver offers iOS 26.4 and 27.0 and
// Android 37 for download, each taking downloadMs.
func downloadHome(t *testing.T, downloadMs string, settings ...string) *home {
	t.Helper()
	base := append([]string{
		"drivers.demo.downloadableRuntimes", `{"ios":["26.4","27.0"],"android":["37"]}`,
		"drivers.demo.downloadMs", downloadMs,
		"capacity.strategy", "fixed", "capacity.config.maxRunning", "4",
	}, fastDemo...)
	return newHome(t, append(base, settings...)...)
}

// stderrSteps parses every progress line a command printed.
func stderrSteps(t *testing.T, stderr string) []progress {
	t.Helper()
	var out []progress
	for _, l := range strings.Split(strings.TrimSpace(stderr), "\n") {
		if p, ok := parseProgress(l); ok {
			out = append(out, p)
		}
	}
	return out
}

// A lease with --allow-download for a missing runtime shows the download,
// naming the component with a rising percent, before provisioning; without
// the flag it fails with RUNTIME_MISSING and nothing downloads.
func TestLeaseDownloadsAMissingRuntimeWithProgress(t *testing.T) {
	t.Parallel()
	h := downloadHome(t, "1500")
	r := h.run("lease", "--platform", "ios", "--os", "26.4", "--agent-id", "without", "--detach")
	e := expectFailure(t, r, 12, "RUNTIME_MISSING")
	if e["downloadable"] != true || e["component"] != "26.4" {
		t.Errorf("RUNTIME_MISSING details = %v, want downloadable component 26.4", e)
	}
	st := daemonStatusJSON(t, h)
	if len(st.Installs) != 0 {
		t.Errorf("a lease without --allow-download started an install: %+v", st.Installs)
	}

	r = h.run("lease", "--platform", "ios", "--os", "26.4", "--allow-download", "--agent-id", "with", "--detach")
	if r.code != 0 {
		t.Fatalf("lease --allow-download\n%s", r)
	}
	g := parseGrant(t, strings.TrimSpace(r.stdout))
	if g.Device.Spec.OSVersion != "26.4" {
		t.Errorf("granted %+v, want iOS 26.4", g.Device.Spec)
	}
	steps := stderrSteps(t, r.stderr)
	var stages []string
	var pcts []int
	for _, s := range steps {
		if len(stages) == 0 || stages[len(stages)-1] != s.Stage {
			stages = append(stages, s.Stage)
		}
		if s.Stage == "downloading" {
			if s.Component != "26.4" || s.Waiting == nil || *s.Waiting {
				t.Errorf("download line %+v, want component 26.4, waiting false", s)
			}
			if s.Percent != nil {
				pcts = append(pcts, *s.Percent)
			}
		}
	}
	if len(stages) < 2 || stages[0] != "downloading" || stages[1] != "provisioning" {
		t.Errorf("stages = %v, want downloading then provisioning\n%s", stages, r.stderr)
	}
	if len(pcts) < 3 || !slices.IsSorted(pcts) || pcts[len(pcts)-1] != 100 || slices.Compact(slices.Clone(pcts))[0] != pcts[0] || len(slices.Compact(slices.Clone(pcts))) != len(pcts) {
		t.Errorf("percentages = %v, want rising whole numbers, each once, up to 100", pcts)
	}
	if !strings.Contains(r.stderr, `{"push":"progress","stage":"downloading","component":"26.4","waiting":false,"percent":`) {
		t.Errorf("no line in the documented shape\n%s", r.stderr)
	}
	// Once downloaded, installed for good: the next lease needs no download.
	r = h.run("lease", "--platform", "ios", "--os", "26.4", "--agent-id", "later", "--detach")
	if r.code != 0 || strings.Contains(r.stderr, "downloading") {
		t.Errorf("a lease on the downloaded runtime\n%s", r)
	}
}

type statusJSON struct {
	Installs []struct {
		Platform  string `json:"platform"`
		Component string `json:"component"`
		State     string `json:"state"`
		Waiters   int    `json:"waiters"`
		Percent   *int   `json:"percent"`
	} `json:"installs"`
}

func daemonStatusJSON(t *testing.T, h *home) statusJSON {
	t.Helper()
	r := h.run("status", "--json")
	var st statusJSON
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &st) != nil {
		t.Fatalf("status --json\n%s", r)
	}
	return st
}

// A request behind another download on the same platform waits, then
// starts its own; one that joins a running download gets its latest
// percentage at once; status shows the installs.
func TestDownloadWaitersAndJoiners(t *testing.T) {
	t.Parallel()
	h := downloadHome(t, "2000")
	first := h.start("lease", "--platform", "ios", "--os", "26.4", "--allow-download", "--agent-id", "first", "--detach")
	first.waitLine(first.stderr, "30% downloaded", func(s string) bool {
		p, ok := parseProgress(s)
		return ok && p.Percent != nil && *p.Percent >= 30
	})
	joiner := h.start("lease", "--platform", "ios", "--os", "26.4", "--allow-download", "--agent-id", "joiner", "--detach")
	l := joiner.waitLine(joiner.stderr, "a progress line", func(s string) bool { _, ok := parseProgress(s); return ok })
	if p, _ := parseProgress(l.text); p.Stage != "downloading" || p.Percent == nil || *p.Percent < 30 {
		t.Errorf("the joiner's first line = %s, want downloading at 30%% or more", l.text)
	}
	waiter := h.start("lease", "--platform", "ios", "--os", "27.0", "--allow-download", "--agent-id", "waiter", "--detach")
	l = waiter.waitLine(waiter.stderr, "a progress line", func(s string) bool { _, ok := parseProgress(s); return ok })
	if p, _ := parseProgress(l.text); p.Stage != "downloading" || p.Component != "27.0" || p.Waiting == nil || !*p.Waiting {
		t.Errorf("the second component's first line = %s, want downloading 27.0 waiting", l.text)
	}
	st := daemonStatusJSON(t, h)
	if len(st.Installs) != 2 || st.Installs[0].Component != "26.4" || st.Installs[0].State != "downloading" || st.Installs[0].Waiters != 2 ||
		st.Installs[1].Component != "27.0" || st.Installs[1].State != "waiting" {
		t.Errorf("status installs = %+v", st.Installs)
	}
	if human := h.run("status"); !strings.Contains(human.stdout, "Install ios 26.4: downloading") || !strings.Contains(human.stdout, "2 waiters") {
		t.Errorf("status does not show the install\n%s", human.stdout)
	}
	waiter.waitLine(waiter.stderr, "its own download starting", func(s string) bool {
		p, ok := parseProgress(s)
		return ok && p.Stage == "downloading" && p.Waiting != nil && !*p.Waiting
	})
	for _, p := range []*proc{first, joiner, waiter} {
		if code := p.wait(); code != 0 {
			t.Errorf("%s exited %d\n%s", p, code, p.dump())
		}
	}
}

// The component commands: install with progress, list, remove with its
// refusals, and the policy that disables downloads.
func TestComponentCommands(t *testing.T) {
	t.Parallel()
	h := downloadHome(t, "500")
	r := h.run("component", "install", "android", "37")
	var res map[string]any
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &res) != nil || res["outcome"] != "installed" || res["version"] != "37" {
		t.Fatalf("component install\n%s", r)
	}
	for _, want := range []string{`{"event":"phase","phase":"queue","status":"start"`, `{"event":"phase","phase":"download","status":"start"`,
		`"percent":100`, `{"event":"phase","phase":"verify","status":"start"`, `{"event":"phase","phase":"record","status":"done"`, `{"event":"done"`} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("the install's JSON lines on stderr lack %s\n%s", want, r.stderr)
		}
	}
	if res["jobId"] == nil {
		t.Errorf("the result names no job: %s", r.stdout)
	}
	r = h.run("component", "install", "android", "37")
	if !strings.Contains(r.stdout, `"outcome":"already-installed"`) {
		t.Errorf("second install\n%s", r)
	}
	r = h.run("component", "list", "--platform", "android")
	var list struct {
		Components []struct {
			Version string `json:"version"`
			Owned   bool   `json:"owned"`
		} `json:"components"`
	}
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &list) != nil {
		t.Fatalf("component list\n%s", r)
	}
	owned := map[string]bool{}
	for _, c := range list.Components {
		owned[c.Version] = c.Owned
	}
	if !owned["37"] || owned["36"] {
		t.Errorf("owned = %v, want 37 owned and the built-in 36 not", owned)
	}
	expectFailure(t, h.run("component", "remove", "android", "36", "--yes"), 12, "COMPONENT_NOT_OWNED")
	expectFailure(t, h.run("component", "remove", "android", "37"), 2, "USAGE")
	if r := h.run("component", "remove", "android", "37", "--dry-run"); r.code != 0 || !strings.Contains(r.stdout, `"removed":false`) {
		t.Errorf("dry run\n%s", r)
	}
	if r := h.run("component", "remove", "android", "37", "--yes"); r.code != 0 || !strings.Contains(r.stdout, `"removed":true`) {
		t.Fatalf("remove\n%s", r)
	}
	expectFailure(t, h.run("lease", "--platform", "android", "--os", "37", "--agent-id", "x", "--detach"), 12, "RUNTIME_MISSING")

	never := downloadHome(t, "500", "downloads.policy", "never")
	expectFailure(t, never.run("component", "install", "ios", "26.4"), 12, "DOWNLOADS_DISABLED")
	expectFailure(t, never.run("lease", "--platform", "ios", "--os", "26.4", "--allow-download", "--agent-id", "x", "--detach"), 12, "RUNTIME_MISSING")
}

// The downloading stage shows on the HTTP request resource and its event
// stream, and as MCP progress naming the component.
func TestDownloadStageOverHTTPAndMCP(t *testing.T) {
	t.Parallel()
	h, a := httpHome(t, "drivers.demo.downloadableRuntimes", `{"ios":["26.4"],"android":["37"]}`, "drivers.demo.downloadMs", "1500")
	_, agent := h.token("agent", "dl")
	r := a.do("POST", "/v1/lease-requests", agent, `{"platform":"ios","os":"26.4","allowDownload":true}`)
	if r.status != 201 {
		t.Fatalf("create: %d %s", r.status, r.raw)
	}
	id := requestOf(t, r)["id"].(string)
	s := a.stream("/v1/lease-requests/"+id+"/events", agent)
	got := a.awaitState(agent, id, "downloading")
	if got["component"] != "26.4" || got["waiting"] == nil {
		t.Errorf("resource while downloading = %v, want component and waiting", got)
	}
	sawPercent := false
	var names []string
	for {
		ev, ok := s.next(t)
		if !ok {
			break
		}
		if len(names) == 0 || names[len(names)-1] != ev.name {
			names = append(names, ev.name)
		}
		if ev.name == "downloading" {
			if m := ev.json(t); m["percent"] != nil {
				sawPercent = true
			}
		}
	}
	if !slices.Contains(names, "downloading") || !sawPercent || names[len(names)-1] != "granted" ||
		slices.Index(names, "downloading") > slices.Index(names, "provisioning") {
		t.Errorf("event stream = %v (percent seen: %v), want downloading with percents before provisioning, ending granted", names, sawPercent)
	}

	m := h.mcpConnect("mcp-dl")
	res, grant := m.call("lease_simulator", map[string]any{"platform": "android", "osVersion": "37", "allowDownload": true}, "dl-1")
	if res.IsError {
		t.Fatalf("lease_simulator: %v", grant)
	}
	m.awaitHeard("a progress step naming the component", func() bool {
		for _, p := range m.progress {
			if strings.Contains(p.Message, "37") && strings.Contains(p.Message, "Downloading") {
				return true
			}
		}
		return false
	})
	m.mu.Lock()
	defer m.mu.Unlock()
	for i := 1; i < len(m.progress); i++ {
		if m.progress[i].Progress <= m.progress[i-1].Progress {
			t.Errorf("MCP progress went from %v to %v", m.progress[i-1].Progress, m.progress[i].Progress)
		}
	}
}

// The iOS driver downloads a runtime with xcodebuild -downloadPlatform and
// reads its decimal-comma percentages; the Android driver refuses an image
// whose license is not accepted unless downloads.acceptAndroidLicenses.
func TestRealDriversDownloadThroughTheirInstallers(t *testing.T) {
	t.Parallel()
	e := shimtest.Build(t)
	h := newHome(t)
	h.withShims(e, "ios,android")
	r := h.run("lease", "--platform", "ios", "--device", "iPhone 16", "--os", "26.4", "--allow-download", "--agent-id", "a", "--detach")
	if r.code != 0 {
		t.Fatalf("iOS lease with a download\n%s", r)
	}
	var sawPercent bool
	for _, s := range stderrSteps(t, r.stderr) {
		if s.Stage == "downloading" && s.Component == "26.4" && s.Percent != nil {
			sawPercent = true
		}
	}
	if !sawPercent {
		t.Errorf("no downloading line with a percentage\n%s", r.stderr)
	}
	called := false
	for _, c := range e.Calls(t) {
		if c.Tool == "xcodebuild" && slices.Contains(c.Args, "-downloadPlatform") && slices.Contains(c.Args, "26.4") {
			called = true
		}
	}
	if !called {
		t.Error("xcodebuild -downloadPlatform iOS -buildVersion 26.4 never ran")
	}

	e.RefuseAndroidLicenses(t)
	r = h.run("component", "install", "android", "37")
	expectFailure(t, r, 12, "LICENSE_NOT_ACCEPTED")
}
