package browser

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
)

// progressJS drives the page's own progress module through the cases
// the rules are about, on a clock of its own (milliseconds from 0), and
// returns what it showed at each point.
const progressJS = `(async () => {
  const m = await import('/js/progress.js');
  const at = (stage, progress, extra) => Object.assign({ requestId: 'r', requesterId: 'a', stage, progress }, extra || {});
  const out = {};

  // A queued stage of 300 ms never lights; it shows done once the next
  // step lights, a second after that step began.
  const j = new m.Journey('r', 0);
  j.observe(at('queued', { stage: 'queued', queuePosition: 1 }), 0);
  j.observe(at('starting', { stage: 'provisioning', etaMs: 1500 }, { deviceId: 'dev_1' }), 300);
  out.litAt200 = j.litStep(200);
  out.litAt900 = j.litStep(900);
  out.litAt1400 = j.litStep(1400);
  out.queuedAt1400 = j.strip(1400).find(s => s.step === 'queued').state;
  j.observe(at('starting', { stage: 'booting', etaMs: 900 }), 2500);
  out.litAt3000 = j.litStep(3000);
  out.litAt3600 = j.litStep(3600);
  out.nextChangeAt2600 = j.nextChange(2600);
  j.settle('ready', 3900, { leaseId: 'lse_1' });
  out.litReady = j.litStep(3900);
  out.bootingAtReady = j.strip(3900).find(s => s.step === 'booting').state;

  // A booting stage shorter than a second, straight to ready: booting
  // never lit, shown done.
  const quick = new m.Journey('q', 0);
  quick.observe(at('starting', { stage: 'provisioning', etaMs: 1 }), 0);
  quick.observe(at('starting', { stage: 'booting', etaMs: 1 }), 1500);
  quick.settle('ready', 1700, {});
  out.quickBooting = quick.strip(1700).find(s => s.step === 'booting').state;
  out.quickLit = quick.litStep(1700);

  // A failed request has no strip.
  const f = new m.Journey('f', 0);
  f.observe(at('starting', { stage: 'booting', etaMs: 100 }), 0);
  f.settle('failed', 1500, { error: { code: 'INTERNAL', message: 'booting its device failed' } });
  out.failedStrip = f.strip(1600);

  // Bars: no number until one is known; the shown value never goes down
  // within the stage; the detail under it goes with the stage.
  const d = new m.Journey('d', 0);
  const dl = (p) => at('downloading', Object.assign({ stage: 'downloading', component: '26.4', waiting: false }, p));
  d.observe(dl({ waiting: true }), 0);
  out.barWaiting = d.progressBar();
  d.observe(dl({}), 100);
  out.barUnknown = d.progressBar();
  d.observe(dl({ percent: 40, bytesDone: 3400000000, bytesTotal: 8600000000 }), 200);
  out.bar40 = d.progressBar();
  d.observe(dl({ percent: 35, bytesDone: 3000000000, bytesTotal: 8600000000 }), 300);
  out.barAfter35 = d.progressBar();
  d.observe(dl({}), 400);
  out.barLostPercent = d.progressBar();
  d.observe(dl({ percent: 38 }), 500);
  out.barBack = d.progressBar();
  d.observe(at('queued', { stage: 'queued', queuePosition: 2 }), 600);
  out.barQueued = d.progressBar();
  return out;
})()`

type barView struct {
	Determinate bool     `json:"determinate"`
	Value       *float64 `json:"value"`
	PercentText string   `json:"percentText"`
	Detail      string   `json:"detail"`
	Waiting     bool     `json:"waiting"`
}

func (b barView) String() string {
	v := "none"
	if b.Value != nil {
		v = strconv.FormatFloat(*b.Value, 'f', -1, 64)
	}
	return fmt.Sprintf("{determinate %v, value %s, %q, detail %q, waiting %v}", b.Determinate, v, b.PercentText, b.Detail, b.Waiting)
}

