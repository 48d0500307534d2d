package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/simlock/simlock/internal/shimtest"
)

// requestOf reads {"request":{...}}.
func requestOf(t *testing.T, r reply) map[string]any {
	t.Helper()
	req := r.obj("request")
	if req == nil || req["id"] == nil || req["state"] == nil {
		t.Fatalf("answer %d is not a request resource: %s", r.status, r.raw)
	}
	return req
}

// awaitState long-polls a request until it reaches one of the states.
func (a *api) awaitState(secret, id string, states ...string) map[string]any {
	a.t.Helper()
	deadline := time.Now().Add(waitBound)
	for time.Now().Before(deadline) {
		r := a.do("GET", "/v1/lease-requests/"+id+"?wait=5", secret, "")
		if r.status != 200 {
			a.t.Fatalf("GET request %s: %d %s", id, r.status, r.raw)
		}
		req := requestOf(a.t, r)
		if slices.Contains(states, req["state"].(string)) {
			return req
		}
	}
	a.t.Fatalf("request %s did not reach %v within %s", id, states, waitBound)
	return nil
}

// The whole life of a lease request over HTTP: create, follow its stream
// through queued, provisioning, booting and granted, renew, release; a
// long-poll that returns on the change; idempotent creation; cancelling a
// queued request.
func TestHTTPLeaseRequestLifecycle(t *testing.T) {
	t.Parallel()
	h, a := httpHome(t, "capacity.strategy", "fixed", "capacity.config.maxRunning", "1")
	_, alice := h.token("agent", "alice")
	bobID, bob := h.token("agent", "bob")
	_, carol := h.token("agent", "carol")

	if r := a.do("GET", "/v1/healthz", "", ""); r.status != 200 || r.body["ok"] != true {
		t.Fatalf("healthz: %d %s", r.status, r.raw)
	}
	// Alice holds the only running slot.
	r := a.do("POST", "/v1/lease-requests", alice, `{"platform":"ios"}`)
	if r.status != 201 {
		t.Fatalf("create: %d %s", r.status, r.raw)
	}
	aliceReq := requestOf(t, r)
	if loc := r.header.Get("Location"); loc != "/v1/lease-requests/"+aliceReq["id"].(string) {
		t.Errorf("Location = %q", loc)
	}
	aliceLease := a.awaitState(alice, aliceReq["id"].(string), "granted")["lease"].(map[string]any)

	// Bob asks for Android: it waits for the slot, then needs a new device.
	r = a.do("POST", "/v1/lease-requests", bob, `{"platform":"android","ttlMs":60000}`, "Idempotency-Key", "bob-1")
	if r.status != 201 {
		t.Fatalf("bob create: %d %s", r.status, r.raw)
	}
	bobReq := requestOf(t, r)
	id := bobReq["id"].(string)
	if bobReq["state"] != "queued" || bobReq["queuePosition"] != float64(1) || bobReq["requesterId"] != bobID {
		t.Fatalf("bob's request = %v, want queued at 1 for %s", bobReq, bobID)
	}
	again := a.do("POST", "/v1/lease-requests", bob, `{"platform":"android","ttlMs":60000}`, "Idempotency-Key", "bob-1")
	if again.status != 201 || requestOf(t, again)["id"] != id {
		t.Errorf("repeat with the same Idempotency-Key: %d %s, want request %s", again.status, again.raw, id)
	}

	// Carol queues behind Bob and withdraws.
	r = a.do("POST", "/v1/lease-requests", carol, `{"platform":"ios"}`)
	carolID := requestOf(t, r)["id"].(string)
	if d := a.do("DELETE", "/v1/lease-requests/"+carolID, carol, ""); d.status != 204 {
		t.Errorf("DELETE of a queued request: %d %s, want 204", d.status, d.raw)
	}
	if st := requestOf(t, a.do("GET", "/v1/lease-requests/"+carolID, carol, ""))["state"]; st != "cancelled" {
		t.Errorf("cancelled request reads as %v", st)
	}

	stream := a.stream("/v1/lease-requests/"+id+"/events", bob)
	first, ok := stream.next(t)
	if !ok || first.name != "queued" {
		t.Fatalf("first event = %+v, want queued", first)
	}

	// A long-poll on the queued request returns once it moves, whether it
	// arrives before the release (and parks) or after it. (That it parks,
	// and does not answer early, is httpapi's TestGetLeaseRequestLongPoll.)
	polled := make(chan reply, 1)
	go func() { polled <- a.do("GET", "/v1/lease-requests/"+id+"?wait=30", bob, "") }()
	released := time.Now()
	if d := a.do("DELETE", "/v1/leases/"+aliceLease["id"].(string), alice, ""); d.status != 202 || d.body["released"] != true {
		t.Fatalf("release: %d %s", d.status, d.raw)
	}
	p := <-polled
	// It moved: past queued, or still queued but no longer waiting on
	// alice's lease, which has ended.
	polledReq := requestOf(t, p)
	waitsOn := ""
	if w, ok := polledReq["wait"].(map[string]any); ok {
		waitsOn, _ = w["leaseId"].(string)
	}
	if p.status != 200 || (polledReq["state"] == "queued" && waitsOn == aliceLease["id"]) {
		t.Errorf("long-poll answered %d %s, want a state past queued or a wait on something other than alice's ended lease", p.status, p.raw)
	}
	if took := time.Since(released); took > 10*time.Second {
		t.Errorf("long-poll returned %s after the change", took)
	}

	names := []string{first.name}
	var granted map[string]any
	for {
		ev, ok := stream.next(t)
		if !ok {
			break
		}
		if ev.name != names[len(names)-1] {
			names = append(names, ev.name)
		}
		if ev.name == "granted" {
			granted = ev.json(t)
		}
	}
	if want := []string{"queued", "provisioning", "booting", "granted"}; !slices.Equal(names, want) {
		t.Errorf("event stream = %v, want %v", names, want)
	}
	lease, _ := granted["lease"].(map[string]any)
	if lease == nil || lease["platform"] != "android" {
		t.Fatalf("granted event carries no android lease: %v", granted)
	}
	leaseID := lease["id"].(string)
	if got := a.do("GET", "/v1/leases/"+leaseID, bob, ""); got.status != 200 || got.obj("lease")["id"] != leaseID {
		t.Errorf("GET lease: %d %s", got.status, got.raw)
	}
	before := lease["expiresAt"].(string)
	renew := a.do("POST", "/v1/leases/"+leaseID+"/renew", bob, `{"ttlMs":120000}`)
	if renew.status != 200 || renew.body["leaseId"] != leaseID || renew.body["ttlMs"] != float64(120000) {
		t.Fatalf("renew: %d %s", renew.status, renew.raw)
	}
	after, _ := time.Parse(time.RFC3339Nano, renew.body["expiresAt"].(string))
	was, _ := time.Parse(time.RFC3339Nano, before)
	if !after.After(was) {
		t.Errorf("renew moved expiresAt from %s to %s", before, renew.body["expiresAt"])
	}
	rel := a.do("DELETE", "/v1/leases/"+leaseID, bob, "")
	if rel.status != 202 || rel.body["released"] != true || rel.obj("device")["state"] != "reclaiming" {
		t.Errorf("release: %d %s", rel.status, rel.raw)
	}
	if g := a.do("GET", "/v1/leases/"+leaseID, bob, ""); g.status != 404 || g.errCode() != "UNKNOWN_LEASE" {
		t.Errorf("GET a released lease: %d %s", g.status, g.raw)
	}
	// A granted request cannot be cancelled; the answer names its lease.
	if d := a.do("DELETE", "/v1/lease-requests/"+id, bob, ""); d.status != 409 || d.errCode() != "REQUEST_NOT_CANCELLABLE" {
		t.Errorf("DELETE of a granted request: %d %s", d.status, d.raw)
	}
}

