package browser

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/simlock/simlock/internal/bintest"
)

// consoleHome is a daemon with its HTTP API on, whose demo steps last
// long enough to be watched: creating a device 2 s and booting it 2.5 s
// (a step lights only after a second), a runtime download 8 s, one iOS
// device running at a time so a request can be made to wait in line,
// and a quarantined device never retried by itself (only the console's
// Retry cleans it).
func consoleHome(t *testing.T) *home {
	t.Helper()
	// A fixed port: the page must find the daemon again after a restart.
	port, err := bintest.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	h := newHome(t,
		"http.enabled", "true", "http.port", strconv.Itoa(port),
		"drivers.demo.provisionMs", "2000",
		"drivers.demo.bootMs", "2500",
		"drivers.demo.reclaimMs", "300",
		"drivers.demo.downloadableRuntimes", `{"ios":["26.4","27.0"],"android":["37"]}`,
		"drivers.demo.downloadMs", "8000",
		"capacity.strategy", "fixed",
		"capacity.config.maxRunning", "3",
		"capacity.config.ios.maxRunning", "1",
		"capacity.config.ios.maxDevices", "4",
		"warmPool.quarantine.retryBackoffMs", "3600000",
	)
	h.startDaemon()
	return h
}

// cardJS reads the card of the request a requester waits on, on the
// Devices tab: its strip, bar and words; null when there is none.
const cardJS = `window.__card = (who) => {
  const c = document.querySelector('.card-journey[data-requester="' + who + '"]');
  if (!c) return null;
  const strip = c.querySelector('.strip');
  const bar = c.querySelector('.bar');
  const text = (sel) => { const e = c.querySelector(sel); return e ? e.textContent : ''; };
  return {
    id: c.dataset.requestId, outcome: c.dataset.outcome, stage: c.dataset.stage, deviceId: c.dataset.deviceId || '',
    lit: strip ? strip.dataset.lit : '', hasStrip: !!strip,
    bar: bar ? { determinate: bar.dataset.determinate === 'true', value: bar.dataset.value === '' ? null : Number(bar.dataset.value) } : null,
    pct: text('.bar-block .pct'), note: text('.bar-block .bar-note'), detail: text('.bar-detail'),
    reason: text('.reason'), retry: !!c.querySelector('button[data-retry]'),
  };
}; true`

// samplerJS records every 50 ms what the cards of the given requesters
// show, with the page's clock.
const samplerJS = `window.__samples = {}; window.__sampler = setInterval(() => {
  for (const who of %s) {
    const s = window.__card(who);
    if (s) { s.at = performance.now(); (window.__samples[who] = window.__samples[who] || []).push(s); }
  }
}, 50); true`

type cardSample struct {
	At       float64 `json:"at"`
	ID       string  `json:"id"`
	Outcome  string  `json:"outcome"`
	Stage    string  `json:"stage"`
	DeviceID string  `json:"deviceId"`
	Lit      string  `json:"lit"`
	HasStrip bool    `json:"hasStrip"`
	Bar      *struct {
		Determinate bool     `json:"determinate"`
		Value       *float64 `json:"value"`
	} `json:"bar"`
	Pct    string `json:"pct"`
	Note   string `json:"note"`
	Detail string `json:"detail"`
	Reason string `json:"reason"`
	Retry  bool   `json:"retry"`
}

func (p *page) card(who string) *cardSample {
	p.t.Helper()
	var c *cardSample
	p.must("read the card of "+who, fmt.Sprintf(`window.__card(%q)`, who), &c)
	return c
}

// waitCard waits for the card of a requester to satisfy a JavaScript
// condition on c (the card as cardJS reads it).
func (p *page) waitCard(what, who string, bound time.Duration, cond string) *cardSample {
	p.t.Helper()
	p.waitFor(what, bound, fmt.Sprintf(`(() => { const c = window.__card(%q); return !!c && (%s); })()`, who, cond))
	return p.card(who)
}

