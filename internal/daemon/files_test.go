package daemon

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"image/png"
	"io"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/simlock/simlock/internal/appbundle/apptest"
	"github.com/simlock/simlock/internal/client"
	"github.com/simlock/simlock/internal/config"
	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/driver"
	"github.com/simlock/simlock/internal/driver/demo"
)

func lease(t *testing.T, c *client.Client, p contract.Platform) contract.LeaseGrant {
	t.Helper()
	g, err := c.RequestLease(context.Background(), contract.LeaseRequestInput{Platform: p}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func into(w io.Writer) func(contract.TransferInfo) (io.Writer, error) {
	return func(contract.TransferInfo) (io.Writer, error) { return w, nil }
}

// staged lists what is under the home's staging directory.
func staged(t *testing.T, home string) []string {
	t.Helper()
	var out []string
	_ = filepath.WalkDir(filepath.Join(home, stagingName), func(p string, d os.DirEntry, err error) error {
		if err == nil && p != filepath.Join(home, stagingName) {
			out = append(out, p)
		}
		return nil
	})
	return out
}

func size(n int) *int64 { v := int64(n); return &v }

func TestFilesRoundTripThroughTheSocketAndLeaveNothingStaged(t *testing.T) {
	_, home := startDaemon(t, nil)
	c := dial(t, home, "a", false)
	g := lease(t, c, contract.PlatformAndroid)
	ctx := context.Background()
	big := make([]byte, 3<<20+17)
	_, _ = rand.Read(big)
	for name, body := range map[string][]byte{"/sdcard/big.bin": big, "/sdcard/empty": {}} {
		res, err := c.PushFile(ctx, contract.FilesPutInput{LeaseID: g.Lease.ID, Path: name, Size: size(len(body))}, bytes.NewReader(body))
		if err != nil || res.Bytes != int64(len(body)) || res.Path != name || res.LeaseID != g.Lease.ID {
			t.Fatalf("push %s: %+v %v", name, res, err)
		}
		var got bytes.Buffer
		info, n, err := c.PullFile(ctx, contract.FilesGetInput{LeaseID: g.Lease.ID, Path: name}, into(&got))
		if err != nil || n != int64(len(body)) || info.Size == nil || *info.Size != int64(len(body)) {
			t.Fatalf("pull %s: %+v %d %v", name, info, n, err)
		}
		if !bytes.Equal(got.Bytes(), body) {
			t.Errorf("%s: pulled %d bytes that differ from the %d pushed", name, got.Len(), len(body))
		}
	}
	var shot bytes.Buffer
	info, _, err := c.Screenshot(ctx, contract.ScreenshotInput{LeaseID: g.Lease.ID}, into(&shot))
	if err != nil || info.ContentType != "image/png" {
		t.Fatalf("screenshot: %+v %v", info, err)
	}
	if _, err := png.Decode(&shot); err != nil {
		t.Errorf("the screenshot is not a PNG: %v", err)
	}
	res, err := c.InstallApp(ctx, contract.AppInstallInput{LeaseID: g.Lease.ID}, bytes.NewReader(apptest.APK("com.example.notes")))
	if err != nil || res.App == nil || *res.App != (contract.InstalledApp{Kind: contract.AppAPK, ID: "com.example.notes"}) {
		t.Fatalf("install: %+v %v", res, err)
	}
	for _, p := range staged(t, home) {
		if filepath.Dir(p) != filepath.Join(home, stagingName) {
			t.Errorf("left staged after the transfers ended: %s", p)
		}
	}
	events := subscribe(t, home)
	if _, err := c.Release(ctx, g.Lease.ID); err != nil {
		t.Fatal(err)
	}
	// The clean starts once the lease's transfers have ended.
	awaitReclaimed(t, events, g.Device.ID)
	if left := staged(t, home); len(left) != 0 {
		t.Errorf("the lease's staging is still there after its release: %v", left)
	}
}

// subscribe follows home's events as an admin.
func subscribe(t *testing.T, home string) <-chan contract.Event {
	t.Helper()
	ch, _, err := dial(t, home, "observer", true).Subscribe(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return ch
}

// awaitReclaimed waits for device.reclaimed of device id.
func awaitReclaimed(t *testing.T, events <-chan contract.Event, id string) {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case ev := <-events:
			var p struct {
				DeviceID string `json:"deviceId"`
			}
			_ = json.Unmarshal(ev.Payload, &p)
			if ev.Event == "device.reclaimed" && p.DeviceID == id {
				return
			}
		case <-timeout:
			t.Fatalf("no device.reclaimed for %s within 10 s", id)
		}
	}
}

func TestAnAppIsToldApartByContentAndMustFitThePlatform(t *testing.T) {
	_, home := startDaemon(t, nil)
	c := dial(t, home, "a", false)
	ios := lease(t, c, contract.PlatformIOS)
	ctx := context.Background()
	for name, tc := range map[string]struct {
		body []byte
		code contract.Code
	}{
		"text named like an app":  {[]byte("not an app"), contract.CodeInvalidApp},
		"an apk on an iOS device": {apptest.APK("com.example.x"), contract.CodeInvalidApp},
		"an ipa":                  {apptest.IPA("com.example.Todo", "Todo"), ""},
		"a zipped app":            {apptest.AppZip("com.example.Maps", "Maps"), ""},
	} {
		res, err := c.InstallApp(ctx, contract.AppInstallInput{LeaseID: ios.Lease.ID}, bytes.NewReader(tc.body))
		if code(err) != tc.code {
			t.Errorf("%s: got %+v %v, want %q", name, res, err, tc.code)
		}
	}
}

func TestOnlyTheLeasesOwnerMovesItsFiles(t *testing.T) {
	_, home := startDaemon(t, nil)
	a := dial(t, home, "a", false)
	b := dial(t, home, "b", false)
	g := lease(t, a, contract.PlatformAndroid)
	ctx := context.Background()
	_, err := b.PushFile(ctx, contract.FilesPutInput{LeaseID: g.Lease.ID, Path: "/sdcard/x"}, bytes.NewReader([]byte("x")))
	if c := code(err); c != contract.CodeForbidden && c != contract.CodeUnknownLease {
		t.Errorf("b's push to a's lease: got %v, want FORBIDDEN or UNKNOWN_LEASE", err)
	}
	if _, _, err := b.Screenshot(ctx, contract.ScreenshotInput{LeaseID: g.Lease.ID}, into(io.Discard)); code(err) != contract.CodeForbidden && code(err) != contract.CodeUnknownLease {
		t.Errorf("b's screenshot of a's lease: got %v", err)
	}
	// a's transfer is a's: b, knowing its id, gets nowhere.
	var info contract.TransferInfo
	if err := a.Call(ctx, contract.OpFilesPut, contract.FilesPutInput{LeaseID: g.Lease.ID, Path: "/sdcard/x"}, &info); err != nil {
		t.Fatal(err)
	}
	var w contract.TransferWriteResult
	if err := b.Call(ctx, contract.OpTransferWrite, contract.TransferWriteInput{TransferID: info.TransferID, Data: []byte("b's")}, &w); code(err) != contract.CodeUnknownTransfer {
		t.Errorf("b's write to a's transfer: got %v, want UNKNOWN_TRANSFER", err)
	}
	var r contract.TransferResult
	if err := b.Call(ctx, contract.OpTransferCommit, contract.TransferIDInput{TransferID: info.TransferID}, &r); code(err) != contract.CodeUnknownTransfer {
		t.Errorf("b's commit of a's transfer: got %v, want UNKNOWN_TRANSFER", err)
	}
	// An admin names the requester, as for exec.
	admin := dial(t, home, "ops", true)
	if _, err := admin.PushFile(ctx, contract.FilesPutInput{LeaseID: g.Lease.ID, Path: "/sdcard/y"}, bytes.NewReader(nil)); code(err) != contract.CodeForbidden {
		t.Errorf("an admin without requesterId: got %v, want FORBIDDEN", err)
	}
	if _, err := admin.PushFile(ctx, contract.FilesPutInput{LeaseID: g.Lease.ID, Path: "/sdcard/y", RequesterID: g.Lease.RequesterID}, bytes.NewReader(nil)); err != nil {
		t.Errorf("an admin naming the requester: %v", err)
	}
}

func TestADeclaredSizeOverTheLimitIsRefusedAndNothingIsStaged(t *testing.T) {
	cfg, err := config.Parse([]byte(`{"exec":{"maxUploadBytes":1000}}`))
	if err != nil {
		t.Fatal(err)
	}
	_, home := startDaemon(t, cfg)
	c := dial(t, home, "a", false)
	g := lease(t, c, contract.PlatformAndroid)
	var info contract.TransferInfo
	err = c.Call(context.Background(), contract.OpFilesPut, contract.FilesPutInput{LeaseID: g.Lease.ID, Path: "/sdcard/x", Size: size(1001)}, &info)
	if code(err) != contract.CodeBodyTooLarge {
		t.Fatalf("got %+v %v, want BODY_TOO_LARGE", info, err)
	}
	if left := staged(t, home); len(left) != 0 {
		t.Errorf("staged for a refused upload: %v", left)
	}
	// Undeclared, it is cut when it passes the limit.
	_, err = c.PushFile(context.Background(), contract.FilesPutInput{LeaseID: g.Lease.ID, Path: "/sdcard/x"}, bytes.NewReader(make([]byte, 1001)))
	if code(err) != contract.CodeBodyTooLarge {
		t.Fatalf("an undeclared upload past the limit: got %v, want BODY_TOO_LARGE", err)
	}
	if left := staged(t, home); len(left) > 1 {
		t.Errorf("staged after the cut: %v", left)
	}
}

// slowPush is a demo driver whose PushFile waits for its context, and
// which records whether a clean began while a push was running.
type slowPush struct {
	*demo.Driver
	started chan struct{}
	// giveUp ends a push its context never ends, when the test is over.
	giveUp   chan struct{}
	mu       sync.Mutex
	pushing  bool
	overlaps int
}

func (s *slowPush) PushFile(ctx context.Context, dev driver.Device, src, path string) error {
	s.mu.Lock()
	s.pushing = true
	s.mu.Unlock()
	close(s.started)
	select {
	case <-ctx.Done():
	case <-s.giveUp:
	}
	s.mu.Lock()
	s.pushing = false
	s.mu.Unlock()
	return ctx.Err()
}

func (s *slowPush) Reclaim(ctx context.Context, dev driver.Device) (driver.ReclaimResult, error) {
	s.mu.Lock()
	if s.pushing {
		s.overlaps++
	}
	s.mu.Unlock()
	return s.Driver.Reclaim(ctx, dev)
}

func (s *slowPush) reclaimedDuringPush() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.overlaps
}

