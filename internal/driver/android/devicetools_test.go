package android_test

import (
	"context"
	"errors"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/driver"
	"github.com/simlock/simlock/internal/runner"
)

// Each device tool is one adb call through the private server to the
// leased emulator, by serial; the exact argv is what the test checks, and
// a URL the guest's shell would read as syntax arrives quoted.
func TestDeviceToolsRunOneAdbCallOnTheLeasedEmulator(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	d, dev := readyPixel(t, f.opts)
	ctx := t.Context()
	install(t, d, dev.Address, "com.example.notes")
	pinned := []string{"-P", strconv.Itoa(f.port), "-s", dev.Address}
	var logs contract.DeviceLogs
	for _, s := range []struct {
		name string
		run  func() error
		want []string
	}{
		{"launch", func() error {
			got, err := d.LaunchApp(ctx, dev, "com.example.notes", nil)
			if err == nil && got.AppID != "com.example.notes" {
				t.Errorf("launch answered %+v", got)
			}
			return err
		}, []string{"shell", "monkey", "-p", "com.example.notes", "-c", "android.intent.category.LAUNCHER", "1"}},
		{"terminate", func() error { return d.TerminateApp(ctx, dev, "com.example.notes") },
			[]string{"shell", "am", "force-stop", "com.example.notes"}},
		{"open-url", func() error { return d.OpenURL(ctx, dev, "myapp://item/1?a=1&b=';reboot;'") },
			[]string{"shell", "am", "start", "-a", "android.intent.action.VIEW", "-d", `'myapp://item/1?a=1&b='\'';reboot;'\'''`}},
		{"location", func() error { return d.SetLocation(ctx, dev, 48.8584, 2.2945) },
			[]string{"emu", "geo", "fix", "2.2945", "48.8584"}},
		{"dark", func() error { return d.SetAppearance(ctx, dev, contract.AppearanceDark) },
			[]string{"shell", "cmd", "uimode", "night", "yes"}},
		{"light", func() error { return d.SetAppearance(ctx, dev, contract.AppearanceLight) },
			[]string{"shell", "cmd", "uimode", "night", "no"}},
		{"logs", func() (err error) {
			logs, err = d.DeviceLogs(ctx, dev, driver.LogQuery{Lines: 2, Process: "ActivityManager"})
			return err
		}, []string{"shell", "logcat", "-d", "-v", "threadtime", "-t", "2", "-s", "ActivityManager"}},
	} {
		from := len(calls(t, f.shims, "adb"))
		if err := s.run(); err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		got := calls(t, f.shims, "adb")[from:]
		want := append(slices.Clone(pinned), s.want...)
		if len(got) != 1 || !slices.Equal(got[0].Args, want) {
			var args [][]string
			for _, c := range got {
				args = append(args, c.Args)
			}
			t.Errorf("%s: adb calls %q, want one: %q", s.name, args, want)
		}
	}
	if len(logs.Lines) != 2 || !strings.Contains(logs.Lines[1], "line 3 of "+dev.Address) {
		t.Errorf("logs answered %q, want the last 2 lines without the banner", logs.Lines)
	}

	// A window is a time: -t <epoch seconds>.<ms>, about now less the window.
	from := len(calls(t, f.shims, "adb"))
	before := time.Now()
	if _, err := d.DeviceLogs(ctx, dev, driver.LogQuery{Lines: 10, Since: time.Minute}); err != nil {
		t.Fatal(err)
	}
	got := calls(t, f.shims, "adb")[from:]
	at := slices.Index(got[0].Args, "-t")
	if at < 0 || !regexp.MustCompile(`^\d+\.\d{3}$`).MatchString(got[0].Args[at+1]) {
		t.Fatalf("logs since a minute: %q", got[0].Args)
	}
	secs, _ := strconv.ParseFloat(got[0].Args[at+1], 64)
	if want := float64(before.Add(-time.Minute).Unix()); secs < want-1 || secs > want+5 {
		t.Errorf("logs since a minute read from %v, want about %v", secs, want)
	}
}

func TestAndroidLaunchRefusalsAreTyped(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	d, dev := readyPixel(t, f.opts)
	ctx := t.Context()
	_, err := d.LaunchApp(ctx, dev, "com.example.absent", nil)
	var missing *driver.AppNotInstalledError
	if !errors.As(err, &missing) || driver.ContractError(err).Code != contract.CodeAppNotInstalled {
		t.Errorf("launch of an app not installed: got %v, want APP_NOT_INSTALLED", err)
	}
	from := len(calls(t, f.shims, "adb"))
	for _, c := range []struct {
		id   string
		args []string
	}{
		{"com.example-app", nil},             // a bundle id, not a package
		{"com.example.notes", []string{"x"}}, // a launcher activity takes no arguments
	} {
		if _, err := d.LaunchApp(ctx, dev, c.id, c.args); contract.AsError(err).Code != contract.CodeBadRequest {
			t.Errorf("launch %q %q: got %v, want BAD_REQUEST", c.id, c.args, err)
		}
	}
	if got := calls(t, f.shims, "adb")[from:]; len(got) != 0 {
		t.Errorf("refused launches ran adb: %v", got)
	}
}

// recordingRunner runs tools as runner.OS does and remembers each command.
type recordingRunner struct {
	runner.OS
	mu   sync.Mutex
	cmds []runner.Cmd
}

func (r *recordingRunner) Run(ctx context.Context, c runner.Cmd) (runner.Result, error) {
	r.mu.Lock()
	r.cmds = append(r.cmds, c)
	r.mu.Unlock()
	return r.OS.Run(ctx, c)
}

// A device's log is read through its tail: of what logcat writes, the
// driver keeps at most driver.MaxLogOutput (a tenant can grow the log
// buffers and fill them).
func TestDeviceLogsKeepOnlyTheTailOfLogcat(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	rec := &recordingRunner{}
	f.opts.Runner = rec
	d, dev := readyPixel(t, f.opts)
	ctx := t.Context()
	if _, err := d.DeviceLogs(ctx, dev, driver.LogQuery{Lines: 10, Since: 24 * time.Hour}); err != nil {
		t.Fatal(err)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	reads := 0
	for _, c := range rec.cmds {
		if slices.Contains(c.Args, "logcat") {
			reads++
			if c.MaxStdout != driver.MaxLogOutput || !c.KeepTail {
				t.Errorf("logcat ran keeping %d bytes (tail %v), want the last %d", c.MaxStdout, c.KeepTail, driver.MaxLogOutput)
			}
		}
	}
	if reads != 1 {
		t.Errorf("logcat ran %d times, want once", reads)
	}
}

// A URL no installed app opens is typed, with the URL, though am exits 0:
// the caller is told what to install, not that the tool failed.
func TestOpeningAURLNoAppOpensIsTyped(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	d, dev := readyPixel(t, f.opts)
	ctx := t.Context()
	err := d.OpenURL(ctx, dev, "nohandler://item/1")
	var none *driver.NoAppForURLError
	if !errors.As(err, &none) || none.URL != "nohandler://item/1" {
		t.Fatalf("got %v, want *NoAppForURLError", err)
	}
	if ce := driver.ContractError(err); ce.Code != contract.CodeAppNotInstalled || ce.Details["url"] != "nohandler://item/1" {
		t.Errorf("contract error %v, want APP_NOT_INSTALLED naming the URL", ce)
	}
	if err := d.OpenURL(ctx, dev, "https://example.com"); err != nil {
		t.Errorf("a URL an app opens: %v", err)
	}
}