// The rules of honest progress, run in the page's own module: a stage
// lights its step only after a second, a short one is merged into the
// next; a failed request has no strip; a bar has a number only when one
// is known, never shows less than it did within a stage, and its detail
// goes with the stage.
func TestTheProgressRules(t *testing.T) {
	f := newFakeDaemon(t)
	p := newPage(t, f.srv.URL)
	p.open("/")
	var out struct {
		LitAt200, LitAt900, LitAt1400, QueuedAt1400, LitAt3000, LitAt3600  string
		LitReady, BootingAtReady, QuickBooting, QuickLit                   string
		NextChangeAt2600                                                   float64
		FailedStrip                                                        []any
		BarWaiting, BarUnknown, Bar40, BarAfter35, BarLostPercent, BarBack *barView
		BarQueued                                                          *barView
	}
	p.must("run the progress module", progressJS, &out)
	check := func(what, got, want string) {
		t.Helper()
		if got != want {
			t.Errorf("%s: got %q, want %q", what, got, want)
		}
	}
	check("lit 200 ms into a stage", out.LitAt200, "")
	check("lit 600 ms into provisioning, after a 300 ms queue", out.LitAt900, "")
	check("lit 1.1 s into provisioning", out.LitAt1400, "provisioning")
	check("the 300 ms queued step once provisioning lit", out.QueuedAt1400, "done")
	check("lit 500 ms into booting (provisioning stays lit)", out.LitAt3000, "provisioning")
	check("lit 1.1 s into booting", out.LitAt3600, "booting")
	check("lit once ready", out.LitReady, "ready")
	check("booting once ready", out.BootingAtReady, "done")
	check("a 200 ms boot, once ready", out.QuickBooting, "done")
	check("lit after a 200 ms boot", out.QuickLit, "ready")
	if out.NextChangeAt2600 != 3500 {
		t.Errorf("the strip's next change after booting began at 2500 = %v, want 3500 (a second on)", out.NextChangeAt2600)
	}
	if out.FailedStrip != nil {
		t.Errorf("a failed request's strip = %v, want none", out.FailedStrip)
	}
	bar := func(what string, b *barView, determinate bool, value float64, text, detail string) {
		t.Helper()
		switch {
		case b == nil:
			t.Errorf("%s: no bar", what)
		case b.Determinate != determinate || b.PercentText != text || b.Detail != detail:
			t.Errorf("%s: %s, want determinate %v, %q, detail %q", what, *b, determinate, text, detail)
		case determinate && (b.Value == nil || *b.Value != value):
			t.Errorf("%s: value %v, want %v", what, b.Value, value)
		case !determinate && b.Value != nil:
			t.Errorf("%s: an indeterminate bar with value %v", what, *b.Value)
		}
	}
	bar("waiting for another install", out.BarWaiting, false, 0, "", "")
	if out.BarWaiting != nil && !out.BarWaiting.Waiting {
		t.Errorf("the bar of a request behind another install does not say it waits")
	}
	bar("downloading, no percentage yet", out.BarUnknown, false, 0, "", "")
	bar("40%", out.Bar40, true, 40, "40%", "3.2 GiB of 8.0 GiB")
	bar("35% after 40%", out.BarAfter35, true, 40, "40%", "3.2 GiB of 8.0 GiB")
	bar("the percentage gone again", out.BarLostPercent, false, 0, "", "3.2 GiB of 8.0 GiB")
	bar("38% after 40%", out.BarBack, true, 40, "40%", "3.2 GiB of 8.0 GiB")
	if out.BarQueued != nil {
		t.Errorf("once queued the download's bar is still there: %s", *out.BarQueued)
	}
}

// The live layer's rules, run in the page's own module: the reconnect
// waits, and which routes an event has read again.
func TestTheLiveLayerRules(t *testing.T) {
	f := newFakeDaemon(t)
	p := newPage(t, f.srv.URL)
	p.open("/")
	var out struct {
		Waits  []float64           `json:"waits"`
		Routes map[string][]string `json:"routes"`
	}
	p.must("run the live module", `(async () => {
	  const m = await import('/js/live.js');
	  const routes = {};
	  const ev = (event, payload) => ({ event, payload: payload || {} });
	  const cases = {
	    'lease.granted': [ev('lease.granted', { requestId: 'r' }), false],
	    'lease.rejected': [ev('lease.rejected'), false],
	    'device.ready': [ev('device.ready'), false],
	    'worker.drained': [ev('worker.drained', { workerId: 'w1' }), true],
	    'worker.rejected': [ev('worker.rejected', { workerId: 'w1' }), true],
	    'relayed device.ready': [ev('device.ready', { workerId: 'w2' }), true],
	    'component.installed': [ev('component.installed'), false],
	  };
	  for (const [k, [e, gw]] of Object.entries(cases)) routes[k] = [...m.routesFor(e, gw)].sort();
	  return { waits: [0, 1, 2, 3, 4, 5, 9].map(m.backoffMs), routes };
	})()`, &out)
	want := []float64{1000, 2000, 4000, 8000, 10000, 10000, 10000}
	if len(out.Waits) != len(want) {
		t.Fatalf("backoff waits %v, want %v", out.Waits, want)
	}
	for i := range want {
		if out.Waits[i] != want[i] {
			t.Errorf("reconnect attempt %d waits %v ms, want %v (1, 2, 4, 8 s, then every 10 s)", i, out.Waits[i], want[i])
		}
	}
	wantRoutes := map[string]string{
		"lease.granted":        "status",
		"lease.rejected":       "failed status",
		"device.ready":         "status",
		"worker.drained":       "status worker:w1 workers",
		"worker.rejected":      "",
		"relayed device.ready": "status worker:w2",
		"component.installed":  "status",
	}
	for k, w := range wantRoutes {
		if got := strings.Join(out.Routes[k], " "); got != w {
			t.Errorf("a %s event reads %q again, want %q", k, got, w)
		}
	}
}
