package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/simlock/simlock/internal/client"
	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/daemon"
	"github.com/simlock/simlock/internal/shimtest"
)

// fleetHeartbeat keeps the uplinks' liveness checks short, so a dead
// worker is noticed within the tests' bounds.
const fleetHeartbeat = "500"

// fleet is a gateway on a fixed loopback port (so workers find it again
// after it restarts) and the join tokens of its workers: one per worker, as
// a gateway takes one worker id per join token.
type fleet struct {
	t   *testing.T
	gw  *home
	url string
	api *api

	mu sync.Mutex
	// joins are the join tokens made so far, by the name they were made
	// for (a worker's label, a fake worker's id).
	joins map[string]joinToken
}

// joinToken is a join token's id (for token revoke) and secret.
type joinToken struct{ id, secret string }

// join is the join token for name, made on first use.
func (f *fleet) join(name string) joinToken {
	f.t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	if j, ok := f.joins[name]; ok {
		return j
	}
	var j joinToken
	j.id, j.secret = f.gw.token("worker", name)
	f.joins[name] = j
	return j
}

// joinSecret is the secret of name's join token.
func (f *fleet) joinSecret(name string) string { return f.join(name).secret }

// shimWorker starts a worker driving the stand-ins of platform ("ios" or
// "android"), joined to the gateway as label with extra settings, and
// waits until the gateway lists it connected.
func (f *fleet) shimWorker(e shimtest.Env, platform, label string, extra ...string) *home {
	f.t.Helper()
	settings := []string{"gateway.url", f.url, "gateway.token", f.joinSecret(label), "gateway.label", label, "gateway.heartbeatMs", fleetHeartbeat}
	w := newHome(f.t, append(settings, extra...)...)
	w.withShims(e, platform)
	w.startDaemon()
	f.await("worker "+label+" connected", 10*time.Second, connected(instanceID(f.t, w)))
	return w
}

func newFleet(t *testing.T, settings ...string) *fleet {
	t.Helper()
	port := freePort(t)
	gw := newHome(t, append([]string{"mode", "gateway", "http.enabled", "true", "http.port", port, "gateway.heartbeatMs", fleetHeartbeat}, settings...)...)
	gw.startDaemon()
	// Runs before the home's own cleanup removes the log.
	t.Cleanup(func() {
		if t.Failed() {
			b, _ := os.ReadFile(gw.path("daemon.log"))
			t.Logf("the gateway's daemon.log:\n%s", b)
		}
	})
	f := &fleet{t: t, gw: gw, url: "http://127.0.0.1:" + port, joins: map[string]joinToken{}}
	f.api = &api{t: t, base: f.url}
	return f
}

// worker makes a worker home joined to the gateway, with maxRunning
// running slots and any extra settings, and starts its daemon.
func (f *fleet) worker(label string, maxRunning int, extra ...string) *home {
	f.t.Helper()
	settings := append(append([]string{"capacity.strategy", "fixed", "capacity.config.maxRunning", fmt.Sprint(maxRunning),
		"gateway.url", f.url, "gateway.token", f.joinSecret(label), "gateway.label", label, "gateway.heartbeatMs", fleetHeartbeat}, fastDemo...), extra...)
	w := newHome(f.t, settings...)
	w.startDaemon()
	f.t.Cleanup(func() {
		if f.t.Failed() {
			b, _ := os.ReadFile(w.path("daemon.log"))
			f.t.Logf("worker %s's daemon.log:\n%s", label, b)
		}
	})
	return w
}

// instanceID is the worker id a home joins with.
func instanceID(t *testing.T, h *home) string {
	t.Helper()
	return h.InstanceID(t)
}

type workerLine struct {
	ID         string `json:"id"`
	Label      string `json:"label"`
	Connection string `json:"connection"`
	Drained    bool   `json:"drained"`
	Reason     string `json:"reason"`
	ReasonCode string `json:"reasonCode"`
	MaxRunning int    `json:"maxRunning"`
	Leases     int    `json:"leases"`
}

// workers is `simlock worker list --json` on the gateway, by id.
func (f *fleet) workers() map[string]workerLine {
	f.t.Helper()
	r := f.gw.run("worker", "list", "--json")
	var out struct {
		Mode    string       `json:"mode"`
		Workers []workerLine `json:"workers"`
	}
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &out) != nil || out.Mode != "gateway" {
		f.t.Fatalf("worker list --json on the gateway\n%s", r)
	}
	m := map[string]workerLine{}
	for _, w := range out.Workers {
		m[w.ID] = w
	}
	return m
}

