package core

import (
	"testing"

	"github.com/simlock/simlock/internal/config"
	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/driver"
)

// TestTransitionTableIsTotal visits every (from, to) pair: each is either in
// the table or refused, and the table names only known states.
func TestTransitionTableIsTotal(t *testing.T) {
	allowed := map[[2]contract.DeviceState]bool{
		{"provisioning", "ready"}: true, {"provisioning", "quarantined"}: true, {"provisioning", "deleted"}: true,
		{"ready", "leased"}: true, {"ready", "shutdown"}: true, {"ready", "deleted"}: true,
		{"leased", "reclaiming"}: true,
		{"reclaiming", "ready"}:  true, {"reclaiming", "shutdown"}: true, {"reclaiming", "quarantined"}: true, {"reclaiming", "deleted"}: true,
		{"shutdown", "ready"}: true, {"shutdown", "deleted"}: true, {"shutdown", "quarantined"}: true,
		{"quarantined", "ready"}: true, {"quarantined", "shutdown"}: true, {"quarantined", "deleted"}: true,
	}
	states := DeviceStates()
	if len(transitions) != len(states) {
		t.Fatalf("table has %d states, want %d", len(transitions), len(states))
	}
	for _, from := range states {
		for _, to := range states {
			want := from == to || allowed[[2]contract.DeviceState{from, to}]
			if got := CanTransition(from, to); got != want {
				t.Errorf("CanTransition(%s, %s) = %v, want %v", from, to, got, want)
			}
		}
	}
	if CanTransition(contract.DeviceLeased, contract.DeviceReady) {
		t.Error("a leased device must be cleaned before it is ready again")
	}
}

func TestResourceLimitsFollowTheFormula(t *testing.T) {
	const gib = 1 << 30
	cases := []struct {
		cpus                  int
		ram                   int64
		ios, android, running int
		ramLimit              int64
	}{
		{10, 32 * gib, 5, 2, 7, 28 * gib},  // the reference's example
		{2, 4 * gib, 1, 1, 2, 0},           // a small host still gets one of each
		{8, 16 * gib, 4, 2, 6, 12 * gib},   // android limited by CPU and RAM alike
		{16, 16 * gib, 8, 2, 10, 12 * gib}, // android limited by RAM
		{24, 128 * gib, 12, 6, 18, 124 * gib},
		{1, 64 * gib, 1, 1, 2, 60 * gib}, // one CPU: max(1, ...)
	}
	for _, c := range cases {
		l := LimitsFrom(config.Default(), Host{CPUs: c.cpus, RAMBytes: c.ram})
		got := [3]int{l.Platforms[contract.PlatformIOS].MaxDevices, l.Platforms[contract.PlatformAndroid].MaxDevices, l.MaxRunning}
		if got != [3]int{c.ios, c.android, c.running} {
			t.Errorf("%d CPUs, %d GiB: ios/android/running = %v, want %d/%d/%d", c.cpus, c.ram/gib, got, c.ios, c.android, c.running)
		}
		if l.Platforms[contract.PlatformIOS].MaxRunning != c.ios || l.Platforms[contract.PlatformAndroid].MaxRunning != c.android {
			t.Errorf("%d CPUs: per-platform maxRunning should equal maxDevices: %+v", c.cpus, l.Platforms)
		}
		if l.RAM == nil || l.RAM.LimitBytes != c.ramLimit {
			t.Errorf("%d GiB: RAM limit = %+v, want %d", c.ram/gib, l.RAM, c.ramLimit)
		}
	}
	if l := LimitsFrom(config.Default(), Host{CPUs: 4}); l.RAM != nil {
		t.Errorf("unknown RAM should mean no RAM budget, got %+v", l.RAM)
	}
}

func TestFixedLimitsDefaultToGlobal(t *testing.T) {
	cfg, err := config.Parse([]byte(`{"capacity":{"strategy":"fixed","config":{"maxRunning":3,"android":{"maxRunning":1}}}}`))
	if err != nil {
		t.Fatal(err)
	}
	l := LimitsFrom(cfg, Host{})
	want := map[contract.Platform]PlatformLimits{
		contract.PlatformIOS: {MaxDevices: 3, MaxRunning: 3}, contract.PlatformAndroid: {MaxDevices: 1, MaxRunning: 1},
	}
	if l.MaxRunning != 3 || l.Platforms[contract.PlatformIOS] != want[contract.PlatformIOS] || l.Platforms[contract.PlatformAndroid] != want[contract.PlatformAndroid] || l.RAM != nil {
		t.Errorf("limits = %+v", l)
	}
}