// Agents see only their own leases and requests, revoked tokens stop
// working, and malformed requests are refused without changing anything.
func TestHTTPRefusesStrangersAndBadInput(t *testing.T) {
	t.Parallel()
	h, a := httpHome(t)
	_, alice := h.token("agent", "alice")
	eveID, eve := h.token("agent", "eve")
	_, op := h.token("operator", "ops")

	r := a.do("POST", "/v1/lease-requests", alice, `{"platform":"ios"}`)
	reqID := requestOf(t, r)["id"].(string)
	lease := a.awaitState(alice, reqID, "granted")["lease"].(map[string]any)
	leaseID := lease["id"].(string)

	for _, c := range []struct{ method, path, body, code string }{
		{"GET", "/v1/leases/" + leaseID, "", "UNKNOWN_LEASE"},
		{"POST", "/v1/leases/" + leaseID + "/renew", "", "UNKNOWN_LEASE"},
		{"DELETE", "/v1/leases/" + leaseID, "", "UNKNOWN_LEASE"},
		{"POST", "/v1/leases/" + leaseID + "/exec", `{"tool":"simctl","args":["list"]}`, "UNKNOWN_LEASE"},
		{"GET", "/v1/lease-requests/" + reqID, "", "UNKNOWN_LEASE_REQUEST"},
		{"DELETE", "/v1/lease-requests/" + reqID, "", "UNKNOWN_LEASE_REQUEST"},
	} {
		got := a.do(c.method, c.path, eve, c.body)
		if got.status != 404 || got.errCode() != c.code {
			t.Errorf("eve %s %s: %d %s, want 404 %s", c.method, c.path, got.status, got.raw, c.code)
		}
	}
	if got := a.do("GET", "/v1/leases/nope", eve, ""); got.status != 404 || got.errCode() != "UNKNOWN_LEASE" {
		t.Errorf("unknown lease: %d %s", got.status, got.raw)
	}
	if got := a.do("GET", "/v1/devices", eve, ""); got.status != 403 || got.errCode() != "FORBIDDEN" {
		t.Errorf("agent on an operator route: %d %s", got.status, got.raw)
	}
	if got := a.do("GET", "/v1/status", "", ""); got.status != 401 || got.errCode() != "UNAUTHENTICATED" {
		t.Errorf("no token: %d %s", got.status, got.raw)
	}
	if got := a.do("GET", "/v1/status", "slk_made_up", ""); got.status != 401 || got.errCode() != "UNAUTHENTICATED" {
		t.Errorf("unknown token: %d %s", got.status, got.raw)
	}

	big := `{"platform":"ios","os":"` + strings.Repeat("1", 70<<10) + `"}`
	if got := a.do("POST", "/v1/lease-requests", eve, big); got.status != 413 || got.errCode() != "BODY_TOO_LARGE" {
		t.Errorf("70 KiB body: %d %.200s", got.status, got.raw)
	}
	if got := a.do("POST", "/v1/lease-requests", eve, `{"platform":"ios"}`, "Content-Type", "text/plain"); got.status != 415 || got.errCode() != "UNSUPPORTED_MEDIA_TYPE" {
		t.Errorf("text/plain body: %d %s", got.status, got.raw)
	}
	got := a.do("POST", "/v1/lease-requests", eve, `{"platform":"ios","colour":"red"}`)
	if e := got.obj("error"); got.status != 400 || got.errCode() != "BAD_REQUEST" || e["field"] != "colour" {
		t.Errorf("unknown field: %d %s, want 400 naming colour", got.status, got.raw)
	}
	if got := a.do("POST", "/v1/lease-requests", eve, `{"platform":"ios","ttlMs":999999999999}`); got.status != 400 || got.errCode() != "BAD_REQUEST" {
		t.Errorf("ttl above the maximum: %d %s", got.status, got.raw)
	}
	// None of that made a request for eve.
	if reqs := a.do("GET", "/v1/lease-requests", op, ""); reqs.status != 200 || strings.Contains(reqs.raw, eveID) {
		t.Errorf("eve's refused calls left a request: %s", reqs.raw)
	}

	// Revoking a token shuts its holder out on the very next call.
	if ok := a.do("GET", "/v1/catalog", eve, ""); ok.status != 200 {
		t.Fatalf("catalog before revoke: %d %s", ok.status, ok.raw)
	}
	if rv := h.run("token", "revoke", eveID); rv.code != 0 || !strings.Contains(rv.stdout, `"revoked":true`) {
		t.Fatalf("token revoke\n%s", rv)
	}
	if got := a.do("GET", "/v1/catalog", eve, ""); got.status != 401 || got.errCode() != "UNAUTHENTICATED" {
		t.Errorf("revoked token: %d %s", got.status, got.raw)
	}
	var list struct {
		Tokens []map[string]any `json:"tokens"`
	}
	tl := a.do("GET", "/v1/tokens", op, "")
	if err := json.Unmarshal([]byte(tl.raw), &list); err != nil || len(list.Tokens) != 2 || strings.Contains(tl.raw, "slk_") {
		t.Errorf("token list after revoke: %s", tl.raw)
	}
	// And the daemon still serves the rightful owner.
	if got := a.do("GET", "/v1/leases/"+leaseID, alice, ""); got.status != 200 {
		t.Errorf("alice after all that: %d %s", got.status, got.raw)
	}
}