// await polls the gateway's worker list until pred holds, for at most
// bound; it fails naming what it waited for.
func (f *fleet) await(what string, bound time.Duration, pred func(map[string]workerLine) bool) map[string]workerLine {
	f.t.Helper()
	deadline := time.Now().Add(bound)
	for {
		ws := f.workers()
		if pred(ws) {
			return ws
		}
		if time.Now().After(deadline) {
			f.t.Fatalf("within %s the gateway did not show %s; it lists %+v", bound, what, ws)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func connected(ids ...string) func(map[string]workerLine) bool {
	return func(ws map[string]workerLine) bool {
		for _, id := range ids {
			if ws[id].Connection != "connected" {
				return false
			}
		}
		return true
	}
}

func TestAGatewayShowsItsWorkersTheirCapacityAndTheirLeases(t *testing.T) {
	t.Parallel()
	f := newFleet(t)
	follow := f.gw.follow()
	a, b := f.worker("worker-a", 2), f.worker("worker-b", 3)
	idA, idB := instanceID(t, a), instanceID(t, b)
	ws := f.await("both workers connected", 5*time.Second, connected(idA, idB))
	if ws[idA].Label != "worker-a" || ws[idB].Label != "worker-b" {
		t.Errorf("labels = %q, %q, want worker-a, worker-b", ws[idA].Label, ws[idB].Label)
	}
	follow.find("worker.connected of A", isEvent("worker.connected", "workerId", idA))

	r := f.gw.run("status", "--json")
	var st struct {
		Daemon struct {
			Mode string `json:"mode"`
		} `json:"daemon"`
		Capacity struct {
			Global struct {
				MaxRunning int `json:"maxRunning"`
			} `json:"global"`
		} `json:"capacity"`
		Fleet struct {
			Connected int `json:"connected"`
		} `json:"fleet"`
	}
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &st) != nil {
		t.Fatalf("status --json on the gateway\n%s", r)
	}
	if st.Daemon.Mode != "gateway" || st.Capacity.Global.MaxRunning != 5 || st.Fleet.Connected != 2 {
		t.Errorf("gateway status: mode %q, maxRunning %d, connected %d; want gateway, 2+3=5, 2", st.Daemon.Mode, st.Capacity.Global.MaxRunning, st.Fleet.Connected)
	}
	if text := f.gw.run("status"); !strings.Contains(text.stdout, "Mode: gateway") {
		t.Errorf("status text has no Mode: gateway line\n%s", text)
	}

	g := b.leaseDetached("agent-on-b", "ios")
	granted := time.Now()
	ev := follow.next("the relayed lease.granted", isEvent("lease.granted", "leaseId", g.Lease.ID))
	if ev.str("workerId") != idB {
		t.Errorf("relayed lease.granted workerId = %q, want %q", ev.str("workerId"), idB)
	}
	if took := time.Since(granted); took > time.Second {
		t.Errorf("the relayed lease.granted took %s, want within 1s", took)
	}
	var listed struct {
		Leases []struct {
			ID       string `json:"id"`
			WorkerID string `json:"workerId"`
		} `json:"leases"`
	}
	deadline := time.Now().Add(time.Second)
	for {
		r := f.gw.run("list", "--leases")
		if r.code != 0 || json.Unmarshal([]byte(r.stdout), &listed) != nil {
			t.Fatalf("list --leases on the gateway\n%s", r)
		}
		if len(listed.Leases) == 1 || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if len(listed.Leases) != 1 || listed.Leases[0].ID != g.Lease.ID || listed.Leases[0].WorkerID != idB {
		t.Errorf("gateway list --leases = %+v, want %s on %s within 1s", listed.Leases, g.Lease.ID, idB)
	}
	// The open requests are read from the workers when asked: fill A's
	// two running slots, and a third request waits there.
	a.leaseDetached("a1", "ios")
	a.leaseDetached("a2", "ios")
	a.start("lease", "--platform", "ios", "--agent-id", "a3")
	var reqs struct {
		Requests []struct {
			RequesterID string `json:"requesterId"`
			WorkerID    string `json:"workerId"`
		} `json:"requests"`
	}
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		r := f.gw.run("list", "--requests")
		if r.code != 0 || json.Unmarshal([]byte(r.stdout), &reqs) != nil {
			t.Fatalf("list --requests on the gateway\n%s", r)
		}
		if len(reqs.Requests) > 0 || time.Now().After(deadline) {
			break
		}
	}
	if len(reqs.Requests) != 1 || reqs.Requests[0].RequesterID != "a3" || reqs.Requests[0].WorkerID != idA {
		t.Errorf("gateway list --requests = %+v, want a3's request waiting on %s", reqs.Requests, idA)
	}
}

func TestAKilledWorkerIsListedDisconnectedAndComesBackByItself(t *testing.T) {
	t.Parallel()
	f := newFleet(t)
	follow := f.gw.follow()
	a := f.worker("worker-a", 2)
	idA := instanceID(t, a)
	f.await("worker A connected", 5*time.Second, connected(idA))
	if err := syscall.Kill(lockPID(a.Dir), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	f.await("worker A disconnected", 3*500*time.Millisecond+time.Second, func(ws map[string]workerLine) bool {
		return ws[idA].Connection == "disconnected"
	})
	follow.find("worker.disconnected of A", isEvent("worker.disconnected", "workerId", idA))
	t.Logf("disconnected %s after SIGKILL", time.Since(killed).Round(time.Millisecond))
	a.startDaemon()
	f.await("worker A connected again", 10*time.Second, connected(idA))
}

func TestADrainOutlivesRestartsOfTheGatewayAndTheWorkerUntilUndrain(t *testing.T) {
	t.Parallel()
	f := newFleet(t)
	a := f.worker("worker-a", 2)
	idA := instanceID(t, a)
	f.await("worker A connected", 5*time.Second, connected(idA))
	if r := f.gw.run("worker", "drain", idA); r.code != 0 || !strings.Contains(r.stdout, `"drained":true`) {
		t.Fatalf("worker drain\n%s", r)
	}
	if r := f.gw.run("daemon", "stop"); r.code != 0 {
		t.Fatalf("daemon stop on the gateway\n%s", r)
	}
	f.gw.startDaemon()
	ws := f.await("worker A back after the gateway restarted", 10*time.Second, connected(idA))
	if !ws[idA].Drained {
		t.Errorf("after a gateway restart worker A is %+v, want drained", ws[idA])
	}
	if r := a.run("daemon", "stop"); r.code != 0 {
		t.Fatalf("daemon stop on the worker\n%s", r)
	}
	a.startDaemon()
	ws = f.await("worker A back after it restarted", 10*time.Second, connected(idA))
	if !ws[idA].Drained {
		t.Errorf("after a worker restart worker A is %+v, want drained", ws[idA])
	}
	if r := f.gw.run("worker", "undrain", idA); r.code != 0 {
		t.Fatalf("worker undrain\n%s", r)
	}
	if ws := f.workers(); ws[idA].Drained {
		t.Errorf("after undrain worker A is %+v, want not drained", ws[idA])
	}
}

func TestARevokedJoinTokenClosesTheUplinkAndBadTokensAreRefused(t *testing.T) {
	t.Parallel()
	f := newFleet(t)
	follow := f.gw.follow()
	a := f.worker("worker-a", 2)
	idA := instanceID(t, a)
	f.await("worker A connected", 5*time.Second, connected(idA))

	_, agentSecret := f.gw.token("agent", "an-agent")
	for _, c := range []struct {
		name, secret string
		status       int
	}{{"no token", "", 401}, {"a bad token", "slk_not_a_token", 401}, {"an agent token", agentSecret, 403}} {
		rep := f.api.do("GET", "/v1/uplink", c.secret, "", "X-Simlock-Worker-Id", "ins_intruder")
		if rep.status != c.status {
			t.Errorf("uplink with %s: status %d, want %d\n%s", c.name, rep.status, c.status, rep.raw)
		}
	}
	follow.find("worker.rejected", isEvent("worker.rejected"))
	if ws := f.workers(); len(ws) != 1 {
		t.Errorf("after refused uplinks the gateway lists %+v, want worker A alone", ws)
	}

	if r := f.gw.run("token", "revoke", f.join("worker-a").id); r.code != 0 {
		t.Fatalf("token revoke\n%s", r)
	}
	ws := f.await("worker A disconnected after its token was revoked", time.Second+500*time.Millisecond, func(ws map[string]workerLine) bool {
		return ws[idA].Connection == "disconnected"
	})
	if !strings.Contains(ws[idA].Reason, "revoked") {
		t.Errorf("disconnect reason %q, want it to say the token was revoked", ws[idA].Reason)
	}
}

// fakeWorker is a test client that dials the gateway's uplink as a worker
// would and answers the gateway's calls as the test says: the stand-in for
// a broken or lying worker.
type fakeWorker struct {
	t  *testing.T
	ws *websocket.Conn
}

func (f *fleet) fakeWorker(id string) *fakeWorker {
	f.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), commandBound)
	defer cancel()
	h := http.Header{}
	h.Set("Authorization", "Bearer "+f.joinSecret(id))
	h.Set("X-Simlock-Worker-Id", id)
	h.Set("X-Simlock-Worker-Label", "fake")
	ws, _, err := websocket.Dial(ctx, strings.Replace(f.url, "http://", "ws://", 1)+"/v1/uplink", &websocket.DialOptions{HTTPHeader: h})
	if err != nil {
		f.t.Fatalf("fake worker: dial the uplink: %v", err)
	}
	ws.SetReadLimit(16 << 20)
	f.t.Cleanup(func() { ws.CloseNow() })
	return &fakeWorker{t: f.t, ws: ws}
}

// call reads the gateway's next call and returns its id and op.
func (w *fakeWorker) call() (id json.RawMessage, op string) {
	w.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), commandBound)
	defer cancel()
	_, b, err := w.ws.Read(ctx)
	if err != nil {
		w.t.Fatalf("fake worker: read the gateway's call: %v", err)
	}
	var req struct {
		ID json.RawMessage `json:"id"`
		Op string          `json:"op"`
	}
	if err := json.Unmarshal(b, &req); err != nil {
		w.t.Fatalf("fake worker: the gateway sent %q: %v", b, err)
	}
	return req.ID, req.Op
}

