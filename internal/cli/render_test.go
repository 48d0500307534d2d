package cli

import (
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/simlock/simlock/internal/contract"
)

func TestProgressJSONLines(t *testing.T) {
	cases := []struct {
		p    contract.LeaseProgress
		want string
	}{
		{contract.LeaseProgress{Stage: contract.StageQueued, QueuePosition: 1}, `{"push":"progress","stage":"queued","queuePosition":1}`},
		{contract.LeaseProgress{Stage: contract.StageProvisioning, EtaMs: 3000}, `{"push":"progress","stage":"provisioning","etaMs":3000}`},
		{contract.LeaseProgress{Stage: contract.StageBooting, EtaMs: 0}, `{"push":"progress","stage":"booting","etaMs":0}`},
		{contract.LeaseProgress{Stage: contract.StageReclaiming, EtaMs: 1500}, `{"push":"progress","stage":"reclaiming","etaMs":1500}`},
		{contract.LeaseProgress{Stage: contract.StageDownloading, Component: "26.4", Waiting: false, Percent: pct(41)}, `{"push":"progress","stage":"downloading","component":"26.4","waiting":false,"percent":41}`},
		{contract.LeaseProgress{Stage: contract.StageDownloading, Component: "26.4", Waiting: true}, `{"push":"progress","stage":"downloading","component":"26.4","waiting":true}`},
	}
	for _, c := range cases {
		if got := progressJSON(c.p); got != c.want {
			t.Errorf("progressJSON(%+v) = %s, want %s", c.p, got, c.want)
		}
	}
}

func TestProgressHumanGolden(t *testing.T) {
	clock := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	cases := []struct {
		p       contract.LeaseProgress
		device  string
		elapsed time.Duration
		frame   int
		want    string
	}{
		{contract.LeaseProgress{Stage: contract.StageQueued, QueuePosition: 1}, "iOS device", 3 * time.Second, 0, "⠋ Queued 1st for an iOS device, waiting 3s"},
		{contract.LeaseProgress{Stage: contract.StageQueued, QueuePosition: 3}, "iPhone 17", 75 * time.Second, 1, "⠙ Queued 3rd for iPhone 17 (2 requests ahead), waiting 1m15s"},
		{contract.LeaseProgress{Stage: contract.StageQueued, QueuePosition: 2}, "Android device", 4 * time.Second, 0, "⠋ Queued 2nd for an Android device (1 request ahead), waiting 4s"},
		// The first in line hears what it waits for, counted down.
		{contract.LeaseProgress{Stage: contract.StageQueued, QueuePosition: 1, Wait: &contract.QueueWait{
			Limit: contract.WaitPlatformRunning, InUse: 1, Max: 1, LeaseID: "lse_4bf45a1abadb550d", Holder: "holder2",
			EndsAt: clock.Add(14*time.Minute - 300*time.Millisecond).UnixMilli()}},
			"iOS device", 12 * time.Second, 0, "⠋ Queued 1st for an iOS device, waiting 12s (1/1 running: lse_4bf45a1abadb550d held by holder2, expires in 14m)"},
		{contract.LeaseProgress{Stage: contract.StageQueued, QueuePosition: 1, Wait: &contract.QueueWait{
			Limit: contract.WaitMachineRunning, InUse: 2, Max: 2, LeaseID: "lse_1", Holder: "a", EndsAt: clock.Add(-time.Second).UnixMilli()}},
			"Pixel 9", time.Second, 0, "⠋ Queued 1st for Pixel 9, waiting 1s (2/2 running on this machine: lse_1 held by a, due to expire unless renewed)"},
		{contract.LeaseProgress{Stage: contract.StageQueued, QueuePosition: 1, Wait: &contract.QueueWait{Limit: contract.WaitDevices, InUse: 3, Max: 3}},
			"Android device", time.Second, 0, "⠋ Queued 1st for an Android device, waiting 1s (3/3 devices exist, the most allowed)"},
		{contract.LeaseProgress{Stage: contract.StageBooting, EtaMs: 40000}, "iPhone 17", 10 * time.Second, 2, "⠹ Booting the iPhone 17, about 30s left"},
		{contract.LeaseProgress{Stage: contract.StageBooting, EtaMs: 40000, Detail: "waiting for sys.boot_completed"}, "Pixel 8", 10 * time.Second, 2,
			"⠹ Booting the Pixel 8 (waiting for sys.boot_completed), about 30s left"},
		// Under a second left still reads as a second, not "about 0s".
		{contract.LeaseProgress{Stage: contract.StageBooting, EtaMs: 1000}, "iOS device", 600 * time.Millisecond, 0, "⠋ Booting the iOS device, about 1s left"},
		{contract.LeaseProgress{Stage: contract.StageReclaiming, EtaMs: 3000}, "iOS 26.1 device", 0, 0, "⠋ Cleaning a released iOS 26.1 device for you, about 3s left"},
		{contract.LeaseProgress{Stage: contract.StageProvisioning, EtaMs: 1000}, "Pixel 9", 4 * time.Second, 3, "⠸ Creating a new Pixel 9, taking longer than usual, 4s so far"},
		{contract.LeaseProgress{Stage: contract.StageDownloading, Component: "26.4", Waiting: true}, "iOS device", 61 * time.Second, 0, "⠋ Waiting for another download to finish before runtime 26.4, 1m01s so far"},
		{contract.LeaseProgress{Stage: contract.StageDownloading, Component: "26.4"}, "iOS device", 5 * time.Second, 1, "⠙ Downloading runtime 26.4, 5s so far"},
		{contract.LeaseProgress{Stage: contract.StageDownloading, Component: "26.4", Percent: pct(41)}, "iOS device", 5 * time.Second, 2, "Downloading runtime 26.4 [█████████░░░░░░░░░░░░░░░]  41%"},
	}
	for _, c := range cases {
		if got := progressHuman(c.p, c.device, c.elapsed, clock, c.frame); got != c.want {
			t.Errorf("progressHuman(%+v, %q, %s) =\n  %q\nwant\n  %q", c.p, c.device, c.elapsed, got, c.want)
		}
	}
}