// The console, signed in with an operator token, follows a lease from a
// runtime download to a device, honestly: the strip lights each step as
// the daemon reports it, the download's bar only rises and shows a
// percentage only when one is known, a request waiting for another
// install has a bar with no number; the lease is counted down and
// leaves when released; a quarantined device and a failed request are
// shown with their reason and come back with Retry; the event list
// resumes across a daemon restart without a gap or a duplicate; a
// revoked token signs the page out. Each tab is saved as a screenshot.
func TestTheConsoleFollowsALeaseFromDownloadToReleaseAndRetriesWhatFailed(t *testing.T) {
	h := consoleHome(t)
	base := h.consoleURL()
	_, agent := h.token("agent", "an-agent")
	opsID, ops := h.token("operator", "console")
	p := newPage(t, base)

	// --- Sign-in: what each kind of token is told.
	p.open("/devices")
	p.signIn("slk_not-a-token-anyone-made")
	p.signInMessage("an unknown token is told it is unknown", "unknown or was revoked")
	p.signIn(agent)
	p.signInMessage("an agent token is told the console needs an operator token", "not an operator token")
	p.signIn(ops)
	p.waitFor("the console connected after an operator signed in", 10*time.Second,
		`document.querySelector('#status-box')?.dataset.state === 'connected'`)
	p.waitFor("the page stayed on /devices, the tab it was opened at", 5*time.Second,
		`location.pathname === '/devices' && document.querySelector('a[data-tab=devices]').classList.contains('tab-on')`)
	var stored bool
	p.must("read session storage", `sessionStorage.getItem('simlock.console.token') === `+strconv.Quote(ops), &stored)
	if !stored {
		t.Errorf("the token is not kept in the tab's session storage")
	}

	// --- A device to hold the only iOS running slot, so the download's
	// request waits in line once its runtime is in.
	blocker := parseGrant(t, h.must("the blocking lease", "lease", "--platform", "ios", "--agent-id", "blocker", "--detach", "--progress", "none").stdout)

	p.must("install the card reader", cardJS, nil)
	p.must("start sampling the cards", fmt.Sprintf(samplerJS, `['watched', 'second']`), nil)
	watched := h.start("lease", "--platform", "ios", "--os", "26.4", "--allow-download", "--agent-id", "watched", "--detach", "--progress", "none")
	p.waitCard("the watched request's card, downloading", "watched", 10*time.Second, `c.stage === 'downloading'`)

	// A second download on the platform waits for the first: its bar has
	// no number, for none is known.
	second := h.start("lease", "--platform", "ios", "--os", "27.0", "--allow-download", "--agent-id", "second", "--progress", "none")
	p.waitCard("the second request's card, waiting for the first install", "second", 10*time.Second,
		`c.stage === 'downloading' && !!c.bar && c.note.includes('waiting')`)
	p.waitCard("the watched download past 30%", "watched", 10*time.Second, `!!c.bar && c.bar.determinate && c.bar.value >= 30`)
	p.screenshot("devices")

	p.tab("waiting")
	p.waitFor("the Waiting tab: the watched request's row with a determinate bar and its percentage", 5*time.Second,
		`(() => { const r = document.querySelector('tr[data-requester="watched"]'); const b = r && r.querySelector('.bar');
		  return !!b && b.dataset.determinate === 'true' && r.querySelector('.pct').textContent === b.dataset.value + '%'; })()`)
	p.waitFor("the Waiting tab: the second request's row with a bar and no percentage", 5*time.Second,
		`(() => { const r = document.querySelector('tr[data-requester="second"]'); const b = r && r.querySelector('.bar');
		  return !!b && b.dataset.determinate === 'false' && !r.querySelector('.pct') && !/\d%/.test(r.textContent); })()`)
	p.screenshot("waiting")
	p.tab("devices")
	second.kill() // its requester leaves; the request ends
	p.waitFor("the second request's card gone once its requester left", 20*time.Second, `window.__card('second') === null`)

	// The download ends; the request waits in line behind the blocker.
	p.waitCard("the watched request queued after its download, its step lit", "watched", 20*time.Second, `c.lit === 'queued'`)
	p.waitFor("the queued step lit for over a second", 5*time.Second,
		`(() => { const q = (window.__samples.watched || []).filter(s => s.lit === 'queued'); return q.length > 0 && q[q.length-1].at - q[0].at > 1200; })()`)
	h.must("release the blocker", "release", blocker.Lease.ID)
	p.waitCard("the watched request booting, its step lit", "watched", 20*time.Second, `c.lit === 'booting'`)
	p.screenshot("devices-booting")
	p.waitCard("the watched request ready", "watched", 20*time.Second, `c.outcome === 'ready' && c.lit === 'ready'`)
	// The sampler runs on the page's own timer: it is stopped only once
	// it recorded the card ready too (the card stays ready for seconds).
	p.waitFor("the sampler's record of the card ready", 5*time.Second, `(window.__samples.watched || []).some(s => s.lit === 'ready')`)
	code, out := watched.wait(t, "the watched lease", 10*time.Second)
	if code != 0 {
		t.Fatalf("the watched lease exited %d:\n%s", code, out)
	}
	lease := parseGrant(t, out)
	var samples map[string][]cardSample
	p.must("stop sampling", `(() => { clearInterval(window.__sampler); return window.__samples; })()`, &samples)
	checkJourney(t, samples["watched"])
	checkWaitingBar(t, samples["second"])

	// --- Leases: the lease, counted down on the daemon's clock.
	p.tab("leases")
	row := fmt.Sprintf(`document.querySelector('tr[data-lease-id=%q]')`, lease.Lease.ID)
	p.waitFor("the watched lease listed under Leases, held by watched", 10*time.Second,
		fmt.Sprintf(`(() => { const r = %s; return !!r && r.querySelector('.holder').textContent === 'watched'; })()`, row))
	first := p.countdown(row)
	p.waitFor("the lease's countdown moved", 5*time.Second,
		fmt.Sprintf(`%s.querySelector('.countdown').textContent !== %q`, row, first.text))
	next := p.countdown(row)
	if next.left >= first.left || first.left > 15*time.Minute || first.left < 14*time.Minute {
		t.Errorf("expires-in went %q then %q: want a countdown from under the 15 min TTL, going down", first.text, next.text)
	}
	p.screenshot("leases")

	// --- A failed clean quarantines the device; Retry cleans it.
	h.must("inject a reclaim failure", "demo", "inject", lease.Device.ID, "reclaim-fail")
	h.must("release the watched lease", "release", lease.Lease.ID)
	p.waitFor("the released lease gone from Leases", 10*time.Second, row+` === null`)
	p.tab("attention")
	quarantined := fmt.Sprintf(`document.querySelector('tr[data-kind="device"][data-what="quarantined"][data-id=%q]')`, lease.Device.ID)
	p.waitFor("the quarantined device under Attention with why and Retry", 10*time.Second,
		fmt.Sprintf(`(() => { const r = %s; return !!r && r.querySelector('.why-cell').textContent.includes('clean failed') && !!r.querySelector('button[data-retry="device"]'); })()`, quarantined))
	p.waitFor("the Attention tab's badge counting it", 5*time.Second,
		`Number(document.querySelector('[data-count-for="attention"]').textContent) >= 1`)
	p.screenshot("attention")
	p.click("Retry on the quarantined device", fmt.Sprintf(`tr[data-kind="device"][data-id=%q] button[data-retry="device"]`, lease.Device.ID))
	p.waitFor("the retried device gone from Attention", 15*time.Second, quarantined+` === null`)
	p.tab("devices")
	p.waitFor("the retried device back in service (ready or shut down)", 10*time.Second,
		fmt.Sprintf(`['ready', 'shutdown'].includes(document.querySelector('.card[data-device-id=%q]:not(.card-journey)')?.dataset.state)`, lease.Device.ID))

	// --- A request whose boot fails: its card shows why, with no strip,
	// and Retry makes it again.
	h.must("inject a boot failure", "demo", "inject", blocker.Device.ID, "boot-fail")
	unlucky := h.start("lease", "--platform", "ios", "--os", "26.1", "--agent-id", "unlucky", "--detach", "--progress", "none")
	failed := p.waitCard("the unlucky request's card failed, with its reason and Retry", "unlucky", 20*time.Second,
		`c.outcome === 'failed' && c.reason !== '' && c.retry`)
	if failed.HasStrip {
		t.Errorf("a failed request's card draws a step strip; it should show only the reason")
	}
	if code, out := unlucky.wait(t, "the unlucky lease", 10*time.Second); code == 0 {
		t.Fatalf("the unlucky lease succeeded; its boot was to fail:\n%s", out)
	}
	p.screenshot("devices-failed")
	p.tab("attention")
	p.waitFor("the failed request under Attention with Retry", 10*time.Second,
		fmt.Sprintf(`!!document.querySelector('tr[data-kind="request"][data-id=%q] button[data-retry="request"]')`, failed.ID))
	p.click("Retry on the failed request", fmt.Sprintf(`tr[data-kind="request"][data-id=%q] button[data-retry="request"]`, failed.ID))
	p.waitFor("a notice naming the new request", 10*time.Second,
		fmt.Sprintf(`/Request %s retried as req_/.test(document.querySelector('#notices').textContent)`, failed.ID))
	p.waitFor("the failed request gone from Attention after its retry", 10*time.Second,
		fmt.Sprintf(`!document.querySelector('tr[data-kind="request"][data-id=%q]')`, failed.ID))
	p.tab("leases")
	p.waitFor("the retried request granted: a lease held by unlucky", 20*time.Second,
		`[...document.querySelectorAll('tr[data-lease-id] .holder')].some(td => td.textContent === 'unlucky')`)

	// --- Workers: this daemon's own card.
	p.tab("workers")
	p.waitFor("the daemon's card with its health and running slots", 5*time.Second,
		`(() => { const c = document.querySelector('.card-worker'); return !!c && /Health\s*running/.test(c.innerText) && /Running\s*\d+\/3/.test(c.innerText); })()`)
	p.screenshot("workers")
	p.click("this daemon's page", ".card-worker h3 a")
	p.waitFor("this daemon's page with its devices, lease and catalog", 10*time.Second,
		`location.pathname.startsWith('/workers/') && document.querySelectorAll('table.devices tr[data-device-id]').length >= 2 &&
		 document.querySelectorAll('table.leases tr[data-lease-id]').length === 1 && document.querySelectorAll('table.catalog tr').length > 1`)
	p.screenshot("worker")

	// --- Events: newest first, each once, filtered by kind.
	p.tab("events")
	p.waitFor("events listed", 5*time.Second, `document.querySelectorAll('tr[data-event-id]').length > 10`)
	var seqs []int64
	p.must("read the events' seqs", `[...document.querySelectorAll('tr[data-event-id]')].map(r => Number(r.dataset.seq))`, &seqs)
	if !slices.IsSortedFunc(seqs, func(a, b int64) int { return int(b - a) }) || len(slices.Compact(slices.Clone(seqs))) != len(seqs) {
		t.Errorf("the Events tab's seqs are %v: want newest first, each once", seqs)
	}
	for _, k := range []string{"leases", "workers", "components", "other"} {
		p.click("the "+k+" filter", fmt.Sprintf(`input[data-kind=%q]`, k))
	}
	p.waitFor("only device events left, the filter in the URL", 5*time.Second,
		`location.search.includes('only=devices') && [...document.querySelectorAll('tr[data-event-id]')].every(r => r.dataset.event.startsWith('device.')) && document.querySelectorAll('tr[data-event-id]').length > 0`)
	p.screenshot("events")
	p.click("the leases filter back on", `input[data-kind="leases"]`)

	// --- The stream resumes across a daemon restart: the events of the
	// gap are filled in from the last seq seen, none twice.
	p.tab("devices")
	h.must("stop the daemon", "daemon", "stop")
	p.waitFor("the status box saying it reconnects, with the data's age", 10*time.Second,
		`/^Reconnecting — data from \d+ s ago$/.test(document.querySelector('#status-box').textContent)`)
	gap := parseGrant(t, h.must("a lease while the page is away (it starts the daemon again)", "lease", "--platform", "android", "--agent-id", "in-the-gap", "--detach", "--progress", "none").stdout)
	p.waitFor("connected again", 30*time.Second, `document.querySelector('#status-box').dataset.state === 'connected'`)
	p.waitFor("the gap's lease.granted in the page's events", 10*time.Second,
		fmt.Sprintf(`window.simlockConsole.store.events.list.some(e => e.event === 'lease.granted' && e.payload.leaseId === %q)`, gap.Lease.ID))
	checkNoGap(t, p, base, ops)

	// --- Revoking the token signs the page out at its next call.
	h.must("revoke the console's token", "token", "revoke", opsID)
	h.must("a lease, so the page reads the daemon", "lease", "--platform", "android", "--agent-id", "after-revoke", "--detach", "--progress", "none")
	p.signInMessage("the page signed out once its token was revoked", "revoked")
	var kept bool
	p.must("read session storage", `sessionStorage.getItem('simlock.console.token') !== null`, &kept)
	if kept {
		t.Errorf("the revoked token is still in session storage")
	}

	// --- A daemon that is not there.
	_, ops2 := h.token("operator", "console-2")
	h.must("stop the daemon", "daemon", "stop")
	p.signIn(ops2)
	p.signInMessage("a sign-in with no daemon is told it did not answer", "did not answer")
}

