package android_test

import (
	"bytes"
	"context"
	"errors"
	"image/png"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/simlock/simlock/internal/appbundle"
	"github.com/simlock/simlock/internal/appbundle/apptest"
	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/driver"
)

func stage(t *testing.T, b []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "staged")
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestFilesReachTheLeasedEmulatorOnly pushes, pulls, installs and takes a
// screenshot on one of two running emulators, and checks each adb call is
// pinned to it through the private server.
func TestFilesReachTheLeasedEmulatorOnly(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	d := newDriver(t, f.opts)
	ctx := t.Context()
	req := driver.Request{Platform: contract.PlatformAndroid, Model: "pixel_8"}
	dev, err := d.MakeReady(ctx, provision(t, ctx, d, req))
	if err != nil {
		t.Fatal(err)
	}
	other, err := d.MakeReady(ctx, provision(t, ctx, d, req))
	if err != nil {
		t.Fatal(err)
	}
	from := len(calls(t, f.shims, "adb"))

	want := bytes.Repeat([]byte{0, 0xff, 'x', '\n'}, 300_000)
	if err := d.PushFile(ctx, dev, stage(t, want), "/sdcard/Download/blob.bin"); err != nil {
		t.Fatalf("PushFile: %v", err)
	}
	dst := filepath.Join(t.TempDir(), "pulled")
	if err := d.PullFile(ctx, dev, "/sdcard/Download/blob.bin", dst, 1<<30); err != nil {
		t.Fatalf("PullFile: %v", err)
	}
	if got, _ := os.ReadFile(dst); !bytes.Equal(got, want) {
		t.Errorf("pulled %d bytes, not the %d pushed", len(got), len(want))
	}
	var missing *driver.FileMissingError
	if err := d.PullFile(ctx, other, "/sdcard/Download/blob.bin", filepath.Join(t.TempDir(), "x"), 1<<30); !errors.As(err, &missing) {
		t.Errorf("the other emulator has the file: %v", err)
	}

	src := stage(t, apptest.APK("com.example.notes"))
	app, err := appbundle.Inspect(src)
	if err != nil {
		t.Fatal(err)
	}
	got, err := d.InstallApp(ctx, dev, driver.AppUpload{App: app, Path: src, Scratch: t.TempDir(), MaxBytes: 1 << 20})
	if err != nil || got != (contract.InstalledApp{Kind: contract.AppAPK, ID: "com.example.notes"}) {
		t.Fatalf("InstallApp = %+v, %v", got, err)
	}
	if pkgs := packages(t, d, dev.Address); !slices.Contains(pkgs, "com.example.notes") {
		t.Errorf("pm list packages = %v, want com.example.notes", pkgs)
	}
	if pkgs := packages(t, d, other.Address); slices.Contains(pkgs, "com.example.notes") {
		t.Errorf("the app reached the other emulator: %v", pkgs)
	}

	shot := filepath.Join(t.TempDir(), "shot.png")
	if err := d.Screenshot(ctx, dev, shot); err != nil {
		t.Fatalf("Screenshot: %v", err)
	}
	fh, err := os.Open(shot)
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	if _, err := png.Decode(fh); err != nil {
		t.Errorf("not a PNG: %v", err)
	}

	port := strconv.Itoa(f.port)
	for _, c := range calls(t, f.shims, "adb")[from:] {
		if len(c.Args) < 4 || c.Args[0] != "-P" || c.Args[1] != port || c.Args[2] != "-s" {
			continue // the driver's own probes
		}
		switch c.Args[4] {
		case "push", "pull", "install", "exec-out":
			if c.Args[3] != dev.Address && !(c.Args[4] == "pull" && c.Args[3] == other.Address) {
				t.Errorf("adb %v reached %s, not the leased %s", c.Args[4:], c.Args[3], dev.Address)
			}
		}
	}
}

