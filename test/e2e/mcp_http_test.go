package e2e

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/json"
	"image/png"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/simlock/simlock/internal/appbundle/apptest"
	"github.com/simlock/simlock/internal/testtool"
)

// mcpSDKDir is the node_modules directory that holds the official MCP
// TypeScript SDK (@modelcontextprotocol/sdk), named by SIMLOCK_MCP_SDK
// (.ci/run installs the SDK and sets it). Without it the test is skipped,
// or failed under CI=true, like a program testtool.Find does not find.
func mcpSDKDir(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("SIMLOCK_MCP_SDK")
	if dir != "" {
		if _, err := os.Stat(filepath.Join(dir, "@modelcontextprotocol", "sdk", "package.json")); err == nil {
			return dir
		}
	}
	msg := "no MCP TypeScript SDK: install it with npm (npm install --global --prefix DIR @modelcontextprotocol/sdk) and set SIMLOCK_MCP_SDK=DIR/lib/node_modules"
	if os.Getenv("CI") == "true" {
		t.Fatal(msg)
	}
	t.Skip(msg)
	return ""
}

// tsStep is one JSON line of testdata/mcp-ts/clients.cjs.
type tsStep struct {
	Client   string    `json:"client"`
	Step     string    `json:"step"`
	IsError  bool      `json:"isError"`
	Progress []float64 `json:"progress"`
	Grant    struct {
		Lease struct {
			ID string `json:"id"`
		} `json:"lease"`
		Device struct {
			ID       string `json:"id"`
			WorkerID string `json:"workerId"`
		} `json:"device"`
	} `json:"grant"`
	LeaseID          string         `json:"leaseId"`
	DeviceID         string         `json:"deviceId"`
	Status           map[string]any `json:"status"`
	StatusError      bool           `json:"statusError"`
	Exec             map[string]any `json:"exec"`
	ExecError        bool           `json:"execError"`
	Install          map[string]any `json:"install"`
	InstallError     bool           `json:"installError"`
	Launch           map[string]any `json:"launch"`
	LaunchError      bool           `json:"launchError"`
	ScreenshotError  bool           `json:"screenshotError"`
	ScreenshotMime   string         `json:"screenshotMime"`
	ScreenshotBase64 string         `json:"screenshotBase64"`
	Settled          string         `json:"settled"`
	Error            string         `json:"error"`
	Result           map[string]any `json:"result"`
}

// tsClients is the running script: its steps as they come, and its stdin.
type tsClients struct {
	t     *testing.T
	steps chan tsStep
	in    io.WriteCloser
}

// next is the script's next step, which must be want.
func (c *tsClients) next(want string) tsStep {
	c.t.Helper()
	select {
	case s, ok := <-c.steps:
		if !ok {
			c.t.Fatalf("the TypeScript clients ended before step %q", want)
		}
		if s.Step != want {
			c.t.Fatalf("the TypeScript clients' next step is %q (%+v), want %q", s.Step, s, want)
		}
		return s
	case <-time.After(90 * time.Second):
		c.t.Fatalf("no step %q from the TypeScript clients within 90s", want)
	}
	return tsStep{}
}

func (c *tsClients) tell(word string) {
	c.t.Helper()
	if _, err := io.WriteString(c.in, word+"\n"); err != nil {
		c.t.Fatalf("tell the TypeScript clients %q: %v", word, err)
	}
}

// risingProgress fails unless the client saw progress and it never went
// down.
func risingProgress(t *testing.T, who string, p []float64) {
	t.Helper()
	if len(p) == 0 {
		t.Errorf("client %s saw no progress notification while it leased", who)
	}
	for i := 1; i < len(p); i++ {
		if p[i] < p[i-1] {
			t.Errorf("client %s's progress went down: %v", who, p)
			return
		}
	}
}

