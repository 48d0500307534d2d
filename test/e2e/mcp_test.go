package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/simlock/simlock/internal/shimtest"
)

// mcpSession is `simlock mcp` run as an MCP client runs it, with what the
// client heard.
type mcpSession struct {
	t   *testing.T
	cs  *mcp.ClientSession
	cmd *exec.Cmd

	mu       sync.Mutex
	progress []*mcp.ProgressNotificationParams
	warnings []*mcp.LoggingMessageParams
	heard    chan struct{} // a notification arrived
	stderr   strings.Builder
}

// mcpConnect starts `simlock mcp` for agent over stdio with the official
// go-sdk client.
func (h *home) mcpConnect(agent string) *mcpSession {
	h.T.Helper()
	return h.mcpConnectEnv("SIMLOCK_AGENT_ID=" + agent)
}

// mcpConnectEnv starts `simlock mcp` with extra environment variables.
func (h *home) mcpConnectEnv(extra ...string) *mcpSession {
	h.T.Helper()
	m := &mcpSession{t: h.T, heard: make(chan struct{}, 256)}
	cmd := exec.Command(simlockBin, "mcp")
	cmd.Env = append(slices.Clone(h.Env), extra...)
	cmd.Stderr = &lockedWriter{mu: &m.mu, b: &m.stderr}
	note := func() {
		select {
		case m.heard <- struct{}{}:
		default:
		}
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "e2e", Version: "1"}, &mcp.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
			m.mu.Lock()
			m.progress = append(m.progress, req.Params)
			m.mu.Unlock()
			note()
		},
		LoggingMessageHandler: func(_ context.Context, req *mcp.LoggingMessageRequest) {
			m.mu.Lock()
			m.warnings = append(m.warnings, req.Params)
			m.mu.Unlock()
			note()
		},
	})
	ctx, cancel := context.WithTimeout(context.Background(), waitBound)
	defer cancel()
	cs, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		h.T.Fatalf("connect to simlock mcp: %v", err)
	}
	m.cs, m.cmd = cs, cmd
	h.T.Cleanup(func() { _ = cs.Close() })
	return m
}

type lockedWriter struct {
	mu *sync.Mutex
	b  *strings.Builder
}

func (w *lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

// call runs a tool and returns its result and the JSON it carried.
func (m *mcpSession) call(name string, args map[string]any, progressToken any) (*mcp.CallToolResult, map[string]any) {
	m.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), commandBound)
	defer cancel()
	p := &mcp.CallToolParams{Name: name, Arguments: args}
	if progressToken != nil {
		p.SetProgressToken(progressToken)
	}
	res, err := m.cs.CallTool(ctx, p)
	if err != nil {
		m.t.Fatalf("%s: %v\nserver stderr:\n%s", name, err, m.stderr.String())
	}
	var out map[string]any
	if len(res.Content) > 0 {
		if tc, ok := res.Content[0].(*mcp.TextContent); ok {
			_ = json.Unmarshal([]byte(tc.Text), &out)
		}
	}
	return res, out
}

// awaitHeard waits until pred holds over what the client heard.
func (m *mcpSession) awaitHeard(what string, pred func() bool) {
	m.t.Helper()
	deadline := time.After(waitBound)
	for {
		m.mu.Lock()
		ok := pred()
		m.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-m.heard:
		case <-deadline:
			m.t.Fatalf("the MCP client never heard %s", what)
		}
	}
}

