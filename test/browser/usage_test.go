package browser

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strconv"
	"testing"
	"time"
)

// usageJS reads the Workers tab's usage block: its state, its summary,
// what the chart's minutes add up to and its label, and the busiest
// workers' rows in order; null before the block is drawn.
const usageJS = `(() => {
  const u = document.querySelector('.usage');
  if (!u) return null;
  const text = (sel) => { const e = u.querySelector(sel); return e ? e.textContent : ''; };
  const chart = u.querySelector('svg.usage-chart');
  const sum = (k) => [...u.querySelectorAll('g.usage-minute')].reduce((a, g) => a + Number(g.dataset[k]), 0);
  return {
    state: u.dataset.usage, summary: text('.usage-summary'), problem: text('.usage-problem'),
    chart: !!chart, label: chart ? chart.getAttribute('aria-label') : '', title: chart ? text('svg.usage-chart > title') : '',
    minutes: u.querySelectorAll('g.usage-minute').length,
    requests: sum('requests'), granted: sum('granted'), rejected: sum('rejected'),
    refusedBars: [...u.querySelectorAll('rect.usage-refused')].filter(r => r.getBBox().height > 0).length,
    busiest: u.querySelector('.usage-busiest') ? [...u.querySelectorAll('table.busiest tbody tr')].map(r => ({
      id: r.dataset.workerId, name: r.querySelector('td.worker').textContent,
      href: r.querySelector('td.worker a') ? r.querySelector('td.worker a').getAttribute('href') : '',
      granted: Number(r.querySelector('td.granted').textContent), refused: Number(r.querySelector('td.refused').textContent),
      p90: r.dataset.p90, wait: r.querySelector('td.wait').textContent,
    })) : null,
    busiestEmpty: text('.usage-busiest .empty'),
    signedIn: !document.querySelector('#token'),
  };
})()`

// emptyHour is what the usage block says of an hour with no lease event.
const emptyHour = "No lease was asked for, granted or refused in the last hour."

type usageView struct {
	State        string        `json:"state"`
	Summary      string        `json:"summary"`
	Problem      string        `json:"problem"`
	Chart        bool          `json:"chart"`
	Label        string        `json:"label"`
	Title        string        `json:"title"`
	Minutes      int           `json:"minutes"`
	Requests     int           `json:"requests"`
	Granted      int           `json:"granted"`
	Rejected     int           `json:"rejected"`
	RefusedBars  int           `json:"refusedBars"`
	Busiest      []busiestView `json:"busiest"`
	BusiestEmpty string        `json:"busiestEmpty"`
	SignedIn     bool          `json:"signedIn"`
}

type busiestView struct {
	ID      string `json:"id"`
	Name    string `json:"name"`
	Href    string `json:"href"`
	Granted int    `json:"granted"`
	Refused int    `json:"refused"`
	P90     string `json:"p90"`
	Wait    string `json:"wait"`
}

// usageWhen waits for the usage block to be in state, its summary or
// problem (whichever the state shows) saying words, and returns it.
func usageWhen(p *page, what, state, words string, bound time.Duration) usageView {
	p.t.Helper()
	var u usageView
	p.waitValue(what, bound, fmt.Sprintf(`(() => { const u = %s; return u && u.state === %q && (u.state === 'error' ? u.problem : u.summary) === %q ? u : null; })()`,
		usageJS, state, words), &u)
	return u
}

