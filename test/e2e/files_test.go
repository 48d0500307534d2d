package e2e

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"image/png"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/simlock/simlock/internal/appbundle/apptest"
	"github.com/simlock/simlock/internal/shimtest"
)

// File transfer end to end: the real binary's CLI and HTTP routes on the
// demo driver, the iOS and Android stand-ins, and through a gateway.

// localFile writes b to a new file of the test and returns its path.
func localFile(t *testing.T, name string, b []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func randomBytes(n int) []byte {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return b
}

// jsonLine decodes a command's JSON result.
func jsonLine(t *testing.T, r result) map[string]any {
	t.Helper()
	var m map[string]any
	if r.code != 0 || json.Unmarshal([]byte(strings.TrimSpace(r.stdout)), &m) != nil {
		t.Fatalf("want one JSON result\n%s", r)
	}
	return m
}

// roundTrip pushes body to devicePath with the CLI, pulls it back, and
// checks the bytes.
func roundTrip(t *testing.T, h *home, agent, devicePath string, body []byte) {
	t.Helper()
	src := localFile(t, "up", body)
	m := jsonLine(t, h.run("push", src, devicePath, "--agent-id", agent))
	if m["bytes"] != float64(len(body)) || m["path"] != devicePath {
		t.Fatalf("push %s answered %v", devicePath, m)
	}
	dst := filepath.Join(t.TempDir(), "down")
	m = jsonLine(t, h.run("pull", devicePath, dst, "--agent-id", agent))
	if m["bytes"] != float64(len(body)) || m["file"] != dst {
		t.Fatalf("pull %s answered %v", devicePath, m)
	}
	got, err := os.ReadFile(dst)
	if err != nil || !bytes.Equal(got, body) {
		t.Fatalf("pull %s: %d bytes that differ from the %d pushed (%v)", devicePath, len(got), len(body), err)
	}
}

// screenshotIsPNG takes a screenshot with the CLI and decodes it.
func screenshotIsPNG(t *testing.T, h *home, agent string) {
	t.Helper()
	dst := filepath.Join(t.TempDir(), "shot.png")
	m := jsonLine(t, h.run("screenshot", dst, "--agent-id", agent))
	f, err := os.Open(dst)
	if err != nil {
		t.Fatalf("screenshot answered %v but wrote nothing: %v", m, err)
	}
	defer f.Close()
	if _, err := png.Decode(f); err != nil {
		t.Errorf("the screenshot is not a PNG: %v", err)
	}
}

// stagedFiles lists what the daemon of h has staged.
func stagedFiles(h *home) []string {
	var out []string
	_ = filepath.WalkDir(h.path("staging"), func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			out = append(out, p)
		}
		return nil
	})
	return out
}

// On the demo driver: the CLI pushes, pulls (a few MiB and an empty file),
// installs and screenshots the caller's only lease; after the release the
// lease's staging is gone.
func TestFilesMoveThroughTheCLIOnTheDemoDriver(t *testing.T) {
	t.Parallel()
	h := newHome(t, fastDemo...)
	f := h.follow()
	g := h.leaseDetached("files-agent", "android")
	roundTrip(t, h, "files-agent", "/sdcard/Download/big.bin", randomBytes(3<<20+5))
	roundTrip(t, h, "files-agent", "/sdcard/empty", nil)
	apk := localFile(t, "app-debug.apk", apptest.APK("com.example.notes"))
	m := jsonLine(t, h.run("install", apk, "--agent-id", "files-agent"))
	if app, _ := m["app"].(map[string]any); app["kind"] != "apk" || app["id"] != "com.example.notes" {
		t.Errorf("install answered %v", m)
	}
	screenshotIsPNG(t, h, "files-agent")
	// Another agent holds no lease, and cannot name this one.
	expectFailure(t, h.run("screenshot", "-", "--agent-id", "someone-else"), 2, "USAGE")
	r := h.run("pull", "/sdcard/empty", "-", "--agent-id", "someone-else", "--lease", g.Lease.ID)
	if e := cliError(t, r); r.code != 1 || (e["code"] != "UNKNOWN_LEASE" && e["code"] != "FORBIDDEN") {
		t.Errorf("another agent's pull: want UNKNOWN_LEASE or FORBIDDEN\n%s", r)
	}
	// A path that climbs out is refused before anything is asked.
	expectFailure(t, h.run("pull", "/sdcard/../etc/passwd", "--agent-id", "files-agent"), 2, "USAGE")
	if r := h.run("release", g.Lease.ID); r.code != 0 {
		t.Fatalf("release\n%s", r)
	}
	f.find("device.reclaimed", isEvent("device.reclaimed", "deviceId", g.Device.ID))
	if _, err := os.Stat(h.path("staging")); err == nil {
		if entries, _ := os.ReadDir(h.path("staging")); len(entries) != 0 {
			t.Errorf("the staging directory still holds %v after the lease ended", entries)
		}
	}
}