// The operator's event stream resumes from Last-Event-ID without gaps or
// repeats.
func TestHTTPEventStreamResumes(t *testing.T) {
	t.Parallel()
	h, a := httpHome(t)
	_, op := h.token("operator", "ops")
	_, alice := h.token("agent", "alice")
	s := a.stream("/v1/events/stream", op)
	r := a.do("POST", "/v1/lease-requests", alice, `{"platform":"ios"}`)
	lease := a.awaitState(alice, requestOf(t, r)["id"].(string), "granted")["lease"].(map[string]any)
	var seen []sseEvent
	for {
		ev, ok := s.next(t)
		if !ok {
			t.Fatal("the event stream ended")
		}
		seen = append(seen, ev)
		if ev.json(t)["event"] == "lease.granted" {
			break
		}
	}
	s.close()
	mid := seen[len(seen)/2].id
	a.do("DELETE", "/v1/leases/"+lease["id"].(string), alice, "")
	resumed := a.stream("/v1/events/stream", op, "Last-Event-ID", mid)
	var seqs []int
	for {
		ev, ok := resumed.next(t)
		if !ok {
			t.Fatal("the resumed stream ended")
		}
		var seq int
		fmt.Sscan(ev.id, &seq)
		if m := ev.json(t); m["seq"] != float64(seq) {
			t.Fatalf("event id %s but seq %v", ev.id, m["seq"])
		}
		seqs = append(seqs, seq)
		if ev.json(t)["event"] == "lease.released" {
			break
		}
	}
	var start int
	fmt.Sscan(mid, &start)
	for i, s := range seqs {
		if s != start+1+i {
			t.Fatalf("resumed after %d with seqs %v: a gap or a repeat", start, seqs)
		}
	}
}

