package daemon

import (
	"errors"
	"slices"
	"testing"

	"github.com/simlock/simlock/internal/config"
	"github.com/simlock/simlock/internal/driver/android"
)

func TestEnabledDrivers(t *testing.T) {
	found := func(string) (string, error) { return "/usr/bin/xcrun", nil }
	missing := func(string) (string, error) { return "", errors.New("not found") }
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	demoOn, _ := config.Parse([]byte(`{"drivers":{"demo":{"enabled":true}}}`))
	listed, _ := config.Parse([]byte(`{"drivers":{"enabled":["android"]}}`))
	cases := []struct {
		name     string
		cfg      *config.Config
		env      map[string]string
		look     func(string) (string, error)
		want     []string
		explicit bool
	}{
		{"tools found", config.Default(), map[string]string{"ANDROID_HOME": "/sdk"}, found, []string{"ios", "android"}, false},
		{"nothing found", config.Default(), nil, missing, nil, false},
		{"demo never by default", config.Default(), nil, missing, nil, false},
		{"demo when configured", demoOn, nil, missing, []string{"demo"}, false},
		{"config list", listed, map[string]string{"ANDROID_HOME": "/sdk"}, found, []string{"android"}, true},
		{"env overrides config", listed, map[string]string{"SIMLOCK_DRIVERS": "ios, demo"}, found, []string{"ios", "demo"}, true},
		{"ANDROID_SDK_ROOT counts", config.Default(), map[string]string{"ANDROID_SDK_ROOT": "/sdk"}, missing, []string{"android"}, false},
	}
	for _, c := range cases {
		got, explicit, err := enabledDrivers(c.cfg, env(c.env), c.look)
		if err != nil || !slices.Equal(got, c.want) || explicit != c.explicit {
			t.Errorf("%s: %v explicit=%v err=%v; want %v explicit=%v", c.name, got, explicit, err, c.want, c.explicit)
		}
	}
	if _, _, err := enabledDrivers(config.Default(), env(map[string]string{"SIMLOCK_DRIVERS": "ios,windows"}), found); err == nil {
		t.Error("an unknown driver name was accepted")
	}
}

func TestTheEmulatorKeysReachTheAndroidDriversOptions(t *testing.T) {
	if got, want := emulatorOptions(config.Default()), (android.EmulatorOptions{GPU: "auto"}); got != want {
		t.Errorf("defaults: %+v, want %+v (headless, no audio, no boot animation)", got, want)
	}
	cfg, err := config.Parse([]byte(`{"android":{"emulator":{"headless":false,"gpu":"host","audio":true,"bootAnimation":true}}}`))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := emulatorOptions(cfg), (android.EmulatorOptions{Window: true, GPU: "host", Audio: true, BootAnimation: true}); got != want {
		t.Errorf("from config: %+v, want %+v", got, want)
	}
}
