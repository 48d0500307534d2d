package ios

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/simlock/simlock/internal/appbundle/apptest"
	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/driver"
)

// Each device tool is one simctl call on the leased device, scoped to the
// root, every value one argument: the exact argv is what the test checks.
func TestDeviceToolsRunOneScopedSimctlCallEach(t *testing.T) {
	h := newHarness(t)
	dev := h.boot(t, h.provision(t, "iPhone 16", "18.6"))
	h.install(t, dev, apptest.IPA("com.example.Todo", "Todo"))
	ctx := t.Context()
	type step struct {
		name string
		run  func() error
		want []string
	}
	var launched contract.AppLaunchResult
	var logs contract.DeviceLogs
	for _, s := range []step{
		{"launch", func() (err error) {
			launched, err = h.d.LaunchApp(ctx, dev, "com.example.Todo", []string{"-Flag", "a b;$(id)"})
			return err
		}, []string{"launch", dev.ID, "com.example.Todo", "-Flag", "a b;$(id)"}},
		{"terminate", func() error { return h.d.TerminateApp(ctx, dev, "com.example.Todo") }, []string{"terminate", dev.ID, "com.example.Todo"}},
		{"terminate again", func() error { return h.d.TerminateApp(ctx, dev, "com.example.Todo") }, []string{"terminate", dev.ID, "com.example.Todo"}},
		{"openurl", func() error { return h.d.OpenURL(ctx, dev, "myapp://item/1?x=';reboot'") }, []string{"openurl", dev.ID, "myapp://item/1?x=';reboot'"}},
		{"location", func() error { return h.d.SetLocation(ctx, dev, 37.3349, -122.009) }, []string{"location", dev.ID, "set", "37.3349,-122.009"}},
		{"appearance", func() error { return h.d.SetAppearance(ctx, dev, contract.AppearanceDark) }, []string{"ui", dev.ID, "appearance", "dark"}},
		{"logs", func() (err error) {
			logs, err = h.d.DeviceLogs(ctx, dev, driver.LogQuery{Lines: 2, Since: 90 * time.Second, Process: "SpringBoard"})
			return err
		}, []string{"spawn", dev.ID, "log", "show", "--style", "compact", "--last", "2m", "--predicate", `process == "SpringBoard"`}},
		{"logs by default", func() (err error) {
			_, err = h.d.DeviceLogs(ctx, dev, driver.LogQuery{Lines: 5})
			return err
		}, []string{"spawn", dev.ID, "log", "show", "--style", "compact", "--last", "10m"}},
	} {
		from := len(h.env.Calls(t))
		if err := s.run(); err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		calls := h.simctlCalls(t, from)
		if len(calls) != 1 || !slices.Equal(calls[0].Args[3:], s.want) {
			var got [][]string
			for _, c := range calls {
				got = append(got, c.Args)
			}
			t.Errorf("%s: calls %q, want one: simctl --set %s %q", s.name, got, h.root, s.want)
		}
	}
	if launched.AppID != "com.example.Todo" || launched.PID == 0 {
		t.Errorf("launch answered %+v, want the app and its pid", launched)
	}
	if len(logs.Lines) != 2 || !strings.Contains(logs.Lines[1], "line 3 of "+dev.ID) || strings.HasPrefix(logs.Lines[0], "Timestamp") {
		t.Errorf("logs answered %q, want the last 2 lines without the header", logs.Lines)
	}
}

func TestLaunchingAnAppNotInstalledIsTyped(t *testing.T) {
	h := newHarness(t)
	dev := h.boot(t, h.provision(t, "iPhone 16", "18.6"))
	_, err := h.d.LaunchApp(t.Context(), dev, "com.example.absent", nil)
	var missing *driver.AppNotInstalledError
	if !errors.As(err, &missing) || missing.ID != "com.example.absent" {
		t.Fatalf("got %v, want *AppNotInstalledError", err)
	}
	if code := driver.ContractError(err).Code; code != contract.CodeAppNotInstalled {
		t.Errorf("code %s, want APP_NOT_INSTALLED", code)
	}
}

// An id that is no bundle id never reaches simctl.
func TestAnIDThatIsNoBundleIDRunsNothing(t *testing.T) {
	h := newHarness(t)
	dev := h.boot(t, h.provision(t, "iPhone 16", "18.6"))
	from := len(h.env.Calls(t))
	for _, id := range []string{"com.example_app", "--console", ""} {
		if _, err := h.d.LaunchApp(t.Context(), dev, id, nil); contract.AsError(err).Code != contract.CodeBadRequest {
			t.Errorf("launch %q: got %v, want BAD_REQUEST", id, err)
		}
		if err := h.d.TerminateApp(t.Context(), dev, id); contract.AsError(err).Code != contract.CodeBadRequest {
			t.Errorf("terminate %q: got %v, want BAD_REQUEST", id, err)
		}
	}
	if calls := h.simctlCalls(t, from); len(calls) != 0 {
		t.Errorf("simctl ran: %v", calls)
	}
}

// A device's log is read through its tail: of what log show writes, the
// driver keeps at most driver.MaxLogOutput (a tenant's app can log without
// end, and a window may be a day long).
func TestDeviceLogsKeepOnlyTheTailOfLogShow(t *testing.T) {
	h := newHarness(t)
	dev := h.boot(t, h.provision(t, "iPhone 16", "18.6"))
	if _, err := h.d.DeviceLogs(t.Context(), dev, driver.LogQuery{Lines: 5, Since: 24 * time.Hour}); err != nil {
		t.Fatal(err)
	}
	shows := 0
	for _, c := range h.rec.commands() {
		if slices.Contains(c.Args, "log") && slices.Contains(c.Args, "show") {
			shows++
			if c.MaxStdout != driver.MaxLogOutput || !c.KeepTail {
				t.Errorf("log show ran keeping %d bytes (tail %v), want the last %d", c.MaxStdout, c.KeepTail, driver.MaxLogOutput)
			}
		}
	}
	if shows != 1 {
		t.Errorf("log show ran %d times, want once", shows)
	}
}

// A URL no installed app opens is typed, with the URL: the caller is told
// what to install, not that the tool failed.
func TestOpeningAURLNoAppOpensIsTyped(t *testing.T) {
	h := newHarness(t)
	dev := h.boot(t, h.provision(t, "iPhone 16", "18.6"))
	err := h.d.OpenURL(t.Context(), dev, "nohandler://item/1")
	var none *driver.NoAppForURLError
	if !errors.As(err, &none) || none.URL != "nohandler://item/1" {
		t.Fatalf("got %v, want *NoAppForURLError", err)
	}
	if ce := driver.ContractError(err); ce.Code != contract.CodeAppNotInstalled || ce.Details["url"] != "nohandler://item/1" {
		t.Errorf("contract error %v, want APP_NOT_INSTALLED naming the URL", ce)
	}
	if err := h.d.OpenURL(t.Context(), dev, "https://example.com"); err != nil {
		t.Errorf("a URL an app opens: %v", err)
	}
}