// exec streams a real passthrough command's output and exit code; a
// refused command is answered before anything runs.
func TestHTTPExecStreamsPassthroughOutput(t *testing.T) {
	t.Parallel()
	e := shimtest.Build(t)
	h := newHome(t, "http.enabled", "true", "http.port", "0")
	h.withShims(e, "android")
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
	a := &api{t: t, base: status.Daemon.HTTPURL}
	_, agent := h.token("agent", "droid")
	r := a.do("POST", "/v1/lease-requests", agent, `{"platform":"android"}`)
	if r.status != 201 {
		t.Fatalf("create: %d %s", r.status, r.raw)
	}
	lease := a.awaitState(agent, requestOf(t, r)["id"].(string), "granted")["lease"].(map[string]any)
	path := "/v1/leases/" + lease["id"].(string) + "/exec"

	run := func(body string) (out, errOut string, exit float64, names []string) {
		t.Helper()
		req, _ := http.NewRequest("POST", a.base+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+agent)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != 200 {
			t.Fatalf("exec %s: %d", body, resp.StatusCode)
		}
		s := &sse{resp: resp, cancel: func() {}, events: make(chan sseEvent, 64), comments: make(chan string, 64)}
		go s.read()
		exit = -1
		for {
			ev, ok := s.next(t)
			if !ok {
				return
			}
			names = append(names, ev.name)
			m := ev.json(t)
			switch ev.name {
			case "output":
				if m["stream"] == "stdout" {
					out += m["chunk"].(string)
				} else {
					errOut += m["chunk"].(string)
				}
			case "exit":
				exit = m["exitCode"].(float64)
			}
		}
	}
	out, _, exit, names := run(`{"tool":"adb","args":["shell","getprop","ro.build.version.sdk"]}`)
	if strings.TrimSpace(out) == "" || exit != 0 || names[len(names)-1] != "exit" {
		t.Errorf("getprop: stdout %q exit %v events %v", out, exit, names)
	}
	_, errOut, exit, _ := run(`{"tool":"adb","args":["uninstall"]}`)
	if !strings.Contains(errOut, "usage") || exit != 1 {
		t.Errorf("uninstall without a package: stderr %q exit %v, want the usage on stderr and exit 1", errOut, exit)
	}
	before := len(e.Calls(t))
	refused := a.do("POST", path, agent, `{"tool":"adb","args":["shell"]}`)
	if refused.status != 422 || refused.errCode() != "PASSTHROUGH_REFUSED" {
		t.Errorf("bare adb shell: %d %s, want 422 PASSTHROUGH_REFUSED", refused.status, refused.raw)
	}
	wrong := a.do("POST", path, agent, `{"tool":"simctl","args":["list"]}`)
	if wrong.status != 422 {
		t.Errorf("simctl on an Android lease: %d %s, want 422", wrong.status, wrong.raw)
	}
	for _, c := range e.Calls(t)[before:] {
		if c.Tool == "adb" && slices.Contains(c.Args, "shell") && len(c.Args) > 0 && c.Args[len(c.Args)-1] == "shell" {
			t.Errorf("a refused command ran: %v", c.Args)
		}
	}
}

