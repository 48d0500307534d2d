package mcpserver

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/simlock/simlock/internal/contract"
)

func TestTheGrantSaysHowToUseTheDeviceOnItsPlatform(t *testing.T) {
	grant := func(p contract.Platform, addr string, env map[string]string) *contract.LeaseGrant {
		return &contract.LeaseGrant{
			Device:      contract.GrantDevice{ID: "dev_1", Address: addr, Spec: contract.DeviceSpec{Platform: p, Model: "M", OSVersion: "1"}},
			Lease:       contract.LeaseRecord{ID: "lse_1"},
			Environment: env,
		}
	}
	cases := []struct {
		name string
		g    *contract.LeaseGrant
		want []string
	}{
		{"ios", grant(contract.PlatformIOS, "UDID-1", map[string]string{"SIMLOCK_IOS_DEVICE_SET": "/sets/a"}),
			[]string{"simlock simctl --lease lse_1 install UDID-1 path/to/App.app", "xcrun simctl --set '/sets/a' <command> UDID-1"}},
		{"android", grant(contract.PlatformAndroid, "emulator-5560", map[string]string{"ANDROID_ADB_SERVER_PORT": "5137"}),
			[]string{"simlock adb --lease lse_1 install app.apk", "ANDROID_ADB_SERVER_PORT=5137 adb -s emulator-5560 <command>"}},
		{"demo", grant(contract.PlatformIOS, "demo-1", map[string]string{"SIMLOCK_DEMO": "1"}),
			[]string{"demo driver", "release_simulator"}},
	}
	for _, c := range cases {
		b, err := json.Marshal(withUsage(c.g))
		if err != nil {
			t.Fatal(err)
		}
		var out map[string]any
		if err := json.Unmarshal(b, &out); err != nil {
			t.Fatal(err)
		}
		u, _ := out["usage"].(string)
		for _, w := range c.want {
			if !strings.Contains(u, w) {
				t.Errorf("%s: usage %q lacks %q", c.name, u, w)
			}
		}
		if lease, _ := out["lease"].(map[string]any); lease["id"] != "lse_1" {
			t.Errorf("%s: the grant's own fields are not at the top level beside usage: %s", c.name, b)
		}
	}
}