// The line each finished step leaves names what was done to which device
// and how long it took.
func TestProgressDoneLines(t *testing.T) {
	cases := []struct {
		p    contract.LeaseProgress
		want string
	}{
		{contract.LeaseProgress{Stage: contract.StageQueued, QueuePosition: 1}, "✓ Waited 12s in line"},
		{contract.LeaseProgress{Stage: contract.StageReclaiming}, "✓ Cleaned a released iPhone 17 (12s)"},
		{contract.LeaseProgress{Stage: contract.StageProvisioning}, "✓ Created a new iPhone 17 (12s)"},
		{contract.LeaseProgress{Stage: contract.StageBooting}, "✓ Booted the iPhone 17 (12s)"},
		{contract.LeaseProgress{Stage: contract.StageDownloading, Component: "26.4"}, "✓ Downloaded runtime 26.4 (12s)"},
		{contract.LeaseProgress{Stage: contract.StageDownloading, Component: "26.4", Waiting: true}, "✓ Waited 12s for another download"},
	}
	for _, c := range cases {
		if got := progressDone(c.p, "iPhone 17", 12*time.Second); got != c.want {
			t.Errorf("progressDone(%+v) = %q, want %q", c.p, got, c.want)
		}
	}
}

func TestWantedNamesTheDeviceAsAsked(t *testing.T) {
	cases := map[string]contract.LeaseRequestInput{
		"iOS device":              {Platform: contract.PlatformIOS},
		"iOS 26.1 device":         {Platform: contract.PlatformIOS, OSVersion: "26.1"},
		"iPhone 17":               {Platform: contract.PlatformIOS, Model: "iPhone 17"},
		"iPhone 17 on iOS 26.1":   {Platform: contract.PlatformIOS, Model: "iPhone 17", OSVersion: "26.1"},
		"Android device":          {Platform: contract.PlatformAndroid},
		"Pixel 9 on Android 36.0": {Platform: contract.PlatformAndroid, Model: "Pixel 9", OSVersion: "36.0"},
		// A class is what the request asks for, and a range is said as one.
		"iOS tablet with OS >=18 <27": {Platform: contract.PlatformIOS, Class: contract.ClassTablet, OSVersion: ">=18 <27"},
		"Android 36 tablet":           {Platform: contract.PlatformAndroid, Class: contract.ClassTablet, OSVersion: "36"},
	}
	for want, in := range cases {
		if got := wanted(in); got != want {
			t.Errorf("wanted(%+v) = %q, want %q", in, got, want)
		}
	}
	for n, want := range map[int]string{1: "1st", 2: "2nd", 3: "3rd", 4: "4th", 11: "11th", 12: "12th", 13: "13th", 21: "21st", 102: "102nd"} {
		if got := ordinal(n); got != want {
			t.Errorf("ordinal(%d) = %q, want %q", n, got, want)
		}
	}
}

// A line longer than the terminal is cut one column short of its width,
// so it never wraps; a line that fits, or an unknown width, is kept whole.
func TestFitWidthNeverReachesTheLastColumn(t *testing.T) {
	line := "⠋ Queued 3rd for iPhone 17 (2 requests ahead), waiting 1m15s"
	got := fitWidth(line, 50)
	if n := utf8.RuneCountInString(got); n != 49 || !strings.HasSuffix(got, "…") {
		t.Errorf("fitWidth(_, 50) = %q (%d columns), want 49 columns ending in …", got, n)
	}
	if fitWidth(line, 0) != line || fitWidth(line, 200) != line {
		t.Error("a line that fits, or an unknown width, was cut")
	}
}

func pct(n int) *int { return &n }