// A hundred agents against four running slots: each request ends granted
// (after the holders before it release) or with its own QUEUE_TIMEOUT,
// grants follow arrival order, no request is lost, and the daemon's heap
// stays bounded.
func TestHTTPHundredAgentsShareFourSlots(t *testing.T) {
	t.Parallel()
	const agents, slots, patient = 100, 4, 90
	h, a := httpHome(t, "capacity.strategy", "fixed", "capacity.config.maxRunning", "4",
		"drivers.demo.provisionMs", "5", "drivers.demo.bootMs", "5", "drivers.demo.reclaimMs", "5")
	_, op := h.token("operator", "ops")
	secrets := make([]string, agents)
	for i := range secrets {
		_, secrets[i] = h.token("agent", fmt.Sprintf("agent-%d", i))
	}
	heap := func() int64 {
		var status struct {
			Daemon struct {
				HeapBytes int64 `json:"heapBytes"`
			} `json:"daemon"`
		}
		_ = json.Unmarshal([]byte(a.do("GET", "/v1/status", op, "").raw), &status)
		return status.Daemon.HeapBytes
	}
	heapBefore := heap()
	ids := make([]string, agents)
	create := func(i int, timeoutMs int) {
		r := a.do("POST", "/v1/lease-requests", secrets[i], fmt.Sprintf(`{"platform":"ios","timeoutMs":%d}`, timeoutMs))
		if r.status != 201 {
			t.Fatalf("agent %d create: %d %s", i, r.status, r.raw)
		}
		ids[i] = requestOf(t, r)["id"].(string)
	}
	// The first four arrive one by one and are served at once.
	var held []int
	leaseOf := map[int]string{}
	for i := range slots {
		create(i, 60000)
		leaseOf[i] = a.awaitState(secrets[i], ids[i], "granted")["lease"].(map[string]any)["id"].(string)
		held = append(held, i)
	}
	// The rest queue; the last ten will not wait long enough.
	final := make([]map[string]any, agents)
	var wg sync.WaitGroup
	for i := slots; i < agents; i++ {
		timeout := 60000
		if i >= patient {
			timeout = 1500
		}
		create(i, timeout)
		s := a.stream("/v1/lease-requests/"+ids[i]+"/events", secrets[i])
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ev := range s.events {
				if ev.name == "granted" || ev.name == "failed" || ev.name == "cancelled" {
					var m map[string]any
					_ = json.Unmarshal([]byte(ev.data), &m)
					final[i] = m
				}
			}
		}()
	}
	// Free one slot at a time; the next patient request in line gets it.
	for next := slots; next < patient; next++ {
		oldest := held[0]
		held = held[1:]
		if d := a.do("DELETE", "/v1/leases/"+leaseOf[oldest], secrets[oldest], ""); d.status != 202 {
			t.Fatalf("release of agent %d: %d %s", oldest, d.status, d.raw)
		}
		leaseOf[next] = a.awaitState(secrets[next], ids[next], "granted")["lease"].(map[string]any)["id"].(string)
		held = append(held, next)
	}
	wg.Wait() // every stream ended: each request settled
	for i := slots; i < agents; i++ {
		f := final[i]
		switch {
		case f == nil:
			t.Errorf("request %d (%s): its stream ended with no terminal event", i, ids[i])
		case i < patient && f["state"] != "granted":
			t.Errorf("patient request %d ended %v", i, f)
		case i >= patient:
			e, _ := f["error"].(map[string]any)
			if f["state"] != "failed" || e["code"] != "QUEUE_TIMEOUT" || e["requestId"] != ids[i] {
				t.Errorf("impatient request %d (%s) ended %v, want its own QUEUE_TIMEOUT", i, ids[i], f)
			}
		}
	}
	// Grants in the event log follow arrival order exactly.
	evs := a.do("GET", "/v1/events?since=10m&limit=10000", op, "")
	var log struct {
		Events []struct {
			Event   string          `json:"event"`
			Payload json.RawMessage `json:"payload"`
		} `json:"events"`
	}
	if err := json.Unmarshal([]byte(evs.raw), &log); err != nil {
		t.Fatalf("events: %v", err)
	}
	var grantOrder []string
	for _, ev := range log.Events {
		if ev.Event == "lease.granted" {
			var p struct {
				RequestID string `json:"requestId"`
			}
			_ = json.Unmarshal(ev.Payload, &p)
			grantOrder = append(grantOrder, p.RequestID)
		}
	}
	if !slices.Equal(grantOrder, ids[:patient]) {
		t.Errorf("grant order differs from arrival order:\n got %v\nwant %v", grantOrder, ids[:patient])
	}
	// Nothing is lost: every request still reads back, settled.
	for i, id := range ids {
		st := requestOf(t, a.do("GET", "/v1/lease-requests/"+id, secrets[i], ""))["state"]
		if st != "granted" && st != "failed" {
			t.Errorf("request %d reads back as %v", i, st)
		}
	}
	// Bounded: what is left after a hundred requests, their streams and
	// their leases is a small constant over the idle daemon, not a
	// per-request accumulation of sessions or subscriptions.
	heapAfter := heap()
	t.Logf("daemon heap: %d KiB idle, %d KiB after %d requests", heapBefore>>10, heapAfter>>10, agents)
	if heapBefore <= 0 || heapAfter > heapBefore+16<<20 {
		t.Errorf("daemon heap grew from %d to %d bytes, want under 16 MiB of growth", heapBefore, heapAfter)
	}
}

