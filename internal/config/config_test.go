package config

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestDefaults(t *testing.T) {
	c := Default()
	if c.String("capacity.strategy") != "resource" || c.Int("capacity.config.maxRunning") != 2 ||
		c.Int("lease.defaultTtlMs") != 900000 || c.Int("lease.maxTtlMs") != 14400000 || c.Bool("drivers.demo.enabled") {
		t.Errorf("defaults = %v", c.Flat())
	}
	if _, set := c.IntSet("capacity.config.ios.maxRunning"); set {
		t.Error("optional keys start unset")
	}
}

func TestParseMergesWarnsAndRefuses(t *testing.T) {
	c, err := Parse([]byte(`{"capacity":{"strategy":"fixed","config":{"maxRunning":1}},"lease":{"defaultTtlMs":60000},"mystery":{"x":1}}`))
	if err != nil {
		t.Fatal(err)
	}
	if c.Int("capacity.config.maxRunning") != 1 || c.Int("lease.defaultTtlMs") != 60000 || c.Int("lease.maxTtlMs") != 14400000 {
		t.Errorf("merged = %v", c.Flat())
	}
	if len(c.Warnings) != 1 || !strings.Contains(c.Warnings[0], "mystery.x") {
		t.Errorf("warnings = %v", c.Warnings)
	}
	bad := map[string]string{
		`{"lease":{"defaultTtlMs":-1}}`:                         "lease.defaultTtlMs",
		`{"lease":{"defaultTtlMs":"long"}}`:                     "lease.defaultTtlMs",
		`{"capacity":{"strategy":"magic"}}`:                     "capacity.strategy",
		`{"drivers":{"demo":{"fail":["explode"]}}}`:             "drivers.demo.fail",
		`{"lease":{"defaultTtlMs":7200000,"maxTtlMs":3600000}}`: "lease.defaultTtlMs",
		`{"capacity":{"config":{"maxRunning":0}}}`:              "capacity.config.maxRunning",
	}
	for doc, key := range bad {
		_, err := Parse([]byte(doc))
		var ce *Error
		if !errors.As(err, &ce) || ce.Key != key {
			t.Errorf("%s: err = %v, want one naming %s", doc, err, key)
		}
	}
}

func TestSetValidatesAndKeepsOtherSettings(t *testing.T) {
	home := t.TempDir()
	if _, err := Set(home, "capacity.strategy", "fixed"); err != nil {
		t.Fatal(err)
	}
	if _, err := Set(home, "drivers.demo.fail", "boot,reclaim"); err != nil {
		t.Fatal(err)
	}
	if _, err := Set(home, "lease.maxTtlMs", "abc"); err == nil {
		t.Error("non-integer accepted")
	}
	if _, err := Set(home, "lease.maxTtlMs", "1000"); err == nil {
		t.Error("maxTtlMs below the default TTL accepted")
	}
	if _, err := Set(home, "no.such.key", "1"); err == nil {
		t.Error("unknown key accepted")
	}
	c, err := Load(home)
	if err != nil {
		t.Fatal(err)
	}
	if c.String("capacity.strategy") != "fixed" || strings.Join(c.List("drivers.demo.fail"), ",") != "boot,reclaim" || c.Int("lease.maxTtlMs") != 14400000 {
		t.Errorf("after set: %v", c.Flat())
	}
	st, err := os.Stat(filepath.Join(home, "config.json"))
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("config.json mode = %v, %v", st.Mode().Perm(), err)
	}
}

func TestFixedStrategyShorthands(t *testing.T) {
	c, err := Parse([]byte(`{"capacity":{"strategy":"fixed","maxRunning":1,"ios":{"maxDevices":3}}}`))
	if err != nil {
		t.Fatal(err)
	}
	if c.Int("capacity.config.maxRunning") != 1 || c.Int("capacity.config.ios.maxDevices") != 3 || len(c.Warnings) != 0 {
		t.Errorf("shorthands not applied: %v %v", c.Flat(), c.Warnings)
	}
	if _, err := Parse([]byte(`{"capacity":{"maxRunning":1,"config":{"maxRunning":2}}}`)); err == nil {
		t.Error("both spellings of one key accepted")
	}
	home := t.TempDir()
	if _, err := Set(home, "capacity.maxRunning", "1"); err != nil {
		t.Fatal(err)
	}
	c, err = Load(home)
	if err != nil || c.Int("capacity.config.maxRunning") != 1 {
		t.Fatalf("after set: %v, %v", c, err)
	}
	if v, ok := c.Get("capacity.maxRunning"); !ok || v != int64(1) {
		t.Errorf("get by shorthand = %v, %v", v, ok)
	}
}

