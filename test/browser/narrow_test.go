package browser

import (
	"fmt"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// At 420 px (a phone) no tab scrolls sideways; the Devices heading counts
// the cards under it; an HTTP agent is named by its token's label; sizes
// are in one unit system (GiB).
func TestTheConsoleAtAPhonesWidthFitsCountsItsCardsNamesHTTPAgentsAndSaysGiB(t *testing.T) {
	f := newFakeDaemon(t)
	st := fakeStatus(10, 2)
	// One lease held by an HTTP agent: its requester id is its token's id.
	leases := st["leases"].([]any)
	leases[0].(map[string]any)["requesterId"] = "tok_0123456789abcdef"
	st["host"] = map[string]any{"os": "linux", "arch": "amd64", "cpus": 2, "ramBytes": 16 << 30}
	f.status = st
	// A request that timed out after its 1 s timeoutMs.
	f.failed = []map[string]any{{"id": "req_timedout00000001", "state": "failed", "requesterId": "hasty",
		"requestSpec": map[string]any{"platform": "ios"}, "waitPolicy": map[string]any{"timeoutMs": 1000, "ttlMs": 900000},
		"error": map[string]any{"code": "QUEUE_TIMEOUT", "message": "no device within 1 s"}, "settledAt": time.Now().UnixMilli()}}
	p := newPage(t, f.srv.URL)
	p.do("narrow the page to 420 px", chromedp.EmulateViewport(420, 900))
	p.open("/devices")
	p.signIn(fakeOperator)
	p.waitFor("the device cards", 10*time.Second, `document.querySelectorAll('.card').length > 0`)

	var count struct {
		Head    string `json:"head"`
		Devices int    `json:"devices"`
	}
	p.must("read the Devices heading and its cards", `(() => {
	  const head = [...document.querySelectorAll('h2')].find(e => e.textContent.startsWith('Devices ('));
	  return { head: head ? head.textContent : '', devices: document.querySelectorAll('article.card:not(.card-journey)').length };
	})()`, &count)
	if want := fmt.Sprintf("Devices (%d)", count.Devices); count.Head != want {
		t.Errorf("the Devices heading says %q over %d device cards, want %q", count.Head, count.Devices, want)
	}

	// Each tab with what it draws once its reads are in.
	tabs := [][2]string{
		{"devices", `document.querySelectorAll('article.card').length > 0`},
		{"leases", `document.querySelectorAll('tr[data-lease-id]').length > 0`},
		{"waiting", `document.querySelectorAll('tr[data-request-id]').length > 0`},
		{"attention", `document.querySelectorAll('tr[data-what]').length > 0`},
		{"events", `document.querySelector('.tab-on')?.dataset.tab === 'events'`},
		{"workers", `document.querySelectorAll('main tr, main article').length > 0`},
		{"workers/ins_fake", `document.body.textContent.includes('GiB')`},
	}
	for _, tc := range tabs {
		tab := tc[0]
		p.open("/" + tab)
		p.waitFor("the "+tab+" tab drawn", 10*time.Second, tc[1])
		var wide struct {
			Scroll int    `json:"scroll"`
			Client int    `json:"client"`
			Widest string `json:"widest"`
		}
		p.must("measure "+tab, `(() => {
		  const d = document.documentElement;
		  let widest = '', w = d.clientWidth;
		  for (const e of document.body.querySelectorAll('*')) {
		    const r = e.getBoundingClientRect();
		    if (r.right > w + 1) { w = r.right; widest = e.tagName.toLowerCase() + (e.className ? '.' + String(e.className).split(' ').join('.') : ''); }
		  }
		  return { scroll: d.scrollWidth, client: d.clientWidth, widest };
		})()`, &wide)
		if wide.Scroll > wide.Client {
			t.Errorf("at 420 px the %s tab scrolls sideways: %d px wide in %d (widest: %s)", tab, wide.Scroll, wide.Client, wide.Widest)
		}
	}

	p.open("/leases")
	p.waitFor("the HTTP agent named by its token's label", 10*time.Second,
		`[...document.querySelectorAll('td.holder')].some(e => e.textContent === 'ci-runner-7' && e.title === 'tok_0123456789abcdef')`)
	p.open("/workers/ins_fake")
	p.waitFor("the host's RAM in GiB", 10*time.Second, `document.body.textContent.includes('16.0 GiB')`)

	// Its retry waits the same 1 s again, and the page says so.
	p.open("/attention")
	p.waitFor("the timed-out request under Attention with Retry", 10*time.Second,
		`!!document.querySelector('tr[data-kind="request"][data-id="req_timedout00000001"] button[data-retry="request"]')`)
	p.click("Retry on the timed-out request", `tr[data-kind="request"][data-id="req_timedout00000001"] button[data-retry="request"]`)
	p.waitFor("a notice saying the retry waits its 1 s timeout again", 10*time.Second,
		`/retried as req_timedout00000001_again, waiting up to 1\.0 s again, the timeout it was made with/.test(document.querySelector('#notices').textContent)`)

	var gb bool
	p.must("look for GB", `/\d GB\b/.test(document.body.textContent)`, &gb)
	if gb {
		t.Errorf("the page says GB beside GiB")
	}
}