// The end of a lease stops its push in flight before the device is
// cleaned: nothing a tenant sent lands on the next tenant's device.
func TestALeasesEndStopsItsPushBeforeTheDeviceIsCleaned(t *testing.T) {
	drivers := map[contract.Platform]driver.Driver{}
	var android *slowPush
	for _, p := range contract.Platforms() {
		d, err := demo.New(demo.Options{Platform: p})
		if err != nil {
			t.Fatal(err)
		}
		if p == contract.PlatformAndroid {
			android = &slowPush{Driver: d, started: make(chan struct{}), giveUp: make(chan struct{})}
			t.Cleanup(func() { close(android.giveUp) })
			drivers[p] = android
			continue
		}
		drivers[p] = d
	}
	_, home := startDaemonWith(t, nil, drivers)
	c := dial(t, home, "a", false)
	g := lease(t, c, contract.PlatformAndroid)
	done := make(chan error, 1)
	go func() {
		_, err := c.PushFile(context.Background(), contract.FilesPutInput{LeaseID: g.Lease.ID, Path: "/sdcard/x"}, bytes.NewReader([]byte("payload")))
		done <- err
	}()
	<-android.started
	events := subscribe(t, home)
	if _, err := c.Release(context.Background(), g.Lease.ID); err != nil {
		t.Fatal(err)
	}
	awaitReclaimed(t, events, g.Device.ID)
	if n := android.reclaimedDuringPush(); n != 0 {
		t.Errorf("the device was cleaned %d times while the lease's push still ran", n)
	}
	select {
	case err := <-done:
		if code(err) != contract.CodeUnknownTransfer {
			t.Errorf("the push in flight: got %v, want UNKNOWN_TRANSFER", err)
		}
	case <-time.After(10 * time.Second):
		t.Errorf("the push in flight did not end with its lease")
	}
	if left := staged(t, home); len(left) != 0 {
		t.Errorf("staged after the lease ended: %v", left)
	}
}

