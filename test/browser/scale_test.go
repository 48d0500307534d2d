package browser

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

// How long drawing a tab may take with 500 devices and 10,000 events: a
// tenth of a second is what a person notices; the bound leaves room for a
// busy CI machine.
const drawBound = 250 * time.Millisecond

// With 500 devices and a burst of 10,000 events the console keeps up: it
// takes the burst within seconds, keeps the newest 10,000 events, reads
// each route again a few times rather than once an event, and draws any
// tab in a fraction of a second, a page at a time.
func TestTheConsoleStaysFastWithFiveHundredDevicesAndTenThousandEvents(t *testing.T) {
	f := newFakeDaemon(t)
	f.status = fakeStatus(500, 40)
	f.addEvents(1000, false)
	p := newPage(t, f.srv.URL)
	p.open("/devices")
	p.signIn(fakeOperator)
	p.waitFor("the Devices tab counting 500 devices", 10*time.Second,
		`document.querySelector('[data-count-for="devices"]')?.textContent === '500'`)
	p.waitFor("connected", 10*time.Second, `document.querySelector('#status-box').dataset.state === 'connected'`)

	before := f.hit("/v1/status")
	start := time.Now()
	f.addEvents(10000, true)
	p.waitFor("the page holding the newest 10,000 of 11,000 events", 30*time.Second,
		`(() => { const e = window.simlockConsole.store.events; return e.size === 10000 && e.lastSeq === 11000 && e.list[0].seq === 1001; })()`)
	took := time.Since(start)
	reads := f.hit("/v1/status") - before
	t.Logf("a burst of 10,000 events taken in %s, with %d reads of /v1/status", took.Round(time.Millisecond), reads)
	if took > 10*time.Second {
		t.Errorf("the page took %s to take 10,000 events", took)
	}
	if reads > 30 {
		t.Errorf("10,000 events made %d reads of /v1/status: a route has one read in flight at a time, so a burst costs a few", reads)
	}

	var times map[string]float64
	p.must("time the drawing of each tab", `(() => {
	  const app = window.simlockConsole, out = {};
	  const draw = (name, url) => { history.pushState(null, '', url); const t0 = performance.now(); app.render(); out[name] = performance.now() - t0; };
	  for (const tab of ['workers', 'devices', 'leases', 'waiting', 'attention', 'events']) { draw(tab, '/' + tab); draw(tab + ' again', '/' + tab); }
	  draw('events, devices only', '/events?only=devices');
	  draw('events, page 100 of 25', '/events?page=100&size=25');
	  draw('devices, page 5 of 100', '/devices?page=5&size=100');
	  return out;
	})()`, &times)
	names := make([]string, 0, len(times))
	for k := range times {
		names = append(names, k)
	}
	slices.Sort(names)
	var lines []string
	for _, k := range names {
		lines = append(lines, fmt.Sprintf("%s %.1f ms", k, times[k]))
		if d := time.Duration(times[k] * float64(time.Millisecond)); d > drawBound {
			t.Errorf("drawing %s took %s, over %s", k, d.Round(time.Millisecond), drawBound)
		}
	}
	t.Logf("drawing times: %s", strings.Join(lines, "; "))

	// What needs attention: the RAM over budget, the stalled and the
	// quarantined devices; a Retry the daemon refuses says why.
	p.open("/attention")
	p.waitFor("the RAM budget, stalled and quarantined devices under Attention", 10*time.Second,
		`['over RAM budget', 'stalled', 'quarantined'].every(w => !!document.querySelector('tr[data-what="' + w + '"]'))`)
	p.click("Retry on a quarantined device", `tr[data-what="quarantined"] button[data-retry="device"]`)
	p.waitFor("the daemon's refusal shown beside Retry", 10*time.Second,
		`[...document.querySelectorAll('.retry-msg.err')].some(m => m.textContent.includes('only a quarantined device can be retried'))`)

	// The page of devices is in the URL, and the tab draws that page only.
	p.open("/devices?page=2&size=25")
	p.waitFor("page 2 of 25 cards, said by the pager", 10*time.Second,
		`(() => { const w = document.querySelector('.pager-where'); return !!w && w.textContent.startsWith('26–50 of ') && document.querySelectorAll('.view[data-view=devices] .card').length === 25; })()`)
	p.click("the next page", `.pager button:nth-of-type(2)`)
	p.waitFor("page 3 in the URL", 5*time.Second, `location.search === '?page=3&size=25' && document.querySelector('.pager-where').textContent.startsWith('51–75 of ')`)
}