func TestCanStartAndCreate(t *testing.T) {
	l := Limits{MaxRunning: 2, Platforms: map[contract.Platform]PlatformLimits{
		contract.PlatformIOS: {MaxDevices: 2, MaxRunning: 1}, contract.PlatformAndroid: {MaxDevices: 1, MaxRunning: 2},
	}}
	u := Measure(l, []Slot{
		{Platform: contract.PlatformIOS, State: contract.DeviceLeased},
		{Platform: contract.PlatformIOS, State: contract.DeviceShutdown},
		{Platform: contract.PlatformAndroid, State: contract.DeviceProvisioning, Reserved: true},
		{Platform: contract.PlatformAndroid, State: contract.DeviceDeleted},
	})
	if b := CanStart(l, u, contract.PlatformIOS); b != BlockGlobalRunning {
		t.Errorf("ios start: %q, want global limit (1 running + 1 reserved of 2)", b)
	}
	if b := CanCreate(l, u, contract.PlatformAndroid, false); b != BlockDeviceLimit {
		t.Errorf("android create: %q, want device limit", b)
	}
	u2 := Measure(l, []Slot{{Platform: contract.PlatformIOS, State: contract.DeviceReady}})
	if b := CanStart(l, u2, contract.PlatformIOS); b != BlockPlatformRunning {
		t.Errorf("ios start with one ready: %q, want platform limit", b)
	}
	u3 := Measure(l, []Slot{{Platform: contract.PlatformIOS, State: contract.DeviceReady, Releasing: true}})
	if b := CanStart(l, u3, contract.PlatformIOS); b != BlockNone {
		t.Errorf("a device being shut down for a request frees its slot: %q", b)
	}
}

func TestFitsAndModelsFor(t *testing.T) {
	cat := driver.Catalog{
		Models:        []string{"iPhone 17", "iPhone 16", "iPad Air"},
		ModelRuntimes: map[string][]string{"iPhone 17": {"26.1"}, "iPhone 16": {"26.1", "18.6"}, "iPad Air": {"26.1"}},
		ModelAliases:  map[string][]string{"iPhone 16": {"iphone-16"}},
		ModelClasses:  map[string]contract.DeviceClass{"iPhone 17": "phone", "iPhone 16": "phone", "iPad Air": "tablet"},
		ClassDefaults: map[contract.DeviceClass][]string{"phone": {"iPhone 18", "iPhone 17", "iPhone 16"}, "tablet": {"iPad Air"}},
	}
	w := WantOf(contract.RequestSpec{Platform: "ios"}, cat)
	if w.Class != contract.ClassPhone {
		t.Errorf("no model and no class should mean phone, got %+v", w)
	}
	if got := ModelsFor(w, cat, nil); len(got) != 2 || got[0] != "iPhone 17" {
		t.Errorf("phones = %v, want the listed ones in preference order", got)
	}
	w18 := WantOf(contract.RequestSpec{Platform: "ios", OSVersion: "18"}, cat)
	if got := ModelsFor(w18, cat, nil); len(got) != 1 || got[0] != "iPhone 16" {
		t.Errorf("phones on 18 = %v, want iPhone 16", got)
	}
	alias := WantOf(contract.RequestSpec{Platform: "ios", Model: "IPHONE-16"}, cat)
	if alias.Model != "iPhone 16" {
		t.Errorf("alias resolved to %q", alias.Model)
	}
	dev := contract.DeviceSpec{Platform: "ios", Model: "iPhone 16", OSVersion: "18.6"}
	if !Fits(dev, w, cat) || !Fits(dev, w18, cat) || !Fits(dev, alias, cat) {
		t.Error("an iPhone 16 on 18.6 fits a phone, a phone on 18, and iphone-16")
	}
	if Fits(dev, WantOf(contract.RequestSpec{Platform: "ios", Class: "tablet"}, cat), cat) {
		t.Error("a phone fits a tablet request")
	}
	if VersionFits("18.6", "18.") || VersionFits("180.1", "18") || !VersionFits("18.6.1", "18.6") {
		t.Error("version prefix matching is wrong")
	}
}