// The HTTP file routes on the demo driver: a declared body over
// exec.maxUploadBytes is 413 before it is read and nothing is staged;
// another agent's lease is 404; a file goes up and comes back.
func TestFileRoutesOverHTTPOnTheDemoDriver(t *testing.T) {
	t.Parallel()
	h, a := httpHome(t, "exec.maxUploadBytes", "1000000")
	_, alice := h.token("agent", "alice")
	_, bob := h.token("agent", "bob")
	r := a.do("POST", "/v1/lease-requests", alice, `{"platform":"ios"}`)
	if r.status != 201 {
		t.Fatalf("create: %d %s", r.status, r.raw)
	}
	lease := a.awaitState(alice, requestOf(t, r)["id"].(string), "granted")["lease"].(map[string]any)
	files := "/v1/leases/" + lease["id"].(string) + "/files"

	body := randomBytes(900_000)
	up := a.send("PUT", files+"?path=/Documents/data.bin", alice, bytes.NewReader(body), int64(len(body)))
	if up.status != 200 || up.body["bytes"] != float64(len(body)) {
		t.Fatalf("PUT: %d %s", up.status, up.raw)
	}
	down := a.send("GET", files+"?path=/Documents/data.bin", alice, nil, 0)
	if down.status != 200 || !bytes.Equal([]byte(down.raw), body) || down.header.Get("Content-Length") != fmt.Sprint(len(body)) {
		t.Fatalf("GET: %d, %d bytes, Content-Length %q", down.status, len(down.raw), down.header.Get("Content-Length"))
	}
	shot := a.send("GET", "/v1/leases/"+lease["id"].(string)+"/screenshot", alice, nil, 0)
	if _, err := png.Decode(strings.NewReader(shot.raw)); shot.status != 200 || shot.header.Get("Content-Type") != "image/png" || err != nil {
		t.Errorf("screenshot: %d %q %v", shot.status, shot.header.Get("Content-Type"), err)
	}
	if r := a.send("GET", files+"?path=/Documents/data.bin", bob, nil, 0); r.status != 404 || r.errCode() != "UNKNOWN_LEASE" {
		t.Errorf("bob's GET of alice's file: %d %s", r.status, r.raw)
	}
	if r := a.send("PUT", files+"?path=/Documents/../x", alice, strings.NewReader("x"), 1); r.status != 400 || r.errCode() != "BAD_REQUEST" {
		t.Errorf("a path that climbs: %d %s", r.status, r.raw)
	}

	// Only the headers of a body over the limit: the answer comes before
	// any of it, and nothing is staged.
	conn, err := net.Dial("tcp", strings.TrimPrefix(a.base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(waitBound))
	fmt.Fprintf(conn, "PUT %s?path=/Documents/huge HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Length: 1000001\r\n\r\n", files, alice)
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("no answer before the body: %v", err)
	}
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 413 || !strings.Contains(string(b), `"BODY_TOO_LARGE"`) {
		t.Errorf("a declared body over the limit: %d %s", resp.StatusCode, b)
	}
	if left := stagedFiles(h); len(left) != 0 {
		t.Errorf("staged: %v", left)
	}
}

// send is do with a body of any bytes and a length (0 with nil: none), and
// a raw answer kept whole.
func (a *api) send(method, path, secret string, body io.Reader, length int64) reply {
	a.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), commandBound)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, a.base+path, body)
	if err != nil {
		a.t.Fatal(err)
	}
	req.ContentLength = length
	req.Header.Set("Authorization", "Bearer "+secret)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		a.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		a.t.Fatalf("%s %s: read body: %v", method, path, err)
	}
	out := reply{status: resp.StatusCode, header: resp.Header, raw: string(b)}
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
		_ = json.Unmarshal(b, &out.body)
	}
	return out
}