func TestDriverKeys(t *testing.T) {
	c, err := Parse([]byte(`{"drivers":{"enabled":["ios","demo"],"ios":{"deviceRoot":"/srv/sims"}},"android":{"defaultModels":{"phone":"Pixel 8"}},"ios":{"defaultModels":{"tablet":["iPad Air 11-inch (M3)","iPad (A16)"]}}}`))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(c.List("drivers.enabled"), ",") != "ios,demo" || c.String("drivers.ios.deviceRoot") != "/srv/sims" {
		t.Errorf("drivers = %v", c.Flat())
	}
	if got := c.List("android.defaultModels.phone"); len(got) != 1 || got[0] != "Pixel 8" {
		t.Errorf("a single model is a one-item list: %v", got)
	}
	if got := c.List("ios.defaultModels.tablet"); len(got) != 2 {
		t.Errorf("tablet list = %v", got)
	}
	if c.Int("drivers.android.adbServerPort") != 5038 || Default().Has("drivers.enabled") {
		t.Error("adb port default 5038; drivers.enabled unset by default")
	}
	for doc, key := range map[string]string{
		`{"drivers":{"android":{"adbServerPort":5037}}}`: "drivers.android.adbServerPort",
		`{"drivers":{"enabled":["windows"]}}`:            "drivers.enabled",
		`{"ios":{"defaultModels":{"phone":[]}}}`:         "ios.defaultModels.phone",
		`{"drivers":{"ios":{"deviceRoot":7}}}`:           "drivers.ios.deviceRoot",
	} {
		_, err := Parse([]byte(doc))
		var ce *Error
		if !errors.As(err, &ce) || ce.Key != key {
			t.Errorf("%s: %v, want an error naming %s", doc, err, key)
		}
	}
	home := t.TempDir()
	if _, err := Set(home, "ios.defaultModels.phone", "iPhone 16"); err != nil {
		t.Fatal(err)
	}
	if _, err := Set(home, "drivers.enabled", "ios,android"); err != nil {
		t.Fatal(err)
	}
}

func TestEndWaitMsBounds(t *testing.T) {
	if Default().Int("lease.endWaitMs") != 600000 {
		t.Errorf("lease.endWaitMs default = %d", Default().Int("lease.endWaitMs"))
	}
	for _, ok := range []string{`1`, `2147483647`} {
		if _, err := Parse([]byte(`{"lease":{"endWaitMs":` + ok + `}}`)); err != nil {
			t.Errorf("lease.endWaitMs %s refused: %v", ok, err)
		}
	}
	for _, bad := range []string{`0`, `-5`, `2147483648`, `"10m"`} {
		_, err := Parse([]byte(`{"lease":{"endWaitMs":` + bad + `}}`))
		if err == nil || !strings.Contains(err.Error(), "lease.endWaitMs") {
			t.Errorf("lease.endWaitMs %s: %v, want an error naming the key", bad, err)
		}
	}
}

func TestDemoDownloadableRuntimesIsAnObjectOfLists(t *testing.T) {
	c, err := Parse([]byte(`{"drivers":{"demo":{"downloadableRuntimes":{"ios":["27.0"]}}}}`))
	if err != nil {
		t.Fatal(err)
	}
	if got := c.PlatformLists("drivers.demo.downloadableRuntimes"); len(got) != 1 || len(got["ios"]) != 1 || got["ios"][0] != "27.0" {
		t.Errorf("parsed = %v", got)
	}
	for _, bad := range []string{`["26.4"]`, `{"windows":["1"]}`, `{"ios":"26.4"}`, `{"ios":[""]}`} {
		if _, err := Parse([]byte(`{"drivers":{"demo":{"downloadableRuntimes":` + bad + `}}}`)); err == nil {
			t.Errorf("accepted %s", bad)
		}
	}
}

