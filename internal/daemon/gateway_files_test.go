package daemon

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/simlock/simlock/internal/appbundle/apptest"
	"github.com/simlock/simlock/internal/client"
	"github.com/simlock/simlock/internal/config"
	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/driver"
	"github.com/simlock/simlock/internal/driver/demo"
	"github.com/simlock/simlock/internal/transfer"
)

// fleetOfTwo starts a gateway and two workers of one running Android device
// each, joined to it, and returns the gateway's home and each worker's
// Android demo driver by worker id.
func fleetOfTwo(t *testing.T) (gwHome string, drivers map[string]*demo.Driver) {
	t.Helper()
	gcfg, err := config.Parse([]byte(`{"mode":"gateway","http":{"enabled":true,"port":0},"gateway":{"heartbeatMs":200}}`))
	if err != nil {
		t.Fatal(err)
	}
	gw, gwHome := startDaemonOpts(t, Options{Config: gcfg})
	admin := dial(t, gwHome, "ops", true)
	if _, err := admin.StatusWith(context.Background(), contract.StatusGetInput{WaitReady: true}); err != nil {
		t.Fatal(err)
	}
	events, _, err := admin.Subscribe(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	byLabel := map[string]*demo.Driver{}
	for _, label := range []string{"w1", "w2"} {
		var tok contract.TokenCreateResult
		if err := admin.Call(context.Background(), contract.OpTokenCreate, contract.TokenCreateInput{Role: contract.TokenWorker}, &tok); err != nil {
			t.Fatal(err)
		}
		wcfg, err := config.Parse([]byte(fmt.Sprintf(`{"capacity":{"strategy":"fixed","config":{"maxRunning":1}},"gateway":{"url":%q,"token":%q,"label":%q,"heartbeatMs":200}}`,
			gw.httpURL, tok.Secret, label)))
		if err != nil {
			t.Fatal(err)
		}
		drv := map[contract.Platform]driver.Driver{}
		for _, p := range contract.Platforms() {
			d, err := demo.New(demo.Options{Platform: p})
			if err != nil {
				t.Fatal(err)
			}
			drv[p] = d
		}
		byLabel[label] = drv[contract.PlatformAndroid].(*demo.Driver)
		startDaemonWith(t, wcfg, drv)
	}
	drivers = map[string]*demo.Driver{}
	timeout := time.After(10 * time.Second)
	for len(drivers) < 2 {
		select {
		case ev := <-events:
			var p struct{ WorkerID, Label string }
			_ = json.Unmarshal(ev.Payload, &p)
			if ev.Event == "worker.connected" {
				drivers[p.WorkerID] = byLabel[p.Label]
			}
		case <-timeout:
			t.Fatalf("the two workers did not connect within 10 s (%d did)", len(drivers))
		}
	}
	return gwHome, drivers
}

// pullFromWorker reads a file of a worker's demo device directly, not
// through simlock.
func pullFromWorker(t *testing.T, d *demo.Driver, deviceID, path string) ([]byte, error) {
	t.Helper()
	dst := filepath.Join(t.TempDir(), "direct")
	if err := d.PullFile(context.Background(), driver.Device{ID: deviceID}, path, dst, 1<<30); err != nil {
		return nil, err
	}
	return os.ReadFile(dst)
}

// Through a gateway with two workers, each agent's files reach its own
// lease's worker and device, and come back from there; the gateway stages
// nothing, and one agent cannot reach the other's lease or transfer.
func TestFilesThroughAGatewayReachTheLeasesWorkerOnly(t *testing.T) {
	gwHome, drivers := fleetOfTwo(t)
	ctx := context.Background()
	type agent struct {
		c    *client.Client
		g    contract.LeaseGrant
		body []byte
	}
	agents := map[string]*agent{}
	for _, name := range []string{"alice", "bob"} {
		c := dial(t, gwHome, name, false)
		g, err := c.RequestLease(ctx, contract.LeaseRequestInput{Platform: contract.PlatformAndroid}, nil)
		if err != nil {
			t.Fatal(err)
		}
		body := make([]byte, 600_000)
		_, _ = rand.Read(body)
		agents[name] = &agent{c: c, g: g, body: body}
	}
	if agents["alice"].g.Device.WorkerID == agents["bob"].g.Device.WorkerID {
		t.Fatalf("both leases went to worker %s; each worker has one slot", agents["alice"].g.Device.WorkerID)
	}
	for name, a := range agents {
		res, err := a.c.PushFile(ctx, contract.FilesPutInput{LeaseID: a.g.Lease.ID, Path: "/sdcard/mine.bin", Size: size(len(a.body))}, bytes.NewReader(a.body))
		if err != nil || res.LeaseID != a.g.Lease.ID || res.Bytes != int64(len(a.body)) {
			t.Fatalf("%s's push: %+v %v", name, res, err)
		}
	}
	for name, a := range agents {
		for worker, d := range drivers {
			got, err := pullFromWorker(t, d, a.g.Device.DriverDeviceID, "/sdcard/mine.bin")
			switch {
			case worker == a.g.Device.WorkerID && !bytes.Equal(got, a.body):
				t.Errorf("%s's file on its worker %s: %d bytes, %v; want the %d pushed", name, worker, len(got), err, len(a.body))
			case worker != a.g.Device.WorkerID && err == nil:
				t.Errorf("%s's file reached worker %s, not its lease's", name, worker)
			}
		}
		var back bytes.Buffer
		info, n, err := a.c.PullFile(ctx, contract.FilesGetInput{LeaseID: a.g.Lease.ID, Path: "/sdcard/mine.bin"}, into(&back))
		if err != nil || n != int64(len(a.body)) || !bytes.Equal(back.Bytes(), a.body) || info.LeaseID != a.g.Lease.ID {
			t.Errorf("%s's pull through the gateway: %d bytes, %+v, %v", name, n, info, err)
		}
		res, err := a.c.InstallApp(ctx, contract.AppInstallInput{LeaseID: a.g.Lease.ID}, bytes.NewReader(apptest.APK("com.example."+name)))
		if err != nil || res.App == nil || res.App.ID != "com.example."+name {
			t.Errorf("%s's install: %+v %v", name, res, err)
		}
		if apps := drivers[a.g.Device.WorkerID].Apps(a.g.Device.DriverDeviceID); len(apps) != 1 || apps[0] != "com.example."+name {
			t.Errorf("%s's worker lists apps %v on its device", name, apps)
		}
		var shot bytes.Buffer
		if info, _, err := a.c.Screenshot(ctx, contract.ScreenshotInput{LeaseID: a.g.Lease.ID}, into(&shot)); err != nil || info.ContentType != "image/png" || !bytes.HasPrefix(shot.Bytes(), []byte("\x89PNG")) {
			t.Errorf("%s's screenshot: %+v %v", name, info, err)
		}
	}
	alice, bob := agents["alice"], agents["bob"]
	_, err := bob.c.PushFile(ctx, contract.FilesPutInput{LeaseID: alice.g.Lease.ID, Path: "/sdcard/bobs"}, bytes.NewReader([]byte("x")))
	if c := code(err); c != contract.CodeForbidden && c != contract.CodeUnknownLease {
		t.Errorf("bob's push to alice's lease: got %v, want FORBIDDEN or UNKNOWN_LEASE", err)
	}
	var info contract.TransferInfo
	if err := alice.c.Call(ctx, contract.OpFilesPut, contract.FilesPutInput{LeaseID: alice.g.Lease.ID, Path: "/sdcard/later"}, &info); err != nil {
		t.Fatal(err)
	}
	var w contract.TransferWriteResult
	if err := bob.c.Call(ctx, contract.OpTransferWrite, contract.TransferWriteInput{TransferID: info.TransferID, Data: []byte("bob's")}, &w); code(err) != contract.CodeUnknownTransfer {
		t.Errorf("bob's write to alice's transfer: got %v, want UNKNOWN_TRANSFER", err)
	}
	if left := staged(t, gwHome); len(left) != 0 {
		t.Errorf("the gateway staged %v", left)
	}
	var back bytes.Buffer
	if _, _, err := alice.c.PullFile(ctx, contract.FilesGetInput{LeaseID: alice.g.Lease.ID, Path: "/sdcard/none"}, into(&back)); code(err) != contract.CodeDeviceFileMissing {
		t.Errorf("a missing file through the gateway: got %v, want DEVICE_FILE_NOT_FOUND", err)
	}
}

// Two owners who each chose the lease id build-42 through a gateway keep
// their transfers apart there: one's open transfers do not count against
// the other's lease, and one's lease ending ends its own transfers only.
// The gateway keys them by the lease's unique key, as a worker does.
func TestThroughAGatewayTwoOwnersOfOneChosenIDKeepTheirOwnTransfers(t *testing.T) {
	gwHome, _ := fleetOfTwo(t)
	ctx := context.Background()
	events := subscribe(t, gwHome)
	clients := map[string]*client.Client{}
	grants := map[string]contract.LeaseGrant{}
	for _, name := range []string{"a", "b"} {
		c := dial(t, gwHome, name, false)
		g, err := c.RequestLease(ctx, contract.LeaseRequestInput{Platform: contract.PlatformAndroid, LeaseID: "build-42"}, nil)
		if err != nil {
			t.Fatal(err)
		}
		clients[name], grants[name] = c, g
	}
	open := func(name string) (string, error) {
		var info contract.TransferInfo
		err := clients[name].Call(ctx, contract.OpFilesPut, contract.FilesPutInput{LeaseID: "build-42", Path: "/sdcard/later"}, &info)
		return info.TransferID, err
	}
	write := func(name, id string) error {
		var w contract.TransferWriteResult
		return clients[name].Call(ctx, contract.OpTransferWrite, contract.TransferWriteInput{TransferID: id, Data: []byte("more")}, &w)
	}
	var aID string
	for i := range transfer.DefaultPerLease {
		id, err := open("a")
		if err != nil {
			t.Fatalf("a's transfer %d: %v", i+1, err)
		}
		aID = id
	}
	bID, err := open("b")
	if err != nil {
		t.Fatalf("b's transfer while a has %d open on its own build-42: %v", transfer.DefaultPerLease, err)
	}
	if _, err := clients["a"].Release(ctx, "build-42"); err != nil {
		t.Fatal(err)
	}
	// The worker reclaims a's device after it told the gateway the lease
	// ended.
	awaitReclaimed(t, events, grants["a"].Device.ID)
	// An abort is the gateway's own answer, never forwarded: the gateway
	// ended a's transfers with its lease, not merely its worker.
	var res contract.TransferAbortResult
	if err := clients["a"].Call(ctx, contract.OpTransferAbort, contract.TransferIDInput{TransferID: aID}, &res); code(err) != contract.CodeUnknownTransfer {
		t.Errorf("a's transfer on the gateway after a's lease ended: got %+v %v, want UNKNOWN_TRANSFER", res, err)
	}
	if err := write("b", bID); err != nil {
		t.Errorf("b's transfer after a's lease of the same id ended: %v", err)
	}
}