func TestParseDuration(t *testing.T) {
	good := map[string]time.Duration{
		"1500": 1500 * time.Millisecond, "250ms": 250 * time.Millisecond, "3s": 3 * time.Second,
		"2m": 2 * time.Minute, "1h": time.Hour, "1d": 24 * time.Hour, "1.5s": 1500 * time.Millisecond,
	}
	for in, want := range good {
		got, err := parseDuration(in)
		if err != nil || got != want {
			t.Errorf("parseDuration(%q) = %s, %v; want %s", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "s", "-3s", "3x", "1e3", "99999999999d"} {
		if _, err := parseDuration(bad); err == nil {
			t.Errorf("parseDuration(%q) accepted", bad)
		}
	}
}

func TestAgentIDResolution(t *testing.T) {
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	cases := []struct {
		flag string
		env  map[string]string
		want string
	}{
		{"mine", map[string]string{"SIMLOCK_AGENT_ID": "env"}, "mine"},
		{"", map[string]string{"SIMLOCK_AGENT_ID": "env", "CLAUDE_CODE_SESSION_ID": "abc"}, "env"},
		{"", map[string]string{"CLAUDE_CODE_SESSION_ID": "abc", "CODEX_THREAD_ID": "x"}, "claude-code:abc"},
		{"", map[string]string{"CODEX_THREAD_ID": "x"}, "codex:x"},
		// Codex documents no CODEX_SESSION_ID: it is not an identity.
		{"", map[string]string{"CODEX_SESSION_ID": "x"}, "pid:42"},
		{"", map[string]string{}, "pid:42"},
	}
	for _, c := range cases {
		if got := agentID(c.flag, env(c.env), 42); got != c.want {
			t.Errorf("agentID(%q, %v) = %q, want %q", c.flag, c.env, got, c.want)
		}
	}
}

func TestGrantHumanGolden(t *testing.T) {
	g := contract.LeaseGrant{
		Device: contract.GrantDevice{ID: "dev_1", Spec: contract.DeviceSpec{Platform: "ios", Model: "iPhone 17", OSVersion: "26.1"}},
		Lease:  contract.LeaseRecord{ID: "lse_1", TTLDeadline: 0},
	}
	if got, want := grantHuman(g, false), "✓ Leased ios iPhone 17 (26.1) as lse_1 on dev_1, held here; Ctrl-C releases it"; got != want {
		t.Errorf("got  %q\nwant %q", got, want)
	}
	if got, want := grantHuman(g, true), "✓ Leased ios iPhone 17 (26.1) as lse_1 on dev_1, detached; it lasts until released or 1970-01-01T00:00:00Z"; got != want {
		t.Errorf("got  %q\nwant %q", got, want)
	}
}

func TestExportLinesQuoteForTheShell(t *testing.T) {
	got := exportLines(map[string]string{"SIMLOCK_IOS_DEVICE_SET": "/Users/a b/.simlock/devices/ios", "Z": "it's"})
	want := "export SIMLOCK_IOS_DEVICE_SET='/Users/a b/.simlock/devices/ios'\nexport Z='it'\\''s'\n"
	if got != want {
		t.Errorf("got  %q\nwant %q", got, want)
	}
	if exportLines(nil) != "" {
		t.Error("no environment, no lines")
	}
}

// After a download's bar come the sizes the installer printed, then, once
// the rate means something, the speed and the time left at that rate; with
// no sizes, the time left follows the percentage.
func TestDownloadSuffixFollowsTheInstallersFigures(t *testing.T) {
	t0 := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	pct := func(v int) *int { return &v }
	var sized downloadRate
	sized.see(pct(10), 890_000_000, t0)
	for _, c := range []struct {
		at         time.Duration
		pct        int
		bytes, tot int64
		want       string
	}{
		{time.Second, 11, 979_000_000, 8_900_000_000, " · 979.0 MB of 8.9 GB"}, // too soon for a rate
		{10 * time.Second, 20, 1_780_000_000, 8_900_000_000, " · 1.8 GB of 8.9 GB · 89.0 MB/s, about 1m20s left"},
		{20 * time.Second, 100, 8_900_000_000, 8_900_000_000, " · 8.9 GB of 8.9 GB"},
	} {
		if got := sized.suffix(c.pct, c.bytes, c.tot, t0.Add(c.at)); got != c.want {
			t.Errorf("sized at %s: %q, want %q", c.at, got, c.want)
		}
	}
	var bare downloadRate
	bare.see(pct(21), 0, t0)
	for _, c := range []struct {
		at   time.Duration
		pct  int
		want string
	}{
		{10 * time.Second, 41, ", about 30s left"}, // 2 points a second, 59 to go
		{10 * time.Second, 22, ""},                 // too little moved to say
		{time.Second, 41, ""},                      // too soon to say
	} {
		if got := bare.suffix(c.pct, 0, 0, t0.Add(c.at)); got != c.want {
			t.Errorf("without sizes at %s, %d%%: %q, want %q", c.at, c.pct, got, c.want)
		}
	}
	var unseen downloadRate
	if got := unseen.suffix(50, 0, 0, t0); got != "" {
		t.Errorf("no step seen yet: %q, want nothing", got)
	}
}