func TestWarmPoolTargetsAreStrict(t *testing.T) {
	c, err := Parse([]byte(`{"warmPool":{"targets":[{"platform":"ios","model":"iPhone 17","osVersion":"26","count":2}]}}`))
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Targets("warmPool.targets"); len(got) != 1 || got[0] != (WarmTarget{Platform: "ios", Model: "iPhone 17", OSVersion: "26", Count: 2}) {
		t.Errorf("targets = %+v", got)
	}
	for _, bad := range []string{
		`[{"platform":"ios","model":"iPhone 17","count":0}]`,
		`[{"platform":"ios","class":"phone","count":1}]`,
		`[{"platform":"windows","model":"x","count":1}]`,
		`[{"platform":"ios","count":1}]`,
		`{"platform":"ios"}`,
		`[{"platform":"android","model":"Pixel 9","mode":"slim","count":1}]`,
		`[{"platform":"ios","model":"iPhone 17","mode":"thin","count":1}]`,
		`[{"platform":"ios","model":"iPhone 17","imageTag":"google_apis","count":1}]`,
		`[{"platform":"android","model":"Pixel 9","imageTag":"bad tag","count":1}]`,
		`[{"platform":"android","model":"Pixel 9","imageTag":"","count":1}]`,
	} {
		if _, err := Parse([]byte(`{"warmPool":{"targets":` + bad + `}}`)); err == nil || !strings.Contains(err.Error(), "warmPool.targets") {
			t.Errorf("accepted %s (%v)", bad, err)
		}
	}
	c, err = Parse([]byte(`{"warmPool":{"targets":[{"platform":"android","model":"Pixel 9","imageTag":"google_apis_playstore","count":1},` +
		`{"platform":"ios","model":"iPhone 17","mode":"slim","count":1}]}}`))
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Targets("warmPool.targets"); len(got) != 2 || got[0].ImageTag != "google_apis_playstore" || got[1].Mode != "slim" {
		t.Errorf("targets with a tag and a mode = %+v", got)
	}
}

