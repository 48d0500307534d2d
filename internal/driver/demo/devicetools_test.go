package demo_test

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/simlock/simlock/internal/appbundle"
	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/driver"
	"github.com/simlock/simlock/internal/driver/demo"
)

// The demo's device tools change what its device records, log what they
// did, refuse an app that is not installed, and are wiped by a clean.
func TestDemoDeviceToolsAreRecordedAndAReclaimWipesThem(t *testing.T) {
	for _, p := range []contract.Platform{contract.PlatformIOS, contract.PlatformAndroid} {
		t.Run(string(p), func(t *testing.T) {
			d := newDriver(t, demo.Options{Platform: p})
			dev := boot(t, d, provision(t, d))
			ctx := t.Context()
			var missing *driver.AppNotInstalledError
			if _, err := d.LaunchApp(ctx, dev, "com.example.notes", nil); !errors.As(err, &missing) {
				t.Fatalf("launch before install: got %v, want *AppNotInstalledError", err)
			}
			if _, err := d.InstallApp(ctx, dev, driver.AppUpload{App: appbundle.App{Kind: contract.AppAPK, ID: "com.example.notes"}}); err != nil {
				t.Fatal(err)
			}
			got, err := d.LaunchApp(ctx, dev, "com.example.notes", nil)
			if err != nil || got.AppID != "com.example.notes" {
				t.Fatalf("launch: %+v %v", got, err)
			}
			if err := d.OpenURL(ctx, dev, "myapp://item/1"); err != nil {
				t.Fatal(err)
			}
			if err := d.SetLocation(ctx, dev, 51.5, -0.12); err != nil {
				t.Fatal(err)
			}
			if err := d.SetAppearance(ctx, dev, contract.AppearanceDark); err != nil {
				t.Fatal(err)
			}
			st := d.Tools(dev.ID)
			if !slices.Equal(st.Running, []string{"com.example.notes"}) || !slices.Equal(st.URLs, []string{"myapp://item/1"}) ||
				st.Location == nil || *st.Location != [2]float64{51.5, -0.12} || st.Appearance != contract.AppearanceDark {
				t.Errorf("recorded %+v", st)
			}
			if err := d.TerminateApp(ctx, dev, "com.example.notes"); err != nil {
				t.Fatal(err)
			}
			if err := d.TerminateApp(ctx, dev, "com.example.notes"); err != nil {
				t.Errorf("terminating an app that is not running: %v", err)
			}
			if st := d.Tools(dev.ID); len(st.Running) != 0 {
				t.Errorf("still running: %v", st.Running)
			}
			logs, err := d.DeviceLogs(ctx, dev, driver.LogQuery{Lines: 100, Process: "com.example.notes"})
			if err != nil || len(logs.Lines) != 1 || !strings.Contains(logs.Lines[0], "com.example.notes started") {
				t.Errorf("the app's log: %q %v", logs.Lines, err)
			}
			logs, err = d.DeviceLogs(ctx, dev, driver.LogQuery{Lines: 2})
			if err != nil || len(logs.Lines) != 2 || !strings.Contains(logs.Lines[1], "terminated com.example.notes") {
				t.Errorf("the last 2 lines: %q %v", logs.Lines, err)
			}
			if logs, _ := d.DeviceLogs(ctx, dev, driver.LogQuery{Lines: 100, Since: time.Hour}); len(logs.Lines) < 6 {
				t.Errorf("the last hour: %q", logs.Lines)
			}
			if _, err := d.Reclaim(ctx, dev); err != nil {
				t.Fatal(err)
			}
			dev = boot(t, d, dev)
			if st := d.Tools(dev.ID); st.Location != nil || st.Appearance != "" || len(st.URLs) != 0 {
				t.Errorf("a reclaim left %+v", st)
			}
		})
	}
}

func TestDemoChecksTheIDsOfItsPlatform(t *testing.T) {
	d := newDriver(t, demo.Options{Platform: contract.PlatformAndroid})
	dev := boot(t, d, provision(t, d))
	for _, id := range []string{"com.example-app", "Todo"} {
		if _, err := d.LaunchApp(t.Context(), dev, id, nil); contract.AsError(err).Code != contract.CodeBadRequest {
			t.Errorf("android launch %q: got %v, want BAD_REQUEST", id, err)
		}
	}
}
