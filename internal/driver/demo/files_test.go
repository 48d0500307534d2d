package demo_test

import (
	"bytes"
	"errors"
	"image/color"
	"image/png"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/simlock/simlock/internal/appbundle"
	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/driver"
	"github.com/simlock/simlock/internal/driver/demo"
)

func staged(t *testing.T, b []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "staged")
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestDemoFilesRoundTripAndAReclaimWipesThem(t *testing.T) {
	for _, p := range []contract.Platform{contract.PlatformIOS, contract.PlatformAndroid} {
		t.Run(string(p), func(t *testing.T) {
			d := newDriver(t, demo.Options{Platform: p})
			dev := boot(t, d, provision(t, d))
			want := bytes.Repeat([]byte("simlock\x00"), 1000)
			if err := d.PushFile(t.Context(), dev, staged(t, want), "/sdcard/a.bin"); err != nil {
				t.Fatalf("PushFile: %v", err)
			}
			dst := filepath.Join(t.TempDir(), "pulled")
			if err := d.PullFile(t.Context(), dev, "/sdcard/a.bin", dst, 1<<30); err != nil {
				t.Fatalf("PullFile: %v", err)
			}
			if got, _ := os.ReadFile(dst); !bytes.Equal(got, want) {
				t.Fatalf("pulled %d bytes, not the %d pushed", len(got), len(want))
			}
			var tooBig *driver.FileTooLargeError
			if err := d.PullFile(t.Context(), dev, "/sdcard/a.bin", filepath.Join(t.TempDir(), "short"), int64(len(want)-1)); !errors.As(err, &tooBig) {
				t.Errorf("a pull one byte over its bound: got %v, want *FileTooLargeError", err)
			}
			app, err := d.InstallApp(t.Context(), dev, driver.AppUpload{App: appbundle.App{Kind: contract.AppAPK, ID: "com.example.notes"}})
			if err != nil || app.ID != "com.example.notes" {
				t.Fatalf("InstallApp: %+v %v", app, err)
			}
			if got := d.Apps(dev.ID); !slices.Equal(got, []string{"com.example.notes"}) {
				t.Fatalf("apps %v", got)
			}
			if _, err := d.Reclaim(t.Context(), dev); err != nil {
				t.Fatal(err)
			}
			dev = boot(t, d, dev)
			var missing *driver.FileMissingError
			if err := d.PullFile(t.Context(), dev, "/sdcard/a.bin", filepath.Join(t.TempDir(), "again"), 1<<30); !errors.As(err, &missing) {
				t.Errorf("after a reclaim the file is still there: %v", err)
			}
			if got := d.Apps(dev.ID); len(got) != 0 {
				t.Errorf("after a reclaim apps %v remain", got)
			}
		})
	}
}

func TestDemoFilesRefuseWhatThePlatformDoesNotServe(t *testing.T) {
	ios := newDriver(t, demo.Options{Platform: contract.PlatformIOS})
	iosDev := boot(t, ios, provision(t, ios))
	android := newDriver(t, demo.Options{Platform: contract.PlatformAndroid})
	androidDev := boot(t, android, provision(t, android))
	src := staged(t, []byte("x"))
	for name, tc := range map[string]struct {
		d    *demo.Driver
		dev  driver.Device
		path string
	}{
		"android's mark":          {android, androidDev, "/data/local/tmp/simlock-mark.json"},
		"ios's mark":              {ios, iosDev, "/simlock-mark.json"},
		"an app path on android":  {android, androidDev, "@com.example/Documents/x"},
		"an app that is not here": {ios, iosDev, "@com.example.absent/Documents/x"},
	} {
		t.Run(name, func(t *testing.T) {
			var refused *driver.PathRefusedError
			if err := tc.d.PushFile(t.Context(), tc.dev, src, tc.path); !errors.As(err, &refused) {
				t.Errorf("push: got %v, want *PathRefusedError", err)
			}
			if err := tc.d.PullFile(t.Context(), tc.dev, tc.path, filepath.Join(t.TempDir(), "out"), 1<<30); !errors.As(err, &refused) {
				t.Errorf("pull: got %v, want *PathRefusedError", err)
			}
		})
	}
	if _, err := ios.InstallApp(t.Context(), iosDev, driver.AppUpload{App: appbundle.App{Kind: contract.AppIPA, ID: "com.example.here", Name: "Here.app"}}); err != nil {
		t.Fatal(err)
	}
	if err := ios.PushFile(t.Context(), iosDev, src, "@com.example.here/Documents/x"); err != nil {
		t.Errorf("a path in an installed app's container: %v", err)
	}
}

func TestDemoScreenshotIsAPNG(t *testing.T) {
	d := newDriver(t, demo.Options{Platform: contract.PlatformAndroid})
	dev := boot(t, d, provision(t, d))
	dst := filepath.Join(t.TempDir(), "shot.png")
	if err := d.Screenshot(t.Context(), dev, dst); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(dst)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	light, err := png.Decode(f)
	if err != nil {
		t.Fatalf("not a PNG: %v", err)
	}
	// Dark mode shows: the screen's corner goes dark.
	if err := d.SetAppearance(t.Context(), dev, contract.AppearanceDark); err != nil {
		t.Fatal(err)
	}
	darkPath := filepath.Join(t.TempDir(), "dark.png")
	if err := d.Screenshot(t.Context(), dev, darkPath); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(darkPath)
	if err != nil {
		t.Fatal(err)
	}
	dark, err := png.Decode(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("the dark screenshot is not a PNG: %v", err)
	}
	brightness := func(c color.Color) uint32 { r, g, b, _ := c.RGBA(); return r + g + b }
	if brightness(dark.At(0, 0)) >= brightness(light.At(0, 0)) {
		t.Errorf("in dark mode the screenshot's background %v is not darker than %v", dark.At(0, 0), light.At(0, 0))
	}
	if _, err := d.Reclaim(t.Context(), dev); err != nil {
		t.Fatal(err)
	}
	if err := d.Shutdown(t.Context(), dev); err != nil {
		t.Fatal(err)
	}
	if err := d.Screenshot(t.Context(), dev, filepath.Join(t.TempDir(), "x.png")); err == nil {
		t.Error("a stopped device took a screenshot")
	}
}