func (w *fakeWorker) send(b []byte) {
	w.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), commandBound)
	defer cancel()
	if err := w.ws.Write(ctx, websocket.MessageText, b); err != nil {
		w.t.Fatalf("fake worker: write: %v", err)
	}
}

func (w *fakeWorker) answer(id json.RawMessage, result string) {
	w.t.Helper()
	w.send([]byte(`{"id":` + string(id) + `,"result":` + result + `}`))
}

// helloAsAdmin answers the gateway's hello as a worker that trusts it.
func (w *fakeWorker) helloAsAdmin() {
	w.t.Helper()
	id, op := w.call()
	if op != "hello" {
		w.t.Fatalf("the gateway's first call is %q, want hello", op)
	}
	w.answer(id, `{"protocol":1,"daemonProtocol":{"min":1,"max":1},"daemonVersion":"fake","role":"admin","principal":"gateway"}`)
}

func TestAWorkerThatSendsGarbageIsDisconnectedWithTheReasonAndTheOthersStayLive(t *testing.T) {
	t.Parallel()
	f := newFleet(t)
	b := f.worker("worker-b", 2)
	idB := instanceID(t, b)
	f.await("worker B connected", 5*time.Second, connected(idB))

	cases := []struct {
		name, id, reason string
		lie              func(w *fakeWorker)
	}{
		{"a frame that is not JSON", "fake-bad-frame", "bad frame", func(w *fakeWorker) {
			w.helloAsAdmin()
			w.call()
			w.send([]byte(`{"id": this is not json`))
		}},
		{"a frame over the size limit", "fake-oversized", "message over 8388608 bytes", func(w *fakeWorker) {
			w.helloAsAdmin()
			w.call()
			w.send([]byte(`{"x":"` + strings.Repeat("a", 9<<20) + `"}`))
		}},
		{"a status out of range", "fake-out-of-range", "invalid status", func(w *fakeWorker) {
			w.helloAsAdmin()
			id, op := w.call()
			if op != "events.subscribe" {
				t.Fatalf("the gateway's second call is %q, want events.subscribe", op)
			}
			w.answer(id, `{"subscriptionId":"s1","lastSeq":0}`)
			id, op = w.call()
			if op != "status.get" {
				t.Fatalf("the gateway's third call is %q, want status.get", op)
			}
			w.answer(id, `{"daemon":{"mode":"worker","version":"fake","health":"running","protocol":{"min":1,"max":1}},`+
				`"host":{"os":"linux","arch":"amd64","cpus":-4,"ramBytes":1},"queueDepth":0}`)
		}},
	}
	for _, c := range cases {
		w := f.fakeWorker(c.id)
		c.lie(w)
		ws := f.await(c.name+" disconnected", 5*time.Second, func(ws map[string]workerLine) bool {
			return ws[c.id].Connection == "disconnected"
		})
		t.Logf("%s: %s", c.name, ws[c.id].Reason)
		if !strings.Contains(ws[c.id].Reason, c.reason) {
			t.Errorf("%s: disconnect reason %q, want it to say %q", c.name, ws[c.id].Reason, c.reason)
		}
		if ws[idB].Connection != "connected" {
			t.Errorf("after %s, worker B is %+v, want connected", c.name, ws[idB])
		}
	}
	// B's view is still live: a lease taken on it shows on the gateway.
	g := b.leaseDetached("agent-on-b", "ios")
	f.await("B's new lease", 2*time.Second, func(ws map[string]workerLine) bool { return ws[idB].Leases == 1 })
	_ = g
}

func TestAWorkerWhoseProtocolCannotOverlapIsListedIncompatibleWithBothRanges(t *testing.T) {
	t.Parallel()
	f := newFleet(t)
	w := f.fakeWorker("fake-future")
	id, op := w.call()
	if op != "hello" {
		t.Fatalf("the gateway's first call is %q, want hello", op)
	}
	w.send([]byte(`{"id":` + string(id) + `,"error":{"code":"PROTOCOL_VERSION_UNSUPPORTED","message":"no overlap",` +
		`"client":{"min":1,"max":1},"daemon":{"min":90,"max":99},"daemonVersion":"9.0.0"}}`))
	f.await("the worker incompatible", 5*time.Second, func(ws map[string]workerLine) bool {
		return ws["fake-future"].Connection == "incompatible"
	})
	r := f.gw.run("worker", "show", "fake-future")
	var v struct {
		Connection      string                  `json:"connection"`
		WorkerProtocol  *struct{ Min, Max int } `json:"workerProtocol"`
		GatewayProtocol *struct{ Min, Max int } `json:"gatewayProtocol"`
	}
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &v) != nil {
		t.Fatalf("worker show\n%s", r)
	}
	if v.WorkerProtocol == nil || v.WorkerProtocol.Min != 90 || v.WorkerProtocol.Max != 99 || v.GatewayProtocol == nil || v.GatewayProtocol.Max < 1 {
		t.Errorf("incompatible worker's view = %s, want workerProtocol 90-99 and the gateway's range", r.stdout)
	}
}

