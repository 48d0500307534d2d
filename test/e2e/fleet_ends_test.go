package e2e

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/simlock/simlock/internal/contract"
)

// relay pushes one of the worker's own events to the gateway, as the
// worker's event stream does.
func (s *scripted) relay(name string, payload map[string]any) {
	s.t.Helper()
	b, _ := json.Marshal(payload)
	s.mu.Lock()
	s.seq++
	ev := contract.Event{ID: fakeID("evt_"), Seq: s.seq, Timestamp: time.Now().UnixMilli(), Event: name, Payload: b}
	s.mu.Unlock()
	m, _ := json.Marshal(map[string]any{"push": contract.PushEvent, "subscriptionId": fakeSubscription, "event": ev})
	if err := s.write(m); err != nil {
		s.t.Fatalf("fake worker: write: %v", err)
	}
}

// grantOver has an HTTP agent lease a device of the scripted worker w
// through the gateway, and returns the agent's secret, the gateway's lease
// id and the worker's lease.
func (f *fleet) grantOver(w *scripted, label string) (string, string, contract.LeaseRecord) {
	f.t.Helper()
	_, agent := f.gw.token("agent", label)
	r := f.api.do("POST", "/v1/lease-requests", agent, `{"platform":"ios"}`)
	if r.status != 201 {
		f.t.Fatalf("create: %d %s", r.status, r.raw)
	}
	l := w.grant(w.serveUntil("lease.request"), "")
	id := f.api.awaitState(agent, requestOf(f.t, r)["id"].(string), "granted")["lease"].(map[string]any)["id"].(string)
	return agent, id, l
}

// Cancel and expiry through a gateway: a queued request cancelled over
// HTTP is never sent to a worker, even once one has room; a lease that
// expires on its worker is told to its holder's stream (lease_lost,
// expired, under the gateway's id) and forgotten, so a renew is
// UNKNOWN_LEASE without asking the worker and the requester may lease
// again.
func TestCancelAndExpiryThroughAGateway(t *testing.T) {
	t.Parallel()
	f := newFleet(t)
	w := f.fakeJoined("fake-ends", "ios", 2, 1)
	agent, id, l := f.grantOver(w, "expiring")

	// The fleet is full: a second request waits, and is cancelled.
	_, waiter := f.gw.token("agent", "waiter")
	r := f.api.do("POST", "/v1/lease-requests", waiter, `{"platform":"ios"}`)
	if r.status != 201 || requestOf(t, r)["state"] != "queued" {
		t.Fatalf("a request on a full fleet: %d %s, want it queued", r.status, r.raw)
	}
	reqID := requestOf(t, r)["id"].(string)
	if c := f.api.do("DELETE", "/v1/lease-requests/"+reqID, waiter, ""); c.status != 204 {
		t.Fatalf("cancel through the gateway: %d %s", c.status, c.raw)
	}
	if got := requestOf(t, f.api.do("GET", "/v1/lease-requests/"+reqID, waiter, "")); got["state"] != "cancelled" {
		t.Errorf("the cancelled request reads %v, want cancelled", got["state"])
	}
	w.openSlots(1)
	w.quiet(time.Second, "a request cancelled while queued was sent to the worker once it had room")

	// The worker expires the lease and says so.
	stream := f.api.stream("/v1/leases/"+id+"/events", agent)
	w.forget(l.ID)
	w.relay("lease.expired", map[string]any{"leaseId": l.ID, "deviceId": l.DeviceID, "ownerId": l.OwnerID})
	for {
		ev, ok := stream.next(t)
		if !ok {
			t.Fatalf("the lease stream ended without lease_lost")
		}
		if ev.name != "lease_lost" {
			continue
		}
		m := ev.json(t)
		if m["leaseId"] != id || m["reason"] != "expired" {
			t.Errorf("lease_lost through the gateway = %v, want lease %s, reason expired", m, id)
		}
		break
	}
	if rr := f.api.do("POST", "/v1/leases/"+id+"/renew", agent, ""); rr.status != 404 || rr.errCode() != "UNKNOWN_LEASE" {
		t.Errorf("renew of an expired lease through the gateway: %d %s, want 404 UNKNOWN_LEASE", rr.status, rr.raw)
	}
	w.quiet(500*time.Millisecond, "a renew of a lease the gateway knows expired was forwarded")
	r = f.api.do("POST", "/v1/lease-requests", agent, `{"platform":"ios"}`)
	if r.status != 201 {
		t.Fatalf("a new request of the expired lease's requester: %d %s", r.status, r.raw)
	}
	w.grant(w.serveUntil("lease.request"), "")
	f.api.awaitState(agent, requestOf(t, r)["id"].(string), "granted")
}