// A request still waiting when the daemon stops is kept, and the next start
// settles it as failed, daemon-restarted; it stays readable.
func TestHTTPWaitingRequestSurvivesRestartAsFailed(t *testing.T) {
	t.Parallel()
	h, a := httpHome(t, "capacity.strategy", "fixed", "capacity.config.maxRunning", "1")
	_, alice := h.token("agent", "alice")
	_, bob := h.token("agent", "bob")
	r := a.do("POST", "/v1/lease-requests", alice, `{"platform":"ios"}`)
	a.awaitState(alice, requestOf(t, r)["id"].(string), "granted")
	r = a.do("POST", "/v1/lease-requests", bob, `{"platform":"ios"}`)
	id := requestOf(t, r)["id"].(string)
	if st := requestOf(t, r)["state"]; st != "queued" {
		t.Fatalf("bob's request is %v, want queued", st)
	}
	if stop := h.run("daemon", "stop"); stop.code != 0 {
		t.Fatalf("daemon stop\n%s", stop)
	}
	h.startDaemon()
	var st struct {
		Daemon struct {
			HTTPURL string `json:"httpUrl"`
		} `json:"daemon"`
	}
	_ = json.Unmarshal([]byte(h.run("status", "--json").stdout), &st)
	a.base = st.Daemon.HTTPURL
	got := requestOf(t, a.do("GET", "/v1/lease-requests/"+id, bob, ""))
	e, _ := got["error"].(map[string]any)
	if got["state"] != "failed" || e["code"] != "DAEMON_STOPPING" || e["reason"] != "daemon-restarted" {
		t.Errorf("after the restart the request reads %v, want failed with DAEMON_STOPPING, reason daemon-restarted", got)
	}
}