// The real-client check: the official TypeScript SDK's Streamable
// HTTP client against a gateway with two workers, two clients at once with
// their own tokens, each leasing with progress, installing an app, launching
// it and taking a screenshot on its lease, and
// releasing it; a third's cancelled lease_simulator leaves nothing waiting.
func TestTheTypeScriptSDKClientLeasesUsesAndReleasesThroughAGateway(t *testing.T) {
	t.Parallel()
	node := testtool.Find(t, "install Node.js (apt-get install -y nodejs)", "node")
	sdk := mcpSDKDir(t)

	f := newFleet(t)
	w1, w2 := f.worker("worker-1", 1), f.worker("worker-2", 1)
	f.await("both workers connected", 10*time.Second, connected(instanceID(t, w1), instanceID(t, w2)))
	var secrets []string
	for _, name := range []string{"ts-a", "ts-b", "ts-c"} {
		_, s := f.gw.token("agent", name)
		secrets = append(secrets, s)
	}

	cmd := exec.Command(node, append([]string{filepath.Join("testdata", "mcp-ts", "clients.cjs"), f.url + "/mcp"}, secrets...)...)
	const appID = "com.example.tsclient"
	cmd.Env = append(os.Environ(), "NODE_PATH="+sdk,
		"SIMLOCK_TEST_APP="+base64.StdEncoding.EncodeToString(apptest.AppZip(appID, "TS Client")), "SIMLOCK_TEST_APP_ID="+appID)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	c := &tsClients{t: t, steps: make(chan tsStep, 16), in: in}
	go func() {
		defer close(c.steps)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			var s tsStep
			if err := json.Unmarshal(sc.Bytes(), &s); err != nil {
				s = tsStep{Step: "unreadable: " + sc.Text()}
			}
			c.steps <- s
		}
		exited <- cmd.Wait()
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		if t.Failed() {
			t.Logf("the TypeScript clients' stderr:\n%s", stderr.String())
		}
	})

	leases := map[string]tsStep{}
	for range 2 {
		s := c.next("lease")
		if s.IsError || s.Grant.Lease.ID == "" {
			t.Fatalf("client %s's lease_simulator answered %+v, want a grant", s.Client, s)
		}
		risingProgress(t, s.Client, s.Progress)
		leases[s.Client] = s
	}
	if a, b := leases["A"].Grant, leases["B"].Grant; a.Lease.ID == b.Lease.ID || a.Device.ID == b.Device.ID {
		t.Errorf("clients A and B were granted lease %s on %s and lease %s on %s, want two leases on two devices",
			a.Lease.ID, a.Device.ID, b.Lease.ID, b.Device.ID)
	}
	for range 2 {
		s := c.next("use")
		g := leases[s.Client].Grant
		if s.StatusError || s.Status["held"] != true || s.Status["leaseId"] != g.Lease.ID || s.Status["deviceId"] != g.Device.ID {
			t.Errorf("client %s's lease_status of its lease %s = %v, want held on %s", s.Client, g.Lease.ID, s.Status, g.Device.ID)
		}
		// A demo worker runs no simctl: the command reaches the lease's
		// worker through the gateway and is refused there.
		if !s.ExecError || s.Exec["code"] != "PASSTHROUGH_REFUSED" {
			t.Errorf("client %s's run_on_device on its demo lease = %v (isError %v), want PASSTHROUGH_REFUSED", s.Client, s.Exec, s.ExecError)
		}
		// install → launch → screenshot, each on its own lease's device.
		if app, _ := s.Install["app"].(map[string]any); s.InstallError || app["id"] != appID {
			t.Errorf("client %s's install_app = %v (isError %v), want %s installed", s.Client, s.Install, s.InstallError, appID)
		}
		if s.LaunchError || s.Launch["appId"] != appID {
			t.Errorf("client %s's launch_app = %v (isError %v), want %s launched", s.Client, s.Launch, s.LaunchError, appID)
		}
		shot, err := base64.StdEncoding.DecodeString(s.ScreenshotBase64)
		if err == nil {
			_, err = png.Decode(bytes.NewReader(shot))
		}
		if s.ScreenshotError || s.ScreenshotMime != "image/png" || err != nil {
			t.Errorf("client %s's screenshot: isError %v, mime %q, decodes as PNG: %v", s.Client, s.ScreenshotError, s.ScreenshotMime, err)
		}
	}
	// A's lease is not B's to see: refused (FORBIDDEN on a gateway), never
	// shown as held.
	if s := c.next("other"); s.Status["held"] == true || (s.IsError && s.Status["code"] != "FORBIDDEN") || (!s.IsError && s.Status["held"] != false) {
		t.Errorf("client B's lease_status of A's lease = %v (isError %v), want it refused or not held", s.Status, s.IsError)
	}

	c.next("calling")
	waitUntil(t, "client C's request waits in the gateway's queue", func() bool {
		st := f.status()
		return len(st.Waiting) == 1 && st.QueueDepth == 1
	})
	c.tell("abort")
	if s := c.next("aborted"); s.Settled != "rejected" {
		t.Errorf("client C's aborted call ended %q (%+v), want rejected", s.Settled, s)
	}
	waitUntil(t, "nothing waits at the gateway after client C cancelled", func() bool {
		st := f.status()
		return len(st.Waiting) == 0 && st.QueueDepth == 0
	})
	if st := f.status(); len(st.Leases) != 2 {
		t.Errorf("after C's cancel the gateway lists %d leases, want A's and B's", len(st.Leases))
	}

	c.tell("release")
	for range 2 {
		s := c.next("release")
		if s.IsError || s.Result["released"] != true || s.Result["leaseId"] != leases[s.Client].Grant.Lease.ID {
			t.Errorf("client %s's release_simulator = %v, want its lease released", s.Client, s.Result)
		}
	}
	c.next("done")
	select {
	case err := <-exited:
		if err != nil {
			t.Errorf("the TypeScript clients exited: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Errorf("the TypeScript clients did not exit within 30s of closing")
	}
	if st := f.status(); len(st.Leases) != 0 {
		t.Errorf("after both releases the gateway lists leases %+v, want none", st.Leases)
	}
}

// waitUntil polls cond until it holds, failing with what after 15s.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 15s", what)
		}
		time.Sleep(pollEvery)
	}
}