func TestModelsForRangesAndConfiguredPreferences(t *testing.T) {
	cat := driver.Catalog{
		Models:        []string{"iPhone 17", "iPhone 16", "iPhone 15"},
		ModelRuntimes: map[string][]string{"iPhone 17": {"26.1"}, "iPhone 16": {"26.1", "18.6"}, "iPhone 15": {"17.5", "18.6"}},
		ModelClasses:  map[string]contract.DeviceClass{"iPhone 17": "phone", "iPhone 16": "phone", "iPhone 15": "phone"},
		ClassDefaults: map[contract.DeviceClass][]string{"phone": {"iPhone 17", "iPhone 16", "iPhone 15"}},
	}
	w := Want{Platform: "ios", Class: "phone", OSVersion: ">=18 <26"}
	if got := ModelsFor(w, cat, nil); len(got) != 2 || got[0] != "iPhone 16" {
		t.Errorf("phones in >=18 <26 = %v, want iPhone 16 then 15", got)
	}
	if got := NewestFitting(cat.ModelRuntimes["iPhone 16"], ">=18 <26"); got != "18.6" {
		t.Errorf("newest fitting = %q", got)
	}
	pref := ModelsFor(Want{Platform: "ios", Class: "phone"}, cat, []string{"iPhone 15", "iPhone 99"})
	if len(pref) != 3 || pref[0] != "iPhone 15" || pref[1] != "iPhone 17" {
		t.Errorf("configured preference first, unknown skipped, built-in after: %v", pref)
	}
}

func TestFitsTakesOnlyTheImageTagAsked(t *testing.T) {
	cat := driver.Catalog{
		Models:        []string{"Pixel 9"},
		ModelRuntimes: map[string][]string{"Pixel 9": {"36"}},
		ModelClasses:  map[string]contract.DeviceClass{"Pixel 9": "phone"},
	}
	plain := contract.DeviceSpec{Platform: "android", Model: "Pixel 9", OSVersion: "36", ImageTag: "google_apis"}
	store := contract.DeviceSpec{Platform: "android", Model: "Pixel 9", OSVersion: "36", ImageTag: "google_apis_playstore"}
	want := WantOf(contract.RequestSpec{Platform: "android", OSVersion: "36", ImageTag: "google_apis_playstore"}, cat)
	if want.ImageTag != "google_apis_playstore" {
		t.Fatalf("WantOf dropped the tag: %+v", want)
	}
	if Fits(plain, want, cat) {
		t.Error("a google_apis device fits a request for google_apis_playstore")
	}
	if !Fits(store, want, cat) {
		t.Error("a google_apis_playstore device does not fit a request for its tag")
	}
	if any := WantOf(contract.RequestSpec{Platform: "android"}, cat); !Fits(plain, any, cat) || !Fits(store, any, cat) {
		t.Error("a request without a tag should take a device of any tag")
	}
}

func TestFitsServesFullAsAGuaranteeAndSlimWhereTheRuntimeCanSlim(t *testing.T) {
	cat := driver.Catalog{
		Models:        []string{"iPhone 16"},
		ModelRuntimes: map[string][]string{"iPhone 16": {"17.5", "18.6"}},
		ModelClasses:  map[string]contract.DeviceClass{"iPhone 16": "phone"},
		SlimRuntimes:  []string{"18.6"},
		DefaultMode:   contract.DeviceModeFull,
	}
	full186 := contract.DeviceSpec{Platform: "ios", Model: "iPhone 16", OSVersion: "18.6"}
	slim186 := contract.DeviceSpec{Platform: "ios", Model: "iPhone 16", OSVersion: "18.6", Mode: contract.DeviceModeSlim}
	full175 := contract.DeviceSpec{Platform: "ios", Model: "iPhone 16", OSVersion: "17.5"}
	want := func(mode contract.DeviceMode, os string) Want {
		return WantOf(contract.RequestSpec{Platform: "ios", OSVersion: os, Mode: mode}, cat)
	}
	cases := []struct {
		name string
		spec contract.DeviceSpec
		w    Want
		fits bool
	}{
		{"full on a full device", full186, want(contract.DeviceModeFull, "18.6"), true},
		{"full never on a slim device", slim186, want(contract.DeviceModeFull, "18.6"), false},
		{"slim on a slim device", slim186, want(contract.DeviceModeSlim, "18.6"), true},
		{"slim not on a full device of a runtime that can slim", full186, want(contract.DeviceModeSlim, "18.6"), false},
		{"slim on a full device of a runtime that cannot slim", full175, want(contract.DeviceModeSlim, "17.5"), true},
		{"no mode takes the default (full)", full186, want("", "18.6"), true},
		{"no mode never a slim device when the default is full", slim186, want("", "18.6"), false},
	}
	for _, c := range cases {
		if got := Fits(c.spec, c.w, cat); got != c.fits {
			t.Errorf("%s: Fits = %v, want %v", c.name, got, c.fits)
		}
	}
	cat.DefaultMode = contract.DeviceModeSlim
	if !Fits(slim186, want("", "18.6"), cat) || Fits(full186, want("", "18.6"), cat) {
		t.Error("with ios.defaultMode slim, a request naming no mode should take the slim device, not the full one")
	}
}

