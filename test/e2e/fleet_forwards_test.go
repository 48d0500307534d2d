package e2e

import (
	"context"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/shimtest"
)

// refuseWith answers c with the error code, message and details, as a
// worker's refusal reads on the uplink.
func (s *scripted) refuseWith(c gwCall, code, msg string, details map[string]any) {
	s.t.Helper()
	e := map[string]any{"code": code, "message": msg}
	for k, v := range details {
		e[k] = v
	}
	b, _ := json.Marshal(map[string]any{"id": c.ID, "error": e})
	if err := s.write(b); err != nil {
		s.t.Fatalf("fake worker: write: %v", err)
	}
}

// leaksWorkerNames fails the test when text, an answer an agent got
// through the gateway, names any of the worker's own ids.
func leaksWorkerNames(t *testing.T, what, text string, workerIDs ...string) {
	t.Helper()
	for _, id := range append(workerIDs, "gw:") {
		if strings.Contains(text, id) {
			t.Errorf("%s names the worker's own %q: %s", what, id, text)
		}
	}
}

// A worker's refusal never hands an agent the worker's own names: its
// lease ids (lse_…), its request ids and the requester ids the gateway
// asks under (gw:<id>:<requester>) are rewritten, in the message and the
// details, whether the refusal ends a request or a forwarded call.
func TestAWorkersRefusalReachesTheAgentWithoutTheWorkersOwnIDs(t *testing.T) {
	t.Parallel()
	f := newFleet(t)
	w := f.fakeJoined("fake-scrub", "ios", 2, 2)

	// A refused lease request, as a worker that already holds a lease for
	// the gateway's requester answers it once it has started on it (before
	// any progress, the gateway puts the request back in line, to send it
	// again once the worker gave that lease back).
	ch := f.gw.runAsync("lease", "--platform", "ios", "--agent-id", "refused", "--detach")
	c := w.serveUntil("lease.request")
	in := requestIn(t, c)
	w.progress(c, contract.StageBooting)
	theirs, theirReq := fakeID("lse_"), fakeID("req_")
	w.refuseWith(c, "REQUESTER_ALREADY_LEASED", in.RequesterID+" already holds lease "+theirs+"; release it first (request "+theirReq+")",
		map[string]any{"requesterId": in.RequesterID, "existingLeaseId": theirs, "existingRequestId": theirReq})
	r := awaitResult(t, ch)
	expectFailure(t, r, 13, "REQUESTER_ALREADY_LEASED")
	leaksWorkerNames(t, "the refused request's error", r.stderr, theirs, theirReq, in.RequesterID)

	// A refused call on a lease the gateway granted: the worker names the
	// lease by its own id, the agent hears the gateway's.
	ch = f.gw.runAsync("lease", "--platform", "ios", "--agent-id", "holder", "--detach")
	l := w.grant(w.serveUntil("lease.request"), "")
	g := parseGrant(t, strings.TrimSpace(awaitResult(t, ch).stdout))
	// lease.get names the device's lease by the gateway's id too.
	rc := f.gw.dial()
	rc.call("h", "hello", helloInput("holder", ""))
	var got contract.LeaseGetResult
	expectResult(t, rc.call("g", "lease.get", map[string]any{"leaseId": g.Lease.ID}), &got)
	if got.Device.LeaseID != g.Lease.ID || got.Lease.ID != g.Lease.ID {
		t.Errorf("lease.get through the gateway names lease %s, device's lease %s; want the gateway's %s", got.Lease.ID, got.Device.LeaseID, g.Lease.ID)
	}
	renew := f.gw.runAsync("lease", "renew", "--agent-id", "holder", g.Lease.ID)
	c, rr, forwarded := nextOr(w, "lease.renew", renew)
	if !forwarded {
		t.Fatalf("the renew was not forwarded\n%s", rr)
	}
	w.refuseWith(c, "FORBIDDEN", "lease "+l.ID+" of "+l.RequesterID+" may not be renewed by request "+theirReq,
		map[string]any{"leaseId": l.ID, "requesterId": l.RequesterID})
	r = awaitResult(t, renew)
	e := expectFailure(t, r, 1, "FORBIDDEN")
	if e["leaseId"] != g.Lease.ID || !strings.Contains(message(e), g.Lease.ID) {
		t.Errorf("the refused renew names lease %v (%q), want the gateway's id %s", e["leaseId"], message(e), g.Lease.ID)
	}
	leaksWorkerNames(t, "the refused renew's error", strings.ReplaceAll(r.stderr, g.Lease.ID, "<lease>"), l.ID, theirReq, l.RequesterID)
}