// A gateway with three workers: three leases granted on worker-a, one on
// worker-b, one refused on worker-c (its demo driver cannot create a
// device), each sent there by draining the others. The Workers tab first
// says the hour was empty, then charts it: the summary's totals, the
// minutes adding up to them, and the busiest workers ranked by leases
// granted, each named by its label, linking to its page, with its p90 wait
// as the gateway counts it.
func TestTheWorkersTabChartsTheLastHoursLeasesAndRanksTheBusiestWorkers(t *testing.T) {
	f := newGateway(t)
	workers := []struct {
		label string
		h     *home
		id    string
	}{
		{label: "worker-a", h: f.worker(t, "worker-a", 3)},
		{label: "worker-b", h: f.worker(t, "worker-b", 3)},
		{label: "worker-c", h: f.worker(t, "worker-c", 3, "drivers.demo.fail", `["provision"]`)},
	}
	for i := range workers {
		workers[i].id = instanceID(t, workers[i].h)
	}
	_, ops := f.gw.token("operator", "console")

	p := newPage(t, f.console)
	p.open("/workers")
	p.signIn(ops)
	for _, w := range workers {
		p.waitFor("the card of "+w.label+", connected", 15*time.Second,
			fmt.Sprintf(`(() => { const c = document.querySelector('.card-worker[data-worker-id=%q]'); return !!c && c.dataset.connection === 'connected'; })()`, w.id))
	}
	empty := usageWhen(p, "the empty hour said in words", "empty", emptyHour, 10*time.Second)
	if empty.Chart || empty.BusiestEmpty == "" {
		t.Errorf("the empty hour: %+v, want no chart and no busiest workers", empty)
	}

	// only drains every worker but the one named, so the gateway sends the
	// next request there.
	drained := map[string]bool{}
	only := func(id string) {
		t.Helper()
		if drained[id] {
			f.gw.must("undrain", "worker", "undrain", id)
			drained[id] = false
		}
		for _, w := range workers {
			if w.id != id && !drained[w.id] {
				f.gw.must("drain", "worker", "drain", w.id)
				drained[w.id] = true
			}
		}
	}
	lease := func(agent string) result {
		t.Helper()
		return f.gw.run("lease", "--platform", "ios", "--agent-id", agent, "--detach", "--progress", "none")
	}
	only(workers[0].id)
	for i := range 3 {
		if r := lease("agent-a" + strconv.Itoa(i)); r.code != 0 {
			t.Fatalf("a lease on worker-a: %s", r)
		}
	}
	only(workers[1].id)
	if r := lease("agent-b"); r.code != 0 {
		t.Fatalf("a lease on worker-b: %s", r)
	}
	only(workers[2].id)
	if r := lease("agent-c"); r.code == 0 {
		t.Fatalf("a lease on worker-c, whose devices cannot be made, was granted: %s", r)
	}
	for _, w := range workers[:2] {
		f.gw.must("undrain", "worker", "undrain", w.id)
	}

	const want = "4 leases granted in the last hour, 1 refused (5 asked for)."
	u := usageWhen(p, "the chart's summary saying 4 granted and 1 refused", "chart", want, 20*time.Second)
	if !u.Chart || u.Minutes != 60 {
		t.Errorf("the chart: drawn %v with %d minutes, want 60", u.Chart, u.Minutes)
	}
	if u.Requests != 5 || u.Granted != 4 || u.Rejected != 1 || u.RefusedBars != 1 {
		t.Errorf("the chart's minutes add up to %d asked, %d granted, %d not granted (%d red bars), want 5, 4, 1 (1)",
			u.Requests, u.Granted, u.Rejected, u.RefusedBars)
	}
	if u.Label != "Leases, last hour: "+want || u.Title != u.Label {
		t.Errorf("the chart's label %q and title %q, want both %q", u.Label, u.Title, "Leases, last hour: "+want)
	}

	// The gateway's own figures for the p90 waits.
	var stats struct {
		ByWorker map[string]struct {
			Percentiles struct {
				Wait struct {
					P90 int64 `json:"p90"`
				} `json:"wait"`
			} `json:"percentiles"`
		} `json:"byWorker"`
	}
	if r := f.gw.must("stats", "stats", "--since", "1h", "--json"); json.Unmarshal([]byte(r.stdout), &stats) != nil {
		t.Fatalf("stats --json: %s", r)
	}
	p90 := func(id string) string { return strconv.FormatInt(stats.ByWorker[id].Percentiles.Wait.P90, 10) }
	wantRows := []busiestView{
		{ID: workers[0].id, Name: "worker-a", Href: "/workers/" + workers[0].id, Granted: 3, Refused: 0, P90: p90(workers[0].id)},
		{ID: workers[1].id, Name: "worker-b", Href: "/workers/" + workers[1].id, Granted: 1, Refused: 0, P90: p90(workers[1].id)},
		{ID: workers[2].id, Name: "worker-c", Href: "/workers/" + workers[2].id, Granted: 0, Refused: 1, P90: ""},
	}
	got := make([]busiestView, len(u.Busiest))
	for i, b := range u.Busiest {
		got[i] = b
		got[i].Wait = ""
		if (b.P90 == "") != (b.Wait == "—") {
			t.Errorf("busiest worker %s: p90 wait %q shown as %q", b.Name, b.P90, b.Wait)
		}
	}
	if !reflect.DeepEqual(got, wantRows) {
		t.Errorf("the busiest workers, in order:\n got %+v\nwant %+v", got, wantRows)
	}
	p.screenshot("workers-usage")

	p.click("worker-b's link among the busiest", fmt.Sprintf(`table.busiest tr[data-worker-id=%q] a`, workers[1].id))
	p.waitFor("worker-b's page, opened from the busiest workers", 10*time.Second,
		fmt.Sprintf(`location.pathname === '/workers/%s' && !!document.querySelector('.page-head[data-worker-id=%q]')`, workers[1].id, workers[1].id))
}