// On the iOS stand-in: files go into the simulator's data directory and an
// installed app's container, the app is listed by simctl, a screenshot is a
// PNG, and a symlink planted in the device does not lead out of it.
func TestFilesOnTheIOSStandIn(t *testing.T) {
	t.Parallel()
	e := shimtest.Build(t)
	h := newHome(t)
	h.withShims(e, "ios")
	g := h.leaseDetached("ios-files", "ios")
	root := h.path("devices/ios")
	udid := g.Device.DriverDeviceID

	roundTrip(t, h, "ios-files", "/Media/DCIM/100APPLE/IMG_0001.JPG", randomBytes(2<<20+3))
	roundTrip(t, h, "ios-files", "/empty.txt", nil)
	if _, err := os.Stat(filepath.Join(root, udid, "data", "Media", "DCIM", "100APPLE", "IMG_0001.JPG")); err != nil {
		t.Errorf("the file is not in the simulator's data directory: %v", err)
	}
	ipa := localFile(t, "Todo.ipa", apptest.IPA("com.example.Todo", "Todo"))
	m := jsonLine(t, h.run("install", ipa, "--agent-id", "ios-files"))
	if app, _ := m["app"].(map[string]any); app["kind"] != "ipa" || app["id"] != "com.example.Todo" {
		t.Errorf("install answered %v", m)
	}
	if list := shim(t, e, "xcrun", "simctl", "--set", root, "listapps", udid); !strings.Contains(list, `"com.example.Todo"`) {
		t.Errorf("simctl listapps does not list the app:\n%s", list)
	}
	roundTrip(t, h, "ios-files", "@com.example.Todo/Documents/state.json", []byte(`{"seeded":true}`))
	screenshotIsPNG(t, h, "ios-files")

	secret := localFile(t, "host-secret", []byte("the host's own"))
	if err := os.Symlink(secret, filepath.Join(root, udid, "data", "planted")); err != nil {
		t.Fatal(err)
	}
	expectFailure(t, h.run("pull", "/planted", filepath.Join(t.TempDir(), "x"), "--agent-id", "ios-files"), 2, "DEVICE_PATH_REFUSED")
	expectFailure(t, h.run("push", localFile(t, "evil", []byte("overwritten")), "/planted", "--agent-id", "ios-files"), 2, "DEVICE_PATH_REFUSED")
	if b, _ := os.ReadFile(secret); string(b) != "the host's own" {
		t.Errorf("the host file was written through the device: %q", b)
	}
	expectFailure(t, h.run("pull", "/simlock-mark.json", "-", "--agent-id", "ios-files"), 2, "DEVICE_PATH_REFUSED")
	expectFailure(t, h.run("install", localFile(t, "app.apk", apptest.APK("com.example.x")), "--agent-id", "ios-files"), 2, "INVALID_APP")
}

// On the Android stand-in: files round-trip through adb push and pull, the
// app is listed by pm, a screenshot is a PNG, every call pinned to the
// leased emulator; a pull of what has no end (/dev/zero) stops at
// exec.maxUploadBytes.
func TestFilesOnTheAndroidStandIn(t *testing.T) {
	t.Parallel()
	e := shimtest.Build(t)
	h := newHome(t, "exec.maxUploadBytes", "4194304")
	h.withShims(e, "android")
	port := h.adbPort
	g := h.leaseDetached("droid-files", "android")

	roundTrip(t, h, "droid-files", "/sdcard/Download/blob.bin", randomBytes(2<<20+7))
	roundTrip(t, h, "droid-files", "/data/local/tmp/empty", nil)
	apk := localFile(t, "app-debug.apk", apptest.APK("com.example.notes"))
	m := jsonLine(t, h.run("install", apk, "--agent-id", "droid-files"))
	if app, _ := m["app"].(map[string]any); app["kind"] != "apk" || app["id"] != "com.example.notes" {
		t.Errorf("install answered %v", m)
	}
	pm := exec.Command(filepath.Join(e.SDK, "platform-tools", "adb"), "-P", port, "-s", g.Device.Address, "shell", "pm list packages -3")
	pm.Env = e.Environ(nil)
	if pkgs, err := pm.CombinedOutput(); err != nil || !strings.Contains(string(pkgs), "package:com.example.notes") {
		t.Errorf("pm list packages does not list the app (%v):\n%s", err, pkgs)
	}
	screenshotIsPNG(t, h, "droid-files")
	for _, c := range e.Calls(t) {
		if c.Tool != "adb" || len(c.Args) < 5 {
			continue
		}
		switch c.Args[4] {
		case "push", "pull", "install", "exec-out":
			if c.Args[0] != "-P" || c.Args[1] != port || c.Args[2] != "-s" || c.Args[3] != g.Device.Address {
				t.Errorf("adb %v is not pinned to the lease's emulator %s through port %s", c.Args, g.Device.Address, port)
			}
		}
	}
	expectFailure(t, h.run("push", apk, "/data/local/tmp/simlock-mark.json", "--agent-id", "droid-files"), 2, "DEVICE_PATH_REFUSED")
	expectFailure(t, h.run("pull", "/sdcard/none", "-", "--agent-id", "droid-files"), 1, "DEVICE_FILE_NOT_FOUND")
	expectFailure(t, h.run("pull", "/dev/zero", "-", "--agent-id", "droid-files"), 2, "BODY_TOO_LARGE")
	if left := stagedFiles(h); len(left) != 0 {
		t.Errorf("a refused pull left %v staged", left)
	}
}