// renewNotices renews lease over HTTP until its notices have told
// device-unhealthy then device-recovered, each once, and fails if they do
// not within the bound or come in another order or twice.
func renewNotices(t *testing.T, a *api, secret, lease string) {
	t.Helper()
	var heard []string
	deadline := time.Now().Add(10 * time.Second)
	for len(heard) < 2 {
		r := a.do("POST", "/v1/leases/"+lease+"/renew", secret, "")
		if r.status != 200 {
			t.Fatalf("renew of %s: %d %s", lease, r.status, r.raw)
		}
		ns, ok := r.body["notices"].([]any)
		if !ok {
			t.Fatalf("renew of %s answered no notices list: %s", lease, r.raw)
		}
		for _, n := range ns {
			heard = append(heard, n.(string))
		}
		if time.Now().After(deadline) {
			t.Fatalf("within 10 s the renewals of %s told %v, want device-unhealthy then device-recovered", lease, heard)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if want := []string{"device-unhealthy", "device-recovered"}; !slices.Equal(heard, want) {
		t.Errorf("the renewals of %s told %v, want %v", lease, heard, want)
	}
	if r := a.do("POST", "/v1/leases/"+lease+"/renew", secret, ""); !strings.Contains(r.raw, `"notices":[]`) {
		t.Errorf("a renew after the notices were told tells them again: %s", r.raw)
	}
}

// An HTTP agent, which has no session between its calls, hears its
// device's crash and recovery in the notices of its next renew, on a
// worker and through a gateway alike.
func TestHTTPRenewTellsTheNoticesNobodyHeard(t *testing.T) {
	t.Parallel()
	t.Run("worker", func(t *testing.T) {
		t.Parallel()
		h := healthHome(t, "http.enabled", "true", "http.port", "0")
		h.startDaemon()
		a := &api{t: t, base: httpURL(t, h)}
		_, agent := h.token("agent", "http-crash")
		l := a.leaseOver(agent, "ios")
		inject(t, h, l["deviceId"].(string), "crash")
		renewNotices(t, a, agent, l["id"].(string))
	})
	t.Run("gateway", func(t *testing.T) {
		t.Parallel()
		f := newFleet(t)
		w := f.healthWorker("health")
		_, agent := f.gw.token("agent", "http-crash")
		l := f.api.leaseOver(agent, "ios")
		inject(t, w, l["deviceId"].(string), "crash")
		renewNotices(t, f.api, agent, l["id"].(string))
	})
}

// httpURL is the daemon's HTTP API address, from its status.
func httpURL(t *testing.T, h *home) string {
	t.Helper()
	r := h.run("status", "--json")
	var st struct {
		Daemon struct {
			HTTPURL string `json:"httpUrl"`
		} `json:"daemon"`
	}
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &st) != nil || st.Daemon.HTTPURL == "" {
		t.Fatalf("status --json shows no daemon.httpUrl\n%s", r)
	}
	return st.Daemon.HTTPURL
}

// A lease record through a gateway names its worker by id and label, in
// the grant, a renew and the lists; while the worker is away its leases
// stay listed, marked unreachable, in `list --leases`, `status`, GET
// /v1/leases and the request's HTTP view, and the mark goes when it is
// back.
func TestAGatewaysLeaseRecordsNameTheirWorkerAndListAnAbsentOnesLeasesUnreachable(t *testing.T) {
	t.Parallel()
	f := newFleet(t)
	a := f.worker("worker-a", 2)
	idA := instanceID(t, a)
	f.await("worker A connected", 5*time.Second, connected(idA))
	named := func(what string, l leaseRec, unreachable bool) {
		t.Helper()
		if l.Worker == nil || l.Worker.ID != idA || l.Worker.Label != "worker-a" || l.WorkerID != idA {
			t.Errorf("%s: lease %s names worker %+v (workerId %q), want {%s worker-a}", what, l.ID, l.Worker, l.WorkerID, idA)
		}
		if l.Unreachable != unreachable {
			t.Errorf("%s: lease %s unreachable = %v, want %v", what, l.ID, l.Unreachable, unreachable)
		}
	}
	g := f.gw.leaseDetached("cli-holder", "ios")
	named("the grant", g.Lease, false)
	r := f.gw.run("lease", "renew", "--agent-id", "cli-holder", g.Lease.ID)
	var renewed leaseRec
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &renewed) != nil {
		t.Fatalf("renew\n%s", r)
	}
	named("the renew", renewed, false)
	_, agent := f.gw.token("agent", "http-holder")
	cr := f.api.do("POST", "/v1/lease-requests", agent, `{"platform":"ios"}`)
	if cr.status != 201 {
		t.Fatalf("create: %d %s", cr.status, cr.raw)
	}
	reqID := requestOf(t, cr)["id"].(string)
	view := f.api.awaitState(agent, reqID, "granted")["lease"].(map[string]any)
	if w, _ := view["worker"].(map[string]any); w["id"] != idA || w["label"] != "worker-a" {
		t.Errorf("the HTTP lease view names worker %v, want {%s worker-a}", view["worker"], idA)
	}
	named("list --leases", f.gw.leases()[g.Lease.ID], false)

	if r := a.run("daemon", "stop"); r.code != 0 {
		t.Fatalf("daemon stop on A\n%s", r)
	}
	f.await("worker A disconnected", 5*time.Second, func(ws map[string]workerLine) bool { return ws[idA].Connection == "disconnected" })
	ls := f.gw.leases()
	named("list --leases with A away", ls[g.Lease.ID], true)
	if len(ls) != 2 {
		t.Errorf("list --leases with A away lists %d leases, want both of A's: %+v", len(ls), ls)
	}
	var st struct {
		Leases []leaseRec `json:"leases"`
	}
	if r := f.gw.run("status", "--json"); r.code != 0 || json.Unmarshal([]byte(r.stdout), &st) != nil {
		t.Fatalf("status --json\n%s", r)
	}
	if len(st.Leases) != 2 {
		t.Errorf("status with A away lists leases %+v, want A's two", st.Leases)
	}
	for _, l := range st.Leases {
		named("status with A away", l, true)
	}
	hl := f.api.do("GET", "/v1/leases", agent, "")
	if hl.status != 200 || !strings.Contains(hl.raw, `"unreachable":true`) {
		t.Errorf("GET /v1/leases with A away: %d %s, want the agent's lease marked unreachable", hl.status, hl.raw)
	}
	rv := requestOf(t, f.api.do("GET", "/v1/lease-requests/"+reqID, agent, ""))["lease"].(map[string]any)
	if rv["unreachable"] != true || rv["active"] == false {
		t.Errorf("the HTTP request view with A away reads lease %v, want it unreachable and not inactive", rv)
	}

	a.startDaemon()
	f.await("worker A back", 10*time.Second, connected(idA))
	named("list --leases once A is back", f.gw.leases()[g.Lease.ID], false)
}

