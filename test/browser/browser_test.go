package browser

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
)

// The viewport every page is drawn in, and every screenshot's size.
const viewWidth, viewHeight = 1280, 800

// pollEvery is how often a wait looks at the page again.
const pollEvery = 100 * time.Millisecond

// page is one browser tab on the console, with what it reported: its
// uncaught exceptions and the policy violations the browser logged.
type page struct {
	t    *testing.T
	ctx  context.Context
	base string

	mu       sync.Mutex
	problems []string
}

// newPage starts a headless chromium with a fresh profile, with no
// network of its own to reach (no QUIC, no background fetches, no
// component or sync updates), and opens a tab. Its cleanup closes it and
// fails the test if the page threw or broke its policy.
func newPage(t *testing.T, base string) *page {
	t.Helper()
	exe := chromiumPath(t)
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(exe),
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(viewWidth, viewHeight),
	)
	actx, acancel := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	p := &page{t: t, ctx: ctx, base: base}
	t.Cleanup(func() {
		cancel()
		acancel()
		p.mu.Lock()
		defer p.mu.Unlock()
		if len(p.problems) > 0 {
			t.Errorf("the page reported %d problems:\n%s", len(p.problems), strings.Join(p.problems, "\n"))
		}
	})
	// The first call starts the browser and binds its life to the
	// context it is given: the tab's own, with no bound.
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(viewWidth, viewHeight)); err != nil {
		t.Fatalf("start chromium (%s): %v", exe, err)
	}
	// Every request the page makes must go to the page's own origin.
	requests := chromedp.Events(ctx, network.RequestWillBeSent)
	go func() {
		for ev, err := range requests {
			if err != nil {
				return
			}
			u := ev.Request.URL
			if !strings.HasPrefix(u, base+"/") && u != base && !strings.HasPrefix(u, "data:") {
				p.mu.Lock()
				p.problems = append(p.problems, "a request to another origin: "+u)
				p.mu.Unlock()
			}
		}
	}()
	messages := chromedp.Console(ctx)
	go func() {
		for m, err := range messages {
			if err != nil {
				return
			}
			if bad := problem(m); bad != "" {
				p.mu.Lock()
				p.problems = append(p.problems, bad)
				p.mu.Unlock()
			}
		}
	}()
	return p
}

// problem says what is wrong with a console message, or "" when nothing
// is: an exception, a policy violation or an error the page wrote. An
// error status of a call is not one (the sign-in tries tokens that are
// refused, and a stopped daemon refuses everything).
func problem(m chromedp.ConsoleMessage) string {
	switch {
	case m.IsException():
		return fmt.Sprintf("exception at %s:%d: %s", m.URL, m.Line+1, m.Text)
	case strings.Contains(m.Text, "Content Security Policy") || strings.Contains(m.Text, "Content-Security-Policy"):
		return "policy violation: " + m.Text
	case m.Source == "network":
		return ""
	case m.Type == "error" && m.Source == "":
		return "console.error: " + m.Text
	}
	return ""
}

// do runs actions with a bound, failing the test naming what it was.
func (p *page) do(what string, steps ...chromedp.Action[chromedp.Void]) {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, 30*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		p.t.Fatalf("%s: %v", what, err)
	}
}

// open loads a path of the console.
func (p *page) open(path string) {
	p.t.Helper()
	p.do("open "+path, chromedp.Navigate(p.base+path))
}

// eval runs a JavaScript expression (awaiting a promise) and decodes its
// JSON value into out (nil: ignored).
func (p *page) eval(js string, out any) error {
	ctx, cancel := context.WithTimeout(p.ctx, 20*time.Second)
	defer cancel()
	raw, err := chromedp.Run(ctx, chromedp.Evaluate[[]byte](js, chromedp.EvalAwaitPromise))
	if err != nil {
		return err
	}
	if out == nil {
		return nil
	}
	return json.Unmarshal(raw, out)
}

// must evaluates js, failing the test naming what for.
func (p *page) must(what, js string, out any) {
	p.t.Helper()
	if err := p.eval(js, out); err != nil {
		p.t.Fatalf("%s: %v", what, err)
	}
}

// waitFor polls js until it returns true, for at most bound; past it the
// test fails saying what did not show, and what the page showed instead.
func (p *page) waitFor(what string, bound time.Duration, js string) {
	p.t.Helper()
	p.poll(what, bound, js, nil)
}

// poll evaluates js until it returns true, running between (when set)
// after each check that did not hold, and fails the test past the bound.
func (p *page) poll(what string, bound time.Duration, js string, between func()) {
	p.t.Helper()
	deadline := time.Now().Add(bound)
	var lastErr error
	for {
		var ok bool
		err := p.eval(js, &ok)
		if err == nil && ok {
			return
		}
		lastErr = err
		if time.Now().After(deadline) {
			p.t.Fatalf("%s: not seen within %s (last check: %v)\nthe page showed:\n%s", what, bound, lastErr, p.shows())
		}
		if between != nil {
			between()
		}
		time.Sleep(pollEvery)
	}
}