func TestAStartDeletesWhatTheLastRunStaged(t *testing.T) {
	home, err := os.MkdirTemp("", "sld")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(home)
	leftover := filepath.Join(home, stagingName, "abc", "tr-1", "upload")
	if err := os.MkdirAll(filepath.Dir(leftover), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(leftover, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	d, err := Start(context.Background(), Options{Home: home, Version: "test", Config: config.Default()})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Stop("test over")
	if _, err := os.Stat(filepath.Join(home, stagingName)); !os.IsNotExist(err) {
		t.Errorf("the last run's staging is still there: %v", err)
	}
}

// Two owners who each chose the lease id build-42 each reach their own
// device's files by it, and one's lease ending ends its own transfers and
// only those: transfers and staging are keyed by the lease's unique key.
func TestTwoOwnersOfOneChosenIDEachMoveTheirOwnFiles(t *testing.T) {
	_, home := startDaemon(t, nil)
	ctx := context.Background()
	clients := map[string]*client.Client{}
	grants := map[string]contract.LeaseGrant{}
	for _, name := range []string{"a", "b"} {
		c := dial(t, home, name, false)
		g, err := c.RequestLease(ctx, contract.LeaseRequestInput{Platform: contract.PlatformAndroid, LeaseID: "build-42"}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.PushFile(ctx, contract.FilesPutInput{LeaseID: "build-42", Path: "/sdcard/who"}, bytes.NewReader([]byte(name))); err != nil {
			t.Fatalf("%s's push: %v", name, err)
		}
		clients[name], grants[name] = c, g
	}
	for name, c := range clients {
		var got bytes.Buffer
		if _, _, err := c.PullFile(ctx, contract.FilesGetInput{LeaseID: "build-42", Path: "/sdcard/who"}, into(&got)); err != nil || got.String() != name {
			t.Errorf("%s pulled %q (%v), want its own %q", name, got.String(), err, name)
		}
	}
	// Each has an upload open when a's lease ends.
	open := map[string]string{}
	for name, c := range clients {
		var info contract.TransferInfo
		if err := c.Call(ctx, contract.OpFilesPut, contract.FilesPutInput{LeaseID: "build-42", Path: "/sdcard/later"}, &info); err != nil {
			t.Fatal(err)
		}
		open[name] = info.TransferID
	}
	events := subscribe(t, home)
	if _, err := clients["a"].Release(ctx, "build-42"); err != nil {
		t.Fatal(err)
	}
	awaitReclaimed(t, events, grants["a"].Device.ID)
	write := func(name string) error {
		var w contract.TransferWriteResult
		return clients[name].Call(ctx, contract.OpTransferWrite, contract.TransferWriteInput{TransferID: open[name], Data: []byte("more")}, &w)
	}
	if err := write("a"); code(err) != contract.CodeUnknownTransfer {
		t.Errorf("a's transfer after a's lease ended: got %v, want UNKNOWN_TRANSFER", err)
	}
	if err := write("b"); err != nil {
		t.Errorf("b's transfer after a's lease of the same id ended: %v", err)
	}
}