// The tools are listed with strict schemas; a lease with a progress token
// reports rising progress before its grant; lease_status says held;
// release_simulator releases.
func TestMCPLeaseWithProgressStatusAndRelease(t *testing.T) {
	t.Parallel()
	h := newHome(t, "drivers.demo.provisionMs", "300", "drivers.demo.bootMs", "300", "drivers.demo.reclaimMs", "60")
	m := h.mcpConnect("agent-mcp")

	ctx, cancel := context.WithTimeout(context.Background(), waitBound)
	defer cancel()
	tools, err := m.cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range tools.Tools {
		names = append(names, tool.Name)
		schema, _ := json.Marshal(tool.InputSchema)
		var s map[string]any
		_ = json.Unmarshal(schema, &s)
		if s["type"] != "object" || s["additionalProperties"] != false || s["properties"] == nil {
			t.Errorf("tool %s schema is not a strict object: %s", tool.Name, schema)
		}
		if tool.Description == "" {
			t.Errorf("tool %s has no description", tool.Name)
		}
	}
	slices.Sort(names)
	if want := []string{"app_upload_url", "device_logs", "install_app", "launch_app", "lease_simulator", "lease_status", "list_devices", "open_url", "pull_file", "push_file", "release_simulator", "run_on_device", "screenshot", "set_appearance", "set_location", "terminate_app", "wait_for_lease"}; !slices.Equal(names, want) {
		t.Fatalf("tools = %v, want %v", names, want)
	}

	res, grant := m.call("lease_simulator", map[string]any{"platform": "ios"}, "lease-1")
	if res.IsError {
		t.Fatalf("lease_simulator failed: %v", grant)
	}
	lease, _ := grant["lease"].(map[string]any)
	leaseID, _ := lease["id"].(string)
	if leaseID == "" || lease["requesterId"] != "agent-mcp" {
		t.Fatalf("grant = %v, want a lease for agent-mcp", grant)
	}
	m.awaitHeard("two progress notifications", func() bool { return len(m.progress) >= 2 })
	m.mu.Lock()
	steps := slices.Clone(m.progress)
	m.mu.Unlock()
	for i, p := range steps {
		if p.ProgressToken != "lease-1" || p.Total <= 0 || p.Message == "" {
			t.Errorf("notification %d = %+v, want token lease-1, a total and a message", i, p)
		}
		if i > 0 && p.Progress <= steps[i-1].Progress {
			t.Errorf("progress went %v then %v: not strictly increasing", steps[i-1].Progress, p.Progress)
		}
	}
	var msgs []string
	for _, p := range steps {
		msgs = append(msgs, p.Message)
	}
	if !strings.Contains(strings.Join(msgs, "|"), "Booting") {
		t.Errorf("no step said it was booting: %q", msgs)
	}

	res, st := m.call("lease_status", map[string]any{}, nil)
	if res.IsError || st["held"] != true || st["leaseId"] != leaseID || st["expiresAt"] == nil {
		t.Errorf("lease_status = %v, want held %s with expiresAt", st, leaseID)
	}
	res, rel := m.call("release_simulator", map[string]any{"leaseId": leaseID}, nil)
	if res.IsError || rel["released"] != true || rel["leaseId"] != leaseID {
		t.Errorf("release_simulator = %v", rel)
	}
	if _, ok := h.leases()[leaseID]; ok {
		t.Errorf("lease %s is still listed after release_simulator", leaseID)
	}
	res, st = m.call("lease_status", map[string]any{"leaseId": leaseID}, nil)
	if res.IsError || st["held"] != false {
		t.Errorf("lease_status after release = %v, want held false", st)
	}
}

// With capacity full, lease_simulator answers pending after waitSeconds,
// and wait_for_lease later returns the grant once the holder releases.
func TestMCPPendingThenWaitForLease(t *testing.T) {
	t.Parallel()
	h := newHome(t, append([]string{"capacity.strategy", "fixed", "capacity.config.maxRunning", "1"}, fastDemo...)...)
	other := h.leaseDetached("other", "ios")
	m := h.mcpConnect("agent-wait")

	start := time.Now()
	res, out := m.call("lease_simulator", map[string]any{"platform": "ios", "waitSeconds": 2}, nil)
	took := time.Since(start)
	if res.IsError || out["state"] != "pending" || out["requestId"] == nil || out["queuePosition"] != float64(1) {
		t.Fatalf("lease_simulator with capacity full = %v, want pending at queue position 1", out)
	}
	if took < 2*time.Second || took > 10*time.Second {
		t.Errorf("pending came after %s, want about waitSeconds (2 s)", took)
	}
	reqID := out["requestId"].(string)
	if r := h.run("release", other.Lease.ID, "--agent-id", "other"); r.code != 0 {
		t.Fatalf("release\n%s", r)
	}
	res, grant := m.call("wait_for_lease", map[string]any{"requestId": reqID}, nil)
	lease, _ := grant["lease"].(map[string]any)
	if res.IsError || lease == nil || lease["requesterId"] != "agent-wait" {
		t.Fatalf("wait_for_lease = %v, want the grant", grant)
	}
}