// Against a fake worker: an empty hour is said in words; a token that
// may not read the figures (403), a history not kept (410) and a daemon
// that drops the call are each said in place of the chart, the page
// staying signed in; figures that come back are charted for the daemon
// itself, with no busiest workers on a single worker.
func TestTheLeasesChartSaysWhyItHasNoFigures(t *testing.T) {
	f := newFakeDaemon(t)
	p := newPage(t, f.srv.URL)
	p.open("/workers")
	p.signIn(fakeOperator)
	u := usageWhen(p, "the empty hour on a worker", "empty", emptyHour, 10*time.Second)
	if u.Chart || u.Busiest != nil {
		t.Errorf("the empty hour on a worker: %+v, want no chart and no busiest workers", u)
	}
	answer := func(a fakeAnswer) {
		f.mu.Lock()
		f.usage = a
		f.mu.Unlock()
		// Coming back to the tab reads what it shows again.
		p.tab("devices")
		p.tab("workers")
	}
	for _, c := range []struct {
		name   string
		answer fakeAnswer
		want   string
	}{
		{"a 403", fakeAnswer{status: 403, body: map[string]any{"error": map[string]any{"code": "FORBIDDEN", "message": "needs admin"}}},
			"This token may not read the usage figures (403 FORBIDDEN)."},
		{"a 410 HISTORY_NOT_KEPT", fakeAnswer{status: 410, body: map[string]any{"error": map[string]any{"code": "HISTORY_NOT_KEPT", "message": "the event log keeps events from later on"}}},
			"The daemon keeps no events of the last hour (410 HISTORY_NOT_KEPT), so there is nothing to draw."},
		{"a dropped call", fakeAnswer{drop: true},
			"The daemon did not answer, so there are no figures for the last hour; they are read again when it does."},
	} {
		answer(c.answer)
		u := usageWhen(p, c.name+" said in place of the chart", "error", c.want, 10*time.Second)
		if u.Chart || !u.SignedIn {
			t.Errorf("%s: %+v, want no chart, still signed in", c.name, u)
		}
	}
	answer(fakeAnswer{status: 200, body: fakeUsage([]int{2, 0, 1})})
	u = usageWhen(p, "the worker's own hour charted", "chart", "3 leases granted in the last hour, 0 refused (3 asked for).", 10*time.Second)
	p.screenshot("worker-usage")
	if u.Granted != 3 || u.Minutes != 60 || u.Busiest != nil {
		t.Errorf("the worker's own hour: %+v, want 3 granted over 60 minutes and no busiest workers", u)
	}
}
