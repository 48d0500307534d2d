package e2e

import (
	"encoding/json"
	"strings"
	"testing"
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