// waitValue polls js until it returns a value other than null, decodes
// it into out, and fails the test like waitFor past the bound.
func (p *page) waitValue(what string, bound time.Duration, js string, out any) {
	p.t.Helper()
	deadline := time.Now().Add(bound)
	for {
		var raw json.RawMessage
		err := p.eval(js, &raw)
		if err == nil && len(raw) > 0 && string(raw) != "null" {
			if err := json.Unmarshal(raw, out); err != nil {
				p.t.Fatalf("%s: %v: %s", what, err, raw)
			}
			return
		}
		if time.Now().After(deadline) {
			p.t.Fatalf("%s: not seen within %s (last check: %v)\nthe page showed:\n%s", what, bound, err, p.shows())
		}
		time.Sleep(pollEvery)
	}
}

// shows is the page's text as a person would read it, cut short: what a
// failed wait reports.
func (p *page) shows() string {
	var s string
	if err := p.eval(`(document.body ? document.body.innerText : '') + '\n[url ' + location.pathname + location.search + ']'`, &s); err != nil {
		return fmt.Sprintf("(could not read the page: %v)", err)
	}
	if len(s) > 3000 {
		s = s[:3000] + "…"
	}
	return s
}

// click clicks the first element matching a CSS selector, as a person
// would, and fails naming what when there is none.
func (p *page) click(what, selector string) {
	p.t.Helper()
	var found bool
	p.must("look for "+what, fmt.Sprintf(`!!document.querySelector(%q)`, selector), &found)
	if !found {
		p.t.Fatalf("%s: no element matches %s\nthe page showed:\n%s", what, selector, p.shows())
	}
	p.do("click "+what, chromedp.Click(chromedp.CSS(selector)))
}

// clickUntil clicks the element selector finds until js holds, and fails
// the test like waitFor past the bound. A page that redraws the view under
// the click (as it does when it reconnects and reads everything again)
// may drop one; the next poll clicks the element drawn since. Clicks are a
// second apart, so a slow navigation is not clicked over.
func (p *page) clickUntil(what, selector string, bound time.Duration, js string) {
	p.t.Helper()
	var clickedAt time.Time
	p.poll(what, bound, js, func() {
		if time.Since(clickedAt) < time.Second {
			return
		}
		var clicked bool
		_ = p.eval(fmt.Sprintf(`(() => { const e = document.querySelector(%q); if (!e) return false; e.click(); return true; })()`, selector), &clicked)
		if clicked {
			clickedAt = time.Now()
		}
	})
}

// tab follows a tab's link in the page.
func (p *page) tab(name string) {
	p.t.Helper()
	p.click("the "+name+" tab", fmt.Sprintf(`nav.tabs a[data-tab=%q]`, name))
	p.waitFor("the "+name+" tab drawn", 5*time.Second, fmt.Sprintf(`location.pathname === '/%s' && !!document.querySelector('.view[data-view=%q]')`, name, name))
}

// signIn types a secret into the sign-in form and sends it.
func (p *page) signIn(secret string) {
	p.t.Helper()
	p.waitFor("the sign-in form", 10*time.Second, `!!document.querySelector('#token')`)
	p.must("clear the token field", `(() => { const i = document.querySelector('#token'); i.value = ''; return true; })()`, nil)
	p.do("type the token", chromedp.SendKeys(chromedp.CSS("#token"), secret))
	p.click("the sign-in button", "#signin")
}

// signInMessage waits for the sign-in form to say something containing
// want.
func (p *page) signInMessage(what, want string) {
	p.t.Helper()
	p.waitFor(what, 10*time.Second, fmt.Sprintf(`(() => { const m = document.querySelector('#signin-msg'); return !!m && m.textContent.includes(%q); })()`, want))
}

var shots atomic.Int64

var shotDirOnce sync.Once
var shotDirPath string

// screenshotDir is where screenshots go: SIMLOCK_SCREENSHOTS, or a folder
// made under the system's temporary directory for this run.
func screenshotDir() string {
	shotDirOnce.Do(func() {
		if d := os.Getenv("SIMLOCK_SCREENSHOTS"); d != "" {
			shotDirPath = d
			return
		}
		d, err := os.MkdirTemp("", "simlock-console-screenshots-")
		if err == nil {
			shotDirPath = d
		}
	})
	return shotDirPath
}

func screenshotsTaken() int64 { return shots.Load() }

// screenshot saves the viewport (1280×800) as <name>.png in the
// screenshot folder.
func (p *page) screenshot(name string) {
	p.t.Helper()
	dir := screenshotDir()
	if dir == "" {
		p.t.Fatalf("no folder for screenshots")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		p.t.Fatal(err)
	}
	// Let the last render land before the picture.
	p.must("wait a frame", `new Promise(r => requestAnimationFrame(() => requestAnimationFrame(() => r(true))))`, nil)
	ctx, cancel := context.WithTimeout(p.ctx, 20*time.Second)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	if err != nil {
		p.t.Fatalf("screenshot %s: %v", name, err)
	}
	path := filepath.Join(dir, name+".png")
	if err := os.WriteFile(path, png, 0o644); err != nil {
		p.t.Fatal(err)
	}
	shots.Add(1)
	p.t.Logf("screenshot %s", path)
}