// `simlock mcp` with SIMLOCK_URL relays stdio to the gateway's /mcp: a
// stdio client leases with progress as the token's principal (the lease is
// the token's over HTTP), hears over the relay that the lease ended when
// the token releases it over HTTP, and leases and releases again; nothing
// starts a daemon on the client's machine.
func TestSimlockMCPWithSIMLOCKURLRelaysStdioToTheGateway(t *testing.T) {
	t.Parallel()
	f := newFleet(t)
	w := f.worker("relay", 1)
	f.await("the worker connected", 10*time.Second, connected(instanceID(t, w)))
	_, secret := f.gw.token("agent", "relay-agent")

	local := newHome(t)
	m := local.mcpConnectEnv("SIMLOCK_URL="+f.url, "SIMLOCK_TOKEN="+secret)
	res, out := m.call("lease_simulator", map[string]any{"platform": "ios"}, "relay-1")
	lease, _ := out["lease"].(map[string]any)
	id, _ := lease["id"].(string)
	if res.IsError || id == "" {
		t.Fatalf("lease_simulator through the relay = %v, want a grant", out)
	}
	m.mu.Lock()
	heard := len(m.progress)
	m.mu.Unlock()
	if heard == 0 {
		t.Errorf("the relay carried no progress notification of the lease")
	}
	if _, ok := f.leaseIDsOf(secret)[id]; !ok {
		t.Errorf("GET /v1/leases with the token lists %v, want the relayed lease %s", f.leaseIDsOf(secret), id)
	}

	// Released over HTTP by the token: the session's warning comes on the
	// server's own stream, through the relay.
	if r := f.api.do("DELETE", "/v1/leases/"+id, secret, ""); r.status != 202 || r.body["released"] != true {
		t.Fatalf("DELETE /v1/leases/%s: %d %s", id, r.status, r.raw)
	}
	m.awaitHeard("the warning that lease "+id+" ended", func() bool {
		for _, w := range m.warnings {
			if d, ok := w.Data.(map[string]any); ok && d["lease_id"] == id && w.Level == "warning" {
				return true
			}
		}
		return false
	})

	res, out = m.call("lease_simulator", map[string]any{"platform": "ios"}, nil)
	lease, _ = out["lease"].(map[string]any)
	again, _ := lease["id"].(string)
	if res.IsError || again == "" {
		t.Fatalf("a second lease_simulator through the relay = %v, want a grant", out)
	}
	if res, out = m.call("release_simulator", map[string]any{"leaseId": again}, nil); res.IsError || out["released"] != true {
		t.Errorf("release_simulator through the relay = %v, want released", out)
	}
	if ls := f.leaseIDsOf(secret); len(ls) != 0 {
		t.Errorf("after the release the token holds %v, want nothing", ls)
	}
	if _, err := os.Stat(local.Socket()); err == nil {
		t.Errorf("the relay started a daemon on the client's machine")
	}
}