func TestFilesRefuseSimlocksMarkAndAppPaths(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	d, dev := readyPixel(t, f.opts)
	ctx := t.Context()
	from := len(calls(t, f.shims, "adb"))
	var refused *driver.PathRefusedError
	for _, p := range []string{"/data/local/tmp/simlock-mark.json", "@com.example/Documents/x"} {
		if err := d.PushFile(ctx, dev, stage(t, []byte("x")), p); !errors.As(err, &refused) {
			t.Errorf("push %s: got %v, want *PathRefusedError", p, err)
		}
		if err := d.PullFile(ctx, dev, p, filepath.Join(t.TempDir(), "x"), 1<<30); !errors.As(err, &refused) {
			t.Errorf("pull %s: got %v, want *PathRefusedError", p, err)
		}
	}
	// The guest refusing a path is the caller's to fix, not a crash.
	if err := d.PushFile(ctx, dev, stage(t, []byte("x")), "/system/bin/evil"); !errors.As(err, &refused) {
		t.Errorf("push to a read-only path: got %v, want *PathRefusedError", err)
	}
	for _, c := range calls(t, f.shims, "adb")[from:] {
		if has(c.Args, "simlock-mark.json") {
			t.Errorf("adb ran with the mark's path: %v", c.Args)
		}
	}
	// A file that is not an APK never reaches adb install.
	var failed *driver.InstallFailedError
	if _, err := d.InstallApp(ctx, dev, driver.AppUpload{App: appbundle.App{Kind: contract.AppIPA}, Path: stage(t, nil), Scratch: t.TempDir()}); !errors.As(err, &failed) {
		t.Errorf("an ipa on android: got %v, want *InstallFailedError", err)
	}
}

// A pull writes about its bound at most, whatever the device has at the
// path: a file larger than it, a character device with no end (adb pulls
// /dev/zero until it is stopped), or a directory (adb pulls it whole) are
// refused, and nothing is left where the pull wrote.
func TestAPullIsBoundedWhatever(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	d, dev := readyPixel(t, f.opts)
	ctx := t.Context()
	if err := d.PushFile(ctx, dev, stage(t, make([]byte, 3<<20)), "/sdcard/Download/big.bin"); err != nil {
		t.Fatal(err)
	}
	var tooBig *driver.FileTooLargeError
	var refused *driver.PathRefusedError
	for _, tc := range []struct {
		path string
		want any
	}{
		{"/sdcard/Download/big.bin", &tooBig},
		{"/dev/zero", &tooBig},
		{"/sdcard/Download", &refused},
	} {
		dst := filepath.Join(t.TempDir(), "pulled")
		// Well past what the bound takes to be seen; a pull that is not
		// stopped fails here rather than at adb's own half hour.
		cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		err := d.PullFile(cctx, dev, tc.path, dst, 1<<20)
		cancel()
		if !errors.As(err, tc.want) {
			t.Errorf("pull %s bounded at 1 MiB: got %v, want %T", tc.path, err, tc.want)
		}
		if _, err := os.Lstat(dst); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("pull %s left what it wrote: %v", tc.path, err)
		}
	}
	dst := filepath.Join(t.TempDir(), "pulled")
	if err := d.PullFile(ctx, dev, "/sdcard/Download/big.bin", dst, 3<<20); err != nil {
		t.Errorf("a pull of exactly its bound: %v", err)
	}
}

// A screenshot is streamed to its file and cut past a bound no screen's PNG
// reaches: a screencap a rooted tenant replaced cannot fill the daemon's
// memory.
func TestAScreenshotIsCutPastItsBound(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	d, dev := readyPixel(t, f.opts)
	ctx := t.Context()
	cmd, err := d.Passthrough(driver.Target{Device: dev}, []string{"shell", "echo 'flood' > /system/bin/screencap"})
	if err != nil {
		t.Fatal(err)
	}
	if res := runCommand(t, cmd); res.ExitCode != 0 {
		t.Fatalf("replacing screencap: %s", res.Stderr)
	}
	dst := filepath.Join(t.TempDir(), "shot.png")
	if err := d.Screenshot(ctx, dev, dst); err == nil {
		t.Errorf("a 96 MiB screenshot was taken")
	}
	if _, err := os.Lstat(dst); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a refused screenshot left its file: %v", err)
	}
}