// daemon status names where the HTTP API listens, in its line and its JSON.
func TestDaemonStatusPrintsTheHTTPURL(t *testing.T) {
	h, a := httpHome(t)
	if r := h.run("daemon", "status"); r.code != 0 || !strings.Contains(r.stdout, "HTTP API at "+a.base+"\n") {
		t.Errorf("daemon status does not say HTTP API at %s\n%s", a.base, r)
	}
	// daemon start of a running daemon prints the same view.
	for _, args := range [][]string{{"daemon", "status", "--json"}, {"daemon", "start"}} {
		r := h.run(args...)
		var st struct {
			HTTPURL string `json:"httpUrl"`
		}
		if r.code != 0 || json.Unmarshal([]byte(r.stdout), &st) != nil || st.HTTPURL != a.base {
			t.Errorf("%s: httpUrl %q, want %q\n%s", strings.Join(args, " "), st.HTTPURL, a.base, r)
		}
	}
}

// A foreground `daemon run --http` says where it serves: the URL it prints
// is the one status reports and the API answers at.
func TestDaemonRunWithHTTPPrintsTheURL(t *testing.T) {
	t.Parallel()
	h := newHome(t, append([]string{"http.port", "0"}, fastDemo...)...)
	p := h.start("daemon", "run", "--http")
	// Once it says it runs it listens; before that a command would start a
	// daemon of its own.
	p.waitLine(p.stdout, "the running line", func(s string) bool { return strings.HasPrefix(s, "simlock daemon ") })
	// status waits, bounded, for the daemon to be ready.
	if r := h.run("status", "--summary", "--json"); r.code != 0 {
		t.Fatalf("status of the daemon run --http\n%s", r)
	}
	st := daemonStatus(t, h)
	url, _ := st["httpUrl"].(string)
	if !strings.HasPrefix(url, "http://127.0.0.1:") {
		t.Fatalf("daemon status shows no httpUrl of the daemon run --http: %v", st)
	}
	resp, err := http.Get(url + "/v1/healthz")
	if err != nil {
		t.Fatalf("GET %s/v1/healthz: %v", url, err)
	}
	resp.Body.Close()
	p.signal(syscall.SIGTERM)
	if code := p.wait(); code != 0 {
		t.Errorf("daemon run exited %d on SIGTERM, want 0\n%s", code, p.dump())
	}
	if out := p.stdout.text(); !slices.Contains(strings.Split(out, "\n"), "HTTP API at "+url) {
		t.Errorf("daemon run --http printed no \"HTTP API at %s\" line:\n%s", url, out)
	}
}