// The walkthrough in docs/FLEET.md works as written: its sh blocks, run in
// order in one shell with the built simlock on PATH and a fresh HOME, on
// a free port in place of the one it names.
func TestTheFleetWalkthroughRunsAsWritten(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile(filepath.Join(moduleRoot, "docs", "FLEET.md"))
	if err != nil {
		t.Fatal(err)
	}
	blocks := regexp.MustCompile("(?ms)^```sh\n(.*?)^```").FindAllStringSubmatch(string(b), -1)
	if len(blocks) < 4 {
		t.Fatalf("docs/FLEET.md has %d sh blocks, want the walkthrough's", len(blocks))
	}
	var script strings.Builder
	script.WriteString("set -euo pipefail\n")
	for i, m := range blocks {
		fmt.Fprintf(&script, "echo '### FLEET.md block %d' >&2\n%s\n", i+1, m[1])
	}
	text := strings.ReplaceAll(script.String(), "7430", freePort(t))
	home := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-c", text)
	cmd.Env = append(readmeEnv(t, home), "PATH="+filepath.Dir(simlockBin)+string(os.PathListSeparator)+os.Getenv("PATH"))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the walkthrough failed (%v)\n%s", err, out)
	}
	for _, want := range []string{`"connection":"connected"`, `"workerId":"`, "Mode: gateway", `"drained":true`, `"drained":false`} {
		if !strings.Contains(string(out), want) {
			t.Errorf("the walkthrough's output lacks %s\n%s", want, out)
		}
	}
	// Both workers joined: a join token joins one worker, so the
	// walkthrough makes one for each.
	list := regexp.MustCompile(`\{"mode":"gateway","workers":.*`).FindString(string(out))
	if n := strings.Count(list, `"connection":"connected"`); n != 2 {
		t.Errorf("the walkthrough's worker list shows %d workers connected, want both: %s\n%s", n, list, out)
	}
}

func TestAWorkerThatFallsSilentIsDroppedAfterItsMissedHeartbeats(t *testing.T) {
	t.Parallel()
	f := newFleet(t)
	a := f.worker("worker-a", 2)
	idA := instanceID(t, a)
	f.await("worker A connected", 5*time.Second, connected(idA))
	// Stopped, not killed: its socket stays open and nothing answers the
	// gateway's pings, as with a Mac that went to sleep or a cut cable.
	pid := lockPID(a.Dir)
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	defer syscall.Kill(pid, syscall.SIGCONT)
	stopped := time.Now()
	ws := f.await("the silent worker disconnected", 4*500*time.Millisecond+2*time.Second, func(ws map[string]workerLine) bool {
		return ws[idA].Connection == "disconnected"
	})
	t.Logf("dropped %s after SIGSTOP: %s", time.Since(stopped).Round(time.Millisecond), ws[idA].Reason)
	if !strings.Contains(ws[idA].Reason, "heartbeat") {
		t.Errorf("disconnect reason %q, want the missed heartbeats", ws[idA].Reason)
	}
	if err := syscall.Kill(pid, syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	f.await("worker A back after it woke", 10*time.Second, connected(idA))
}

func TestASecondUplinkWithTheSameWorkerIDReplacesTheFirst(t *testing.T) {
	t.Parallel()
	f := newFleet(t)
	first := f.fakeWorker("fake-twin")
	first.helloAsAdmin()
	second := f.fakeWorker("fake-twin")
	ctx, cancel := context.WithTimeout(context.Background(), commandBound)
	defer cancel()
	// The first uplink is closed by the gateway: reading it ends.
	for {
		if _, _, err := first.ws.Read(ctx); err != nil {
			if ctx.Err() != nil {
				t.Fatal("the first uplink was still open after a second one with the same id arrived")
			}
			break
		}
	}
	if id, op := second.call(); op != "hello" || id == nil {
		t.Errorf("the second uplink's first call is %q, want hello", op)
	}
	if ws := f.workers(); len(ws) != 1 {
		t.Errorf("the gateway lists %+v, want the one worker id once", ws)
	}
}

// events is `simlock events` on h: its most recent 1000 events.
func events(t *testing.T, h *home) []event {
	t.Helper()
	r := h.run("events")
	if r.code != 0 {
		t.Fatalf("events\n%s", r)
	}
	var out []event
	for _, line := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
		if line == "" {
			continue
		}
		var ev event
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			t.Fatalf("events printed %q: %v", line, err)
		}
		out = append(out, ev)
	}
	return out
}