// countdown is a lease's expires-in, as shown and as a duration.
type countdownText struct {
	text string
	left time.Duration
}

var countdownRE = regexp.MustCompile(`^(?:(\d+)m )?(\d+)s$`)

func (p *page) countdown(row string) countdownText {
	p.t.Helper()
	var s string
	p.must("read the countdown", row+`.querySelector('.countdown').textContent`, &s)
	m := countdownRE.FindStringSubmatch(s)
	if m == nil {
		p.t.Fatalf("expires-in reads %q: want a countdown such as 14m 58s", s)
	}
	mins, _ := strconv.Atoi(m[1])
	secs, _ := strconv.Atoi(m[2])
	return countdownText{s, time.Duration(mins)*time.Minute + time.Duration(secs)*time.Second}
}

// checkJourney checks what the watched request's card showed, sample by
// sample: the steps it lit, in the daemon's order (its runtime is
// downloaded before it joins the line); each lit for at least about the
// second a step must last to light; a bar only while downloading, a
// number on it only when determinate, never going down, rising through
// several values, with the size downloaded under it; nothing of the
// download left once the stage moved on.
func checkJourney(t *testing.T, samples []cardSample) {
	t.Helper()
	if len(samples) < 50 {
		t.Fatalf("only %d samples of the watched card", len(samples))
	}
	var lit []string
	first, last := map[string]float64{}, map[string]float64{}
	for _, s := range samples {
		if s.Lit == "" {
			continue
		}
		if len(lit) == 0 || lit[len(lit)-1] != s.Lit {
			lit = append(lit, s.Lit)
		}
		if _, ok := first[s.Lit]; !ok {
			first[s.Lit] = s.At
		}
		last[s.Lit] = s.At
	}
	want := []string{"downloading", "queued", "provisioning", "booting", "ready"}
	if !slices.Equal(lit, want) {
		t.Errorf("the strip lit %v, want %v", lit, want)
	}
	// Each of these stages lasts 2 s or more, so its step is lit for a
	// second or more: a step lit for less flashed.
	for _, step := range want[:len(want)-1] {
		if d := last[step] - first[step]; d < 500 {
			t.Errorf("the %s step was lit for %.0f ms: a step lights once its stage lasted a second, and stays lit while it lasts", step, d)
		}
	}
	var values []float64
	sawDetail := false
	for i, s := range samples {
		if s.Bar == nil {
			if s.Pct != "" || s.Detail != "" {
				t.Errorf("sample %d (%s): no bar, but a percentage %q or detail %q", i, s.Stage, s.Pct, s.Detail)
			}
			continue
		}
		if s.Stage != "downloading" {
			t.Errorf("sample %d: a bar in stage %s", i, s.Stage)
		}
		if !s.Bar.Determinate {
			if s.Pct != "" || s.Bar.Value != nil {
				t.Errorf("sample %d: an indeterminate bar shows %q (value %v): no number is known", i, s.Pct, s.Bar.Value)
			}
			continue
		}
		if s.Bar.Value == nil || s.Pct != fmt.Sprintf("%d%%", int(*s.Bar.Value)) {
			t.Errorf("sample %d: a determinate bar with value %v shows %q", i, s.Bar.Value, s.Pct)
			continue
		}
		if n := len(values); n > 0 && *s.Bar.Value < values[n-1] {
			t.Errorf("sample %d: the bar went down from %.0f%% to %.0f%%", i, values[n-1], *s.Bar.Value)
		}
		values = append(values, *s.Bar.Value)
		if regexp.MustCompile(`^[\d.]+ (?:[KMG]i)?B of [\d.]+ GiB$`).MatchString(s.Detail) {
			sawDetail = true
		}
	}
	if len(slices.Compact(slices.Clone(values))) < 3 {
		t.Errorf("the bar showed %v: want it rising through at least three values", slices.Compact(slices.Clone(values)))
	}
	if !sawDetail {
		t.Errorf("no sample showed the size downloaded (\"2.0 GiB of 8.0 GiB\") under the bar")
	}
}