// runPiped runs simlock as agent with stdin piped from in.
func (h *home) runPiped(agent, in string, args ...string) result {
	h.T.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), commandBound)
	defer cancel()
	cmd := exec.CommandContext(ctx, simlockBin, args...)
	cmd.Env = append(slices.Clone(h.Env), "SIMLOCK_AGENT_ID="+agent)
	cmd.Stdin = strings.NewReader(in)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	_ = cmd.Run()
	if ctx.Err() != nil {
		h.T.Fatalf("simlock %s did not finish", strings.Join(args, " "))
	}
	return result{args: args, stdout: stdout.String(), stderr: stderr.String(), code: cmd.ProcessState.ExitCode()}
}

// `simlock adb|simctl …` against a gateway runs as device.exec on the
// caller's lease, on its worker: pinned to the lease's device (without
// --lease when the caller holds one such lease), its exit status kept,
// stdin piped through; and a remote caller there, so the worker's rules
// refuse another device and any path of a machine (nothing runs, exit 2).
func TestSimctlAndAdbOnAGatewayRunOnTheCallersLeaseThroughExec(t *testing.T) {
	t.Parallel()
	f := newFleet(t)
	e := shimtest.Build(t)
	twoRunning := []string{"capacity.strategy", "fixed", "capacity.config.maxRunning", "2"}
	droid := f.shimWorker(e, "android", "droid", twoRunning...)
	f.shimWorker(e, "ios", "mac", twoRunning...)
	local := droid.leaseDetached("local", "android")
	if r := droid.runAs("local", "adb", "--lease", local.Lease.ID, "shell", "echo 'secret-of-local' > /data/local/tmp/l.txt"); r.code != 0 {
		t.Fatalf("the worker's own agent writes its file\n%s", r)
	}

	// Holding nothing, there is nothing to run it on.
	expectFailure(t, f.gw.runAs("me", "adb", "get-serialno"), 2, "BAD_REQUEST")
	mine := f.gw.leaseDetached("me", "android")
	r := f.gw.runAs("me", "adb", "get-serialno")
	if r.code != 0 || strings.TrimSpace(r.stdout) != mine.Device.Address {
		t.Fatalf("adb get-serialno on the gateway: want %s\n%s", mine.Device.Address, r)
	}
	if r := f.gw.runAs("me", "adb", "shell", "echo 'mine' > /data/local/tmp/m.txt"); r.code != 0 {
		t.Fatalf("adb shell echo on the gateway\n%s", r)
	}
	if r := f.gw.runAs("me", "adb", "--lease", mine.Lease.ID, "shell", "cat", "/data/local/tmp/m.txt"); r.code != 0 || r.stdout != "mine\n" {
		t.Errorf("adb shell cat of the file written through the gateway\n%s", r)
	}
	// The tool's exit status and its stderr are the command's.
	r = f.gw.runAs("me", "adb", "shell", "cat", "/data/local/tmp/none.txt")
	if r.code != 1 || !strings.Contains(r.stderr, "No such file") {
		t.Errorf("a command that exits 1 on the worker: want exit 1 and its stderr\n%s", r)
	}
	host := t.TempDir()
	stolen := filepath.Join(host, "stolen.txt")
	for _, args := range [][]string{
		{"adb", "-s", local.Device.Address, "shell", "cat", "/data/local/tmp/l.txt"},
		{"adb", "pull", "/data/local/tmp/m.txt", stolen},
	} {
		r := f.gw.runAs("me", args...)
		expectFailure(t, r, 2, "USAGE")
		if strings.Contains(r.stdout, "secret-of-local") {
			t.Errorf("%q through the gateway read the worker's other emulator", args)
		}
	}
	mustNotExist(t, stolen)

	ios := f.gw.leaseDetached("me-ios", "ios")
	r = f.gw.runPiped("me-ios", "copied text", "simctl", "pbcopy", "booted")
	if r.code != 0 || !strings.Contains(r.stdout, "pasteboard of "+ios.Device.DriverDeviceID+": copied text") {
		t.Errorf("simctl pbcopy with stdin piped through the gateway: want it on %s with the text\n%s", ios.Device.DriverDeviceID, r)
	}
	shot := filepath.Join(host, "shot.png")
	expectFailure(t, f.gw.runAs("me-ios", "simctl", "io", "booted", "screenshot", shot), 2, "USAGE")
	mustNotExist(t, shot)
}