func TestAndroidEmulatorKeys(t *testing.T) {
	c := Default()
	if !c.Bool("android.emulator.headless") || c.String("android.emulator.gpu") != "auto" ||
		c.Bool("android.emulator.audio") || c.Bool("android.emulator.bootAnimation") {
		t.Errorf("emulator defaults = headless %v, gpu %q, audio %v, bootAnimation %v; want true, auto, false, false",
			c.Bool("android.emulator.headless"), c.String("android.emulator.gpu"), c.Bool("android.emulator.audio"), c.Bool("android.emulator.bootAnimation"))
	}
	c, err := Parse([]byte(`{"android":{"emulator":{"headless":false,"gpu":"swiftshader_indirect","audio":true,"bootAnimation":true},"defaultModels":{"phone":"Pixel 8"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	if c.Bool("android.emulator.headless") || c.String("android.emulator.gpu") != "swiftshader_indirect" ||
		!c.Bool("android.emulator.audio") || !c.Bool("android.emulator.bootAnimation") || len(c.Warnings) != 0 {
		t.Errorf("parsed = %v, warnings %v", c.Flat(), c.Warnings)
	}
	for _, mode := range []string{"auto", "host", "swiftshader_indirect", "angle_indirect", "guest"} {
		if _, err := Parse([]byte(`{"android":{"emulator":{"gpu":"` + mode + `"}}}`)); err != nil {
			t.Errorf("gpu %s refused: %v", mode, err)
		}
	}
	for doc, key := range map[string]string{
		`{"android":{"emulator":{"gpu":"vulkan"}}}`:     "android.emulator.gpu",
		`{"android":{"emulator":{"gpu":"host -qemu"}}}`: "android.emulator.gpu",
		`{"android":{"emulator":{"headless":"yes"}}}`:   "android.emulator.headless",
		`{"android":{"emulator":{"bootAnimation":1}}}`:  "android.emulator.bootAnimation",
		`{"android":{"emulator":{"audio":null}}}`:       "android.emulator.audio",
	} {
		_, err := Parse([]byte(doc))
		var ce *Error
		if !errors.As(err, &ce) || ce.Key != key {
			t.Errorf("%s: %v, want an error naming %s", doc, err, key)
		}
	}
	home := t.TempDir()
	if _, err := Set(home, "android.emulator.gpu", "metal"); err == nil {
		t.Error("config set accepted gpu metal")
	}
	if _, err := Set(home, "android.emulator.gpu", "host"); err != nil {
		t.Fatal(err)
	}
	if c, err := Load(home); err != nil || c.String("android.emulator.gpu") != "host" {
		t.Errorf("after set: %v, %v", c, err)
	}
}

// Every key is in docs/CONFIGURATION.md's table, by its name or, for the
// per-class keys, by its pattern (ios.defaultModels.<class>).
func TestEveryKeyIsDocumented(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "docs", "CONFIGURATION.md"))
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	for _, k := range Keys() {
		name := k.Key
		if i := strings.Index(name, ".defaultModels."); i >= 0 {
			name = name[:i] + ".defaultModels.<class>"
		}
		if !strings.Contains(doc, "`"+name+"`") {
			t.Errorf("%s is not in docs/CONFIGURATION.md", name)
		}
	}
}

// A worker's uplink carries its join token and an admin session: plain
// http:// to another machine is refused unless gateway.allowInsecure says
// the network is trusted; loopback and https:// need no such word.
func TestAnInsecureGatewayURLToAnotherMachineNeedsAllowInsecure(t *testing.T) {
	for url, ok := range map[string]bool{
		"https://gw.example:7430":  true,
		"http://127.0.0.1:7430":    true,
		"http://127.8.9.10:7430":   true,
		"http://localhost:7430":    true,
		"http://LOCALHOST:7430":    true,
		"http://[::1]:7430":        true,
		"http://10.1.2.3:7430":     false,
		"http://gw.example:7430":   false,
		"http://localhost.evil:80": false,
		"http://[2001:db8::1]:80":  false,
	} {
		_, err := Parse([]byte(`{"gateway":{"url":"` + url + `"}}`))
		var ce *Error
		switch {
		case ok && err != nil:
			t.Errorf("%s: %v, want it allowed", url, err)
		case !ok && (!errors.As(err, &ce) || ce.Key != "gateway.url" || !strings.Contains(ce.Msg, "clear text") || !strings.Contains(ce.Msg, "gateway.allowInsecure")):
			t.Errorf("%s: %v, want it refused naming gateway.url, saying why and how to allow it", url, err)
		}
		if !ok {
			if _, err := Parse([]byte(`{"gateway":{"url":"` + url + `","allowInsecure":true}}`)); err != nil {
				t.Errorf("%s with gateway.allowInsecure: %v, want it allowed", url, err)
			}
		}
	}
	home := t.TempDir()
	if _, err := Set(home, "gateway.url", "http://10.1.2.3:7430"); err == nil {
		t.Error("config set of an insecure gateway.url succeeded")
	}
	if _, err := Set(home, "gateway.allowInsecure", "true"); err != nil {
		t.Fatal(err)
	}
	if _, err := Set(home, "gateway.url", "http://10.1.2.3:7430"); err != nil {
		t.Errorf("config set of the same url once allowed: %v", err)
	}
}

// The replicas' keys are checked as gateway.url is: each item of
// gateway.urls (the same rule, plain http to another machine included),
// gateway.advertiseUrl a bare origin, gateway.leaderTimeoutMs within its
// bounds. A refused set names the key and leaves the file as it was.
func TestTheReplicaKeysAreChecked(t *testing.T) {
	for _, tc := range []struct {
		key, value string
		ok         bool
	}{
		{"gateway.urls", "https://gw-1:7430,https://gw-2:7430", true},
		{"gateway.urls", `["http://127.0.0.1:7430","https://gw-2:7430/"]`, true},
		{"gateway.urls", "https://gw-1:7430,ftp://gw-2:21", false},
		{"gateway.urls", "https://gw-1:7430,https://gw-2:7430/path", false},
		{"gateway.urls", "https://user:pw@gw-1:7430", false},
		{"gateway.urls", "http://10.1.2.3:7430", false},
		{"gateway.advertiseUrl", "https://gw-1.example:7430", true},
		{"gateway.advertiseUrl", "gw-1.example:7430", false},
		{"gateway.advertiseUrl", "https://gw-1.example:7430/api?x=1", false},
		{"gateway.leaderTimeoutMs", "1000", true},
		{"gateway.leaderTimeoutMs", "999", false},
		{"gateway.leaderTimeoutMs", "60001", false},
	} {
		home := t.TempDir()
		_, err := Set(home, tc.key, tc.value)
		var ce *Error
		switch {
		case tc.ok && err != nil:
			t.Errorf("set %s %q: %v, want it taken", tc.key, tc.value, err)
		case !tc.ok && (!errors.As(err, &ce) || ce.Key != tc.key):
			t.Errorf("set %s %q: %v, want it refused naming %s", tc.key, tc.value, err, tc.key)
		case !tc.ok:
			if _, statErr := os.Stat(Path(home)); statErr == nil {
				t.Errorf("set %s %q was refused but wrote the config file", tc.key, tc.value)
			}
		}
	}
}