func TestASlimDeviceTakesItsOwnSizeOfTheRAMBudget(t *testing.T) {
	const gib = 1 << 30
	cfg, err := config.Parse([]byte(`{"capacity":{"config":{"ramBudget":{"iosSlimBytesPerDevice":536870912}}}}`))
	if err != nil {
		t.Fatal(err)
	}
	l := LimitsFrom(cfg, Host{CPUs: 16, RAMBytes: 6 * gib}) // a 2 GiB budget
	slim := Slot{Platform: contract.PlatformIOS, State: contract.DeviceShutdown, Slim: true}
	u := Measure(l, []Slot{slim, slim, slim})
	if u.RAMBytes != 3*gib/2 {
		t.Errorf("three slim devices take %d bytes, want 1.5 GiB", u.RAMBytes)
	}
	if b := CanCreate(l, u, contract.PlatformIOS, true); b != BlockNone {
		t.Errorf("a fourth slim device (2 GiB in all): %q, want allowed", b)
	}
	if b := CanCreate(l, u, contract.PlatformIOS, false); b != BlockRAM {
		t.Errorf("a full device (3 GiB in all): %q, want ram-budget", b)
	}
	if d := LimitsFrom(config.Default(), Host{CPUs: 16, RAMBytes: 6 * gib}); d.RAM.Bytes(contract.PlatformIOS, true) != d.RAM.Bytes(contract.PlatformIOS, false) {
		t.Error("unset, a slim device's size should be the full one's")
	}
}

// The capacity report says, per platform, when the RAM budget has no room
// for one more device of its smaller mode: the engine then refuses to make
// one (CanCreate), which a gateway must see to not send it the request.
func TestTheReportSaysWhenTheRAMBudgetHasNoRoomForOneMoreDevice(t *testing.T) {
	const gib = 1 << 30
	cfg, err := config.Parse([]byte(`{"capacity":{"config":{"ramBudget":{"iosBytesPerDevice":1073741824,"iosSlimBytesPerDevice":536870912,"androidBytesPerDevice":2147483648}}}}`))
	if err != nil {
		t.Fatal(err)
	}
	l := LimitsFrom(cfg, Host{CPUs: 16, RAMBytes: 6 * gib}) // a 2 GiB budget
	full := Slot{Platform: contract.PlatformIOS, State: contract.DeviceLeased}
	for _, c := range []struct {
		name         string
		slots        []Slot
		ios, android bool
	}{
		{"empty", nil, false, false},
		{"1 GiB used: a slim iOS device fits, an Android one does not", []Slot{full}, false, true},
		{"1.5 GiB used: a slim iOS device still fits", []Slot{full, {Platform: contract.PlatformIOS, State: contract.DeviceLeased, Slim: true}}, false, true},
		{"2 GiB used: nothing fits", []Slot{full, full}, true, true},
	} {
		u := Measure(l, c.slots)
		r := Report(l, u, PerPlatform{})
		if got := r.Platforms[contract.PlatformIOS].AtRAMBudget; got != c.ios {
			t.Errorf("%s: ios atRamBudget %v, want %v", c.name, got, c.ios)
		}
		if got := r.Platforms[contract.PlatformAndroid].AtRAMBudget; got != c.android {
			t.Errorf("%s: android atRamBudget %v, want %v", c.name, got, c.android)
		}
		if blocked := CanCreate(l, u, contract.PlatformIOS, true) == BlockRAM; blocked != c.ios {
			t.Errorf("%s: a slim iOS device blocked by RAM %v, but the report says atRamBudget %v", c.name, blocked, c.ios)
		}
	}
}

func TestDownloadAllowedFollowsThePolicyThenTheRequest(t *testing.T) {
	for _, c := range []struct {
		policy string
		allow  bool
		want   bool
	}{
		{"always", false, true},
		{"always", true, true},
		{"never", true, false},
		{"never", false, false},
		{"on-request", true, true},
		{"on-request", false, false},
		{"", true, true},
		{"", false, false},
	} {
		if got := DownloadAllowed(c.policy, c.allow); got != c.want {
			t.Errorf("DownloadAllowed(%q, %v) = %v, want %v", c.policy, c.allow, got, c.want)
		}
	}
}