// checkWaitingBar checks the second request's card while it waited for
// the first install: a bar with no number, ever.
func checkWaitingBar(t *testing.T, samples []cardSample) {
	t.Helper()
	n := 0
	for i, s := range samples {
		if s.Bar == nil {
			continue
		}
		n++
		if s.Bar.Determinate || s.Pct != "" || s.Bar.Value != nil {
			t.Errorf("sample %d of the waiting request: a bar determinate %v with value %v, percentage %q; no percentage is known while it waits", i, s.Bar.Determinate, s.Bar.Value != nil, s.Pct)
		}
	}
	if n < 3 {
		t.Errorf("only %d samples of the waiting request's bar", n)
	}
}

// checkNoGap compares the page's events with the daemon's: every event
// the daemon stored after the first the page holds is in the page, and
// the page holds each id once.
func checkNoGap(t *testing.T, p *page, base, secret string) {
	t.Helper()
	var page []struct {
		ID  string `json:"id"`
		Seq int64  `json:"seq"`
	}
	p.must("read the page's events", `window.simlockConsole.store.events.list.map(e => ({id: e.id, seq: e.seq}))`, &page)
	req, _ := http.NewRequest(http.MethodGet, base+"/v1/events?limit=10000", nil)
	req.Header.Set("Authorization", "Bearer "+secret)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var stored struct {
		Events []struct {
			ID  string `json:"id"`
			Seq int64  `json:"seq"`
		} `json:"events"`
	}
	if resp.StatusCode != 200 || json.Unmarshal(b, &stored) != nil {
		t.Fatalf("GET /v1/events = %d %s", resp.StatusCode, b)
	}
	have := map[string]int{}
	for _, e := range page {
		have[e.ID]++
	}
	for id, n := range have {
		if n > 1 {
			t.Errorf("the page holds event %s %d times", id, n)
		}
	}
	if len(page) == 0 {
		t.Fatal("the page holds no events")
	}
	var missing []string
	for _, e := range stored.Events {
		if e.Seq >= page[0].Seq && have[e.ID] == 0 {
			missing = append(missing, fmt.Sprintf("%d %s", e.Seq, e.ID))
		}
	}
	if len(missing) > 0 {
		t.Errorf("after the reconnect the page lacks %d stored events: %s", len(missing), strings.Join(missing, ", "))
	}
}
