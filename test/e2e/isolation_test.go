package e2e

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/simlock/simlock/internal/shimtest"
)

// execReply is what POST /v1/leases/{id}/exec answered: a JSON error
// before the command ran, or the stream of its output and its end.
type execReply struct {
	status         int
	code, message  string
	stdout, stderr string
	exit           float64
	// streamErr is the code of an error event that ended a stream.
	streamErr string
}

// exec runs one command through POST /v1/leases/{id}/exec and reads the
// whole answer.
func (a *api) exec(secret, leaseID, body string) execReply {
	a.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), commandBound)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "POST", a.base+"/v1/leases/"+leaseID+"/exec", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+secret)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		a.t.Fatalf("exec %s: %v", body, err)
	}
	defer resp.Body.Close()
	out := execReply{status: resp.StatusCode, exit: -1}
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		var e struct {
			Error struct {
				Code    string `json:"code"`
				Message string `json:"message"`
			} `json:"error"`
		}
		if json.Unmarshal(b, &e) != nil {
			a.t.Fatalf("exec %s: %d with a body that is not a JSON error: %q", body, resp.StatusCode, b)
		}
		out.code, out.message = e.Error.Code, e.Error.Message
		return out
	}
	s := &sse{resp: resp, cancel: cancel, events: make(chan sseEvent, 256), comments: make(chan string, 64)}
	go s.read()
	for {
		ev, ok := s.next(a.t)
		if !ok {
			return out
		}
		m := ev.json(a.t)
		switch ev.name {
		case "output":
			if m["stream"] == "stdout" {
				out.stdout += m["chunk"].(string)
			} else {
				out.stderr += m["chunk"].(string)
			}
		case "exit":
			out.exit = m["exitCode"].(float64)
		case "error":
			e, _ := m["error"].(map[string]any)
			out.streamErr, _ = e["code"].(string)
		}
	}
}

// refused checks that a command was refused before it ran, as
// PASSTHROUGH_REFUSED, and returns the message.
func (r execReply) refused(t *testing.T, what string) string {
	t.Helper()
	if r.status != 422 || r.code != "PASSTHROUGH_REFUSED" {
		t.Errorf("%s: %d %s %q (stdout %q), want 422 PASSTHROUGH_REFUSED", what, r.status, r.code, r.message, r.stdout)
	}
	return r.message
}

// leaseOver leases a device over HTTP as secret and returns its lease view.
func (a *api) leaseOver(secret, platform string) map[string]any {
	a.t.Helper()
	r := a.do("POST", "/v1/lease-requests", secret, `{"platform":"`+platform+`"}`)
	if r.status != 201 {
		a.t.Fatalf("create: %d %s", r.status, r.raw)
	}
	id := a.awaitState(secret, requestOf(a.t, r)["id"].(string), "granted")["lease"].(map[string]any)["id"].(string)
	got := a.do("GET", "/v1/leases/"+id, secret, "")
	if got.status != 200 {
		a.t.Fatalf("GET lease %s: %d %s", id, got.status, got.raw)
	}
	return got.obj("lease")
}

// httpShimHome starts a daemon with the HTTP API on the stand-ins for
// drivers, two running slots, and returns it with its API.
func httpShimHome(t *testing.T, e shimtest.Env, drivers string) (*home, *api) {
	t.Helper()
	h := newHome(t, "http.enabled", "true", "http.port", "0",
		"capacity.strategy", "fixed", "capacity.config.maxRunning", "2")
	h.withShims(e, drivers)
	h.startDaemon()
	st := h.run("status", "--json")
	var status struct {
		Daemon struct {
			HTTPURL string `json:"httpUrl"`
		} `json:"daemon"`
	}
	if json.Unmarshal([]byte(st.stdout), &status) != nil || status.Daemon.HTTPURL == "" {
		t.Fatalf("no httpUrl\n%s", st)
	}
	return h, &api{t: t, base: status.Daemon.HTTPURL}
}

// runAs runs a command as agent (SIMLOCK_AGENT_ID).
func (h *home) runAs(agent string, args ...string) result {
	h.T.Helper()
	env := h.Env
	h.Env = append(slices.Clone(env), "SIMLOCK_AGENT_ID="+agent)
	defer func() { h.Env = env }()
	return h.run(args...)
}