// A worker that answers a release, or a release --all, UNKNOWN_LEASE
// proves the gateway's record wrong: release fails UNKNOWN_LEASE under the
// gateway's id, release --all counts the lease released (it is gone), and
// either way the gateway forgets it, so its requester may lease again.
func TestUnknownLeaseOnReleaseAndReleaseAllThroughAGateway(t *testing.T) {
	t.Parallel()
	f := newFleet(t)
	w := f.fakeJoined("fake-unknown", "ios", 4, 4)

	ch := f.gw.runAsync("lease", "--platform", "ios", "--agent-id", "rel-one", "--detach")
	one := w.grant(w.serveUntil("lease.request"), "")
	g := parseGrant(t, strings.TrimSpace(awaitResult(t, ch).stdout))
	rel := f.gw.runAsync("release", "--agent-id", "rel-one", g.Lease.ID)
	c, rr, forwarded := nextOr(w, "lease.release", rel)
	if !forwarded {
		t.Fatalf("the release was not forwarded\n%s", rr)
	}
	w.forget(one.ID)
	w.refuse(c, "UNKNOWN_LEASE", "no active lease "+one.ID)
	e := expectFailure(t, awaitResult(t, rel), 1, "UNKNOWN_LEASE")
	if e["leaseId"] != g.Lease.ID || strings.Contains(message(e), one.ID+" ") {
		t.Errorf("the release's UNKNOWN_LEASE names %v (%q), want the gateway's id %s", e["leaseId"], message(e), g.Lease.ID)
	}

	ch = f.gw.runAsync("lease", "--platform", "ios", "--agent-id", "rel-all", "--detach")
	all := w.grant(w.serveUntil("lease.request"), "")
	g2 := parseGrant(t, strings.TrimSpace(awaitResult(t, ch).stdout))
	ra := f.gw.runAsync("release", "--all", "--yes")
	c, rr, forwarded = nextOr(w, "lease.release", ra)
	if !forwarded {
		t.Fatalf("release --all was not forwarded\n%s", rr)
	}
	w.forget(all.ID)
	w.refuse(c, "UNKNOWN_LEASE", "no active lease "+all.ID)
	r := awaitResult(t, ra)
	var res contract.ReleaseAllResult
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &res) != nil {
		t.Fatalf("release --all whose lease the worker no longer has\n%s", r)
	}
	if len(res.Released) != 1 || res.Released[0] != g2.Lease.ID {
		t.Errorf("release --all released %v, want [%s]", res.Released, g2.Lease.ID)
	}

	// Both forgotten: their requesters lease again.
	for _, agent := range []string{"rel-one", "rel-all"} {
		ch := f.gw.runAsync("lease", "--platform", "ios", "--agent-id", agent, "--detach")
		c, r, sent := nextOr(w, "lease.request", ch)
		if !sent {
			t.Fatalf("%s, whose lease the worker did not know, could not lease again: %s", agent, r)
		}
		w.grant(c, "")
		if r := awaitResult(t, ch); r.code != 0 {
			t.Errorf("%s's new lease\n%s", agent, r)
		}
	}
}