func TestHTTPAnAgentsStatusCountsOtherLeasesWithoutListingThem(t *testing.T) {
	t.Parallel()
	h, a := httpHome(t, "capacity.strategy", "fixed", "capacity.config.maxRunning", "2")
	_, alice := h.token("agent", "alice")
	_, bob := h.token("agent", "bob")
	_, op := h.token("operator", "ops")
	lease := func(secret string) string {
		r := a.do("POST", "/v1/lease-requests", secret, `{"platform":"ios"}`)
		if r.status != 201 {
			t.Fatalf("create: %d %s", r.status, r.raw)
		}
		return a.awaitState(secret, requestOf(t, r)["id"].(string), "granted")["lease"].(map[string]any)["id"].(string)
	}
	aliceLease, bobLease := lease(alice), lease(bob)

	r := a.do("GET", "/v1/status", alice, "")
	if r.status != 200 {
		t.Fatalf("status: %d %s", r.status, r.raw)
	}
	if strings.Contains(string(r.raw), bobLease) {
		t.Fatalf("alice's status names bob's lease %s: %s", bobLease, r.raw)
	}
	leases, _ := r.body["leases"].([]any)
	if len(leases) != 1 || leases[0].(map[string]any)["id"] != aliceLease {
		t.Fatalf("alice's status lists %v, want only her lease %s", leases, aliceLease)
	}
	if n := r.obj("counts")["leases"]; n != float64(2) {
		t.Fatalf("alice's status counts %v leases, want 2", n)
	}
	if all, _ := a.do("GET", "/v1/status", op, "").body["leases"].([]any); len(all) != 2 {
		t.Fatalf("an operator's status lists %d leases, want 2", len(all))
	}
}

func TestHTTPARepeatOfARefusedRequestGetsTheSameRefusal(t *testing.T) {
	t.Parallel()
	h, a := httpHome(t, "capacity.strategy", "fixed", "capacity.config.maxRunning", "1")
	_, alice := h.token("agent", "alice")
	_, bob := h.token("agent", "bob")
	r := a.do("POST", "/v1/lease-requests", alice, `{"platform":"ios"}`)
	if r.status != 201 {
		t.Fatalf("create: %d %s", r.status, r.raw)
	}
	a.awaitState(alice, requestOf(t, r)["id"].(string), "granted")
	first := a.do("POST", "/v1/lease-requests", bob, `{"platform":"ios","noWait":true}`, "Idempotency-Key", "bob-nw")
	again := a.do("POST", "/v1/lease-requests", bob, `{"platform":"ios","noWait":true}`, "Idempotency-Key", "bob-nw")
	if first.status != 503 || first.errCode() != "NO_CAPACITY" {
		t.Fatalf("first noWait call: %d %s, want 503 NO_CAPACITY", first.status, first.raw)
	}
	if again.status != first.status || again.errCode() != first.errCode() {
		t.Fatalf("its repeat: %d %s, want what the first got (%d %s)", again.status, again.raw, first.status, first.errCode())
	}
}