// Through a gateway with two workers: each agent's file reaches its own
// lease's worker and device (and not the other worker), over HTTP, and
// comes back; the gateway stages nothing.
func TestFileRoutesThroughAGatewayReachTheLeasesWorker(t *testing.T) {
	t.Parallel()
	f := newFleet(t)
	workers := map[string]*home{}
	for _, label := range []string{"files-w1", "files-w2"} {
		w := f.worker(label, 1)
		workers[instanceID(t, w)] = w
	}
	ids := make([]string, 0, 2)
	for id := range workers {
		ids = append(ids, id)
	}
	f.await("both workers connected", waitBound, connected(ids...))

	type holder struct {
		secret, tokenID, lease, worker string
		body                           []byte
	}
	var holders []*holder
	for _, name := range []string{"alice", "bob"} {
		id, secret := f.gw.token("agent", name)
		r := f.api.do("POST", "/v1/lease-requests", secret, `{"platform":"android"}`)
		if r.status != 201 {
			t.Fatalf("create: %d %s", r.status, r.raw)
		}
		req := f.api.awaitState(secret, requestOf(t, r)["id"].(string), "granted")
		lease := req["lease"].(map[string]any)
		leaseID := lease["id"].(string)
		// A gateway names a lease <worker id>.<the worker's lease id>.
		dot := strings.LastIndex(leaseID, ".")
		if dot < 0 {
			t.Fatalf("lease id %q is not a gateway's", leaseID)
		}
		holders = append(holders, &holder{secret: secret, tokenID: id, lease: leaseID, worker: leaseID[:dot], body: randomBytes(700_000)})
	}
	if holders[0].worker == holders[1].worker {
		t.Fatalf("both leases are on worker %s; each worker has one slot", holders[0].worker)
	}
	for _, hd := range holders {
		r := f.api.send("PUT", "/v1/leases/"+hd.lease+"/files?path=/sdcard/mine.bin", hd.secret, bytes.NewReader(hd.body), int64(len(hd.body)))
		if r.status != 200 || r.body["leaseId"] != hd.lease {
			t.Fatalf("PUT through the gateway: %d %s", r.status, r.raw)
		}
	}
	for _, hd := range holders {
		r := f.api.send("GET", "/v1/leases/"+hd.lease+"/files?path=/sdcard/mine.bin", hd.secret, nil, 0)
		if r.status != 200 || !bytes.Equal([]byte(r.raw), hd.body) {
			t.Errorf("GET through the gateway: %d, %d bytes, want the %d put", r.status, len(r.raw), len(hd.body))
		}
		// On the workers themselves: the lease's has the file, the other
		// does not (asked as the lease's owner, over each worker's socket).
		workerLease := hd.lease[strings.LastIndex(hd.lease, ".")+1:]
		for id, w := range workers {
			dst := filepath.Join(t.TempDir(), "direct")
			res := w.run("pull", "/sdcard/mine.bin", dst, "--agent-id", hd.tokenID, "--lease", workerLease)
			if id == hd.worker {
				if b, _ := os.ReadFile(dst); res.code != 0 || !bytes.Equal(b, hd.body) {
					t.Errorf("the file is not on its lease's worker %s\n%s", id, res)
				}
			} else if res.code == 0 {
				t.Errorf("worker %s, not the lease's, answered a pull of its file\n%s", id, res)
			}
		}
	}
	if r := f.api.send("GET", "/v1/leases/"+holders[0].lease+"/screenshot", holders[1].secret, nil, 0); r.status != 404 {
		t.Errorf("bob's screenshot of alice's lease: %d %s", r.status, r.raw)
	}
	if left := stagedFiles(f.gw); len(left) != 0 {
		t.Errorf("the gateway staged %v", left)
	}
}