// A worker's events committed while its gateway is down (stopped, or
// killed with SIGKILL) are relayed when the gateway is back, each once: the
// relay cursor is committed with the relayed events.
func TestAWorkersEventsWhileTheGatewayIsDownAreRelayedOnceEachWhenItIsBack(t *testing.T) {
	t.Parallel()
	f := newFleet(t)
	a := f.worker("worker-a", 2)
	idA := instanceID(t, a)
	f.await("worker A connected", 5*time.Second, connected(idA))
	first := a.leaseDetached("before", "ios")
	follow := f.gw.follow()
	follow.find("the first lease relayed", isEvent("lease.granted", "leaseId", first.Lease.ID))
	follow.p.kill()
	// The worker's history from here on must reach the gateway.
	from := events(t, a)
	cursor := from[len(from)-1].Seq

	for round, stop := range []func(){
		func() { f.gw.run("daemon", "stop") },
		func() { _ = syscall.Kill(lockPID(f.gw.Dir), syscall.SIGKILL) },
	} {
		stop()
		if !waitLockFree(f.gw.Dir, 10*time.Second) {
			t.Fatalf("round %d: the gateway still holds its lock 10 s after it was stopped", round)
		}
		// Work on the worker while nobody relays it.
		r := a.run("release", "--all", "--yes")
		if r.code != 0 {
			t.Fatalf("round %d: release --all on the worker\n%s", round, r)
		}
		a.leaseDetached(fmt.Sprintf("while-down-%d", round), "ios")
		f.gw.startDaemon()
		f.await("worker A back", 10*time.Second, connected(idA))
	}
	want := map[string]bool{}
	for _, ev := range events(t, a) {
		if ev.Seq > cursor {
			want[ev.ID] = true
		}
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		seen := map[string]int{}
		for _, ev := range events(t, f.gw) {
			if ev.str("workerId") == idA {
				seen[ev.ID]++
			}
		}
		var missing []string
		for id := range want {
			if seen[id] == 0 {
				missing = append(missing, id)
			}
		}
		for id, n := range seen {
			if n > 1 {
				t.Fatalf("event %s relayed %d times", id, n)
			}
		}
		if len(missing) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of the worker's %d events since the cursor never reached the gateway: %v", len(missing), len(want), missing)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// A worker id is a header any holder of a join token could copy: it
// belongs to the token it first joined with, until that token is revoked.
func TestAWorkerIDBelongsToTheTokenItJoinedWithUntilThatTokenIsRevoked(t *testing.T) {
	t.Parallel()
	f := newFleet(t)
	a := f.worker("worker-a", 2)
	idA := instanceID(t, a)
	f.await("worker A connected", 5*time.Second, connected(idA))
	_, other := f.gw.token("worker", "another")
	rep := f.api.do("GET", "/v1/uplink", other, "", "X-Simlock-Worker-Id", idA)
	if rep.status != http.StatusForbidden || !strings.Contains(rep.raw, "another join token") {
		t.Fatalf("an uplink claiming A's id with another token: %d %s, want 403 naming the token", rep.status, rep.raw)
	}
	if ws := f.workers(); ws[idA].Connection != "connected" {
		t.Fatalf("after the claim was refused A is %+v, want still connected", ws[idA])
	}
	// Rotating the token: the old one revoked, the worker given the new.
	if r := f.gw.run("token", "revoke", f.join("worker-a").id); r.code != 0 {
		t.Fatalf("token revoke\n%s", r)
	}
	if r := a.run("config", "set", "gateway.token", other); r.code != 0 {
		t.Fatalf("config set gateway.token\n%s", r)
	}
	f.await("worker A back with the new token", 10*time.Second, connected(idA))
}

func TestAClientOfTheGatewayLeasesRenewsAndReleasesOnTheWorkerThatHasTheDevice(t *testing.T) {
	t.Parallel()
	f := newFleet(t)
	a, b := f.worker("worker-a", 3), f.worker("worker-b", 1)
	idA, idB := instanceID(t, a), instanceID(t, b)
	f.await("both workers connected", 5*time.Second, connected(idA, idB))

	// A warm Android device on B (its clean leaves it running): preferred
	// over A's free capacity.
	warm := b.leaseDetached("local", "android")
	if r := b.run("release", warm.Lease.ID); r.code != 0 {
		t.Fatalf("release on B\n%s", r)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		var st struct {
			Devices []struct {
				WorkerID string `json:"workerId"`
				State    string `json:"state"`
				Spec     spec   `json:"spec"`
			} `json:"devices"`
		}
		r := f.gw.run("status", "--json")
		if r.code != 0 || json.Unmarshal([]byte(r.stdout), &st) != nil {
			t.Fatalf("status on the gateway\n%s", r)
		}
		ready := false
		for _, d := range st.Devices {
			ready = ready || (d.WorkerID == idB && d.State == "ready" && d.Spec.Platform == "android")
		}
		if ready {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the gateway never saw B's released Android device ready\n%s", r.stdout)
		}
		time.Sleep(50 * time.Millisecond)
	}
	follow := f.gw.follow()
	g := f.gw.leaseDetached("fleet-agent", "android")
	if !strings.HasPrefix(g.Lease.ID, idB+".") || g.Lease.RequesterID != "fleet-agent" {
		t.Errorf("grant through the gateway = %+v, want a lease on B named %s.<lease>, for fleet-agent", g.Lease, idB)
	}
	if ev := follow.find("request.dispatched", isEvent("request.dispatched", "workerId", idB)); ev.str("reason") != "warm-hit" {
		t.Errorf("request.dispatched reason = %q, want warm-hit", ev.str("reason"))
	}
	if r := f.gw.run("lease", "renew", "--agent-id", "fleet-agent", g.Lease.ID); r.code != 0 || !strings.Contains(r.stdout, g.Lease.ID) {
		t.Errorf("renew through the gateway\n%s", r)
	}
	if ls := f.gw.leases(); ls[g.Lease.ID].ID != g.Lease.ID {
		t.Errorf("the gateway's list --leases = %+v, want %s under its gateway id", ls, g.Lease.ID)
	}
	if r := f.gw.run("release", "--agent-id", "fleet-agent", g.Lease.ID); r.code != 0 {
		t.Errorf("release through the gateway\n%s", r)
	}
	if ls := b.leases(); len(ls) != 0 {
		t.Errorf("B still holds %+v after the release through the gateway", ls)
	}
}

func TestTheFleetQueueGrantsInArrivalOrderWhenTheFleetIsFull(t *testing.T) {
	t.Parallel()
	f := newFleet(t)
	a, b := f.worker("worker-a", 1), f.worker("worker-b", 1)
	idA, idB := instanceID(t, a), instanceID(t, b)
	f.await("both workers connected", 5*time.Second, connected(idA, idB))
	first := f.gw.leaseDetached("r1", "ios")
	second := f.gw.leaseDetached("r2", "ios")
	if first.Lease.WorkerID == second.Lease.WorkerID {
		t.Fatalf("two leases on one worker of one slot each: %s and %s", first.Lease.ID, second.Lease.ID)
	}
	third := f.gw.start("lease", "--platform", "ios", "--agent-id", "r3")
	third.waitLine(third.stderr, "r3 queued", func(s string) bool { return strings.Contains(s, `"stage":"queued"`) })
	fourth := f.gw.start("lease", "--platform", "ios", "--agent-id", "r4")
	fourth.waitLine(fourth.stderr, "r4 queued", func(s string) bool { return strings.Contains(s, `"stage":"queued"`) })
	if r := f.gw.run("release", "--agent-id", "r1", first.Lease.ID); r.code != 0 {
		t.Fatalf("release r1\n%s", r)
	}
	l := third.waitLine(third.stdout, "r3's grant", func(string) bool { return true })
	g := parseGrant(t, l.text)
	if g.Lease.RequesterID != "r3" || !strings.HasPrefix(g.Lease.ID, first.Lease.WorkerID+".") {
		t.Errorf("after r1's release the grant is %+v, want r3 on r1's worker", g.Lease)
	}
	if fourth.running() == false {
		t.Error("r4 ended although nothing freed a slot for it")
	}
}

func TestThroughTheGatewayNoWaitFailsOnAFullFleetAndADownWorkersLeaseIsUnreachableButKept(t *testing.T) {
	t.Parallel()
	f := newFleet(t)
	a := f.worker("worker-a", 1)
	idA := instanceID(t, a)
	f.await("worker A connected", 5*time.Second, connected(idA))
	g := f.gw.leaseDetached("holder", "ios")
	expectFailure(t, f.gw.run("lease", "--platform", "ios", "--agent-id", "other", "--no-wait", "--detach"), 11, "NO_CAPACITY")

	// A's uplink down: the lease is not forgotten, and renew says why.
	if r := a.run("daemon", "stop"); r.code != 0 {
		t.Fatalf("daemon stop on A\n%s", r)
	}
	f.await("worker A disconnected", 5*time.Second, func(ws map[string]workerLine) bool { return ws[idA].Connection == "disconnected" })
	expectFailure(t, f.gw.run("lease", "renew", "--agent-id", "holder", g.Lease.ID), 1, "WORKER_UNREACHABLE")
	a.startDaemon()
	f.await("worker A back", 10*time.Second, connected(idA))
	if r := f.gw.run("lease", "renew", "--agent-id", "holder", g.Lease.ID); r.code != 0 {
		t.Errorf("renew once A is back\n%s", r)
	}
}

func TestAGatewayRestartKeepsItsLeasesRenewableUnderTheSameID(t *testing.T) {
	t.Parallel()
	f := newFleet(t)
	a := f.worker("worker-a", 2)
	idA := instanceID(t, a)
	f.await("worker A connected", 5*time.Second, connected(idA))
	g := f.gw.leaseDetached("holder", "ios")
	if r := f.gw.run("daemon", "stop"); r.code != 0 {
		t.Fatalf("daemon stop on the gateway\n%s", r)
	}
	f.gw.startDaemon()
	f.await("worker A back", 10*time.Second, connected(idA))
	r := f.gw.run("lease", "renew", "--agent-id", "holder", g.Lease.ID)
	if r.code != 0 || !strings.Contains(r.stdout, `"ownerId":"holder"`) {
		t.Errorf("renew of %s after the gateway restarted\n%s", g.Lease.ID, r)
	}
	// The requester still holds its one lease fleet-wide.
	expectFailure(t, f.gw.run("lease", "--platform", "ios", "--agent-id", "holder", "--detach"), 13, "REQUESTER_ALREADY_LEASED")
}

// Requests waiting in a gateway's queue when it is killed (SIGKILL) are
// waiting again when it is back, in the order they queued in, and are
// granted in that order; a client following one by its event stream
// resumes it on the restarted gateway with its Last-Event-ID, hears it as
// it is now (never a 204), and sees it granted.
func TestRequestsWaitingAtAGatewaySurviveItsKillInArrivalOrder(t *testing.T) {
	t.Parallel()
	f := newFleet(t)
	a := f.worker("worker-a", 1)
	f.await("worker A connected", 5*time.Second, connected(instanceID(t, a)))
	_, holder := f.gw.token("agent", "holder")
	held := f.api.do("POST", "/v1/lease-requests", holder, `{"platform":"ios"}`)
	if held.status != 201 {
		t.Fatalf("create: %d %s", held.status, held.raw)
	}
	lease := f.api.awaitState(holder, requestOf(t, held)["id"].(string), "granted")["lease"].(map[string]any)["id"].(string)
	var agents, ids []string
	for _, name := range []string{"waiter-1", "waiter-2", "waiter-3"} {
		_, secret := f.gw.token("agent", name)
		r := f.api.do("POST", "/v1/lease-requests", secret, `{"platform":"ios","timeoutMs":600000}`)
		if r.status != 201 {
			t.Fatalf("create: %d %s", r.status, r.raw)
		}
		agents, ids = append(agents, secret), append(ids, requestOf(t, r)["id"].(string))
	}
	followed := f.api.stream("/v1/lease-requests/"+ids[0]+"/events", agents[0])
	first, ok := followed.next(t)
	if !ok || first.id == "" {
		t.Fatalf("the stream of %s began with %+v, want an event with an id", ids[0], first)
	}
	followed.close()

	if err := syscall.Kill(lockPID(f.gw.Dir), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if !waitLockFree(f.gw.Dir, 10*time.Second) {
		t.Fatal("the gateway still holds its lock 10 s after SIGKILL")
	}
	f.gw.startDaemon()
	for i, id := range ids {
		if got := requestOf(t, f.api.do("GET", "/v1/lease-requests/"+id, agents[i], "")); got["state"] != "queued" {
			t.Fatalf("after the restart request %s reads %v, want queued still", id, got)
		}
	}
	resumed := f.api.stream("/v1/lease-requests/"+ids[0]+"/events", agents[0], "Last-Event-ID", first.id)
	f.await("worker A connected again", 10*time.Second, connected(instanceID(t, a)))

	// Each lease released lets the next request in, in arrival order.
	owner := holder
	for i, id := range ids {
		if r := f.api.do("DELETE", "/v1/leases/"+lease, owner, ""); r.status != 200 && r.status != 202 {
			t.Fatalf("release %s: %d %s", lease, r.status, r.raw)
		}
		got := f.api.awaitState(agents[i], id, "granted")
		lease, owner = got["lease"].(map[string]any)["id"].(string), agents[i]
		for k := i + 1; k < len(ids); k++ {
			if st := requestOf(t, f.api.do("GET", "/v1/lease-requests/"+ids[k], agents[k], ""))["state"]; st != "queued" {
				t.Fatalf("request %d of %d reads %v while request %d was granted, want queued: out of arrival order", k+1, len(ids), st, i+1)
			}
		}
	}
	for {
		ev, ok := resumed.next(t)
		if !ok {
			t.Fatal("the resumed stream ended before it told the grant")
		}
		if ev.id == first.id {
			t.Fatalf("the resumed stream repeated the event id %s the previous gateway gave", ev.id)
		}
		if strings.Contains(ev.data, `"state":"granted"`) {
			break
		}
	}
}

// 50 requesters against a fleet of four running slots (two workers of
// two): each ends granted, nobody holds two leases, no device is in two
// leases at once, and the grants follow arrival order. The queue places
// strictly in order; grants can finish in another order only through the
// dispatches that run side by side (one per running slot, four) and a
// request that bounced off a worker whose view was stale (its slot still
// being cleaned), which goes back to the head of the line while the
// dispatches already sent finish: a request is never granted more than two
// rounds of four later than its arrival.
func TestFiftyRequestersShareAFleetOfFourFairly(t *testing.T) {
	t.Parallel()
	f := newFleet(t)
	a, b := f.worker("worker-a", 2), f.worker("worker-b", 2)
	f.await("both workers connected", 5*time.Second, connected(instanceID(t, a), instanceID(t, b)))
	const n = 50
	ctx := context.Background()
	clients := make([]*client.Client, n)
	ids := make([]string, n)
	for i := range n {
		c, err := client.Dial(ctx, daemon.SocketPath(f.gw.Dir), contract.HelloInput{Principal: fmt.Sprintf("r%02d", i),
			Protocol: contract.VersionRange{Min: contract.ProtocolMin, Max: contract.ProtocolMax}})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		clients[i] = c
		// One at a time, so arrival order is i.
		var st contract.LeaseRequestStatus
		if err := c.Call(ctx, contract.OpLeaseRequestCreate, contract.LeaseRequestInput{Platform: contract.PlatformIOS, TimeoutMs: 120000}, &st); err != nil {
			t.Fatalf("r%02d: %v", i, err)
		}
		ids[i] = st.Request.ID
	}
	var (
		mu      sync.Mutex
		order   []int
		holding = map[string]int{} // device → requester holding it
		errs    []string
	)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			c := clients[i]
			var st contract.LeaseRequestStatus
			for rev := uint64(0); ; {
				if err := c.Call(ctx, contract.OpLeaseRequestGet, contract.LeaseRequestGetInput{RequestID: ids[i], WaitMs: 30000, AfterRev: rev}, &st); err != nil {
					mu.Lock()
					errs = append(errs, fmt.Sprintf("r%02d: %v", i, err))
					mu.Unlock()
					return
				}
				if st.Request.State.Terminal() {
					break
				}
				rev = st.Rev
			}
			if st.Request.State != contract.RequestGranted || st.Request.Grant == nil {
				mu.Lock()
				errs = append(errs, fmt.Sprintf("r%02d ended %s: %+v", i, st.Request.State, st.Request.Error))
				mu.Unlock()
				return
			}
			dev := st.Request.Grant.Device.WorkerID + "/" + st.Request.Grant.Device.ID
			mu.Lock()
			order = append(order, i)
			if other, busy := holding[dev]; busy {
				errs = append(errs, fmt.Sprintf("device %s granted to r%02d while r%02d held it", dev, i, other))
			}
			holding[dev] = i
			mu.Unlock()
			time.Sleep(20 * time.Millisecond) // hold it a moment
			mu.Lock()
			delete(holding, dev)
			mu.Unlock()
			if _, err := c.Release(ctx, st.Request.Grant.Lease.ID); err != nil {
				mu.Lock()
				errs = append(errs, fmt.Sprintf("r%02d release: %v", i, err))
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	for _, e := range errs {
		t.Error(e)
	}
	if len(order) != n {
		t.Fatalf("%d of %d requesters were granted", len(order), n)
	}
	for pos, i := range order {
		if d := i - pos; d > 8 || d < -8 {
			t.Errorf("r%02d was granted %dth, out of arrival order: %v", i, pos+1, order)
			break
		}
	}
}

func TestARequestInFlightToAWorkerThatDiesEndsWorkerUnreachable(t *testing.T) {
	t.Parallel()
	f := newFleet(t)
	settings := []string{"capacity.strategy", "fixed", "capacity.config.maxRunning", "1", "gateway.url", f.url, "gateway.token", f.joinSecret("slow"),
		"gateway.label", "slow", "gateway.heartbeatMs", fleetHeartbeat, "drivers.demo.provisionMs", "5000"}
	slow := newHome(t, settings...)
	slow.startDaemon()
	id := instanceID(t, slow)
	f.await("the slow worker connected", 5*time.Second, connected(id))
	p := f.gw.start("lease", "--platform", "ios", "--agent-id", "stranded", "--progress", "json")
	p.waitLine(p.stderr, "provisioning on the worker", func(s string) bool { return strings.Contains(s, `"stage":"provisioning"`) })
	if err := syscall.Kill(lockPID(slow.Dir), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	line := p.waitLine(p.stderr, "the request's end", func(s string) bool { return strings.Contains(s, `"code"`) })
	if !strings.Contains(line.text, "WORKER_UNREACHABLE") {
		t.Errorf("the request in flight ended with %s, want WORKER_UNREACHABLE", line.text)
	}
	if code := p.wait(); code != 1 {
		t.Errorf("lease exit code = %d, want 1 (WORKER_UNREACHABLE)", code)
	}
}

// An HTTP client of the gateway runs adb on its leased device, which is
// on a worker driving the Android stand-ins: the output streams through,
// and a refusal before the command starts is a plain 422.
func TestExecThroughTheGatewayStreamsTheWorkersCommand(t *testing.T) {
	t.Parallel()
	f := newFleet(t)
	e := shimtest.Build(t)
	f.shimWorker(e, "android", "droid")
	_, agent := f.gw.token("agent", "droid-agent")
	r := f.api.do("POST", "/v1/lease-requests", agent, `{"platform":"android"}`)
	if r.status != 201 {
		t.Fatalf("create through the gateway: %d %s", r.status, r.raw)
	}
	lease := f.api.awaitState(agent, requestOf(t, r)["id"].(string), "granted")["lease"].(map[string]any)
	path := "/v1/leases/" + lease["id"].(string) + "/exec"
	req, _ := http.NewRequest("POST", f.api.base+path, strings.NewReader(`{"tool":"adb","args":["shell","getprop","ro.build.version.sdk"]}`))
	req.Header.Set("Authorization", "Bearer "+agent)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 {
		t.Fatalf("exec through the gateway: %d", resp.StatusCode)
	}
	s := &sse{resp: resp, cancel: func() {}, events: make(chan sseEvent, 64), comments: make(chan string, 64)}
	go s.read()
	var out string
	exit := -1.0
	for {
		ev, ok := s.next(t)
		if !ok {
			break
		}
		m := ev.json(t)
		switch ev.name {
		case "output":
			if m["stream"] == "stdout" {
				out += m["chunk"].(string)
			}
		case "exit":
			exit = m["exitCode"].(float64)
		}
	}
	if strings.TrimSpace(out) == "" || exit != 0 {
		t.Errorf("getprop through the gateway: stdout %q exit %v", out, exit)
	}
	refused := f.api.do("POST", path, agent, `{"tool":"adb","args":["shell"]}`)
	if refused.status != 422 || refused.errCode() != "PASSTHROUGH_REFUSED" {
		t.Errorf("bare adb shell through the gateway: %d %s, want 422 PASSTHROUGH_REFUSED", refused.status, refused.raw)
	}
}

// release --all on a gateway ends the leases the gateway issued, on every
// worker, cancels its queue, tells holders lease-lost, and leaves each
// worker's own leases alone.
func TestReleaseAllOnAGatewayEndsOnlyItsOwnLeases(t *testing.T) {
	t.Parallel()
	f := newFleet(t)
	a, b := f.worker("worker-a", 1), f.worker("worker-b", 2)
	idA, idB := instanceID(t, a), instanceID(t, b)
	f.await("both workers connected", 5*time.Second, connected(idA, idB))
	local := b.leaseDetached("local-on-b", "ios")
	holder, held := f.gw.hold("held-through-gw", "ios")
	detached := f.gw.leaseDetached("detached-through-gw", "ios")
	queued := f.gw.start("lease", "--platform", "ios", "--agent-id", "queued-through-gw")
	queued.waitLine(queued.stderr, "queued", func(s string) bool { return strings.Contains(s, `"stage":"queued"`) })

	r := f.gw.run("release", "--all", "--yes")
	if r.code != 0 {
		t.Fatalf("release --all on the gateway\n%s", r)
	}
	for _, id := range []string{held.Lease.ID, detached.Lease.ID} {
		if !strings.Contains(r.stdout, id) {
			t.Errorf("release --all output lacks %s\n%s", id, r.stdout)
		}
	}
	holder.waitLine(holder.stderr, "lease-lost", func(s string) bool { return strings.Contains(s, `"reason":"killed"`) })
	if code := holder.wait(); code != 14 {
		t.Errorf("holder exit code = %d, want 14", code)
	}
	if code := queued.wait(); code == 0 {
		t.Errorf("the queued request ended 0, want it cancelled")
	}
	if ls := b.leases(); len(ls) != 1 || ls[local.Lease.ID].ID != local.Lease.ID {
		t.Errorf("B's leases after the gateway's release --all = %+v, want its own lease alone", ls)
	}
}

// The fast-fail table runs again when views change: a request waiting for
// the only worker fails NO_CAPACITY (no-worker) when that worker is
// drained, rather than waiting for a worker that takes no requests.
func TestDrainingTheOnlyWorkerFailsTheRequestsWaitingForIt(t *testing.T) {
	t.Parallel()
	f := newFleet(t)
	a := f.worker("worker-a", 1)
	idA := instanceID(t, a)
	f.await("worker A connected", 5*time.Second, connected(idA))
	f.gw.leaseDetached("first", "ios")
	waiting := f.gw.start("lease", "--platform", "ios", "--agent-id", "waiting", "--progress", "json")
	waiting.waitLine(waiting.stderr, "queued", func(s string) bool { return strings.Contains(s, `"stage":"queued"`) })
	if r := f.gw.run("worker", "drain", idA); r.code != 0 {
		t.Fatalf("worker drain\n%s", r)
	}
	line := waiting.waitLine(waiting.stderr, "the request's end", func(s string) bool { return strings.Contains(s, `"code"`) })
	if !strings.Contains(line.text, "NO_CAPACITY") || !strings.Contains(line.text, "no-worker") {
		t.Errorf("the waiting request ended %s, want NO_CAPACITY no-worker", line.text)
	}
	if code := waiting.wait(); code != 11 {
		t.Errorf("exit code %d, want 11", code)
	}
}

// A request allowed to download, when no worker has its runtime, goes to
// the worker that can download it, and the downloading stage reaches the
// requester through the gateway.
func TestARequestThatMayDownloadGoesToTheWorkerThatCanAndShowsDownloading(t *testing.T) {
	t.Parallel()
	f := newFleet(t)
	none := newHome(t, append([]string{"gateway.url", f.url, "gateway.token", f.joinSecret("no-downloads"), "gateway.label", "no-downloads",
		"gateway.heartbeatMs", fleetHeartbeat, "drivers.demo.downloadableRuntimes", `{"ios":[]}`}, fastDemo...)...)
	none.startDaemon()
	can := newHome(t, append([]string{"gateway.url", f.url, "gateway.token", f.joinSecret("downloads"), "gateway.label", "downloads",
		"gateway.heartbeatMs", fleetHeartbeat, "drivers.demo.downloadMs", "300"}, fastDemo...)...)
	can.startDaemon()
	idCan := instanceID(t, can)
	f.await("both workers connected", 5*time.Second, connected(instanceID(t, none), idCan))
	p := f.gw.start("lease", "--platform", "ios", "--os", "26.4", "--allow-download", "--agent-id", "downloader", "--detach", "--progress", "json")
	p.waitLine(p.stderr, "the downloading stage", func(s string) bool { return strings.Contains(s, `"stage":"downloading"`) })
	g := parseGrant(t, p.waitLine(p.stdout, "the grant", func(string) bool { return true }).text)
	if !strings.HasPrefix(g.Lease.ID, idCan+".") || g.Device.Spec.OSVersion != "26.4" {
		t.Errorf("grant = %+v on %s, want iOS 26.4 on the worker that could download it (%s)", g.Lease, g.Device.Spec.OSVersion, idCan)
	}
}

// An uplink that goes silent mid-lease (the worker stopped, its socket
// still open): renew answers WORKER_UNREACHABLE once the gateway dropped
// it, the lease is not forgotten, and renews again when the worker is back.
func TestASilentUplinkMidLeaseMakesRenewUnreachableAndTheLeaseSurvives(t *testing.T) {
	t.Parallel()
	f := newFleet(t)
	a := f.worker("worker-a", 1)
	idA := instanceID(t, a)
	f.await("worker A connected", 5*time.Second, connected(idA))
	g := f.gw.leaseDetached("holder", "ios")
	pid := lockPID(a.Dir)
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	defer syscall.Kill(pid, syscall.SIGCONT)
	f.await("worker A dropped", 5*time.Second, func(ws map[string]workerLine) bool { return ws[idA].Connection == "disconnected" })
	expectFailure(t, f.gw.run("lease", "renew", "--agent-id", "holder", g.Lease.ID), 1, "WORKER_UNREACHABLE")
	if err := syscall.Kill(pid, syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	f.await("worker A back", 10*time.Second, connected(idA))
	if r := f.gw.run("lease", "renew", "--agent-id", "holder", g.Lease.ID); r.code != 0 {
		t.Errorf("renew once A woke\n%s", r)
	}
}