// A grant served at once from an idle ready device (source warm) is held by
// the server from the moment it is handed over: lease_status says held at
// once, renewals keep it past twice its TTL, and closing the client
// releases it.
func TestMCPWarmGrantIsHeldRenewedAndReleasedAtClose(t *testing.T) {
	t.Parallel()
	h := newHome(t, append([]string{"lease.minTtlMs", "1000"}, fastDemo...)...)
	f := h.follow()
	// A demo Android reclaim leaves the device running: one lease and its
	// release make it ready and idle.
	warm := h.leaseDetached("warmer", "android")
	if r := h.run("release", warm.Lease.ID, "--agent-id", "warmer"); r.code != 0 {
		t.Fatalf("release\n%s", r)
	}
	f.next("device.reclaimed of "+warm.Device.ID, func(ev event) bool {
		return ev.Event == "device.reclaimed" && ev.str("deviceId") == warm.Device.ID
	})

	m := h.mcpConnect("agent-warm")
	const ttlMs = 1500
	res, grant := m.call("lease_simulator", map[string]any{"platform": "android", "ttlMs": ttlMs}, nil)
	if res.IsError || grant["source"] != "warm" {
		t.Fatalf("lease_simulator = %v, want a grant with source warm", grant)
	}
	leaseID := grant["lease"].(map[string]any)["id"].(string)
	if _, st := m.call("lease_status", map[string]any{}, nil); st["held"] != true || st["leaseId"] != leaseID {
		t.Fatalf("lease_status right after a warm grant = %v, want held:true for %s", st, leaseID)
	}

	// Renewals come every third of the TTL. Each is checked against the
	// one before by the daemon's own timestamps: a burst (renewals at no
	// interval) puts two within a sixth of the TTL; the lease never
	// expiring shows they are not too far apart either.
	var last int64
	for i := range 6 {
		ev := f.next("a renewal of "+leaseID, func(ev event) bool {
			if ev.str("leaseId") != leaseID {
				return false
			}
			if ev.Event == "lease.expired" || ev.Event == "lease.released" {
				t.Fatalf("after %d renewals: %s %v, want the lease kept", i, ev.Event, ev)
			}
			return ev.Event == "lease.renewed"
		})
		if last != 0 && ev.Timestamp-last < ttlMs/6 {
			t.Fatalf("renewal %d came %d ms after the one before, want them about a third of the TTL (%d ms) apart", i+1, ev.Timestamp-last, ttlMs)
		}
		last = ev.Timestamp
	}
	if _, st := m.call("lease_status", map[string]any{"leaseId": leaseID}, nil); st["held"] != true {
		t.Fatalf("lease_status after twice the TTL = %v, want held:true", st)
	}

	go func() { _ = m.cs.Close() }()
	ev := f.next("lease.released for "+leaseID, func(ev event) bool {
		return ev.Event == "lease.released" && ev.str("leaseId") == leaseID
	})
	if ev.str("reason") != "explicit" {
		t.Errorf("lease.released reason = %q, want explicit (the server's release at close)", ev.str("reason"))
	}
}

