package e2e

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"
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
	// the gateway's requester answers it.
	ch := f.gw.runAsync("lease", "--platform", "ios", "--agent-id", "refused", "--detach")
	c := w.serveUntil("lease.request")
	in := requestIn(t, c)
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
