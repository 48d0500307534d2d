package ios

import (
	"bytes"
	"errors"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"syscall"
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

func (h *harness) install(t *testing.T, dev driver.Device, body []byte) contract.InstalledApp {
	t.Helper()
	src := stage(t, body)
	app, err := appbundle.Inspect(src)
	if err != nil {
		t.Fatal(err)
	}
	got, err := h.d.InstallApp(t.Context(), dev, driver.AppUpload{App: app, Path: src, Scratch: t.TempDir(), MaxBytes: 1 << 20})
	if err != nil {
		t.Fatalf("InstallApp: %v", err)
	}
	return got
}

func TestFilesRoundTripInTheDataDirectoryAndAnAppsContainer(t *testing.T) {
	h := newHarness(t)
	dev := h.boot(t, h.provision(t, "iPhone 16", "18.6"))
	want := bytes.Repeat([]byte{0, 1, 2, 0xff}, 4096)
	for _, p := range []string{"/Media/DCIM/100APPLE/IMG_0001.JPG", "/empty.txt"} {
		body := want
		if p == "/empty.txt" {
			body = nil
		}
		if err := h.d.PushFile(t.Context(), dev, stage(t, body), p); err != nil {
			t.Fatalf("PushFile %s: %v", p, err)
		}
		dst := filepath.Join(t.TempDir(), "pulled")
		if err := h.d.PullFile(t.Context(), dev, p, dst, 1<<30); err != nil {
			t.Fatalf("PullFile %s: %v", p, err)
		}
		if got, _ := os.ReadFile(dst); !bytes.Equal(got, body) {
			t.Errorf("%s: pulled %d bytes, not the %d pushed", p, len(got), len(body))
		}
	}
	if _, err := os.Stat(filepath.Join(h.root, dev.ID, "data", "Media", "DCIM", "100APPLE", "IMG_0001.JPG")); err != nil {
		t.Errorf("the file is not in the device's data directory: %v", err)
	}

	got := h.install(t, dev, apptest.IPA("com.example.Todo", "Todo"))
	if got != (contract.InstalledApp{Kind: contract.AppIPA, ID: "com.example.Todo", Name: "Todo.app"}) {
		t.Errorf("InstallApp = %+v", got)
	}
	if list := h.xcrun(t, "simctl", "--set", h.root, "listapps", dev.ID); !strings.Contains(list, `"com.example.Todo"`) {
		t.Errorf("listapps does not show the app:\n%s", list)
	}
	if err := h.d.PushFile(t.Context(), dev, stage(t, []byte(`{"k":1}`)), "@com.example.Todo/Documents/state.json"); err != nil {
		t.Fatalf("PushFile into the container: %v", err)
	}
	container := h.xcrun(t, "simctl", "--set", h.root, "get_app_container", dev.ID, "com.example.Todo", "data")
	if b, err := os.ReadFile(filepath.Join(container, "Documents", "state.json")); err != nil || string(b) != `{"k":1}` {
		t.Errorf("the container holds %q %v", b, err)
	}
	var missing *driver.FileMissingError
	if err := h.d.PullFile(t.Context(), dev, "/nothing/here", filepath.Join(t.TempDir(), "x"), 1<<30); !errors.As(err, &missing) {
		t.Errorf("a missing file: got %v, want *FileMissingError", err)
	}
}

func TestFilesNeverLeaveTheDevicesTree(t *testing.T) {
	h := newHarness(t)
	dev := h.boot(t, h.provision(t, "iPhone 16", "18.6"))
	secret := filepath.Join(t.TempDir(), "host-secret")
	if err := os.WriteFile(secret, []byte("the host's"), 0o600); err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(h.root, dev.ID, "data")
	// What a tenant could have planted in its device: links out of it.
	if err := os.Symlink(secret, filepath.Join(data, "out-file")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Dir(secret), filepath.Join(data, "out-dir")); err != nil {
		t.Fatal(err)
	}
	var refusedErr *driver.PathRefusedError
	for _, p := range []string{"/out-file", "/out-dir/host-secret", "/simlock-mark.json", "@com.example.absent/Documents/x"} {
		if err := h.d.PullFile(t.Context(), dev, p, filepath.Join(t.TempDir(), "x"), 1<<30); !errors.As(err, &refusedErr) {
			t.Errorf("pull %s: got %v, want *PathRefusedError", p, err)
		}
		if err := h.d.PushFile(t.Context(), dev, stage(t, []byte("overwritten")), p); !errors.As(err, &refusedErr) {
			t.Errorf("push %s: got %v, want *PathRefusedError", p, err)
		}
	}
	if b, _ := os.ReadFile(secret); string(b) != "the host's" {
		t.Errorf("the host file was written through the device: %q", b)
	}
	if _, err := os.Stat(filepath.Join(data, "simlock-mark.json")); err != nil {
		t.Errorf("the mark was touched: %v", err)
	}
}

func TestInstallRefusesABundleThatLinksOutOfItself(t *testing.T) {
	h := newHarness(t)
	dev := h.boot(t, h.provision(t, "iPhone 16", "18.6"))
	src := stage(t, apptest.AppZipWithLink("com.example.evil", "Evil", "secret", "/etc/passwd"))
	app, err := appbundle.Inspect(src)
	if err != nil {
		t.Fatal(err)
	}
	from := len(h.env.Calls(t))
	_, err = h.d.InstallApp(t.Context(), dev, driver.AppUpload{App: app, Path: src, Scratch: t.TempDir(), MaxBytes: 1 << 20})
	if contract.AsError(driver.ContractError(err)).Code != contract.CodeInvalidApp {
		t.Fatalf("got %v, want INVALID_APP", err)
	}
	for _, c := range h.simctlCalls(t, from) {
		if subcommand(c.Args) == "install" {
			t.Errorf("simctl install ran: %v", c.Args)
		}
	}
}

func TestScreenshotIsAPNGOfTheLeasedDevice(t *testing.T) {
	h := newHarness(t)
	dev := h.boot(t, h.provision(t, "iPhone 16", "18.6"))
	dst := filepath.Join(t.TempDir(), "shot.png")
	from := len(h.env.Calls(t))
	if err := h.d.Screenshot(t.Context(), dev, dst); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(dst)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := png.Decode(f); err != nil {
		t.Errorf("not a PNG: %v", err)
	}
	calls := h.simctlCalls(t, from)
	if len(calls) != 1 || strings.Join(calls[0].Args[3:], " ") != "io "+dev.ID+" screenshot --type=png "+dst {
		t.Errorf("calls %v", calls)
	}
}

// A pull copies at most its bound, and a FIFO a tenant's app made in its
// device is refused at once: opening one would wait for a writer that
// never comes, holding the transfer and a thread of the daemon.
func TestAPullIsBoundedAndAFIFOIsRefusedWithoutWaiting(t *testing.T) {
	h := newHarness(t)
	dev := h.boot(t, h.provision(t, "iPhone 16", "18.6"))
	data := filepath.Join(h.root, dev.ID, "data")
	if err := os.WriteFile(filepath.Join(data, "big.bin"), make([]byte, 2<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(t.TempDir(), "x")
	var tooBig *driver.FileTooLargeError
	if err := h.d.PullFile(t.Context(), dev, "/big.bin", dst, 1<<20); !errors.As(err, &tooBig) {
		t.Errorf("a pull of 2 MiB bounded at 1 MiB: got %v, want *FileTooLargeError", err)
	}
	if _, err := os.Lstat(dst); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a refused pull left its file: %v", err)
	}
	if err := h.d.PullFile(t.Context(), dev, "/big.bin", dst, 2<<20); err != nil {
		t.Errorf("a pull of exactly its bound: %v", err)
	}

	if err := syscall.Mkfifo(filepath.Join(data, "pipe"), 0o644); err != nil {
		t.Fatal(err)
	}
	done := make(chan [2]error, 1)
	go func() {
		pull := h.d.PullFile(t.Context(), dev, "/pipe", filepath.Join(t.TempDir(), "y"), 1<<20)
		push := h.d.PushFile(t.Context(), dev, stage(t, []byte("x")), "/pipe")
		done <- [2]error{pull, push}
	}()
	select {
	case errs := <-done:
		var refused *driver.PathRefusedError
		for i, op := range []string{"pull", "push"} {
			if !errors.As(errs[i], &refused) {
				t.Errorf("a %s of a FIFO: got %v, want *PathRefusedError", op, errs[i])
			}
		}
	case <-time.After(10 * time.Second):
		// The goroutine stays blocked in open(2); the test ends anyway.
		t.Fatal("a pull or push of a FIFO still waits after 10 s")
	}
}

// An app's data container is reached from the device's data directory,
// never by its host path: a container an app replaced with a link out of
// the device leads nowhere.
func TestAContainerLinkedOutOfTheDeviceIsRefused(t *testing.T) {
	h := newHarness(t)
	dev := h.boot(t, h.provision(t, "iPhone 16", "18.6"))
	h.install(t, dev, apptest.IPA("com.example.Todo", "Todo"))
	container := strings.TrimSpace(h.xcrun(t, "simctl", "--set", h.root, "get_app_container", dev.ID, "com.example.Todo", "data"))
	outside := t.TempDir()
	if err := os.WriteFile(filepath.Join(outside, "secret"), []byte("the host's"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(container); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, container); err != nil {
		t.Fatal(err)
	}
	var refused *driver.PathRefusedError
	if err := h.d.PullFile(t.Context(), dev, "@com.example.Todo/secret", filepath.Join(t.TempDir(), "x"), 1<<20); !errors.As(err, &refused) {
		t.Errorf("a pull through a container linked out: got %v, want *PathRefusedError", err)
	}
	if err := h.d.PushFile(t.Context(), dev, stage(t, []byte("planted")), "@com.example.Todo/planted"); !errors.As(err, &refused) {
		t.Errorf("a push through a container linked out: got %v, want *PathRefusedError", err)
	}
	if _, err := os.Stat(filepath.Join(outside, "planted")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a push reached the host through the container: %v", err)
	}
}