// A worker that answers a lease request REQUESTER_ALREADY_LEASED before it
// started on it holds a lease of the gateway's requester that the gateway
// never granted (a previous leader's, whose grant was not recorded): the
// request goes back in line rather than failing. It is not sent to that
// worker again while the worker's view stays as it was (a worker that says
// so falsely is not asked in a loop), and is once the view has changed, as
// the lease given back changes it; here it is then granted.
func TestAWorkersUnrecordedLeaseOfTheRequesterSendsTheRequestBackInLine(t *testing.T) {
	t.Parallel()
	f := newFleet(t)
	w := f.fakeJoined("fake-orphan", "ios", 2, 1)

	ch := f.gw.runAsync("lease", "--platform", "ios", "--agent-id", "again", "--detach")
	c := w.serveUntil("lease.request")
	in := requestIn(t, c)
	w.refuseWith(c, "REQUESTER_ALREADY_LEASED", in.RequesterID+" already holds lease "+fakeID("lse_"), map[string]any{"requesterId": in.RequesterID})
	w.quiet(time.Second, "the worker's view is as it was when it refused: the request is not sent to it again")
	select {
	case r := <-ch:
		t.Fatalf("after the worker's REQUESTER_ALREADY_LEASED the request ended instead of waiting\n%s", r)
	default:
	}
	w.openSlots(1) // the view changes, as when the unrecorded lease is given back
	again, r, sent := nextOr(w, "lease.request", ch)
	if !sent {
		t.Fatalf("after the worker's view changed the request was not sent again; the command ended\n%s", r)
	}
	w.grant(again, "")
	g := parseGrant(t, strings.TrimSpace(awaitResult(t, ch).stdout))
	if g.Lease.ID == "" {
		t.Fatal("the request sent again was granted with no lease id")
	}
}