// A call the client cancels with notifications/cancelled gets no response
// at all (the MCP specification: a receiver should not answer it), and its
// waiting request is withdrawn. Read off the raw stdio stream, since an SDK
// client drops a late answer silently.
func TestMCPCancelledCallGetsNoResponse(t *testing.T) {
	t.Parallel()
	h := newHome(t, append([]string{"capacity.strategy", "fixed", "capacity.config.maxRunning", "1"}, fastDemo...)...)
	h.leaseDetached("other", "ios")
	f := h.follow()

	cmd := exec.Command(simlockBin, "mcp")
	cmd.Env = append(slices.Clone(h.Env), "SIMLOCK_AGENT_ID=agent-cancel")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	lines := make(chan map[string]any, 64)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(stdout)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			var m map[string]any
			if json.Unmarshal(sc.Bytes(), &m) == nil {
				lines <- m
			}
		}
	}()
	send := func(frame string) {
		t.Helper()
		if _, err := io.WriteString(stdin, frame+"\n"); err != nil {
			t.Fatalf("write to simlock mcp: %v", err)
		}
	}
	var seen []map[string]any
	answerTo := func(id float64) map[string]any {
		t.Helper()
		deadline := time.After(waitBound)
		for {
			select {
			case m, ok := <-lines:
				if !ok {
					t.Fatalf("simlock mcp closed stdout before answering id %v; it sent %v", id, seen)
				}
				seen = append(seen, m)
				if m["id"] == id {
					return m
				}
			case <-deadline:
				t.Fatalf("no answer to id %v within %s; the server sent %v", id, waitBound, seen)
			}
		}
	}

	send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`)
	answerTo(1)
	send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"lease_simulator","arguments":{"platform":"ios"}}}`)
	queued := f.next("lease.queued of agent-cancel", func(ev event) bool {
		return ev.Event == "lease.queued"
	})
	send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":2,"reason":"the user stopped"}}`)
	f.next("the withdrawal of "+queued.str("requestId"), func(ev event) bool {
		return ev.Event == "lease.rejected" && ev.str("requestId") == queued.str("requestId") && ev.str("reason") == "cancelled"
	})
	send(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"lease_status","arguments":{}}}`)
	if res := answerTo(3); res["result"] == nil {
		t.Fatalf("lease_status after the cancel = %v, want a result (the server keeps serving)", res)
	}
	if err := stdin.Close(); err != nil {
		t.Fatal(err)
	}
	for m := range lines {
		seen = append(seen, m)
	}
	for _, m := range seen {
		if m["id"] == float64(2) {
			t.Fatalf("the cancelled call was answered: %v", m)
		}
	}
}

// Closing the client's stdin releases the server's lease within two
// seconds.
func TestMCPStdinCloseReleasesLeases(t *testing.T) {
	t.Parallel()
	h := newHome(t, fastDemo...)
	m := h.mcpConnect("agent-close")
	res, grant := m.call("lease_simulator", map[string]any{"platform": "android"}, nil)
	if res.IsError {
		t.Fatalf("lease_simulator: %v", grant)
	}
	leaseID := grant["lease"].(map[string]any)["id"].(string)
	f := h.follow()
	closed := time.Now()
	go func() { _ = m.cs.Close() }()
	ev := f.next("lease.released for "+leaseID, func(ev event) bool {
		return ev.Event == "lease.released" && ev.str("leaseId") == leaseID
	})
	if took := time.Since(closed); took > 2*time.Second {
		t.Errorf("lease released %s after stdin closed, want within 2 s", took)
	}
	if ev.str("reason") != "explicit" {
		t.Errorf("lease.released reason = %q, want explicit", ev.str("reason"))
	}
}

// SIGTERM, like a closed stdin, releases the server's leases before it
// exits.
func TestMCPSignalReleasesLeases(t *testing.T) {
	t.Parallel()
	h := newHome(t, fastDemo...)
	m := h.mcpConnect("agent-term")
	res, grant := m.call("lease_simulator", map[string]any{"platform": "ios"}, nil)
	if res.IsError {
		t.Fatalf("lease_simulator: %v", grant)
	}
	leaseID := grant["lease"].(map[string]any)["id"].(string)
	f := h.follow()
	if err := m.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	f.next("lease.released for "+leaseID, func(ev event) bool {
		return ev.Event == "lease.released" && ev.str("leaseId") == leaseID && ev.str("reason") == "explicit"
	})
}

// Bad arguments are isError results carrying the contract's code, and the
// server keeps serving.
func TestMCPBadArgumentsAreToolErrors(t *testing.T) {
	t.Parallel()
	h := newHome(t, fastDemo...)
	m := h.mcpConnect("agent-bad")
	for _, c := range []struct {
		name  string
		args  map[string]any
		field string
	}{
		{"unknown field", map[string]any{"platform": "ios", "colour": "red"}, "colour"},
		{"device for model", map[string]any{"platform": "ios", "device": "iPhone 16"}, "device"},
		{"model and class", map[string]any{"platform": "ios", "model": "iPhone 16", "class": "tablet"}, "class"},
		{"ttl above the maximum", map[string]any{"platform": "ios", "ttlMs": 999999999}, "ttlMs"},
		{"waitSeconds above 55", map[string]any{"platform": "ios", "waitSeconds": 90}, "waitSeconds"},
		{"no platform", map[string]any{}, "platform"},
	} {
		res, out := m.call("lease_simulator", c.args, nil)
		if !res.IsError || out["code"] != "BAD_REQUEST" || out["field"] != c.field {
			t.Errorf("%s: isError %v, %v; want BAD_REQUEST naming %s", c.name, res.IsError, out, c.field)
		}
		if c.field == "device" && out["didYouMean"] != "model" {
			t.Errorf("%s: %v, want didYouMean model", c.name, out)
		}
	}
	if res, out := m.call("release_simulator", map[string]any{"leaseId": "lse_nope"}, nil); !res.IsError || out["code"] != "UNKNOWN_LEASE" {
		t.Errorf("release of an unknown lease: %v", out)
	}
	res, out := m.call("list_devices", map[string]any{"platform": "ios"}, nil)
	if res.IsError || out["platforms"] == nil {
		t.Errorf("list_devices after the errors: %v", out)
	}
	if h.leases() == nil || len(h.leases()) != 0 {
		t.Errorf("bad calls left leases: %v", h.leases())
	}
}

// An agent with no shell on the machine runs adb on its leased emulator
// through run_on_device: the real command runs (the stand-in adb records
// it, aimed at the leased serial) and its output and exit code come back.
func TestMCPRunOnDeviceRunsAdbOnTheLeasedEmulator(t *testing.T) {
	t.Parallel()
	e := shimtest.Build(t)
	h := newHome(t)
	h.withShims(e, "android")
	m := h.mcpConnect("agent-exec")
	res, grant := m.call("lease_simulator", map[string]any{"platform": "android"}, nil)
	if res.IsError {
		t.Fatalf("lease_simulator: %v", grant)
	}
	serial, _ := grant["device"].(map[string]any)["address"].(string)
	res, out := m.call("run_on_device", map[string]any{"tool": "adb", "args": []string{"shell", "getprop", "ro.build.version.sdk"}}, nil)
	if res.IsError || out["exitCode"] != float64(0) || strings.TrimSpace(out["stdout"].(string)) == "" {
		t.Fatalf("run_on_device getprop = %v, want exit 0 and the property", out)
	}
	ran := false
	for _, c := range e.Calls(t) {
		if c.Tool == "adb" && slices.Contains(c.Args, "getprop") && slices.Contains(c.Args, serial) {
			ran = true
		}
	}
	if !ran {
		t.Errorf("no adb call with getprop aimed at the leased %s: %v", serial, e.Calls(t))
	}
	res, out = m.call("run_on_device", map[string]any{"tool": "adb", "args": []string{"uninstall"}}, nil)
	if res.IsError || out["exitCode"] != float64(1) || !strings.Contains(out["stderr"].(string), "usage") {
		t.Errorf("adb uninstall without a package = %v, want exit 1 and the usage on stderr", out)
	}
}