// Until the daemon has started the sign-in says so and waits; once in,
// the status box says so whenever the daemon is starting again.
func TestTheConsoleWaitsForADaemonThatIsStarting(t *testing.T) {
	f := newFakeDaemon(t)
	f.status = fakeStatus(3, 0)
	f.starting = 3
	p := newPage(t, f.srv.URL)
	p.open("/")
	p.signIn(fakeOperator)
	p.signInMessage("the sign-in saying the daemon is still starting", "still starting")
	p.waitFor("the console open once the daemon runs", 10*time.Second,
		`document.querySelector('#status-box')?.dataset.state === 'connected'`)
	f.mu.Lock()
	f.starting = 1 << 30
	f.mu.Unlock()
	f.addEvents(1, true)
	p.waitFor("the status box saying the daemon is starting", 10*time.Second,
		`document.querySelector('#status-box').textContent === 'Daemon starting'`)
	f.mu.Lock()
	f.starting = 0
	f.mu.Unlock()
	p.waitFor("connected again once it runs", 10*time.Second,
		`document.querySelector('#status-box').textContent === 'Connected'`)
}

// A hidden tab stops its stream and its reads; shown again, it resumes
// the stream from the last event it had, and the events it missed (sent
// twice here, replayed and pushed) are kept once each.
func TestAHiddenTabPausesAndCatchesUpWhenShown(t *testing.T) {
	f := newFakeDaemon(t)
	f.status = fakeStatus(3, 0)
	f.addEvents(10, false)
	p := newPage(t, f.srv.URL)
	p.open("/events")
	p.signIn(fakeOperator)
	p.waitFor("connected with 10 events", 10*time.Second,
		`document.querySelector('#status-box')?.dataset.state === 'connected' && window.simlockConsole.store.events.size === 10`)
	p.must("hide the tab", `(() => {
	  Object.defineProperty(document, 'visibilityState', { configurable: true, get: () => 'hidden' });
	  document.dispatchEvent(new Event('visibilitychange')); return true; })()`, nil)
	p.waitFor("the status box saying the page is paused", 5*time.Second,
		`document.querySelector('#status-box').dataset.state === 'paused'`)
	deadline := time.Now().Add(5 * time.Second)
	for f.openStreams() > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("the hidden tab still has its event stream open 5s later")
		}
		time.Sleep(pollEvery)
	}
	reads := f.hit("/v1/status") + f.hit("/v1/workers") + f.hit("/v1/lease-requests") + f.hit("/v1/events/stream")
	f.addEvents(3, true) // stored, and queued for the next stream too
	p.must("let the hidden page be for 2 s", `new Promise(r => setTimeout(() => r(true), 2000))`, nil)
	if now := f.hit("/v1/status") + f.hit("/v1/workers") + f.hit("/v1/lease-requests") + f.hit("/v1/events/stream"); now != reads {
		t.Errorf("the hidden tab made %d reads", now-reads)
	}
	p.must("show the tab", `(() => {
	  Object.defineProperty(document, 'visibilityState', { configurable: true, get: () => 'visible' });
	  document.dispatchEvent(new Event('visibilitychange')); return true; })()`, nil)
	p.waitFor("connected again with the 3 events it missed, each once", 10*time.Second,
		`document.querySelector('#status-box').dataset.state === 'connected' && window.simlockConsole.store.events.size === 13 && document.querySelectorAll('tr[data-event-id]').length === 13`)
	f.mu.Lock()
	ids := slices.Clone(f.lastEventIDs)
	f.mu.Unlock()
	if len(ids) < 2 || ids[len(ids)-1] != "10" {
		t.Errorf("the streams were opened with Last-Event-ID %q: want the last one resumed after seq 10", ids)
	}
}