// mustNotExist fails when path exists: a command wrote a file of the host.
func mustNotExist(t *testing.T, path string) {
	t.Helper()
	if _, err := os.Stat(path); err == nil {
		b, _ := os.ReadFile(path)
		t.Errorf("%s was written on the daemon's machine: %q", path, b)
	}
}

// Two agents on the Android stand-ins, over HTTP: B cannot read, reboot or
// address A's emulator by any selector, cannot name a file of the daemon's
// machine, cannot reach the server or the network, and cannot save, load
// or delete the clean snapshot; its own commands reach its own emulator.
func TestOverHTTPAnAgentReachesItsOwnEmulatorAndNothingElse(t *testing.T) {
	t.Parallel()
	e := shimtest.Build(t)
	h, a := httpShimHome(t, e, "android")
	_, secretA := h.token("agent", "a")
	_, secretB := h.token("agent", "b")
	la, lb := a.leaseOver(secretA, "android"), a.leaseOver(secretB, "android")
	serialA, serialB := la["address"].(string), lb["address"].(string)
	if serialA == serialB || serialA == "" {
		t.Fatalf("the two leases share emulator %q", serialA)
	}
	idA, idB := la["id"].(string), lb["id"].(string)
	if r := a.exec(secretA, idA, `{"tool":"adb","args":["shell","echo 'secret-of-a' > /data/local/tmp/a.txt"]}`); r.exit != 0 {
		t.Fatalf("A writes its file: %+v", r)
	}
	if r := a.exec(secretA, idA, `{"tool":"adb","args":["shell","cat","/data/local/tmp/a.txt"]}`); r.exit != 0 || r.stdout != "secret-of-a\n" {
		t.Fatalf("A reads its own file back: %+v", r)
	}
	before := len(e.Calls(t))

	for _, args := range []string{
		`["-s","` + serialA + `","shell","cat","/data/local/tmp/a.txt"]`,
		`["-s` + serialA + `","shell","cat","/data/local/tmp/a.txt"]`,
		`["--serial","` + serialA + `","shell","cat","/data/local/tmp/a.txt"]`,
		`["-s","` + serialB + `","-s","` + serialA + `","shell","cat","/data/local/tmp/a.txt"]`,
		`["-t","1","shell","cat","/data/local/tmp/a.txt"]`,
		`["-e","shell","cat","/data/local/tmp/a.txt"]`,
		`["-s","` + serialA + `","reboot"]`,
		`["-H","127.0.0.1","shell","id"]`,
		`["-P","5037","shell","id"]`,
		`["connect","10.1.2.3:5555"]`,
		`["kill-server"]`,
		`["emu","avd","snapshot","save","simlock_clean_baseline"]`,
		`["emu","avd snapshot load simlock_clean_baseline"]`,
		`["emu","avd","snapshot","delete","simlock_clean_baseline"]`,
		`["emu","kill"]`,
		`["forward","localfilesystem:/tmp/simlock-sock","tcp:1"]`,
		`["forward","tcp:40000","tcp:5555"]`,
		`["forward","--remove-all"]`,
	} {
		r := a.exec(secretB, idB, `{"tool":"adb","args":`+args+`}`)
		r.refused(t, "B runs adb "+args)
		if strings.Contains(r.stdout, "secret-of-a") {
			t.Errorf("B read A's file with %s", args)
		}
	}

	// Files of the daemon's machine: B's pull would write one, push and
	// install would read one.
	host := t.TempDir()
	stolen := filepath.Join(host, "stolen.txt")
	if err := os.WriteFile(filepath.Join(host, "payload"), []byte("from the host"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, args := range []string{
		`["pull","/data/local/tmp/a.txt","` + stolen + `"]`,
		`["pull","/data/local/tmp/a.txt"]`,
		`["push","` + filepath.Join(host, "payload") + `","/data/local/tmp/p"]`,
		`["install","` + filepath.Join(host, "app.apk") + `"]`,
		`["bugreport","` + filepath.Join(host, "report.zip") + `"]`,
	} {
		msg := a.exec(secretB, idB, `{"tool":"adb","args":`+args+`}`).refused(t, "B runs adb "+args)
		if !strings.Contains(msg, "/v1/leases/{id}/files") {
			t.Errorf("the refusal of adb %s does not name the file routes: %q", args, msg)
		}
	}
	mustNotExist(t, stolen)
	for _, c := range e.Calls(t)[before:] {
		if c.Tool == "adb" && (slices.Contains(c.Args, serialA) || slices.ContainsFunc(c.Args, func(a string) bool {
			return slices.Contains([]string{"pull", "push", "connect", "kill-server", "snapshot", "reboot"}, a) || strings.Contains(a, "snapshot")
		})) {
			t.Errorf("a refused command ran: adb %q", c.Args)
		}
	}

	// B's own commands reach B's emulator: A's file is not there.
	if r := a.exec(secretB, idB, `{"tool":"adb","args":["shell","cat","/data/local/tmp/a.txt"]}`); r.status != 200 || r.exit != 1 || strings.Contains(r.stdout, "secret-of-a") {
		t.Errorf("B's cat of the path on its own emulator: %+v, want exit 1 and no A's secret", r)
	}
	if r := a.exec(secretB, idB, `{"tool":"adb","args":["-s","`+serialB+`","get-serialno"]}`); r.exit != 0 || strings.TrimSpace(r.stdout) != serialB {
		t.Errorf("B's get-serialno with its own -s: %+v, want %s", r, serialB)
	}
	if r := a.exec(secretB, idB, `{"tool":"adb","args":["reverse","tcp:8081","tcp:8081"]}`); r.exit != 0 {
		t.Errorf("B's reverse tcp:8081 tcp:8081: %+v, want it run", r)
	}
	if r := a.exec(secretA, idA, `{"tool":"adb","args":["shell","cat","/data/local/tmp/a.txt"]}`); r.stdout != "secret-of-a\n" {
		t.Errorf("A's file after B's attempts: %+v", r)
	}
}

// Two agents on the iOS stand-ins, over HTTP: booted is B's simulator,
// never whichever simctl would find booted first (A's); A's UDID, a file
// of the daemon's machine, spawn and shutdown all are refused.
func TestOverHTTPBootedIsTheLeasesSimulatorAndHostPathsAreRefused(t *testing.T) {
	t.Parallel()
	e := shimtest.Build(t)
	h, a := httpShimHome(t, e, "ios")
	_, secretA := h.token("agent", "a")
	_, secretB := h.token("agent", "b")
	la := a.leaseOver(secretA, "ios")
	lb := a.leaseOver(secretB, "ios")
	udidA, udidB := la["udid"].(string), lb["udid"].(string)
	idB := lb["id"].(string)

	// A's simulator was booted first: simctl alone would read booted as A's.
	r := a.exec(secretB, idB, `{"tool":"simctl","args":["io","booted","enumerate"]}`)
	if r.exit != 0 || !strings.Contains(r.stdout, udidB) || strings.Contains(r.stdout, udidA) {
		t.Errorf("B's io booted enumerate: %+v, want it run on %s (B's), not %s", r, udidB, udidA)
	}
	r = a.exec(secretB, idB, `{"tool":"simctl","args":["openurl","booted","https://example.com"]}`)
	if r.exit != 0 || !strings.Contains(r.stdout, "openurl "+udidB) {
		t.Errorf("B's openurl booted: %+v, want it on %s", r, udidB)
	}
	host := t.TempDir()
	shot := filepath.Join(host, "shot.png")
	before := len(e.Calls(t))
	for _, args := range []string{
		`["io","` + udidA + `","enumerate"]`,
		`["launch","` + udidA + `","com.example.app"]`,
		`["shutdown","all"]`,
		`["erase","` + udidB + `"]`,
		`["spawn","booted","/bin/sh","-c","id"]`,
		`["io","booted","screenshot","` + shot + `"]`,
		`["install","booted","` + filepath.Join(host, "My.app") + `"]`,
		`["addmedia","booted","` + filepath.Join(host, "a.jpg") + `"]`,
		`["launch","--console","booted","com.example.app"]`,
		`["--set","/tmp","list"]`,
	} {
		a.exec(secretB, idB, `{"tool":"simctl","args":`+args+`}`).refused(t, "B runs simctl "+args)
	}
	mustNotExist(t, shot)
	for _, c := range e.Calls(t)[before:] {
		if c.Tool == "xcrun" && (slices.Contains(c.Args, udidA) || slices.Contains(c.Args, "spawn") || slices.Contains(c.Args, "all") || slices.Contains(c.Args, shot)) {
			t.Errorf("a refused command ran: %q", c.Args)
		}
	}
	if list := shim(t, e, "xcrun", "simctl", "--set", h.path("devices/ios"), "list", "devices"); !strings.Contains(list, udidA+") (Booted)") {
		t.Errorf("A's simulator is no longer booted:\n%s", list)
	}
}

// simlock adb on the machine itself is pinned too: with one Android lease
// the command runs on it without --lease; another emulator's -s is
// refused; and the local user keeps host paths (adb pull writes here).
func TestTheLocalCLIIsPinnedToTheCallersLeaseAndKeepsHostPaths(t *testing.T) {
	t.Parallel()
	e := shimtest.Build(t)
	h := newHome(t, "capacity.strategy", "fixed", "capacity.config.maxRunning", "2")
	h.withShims(e, "android")
	other := h.leaseDetached("other", "android")
	mine := h.leaseDetached("me", "android")

	r := h.runAs("me", "adb", "shell", "echo 'mine' > /data/local/tmp/m.txt")
	if r.code != 0 {
		t.Fatalf("adb shell without --lease\n%s", r)
	}
	r = h.runAs("me", "adb", "-s", other.Device.Address, "shell", "cat", "/data/local/tmp/m.txt")
	expectFailure(t, r, 2, "USAGE")
	dest := filepath.Join(t.TempDir(), "m.txt")
	if r := h.runAs("me", "adb", "--lease", mine.Lease.ID, "pull", "/data/local/tmp/m.txt", dest); r.code != 0 {
		t.Fatalf("adb pull to a local path\n%s", r)
	}
	if b, err := os.ReadFile(dest); err != nil || string(b) != "mine\n" {
		t.Errorf("pulled %q, %v; want the file written on the lease's emulator", b, err)
	}
	for _, c := range e.Calls(t) {
		if c.Tool == "adb" && slices.Contains(c.Args, "cat") {
			t.Errorf("the refused cat ran: %q", c.Args)
		}
	}
}

// simlock mcp runs on the daemon's machine but serves an agent that may be
// anywhere: its run_on_device is confined as a remote caller's. It cannot
// name a file of the machine, nor reach another agent's emulator.
func TestMCPRunOnDeviceIsConfinedLikeARemoteCaller(t *testing.T) {
	t.Parallel()
	e := shimtest.Build(t)
	h := newHome(t, "capacity.strategy", "fixed", "capacity.config.maxRunning", "2")
	h.withShims(e, "android")
	other := h.leaseDetached("other", "android")
	if r := h.runAs("other", "adb", "--lease", other.Lease.ID, "shell", "echo 'secret-of-other' > /data/local/tmp/o.txt"); r.code != 0 {
		t.Fatalf("the other agent writes its file\n%s", r)
	}
	m := h.mcpConnect("agent-mcp")
	if res, grant := m.call("lease_simulator", map[string]any{"platform": "android"}, nil); res.IsError {
		t.Fatalf("lease_simulator: %v", grant)
	}
	if res, out := m.call("run_on_device", map[string]any{"tool": "adb", "args": []string{"shell", "echo 'mine' > /data/local/tmp/m.txt"}}, nil); res.IsError || out["exitCode"] != float64(0) {
		t.Fatalf("run_on_device on its own emulator: %v", out)
	}
	dest := filepath.Join(t.TempDir(), "pulled.txt")
	for _, args := range [][]string{
		{"pull", "/data/local/tmp/m.txt", dest},
		{"push", "/etc/hostname", "/data/local/tmp/h"},
		{"-s", other.Device.Address, "shell", "cat", "/data/local/tmp/o.txt"},
		{"emu", "avd", "snapshot", "save", "simlock_clean_baseline"},
	} {
		res, out := m.call("run_on_device", map[string]any{"tool": "adb", "args": args}, nil)
		if !res.IsError || out["code"] != "PASSTHROUGH_REFUSED" {
			t.Errorf("run_on_device adb %q = %v, want PASSTHROUGH_REFUSED", args, out)
		}
		if s, _ := out["stdout"].(string); strings.Contains(s, "secret-of-other") {
			t.Errorf("run_on_device adb %q read the other agent's file", args)
		}
	}
	mustNotExist(t, dest)
}

// Through a gateway with two workers (one on the iOS stand-ins, one on the
// Android ones), the workers take the gateway's forward for a remote
// caller's: an agent's exec is pinned to its own device (not the worker's
// other emulator, not whatever simulator is booted first), names no file
// of the worker's machine, and cannot touch the clean snapshot.
func TestThroughAGatewayExecReachesTheLeasesDeviceOnly(t *testing.T) {
	t.Parallel()
	f := newFleet(t)
	e := shimtest.Build(t)
	twoRunning := []string{"capacity.strategy", "fixed", "capacity.config.maxRunning", "2"}
	droid := f.shimWorker(e, "android", "droid", twoRunning...)
	ios := f.shimWorker(e, "ios", "mac", twoRunning...)

	// The workers' own leases, taken first: another emulator, and the
	// simulator simctl would read as booted.
	local := droid.leaseDetached("local", "android")
	if r := droid.runAs("local", "adb", "--lease", local.Lease.ID, "shell", "echo 'secret-of-local' > /data/local/tmp/l.txt"); r.code != 0 {
		t.Fatalf("the worker's own agent writes its file\n%s", r)
	}
	localIOS := ios.leaseDetached("local", "ios")

	_, agent := f.gw.token("agent", "fleet-agent")
	la := f.api.leaseOver(agent, "android")
	if la["address"] == local.Device.Address {
		t.Fatalf("the gateway's lease got the worker's own emulator %s", la["address"])
	}
	host := t.TempDir()
	stolen := filepath.Join(host, "stolen.txt")
	for _, args := range []string{
		`["-s","` + local.Device.Address + `","shell","cat","/data/local/tmp/l.txt"]`,
		`["pull","/data/local/tmp/l.txt","` + stolen + `"]`,
		`["install","` + filepath.Join(host, "app.apk") + `"]`,
		`["emu","avd","snapshot","save","simlock_clean_baseline"]`,
		`["connect","10.1.2.3:5555"]`,
	} {
		r := f.api.exec(agent, la["id"].(string), `{"tool":"adb","args":`+args+`}`)
		r.refused(t, "through the gateway, adb "+args)
		if strings.Contains(r.stdout, "secret-of-local") {
			t.Errorf("through the gateway, adb %s read the worker's other emulator", args)
		}
	}
	mustNotExist(t, stolen)
	if r := f.api.exec(agent, la["id"].(string), `{"tool":"adb","args":["get-serialno"]}`); r.exit != 0 || strings.TrimSpace(r.stdout) != la["address"] {
		t.Errorf("through the gateway, get-serialno: %+v, want %v", r, la["address"])
	}

	_, agent2 := f.gw.token("agent", "fleet-agent-2")
	li := f.api.leaseOver(agent2, "ios")
	udid := li["udid"].(string)
	if udid == localIOS.Device.DriverDeviceID {
		t.Fatalf("the gateway's lease got the worker's own simulator %s", udid)
	}
	r := f.api.exec(agent2, li["id"].(string), `{"tool":"simctl","args":["io","booted","enumerate"]}`)
	if r.exit != 0 || !strings.Contains(r.stdout, udid) || strings.Contains(r.stdout, localIOS.Device.DriverDeviceID) {
		t.Errorf("through the gateway, io booted enumerate: %+v, want it on %s, not the worker's own %s", r, udid, localIOS.Device.DriverDeviceID)
	}
	shot := filepath.Join(host, "shot.png")
	for _, args := range []string{
		`["io","booted","screenshot","` + shot + `"]`,
		`["io","` + localIOS.Device.DriverDeviceID + `","enumerate"]`,
		`["spawn","booted","/bin/sh","-c","id"]`,
	} {
		f.api.exec(agent2, li["id"].(string), `{"tool":"simctl","args":`+args+`}`).refused(t, "through the gateway, simctl "+args)
	}
	mustNotExist(t, shot)
}

// A clean snapshot changed on disk behind simlock's back (here: an
// implant written into it while its device was leased) is never loaded:
// the clean at the lease's end fails and quarantines the device, whose
// retried clean wipes it, so the next tenant's device is clean.
func TestAPoisonedCleanSnapshotQuarantinesItsDeviceAtReclaim(t *testing.T) {
	t.Parallel()
	e := shimtest.Build(t)
	h := newHome(t, "capacity.strategy", "fixed", "capacity.config.maxRunning", "1",
		"warmPool.quarantine.retryBackoffMs", "200")
	h.withShims(e, "android")
	f := h.follow()
	g := h.leaseDetached("victim-before", "android")
	snap := filepath.Join(h.path("devices/android"), g.Device.DriverDeviceID+".avd", "snapshots", "simlock_clean_baseline", "shim-userdata.json")
	if _, err := os.Stat(snap); err != nil {
		t.Fatalf("no clean snapshot where the stand-in keeps it: %v", err)
	}
	if err := os.WriteFile(snap, []byte(`{"packages":["com.evil.implant"]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if r := h.run("release", g.Lease.ID); r.code != 0 {
		t.Fatalf("release\n%s", r)
	}
	ended := f.find("the end of the device's clean", func(ev event) bool {
		return isEvent("device.purge-failed", "deviceId", g.Device.ID)(ev) || isEvent("device.reclaimed", "deviceId", g.Device.ID)(ev)
	})
	if ended.Event != "device.purge-failed" || !strings.Contains(ended.str("error"), "not the one simlock saved") {
		t.Fatalf("the clean with a poisoned snapshot ended %s (%s), want device.purge-failed saying the snapshot is not the one simlock saved", ended.Event, ended.str("error"))
	}
	f.find("device.quarantined", isEvent("device.quarantined", "deviceId", g.Device.ID, "reason", "purge-failed"))
	f.find("device.quarantine-recovered", isEvent("device.quarantine-recovered", "deviceId", g.Device.ID))

	next := h.leaseDetached("next", "android")
	if next.Device.ID != g.Device.ID {
		t.Fatalf("the next lease got device %s, want the cleaned %s", next.Device.ID, g.Device.ID)
	}
	r := h.runAs("next", "adb", "shell", "pm", "list", "packages", "-3")
	if r.code != 0 || strings.Contains(r.stdout, "com.evil.implant") {
		t.Errorf("the next tenant's packages:\n%s\nwant no implant", r)
	}
}

// A command's caller that goes away ends the command, through a gateway
// too: the gateway cancels its forward (call.cancel over the uplink) and
// the worker stops the command with SIGTERM.
func TestThroughAGatewayACallerThatGoesAwayStopsTheWorkersCommand(t *testing.T) {
	t.Parallel()
	f := newFleet(t)
	e := shimtest.Build(t)
	f.shimWorker(e, "android", "droid")
	_, agent := f.gw.token("agent", "leaving-agent")
	l := f.api.leaseOver(agent, "android")

	pipe := filepath.Join(t.TempDir(), "fifo")
	if err := syscall.Mkfifo(pipe, 0o600); err != nil {
		t.Fatal(err)
	}
	s := f.api.streamBody("POST", "/v1/leases/"+l["id"].(string)+"/exec", agent, `{"tool":"adb","args":["shell","hold `+pipe+`"]}`)
	for ready := false; !ready; {
		ev, ok := s.next(t)
		if !ok {
			t.Fatal("the exec stream ended before its command said ready")
		}
		ready = ev.name == "output" && strings.Contains(ev.data, "ready")
	}
	ended := make(chan string, 1)
	go func() {
		r, err := os.Open(pipe)
		if err != nil {
			ended <- err.Error()
			return
		}
		defer r.Close()
		b, _ := io.ReadAll(r)
		ended <- string(b)
	}()
	s.close() // the caller goes away
	select {
	case got := <-ended:
		if got != "terminated\n" {
			t.Errorf("the worker's command ended saying %q, want terminated (stopped by SIGTERM)", got)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the worker's command still ran 10s after its caller went away")
	}
}
