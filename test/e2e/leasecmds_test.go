package e2e

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// lease cancel, lease list and lease --idempotency-key: what the protocol,
// HTTP and MCP offered, from the CLI.
func TestTheLeaseSubcommandsCancelAWaitingRequestListOnesOwnLeasesAndKeyARequest(t *testing.T) {
	t.Parallel()
	h := newHome(t, append([]string{"capacity.strategy", "fixed", "capacity.config.maxRunning", "1"}, fastDemo...)...)
	blocker := h.leaseDetached("blocker", "ios", "--idempotency-key", "first-try")
	again := h.leaseDetached("blocker", "ios", "--idempotency-key", "first-try")
	if again.Lease.ID != blocker.Lease.ID {
		t.Fatalf("the same key asked again got lease %s, want the first answer's %s", again.Lease.ID, blocker.Lease.ID)
	}
	expectFailure(t, h.run("lease", "--platform", "android", "--agent-id", "blocker", "--idempotency-key", "first-try", "--detach"), 2, "IDEMPOTENCY_CONFLICT")

	waiter := h.start("lease", "--platform", "ios", "--agent-id", "waiter", "--progress", "json")
	waiter.waitLine(waiter.stderr, "the waiter queued", func(l string) bool { return strings.Contains(l, `"stage":"queued"`) })
	r := h.run("lease", "cancel", "--agent-id", "waiter")
	var res struct {
		Outcome   string `json:"outcome"`
		RequestID string `json:"requestId"`
		LeaseID   string `json:"leaseId"`
	}
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &res) != nil || res.Outcome != "cancelled" || !strings.HasPrefix(res.RequestID, "req_") {
		t.Fatalf("lease cancel of the waiting request\n%s", r)
	}
	if code := waiter.wait(); code != 1 || !strings.Contains(waiter.stderr.text(), "CANCELLED") {
		t.Errorf("the waiting holder exited %d, want 1 with CANCELLED\n%s", code, waiter.dump())
	}
	r = h.run("lease", "cancel", "--agent-id", "waiter")
	expectFailure(t, r, 1, "UNKNOWN_LEASE_REQUEST")
	if !strings.Contains(r.stdout, `"outcome":"not-found"`) {
		t.Errorf("a cancel with nothing waiting prints %q, want the not-found outcome", r.stdout)
	}
	r = h.run("lease", "cancel", blocker.RequestID)
	expectFailure(t, r, 1, "REQUEST_NOT_CANCELLABLE")
	if json.Unmarshal([]byte(r.stdout), &res) != nil || res.Outcome != "not-cancellable" || res.LeaseID != blocker.Lease.ID {
		t.Errorf("a cancel of a granted request prints %q, want not-cancellable naming lease %s", r.stdout, blocker.Lease.ID)
	}

	var list struct {
		Leases []leaseRec `json:"leases"`
	}
	r = h.run("lease", "list", "--agent-id", "blocker")
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &list) != nil || len(list.Leases) != 1 || list.Leases[0].ID != blocker.Lease.ID {
		t.Fatalf("lease list of the blocker\n%s", r)
	}
	r = h.run("lease", "list", "--agent-id", "someone-else")
	if r.code != 0 || strings.TrimSpace(r.stdout) != `{"leases":[]}` {
		t.Errorf("lease list of an agent with no lease\n%s", r)
	}
}

// A chosen lease id: the lease has it, it is its owner's alone (another
// agent may choose it too, and each renews and releases its own by it),
// another request of the same owner for it is LEASE_ID_TAKEN while the
// lease lives, it is free once released, and a gateway issues it as is
// and finds it by its grant records alone (the worker names the lease its
// own way: the chosen id is the gateway's, kept within its owner).
func TestAChosenLeaseIDIsTheLeasesIDTakenWhileItLivesAndRoutedByTheGateway(t *testing.T) {
	t.Parallel()
	h := newHome(t, append([]string{"capacity.strategy", "fixed", "capacity.config.maxRunning", "3"}, fastDemo...)...)
	r := h.run("lease", "--platform", "ios", "--agent-id", "a", "--lease-id", "ui-tests-42", "--detach")
	if r.code != 0 || !strings.Contains(r.stdout, `"idChosenByRequester":true`) {
		t.Fatalf("a lease with a chosen id\n%s", r)
	}
	ga := parseGrant(t, r.stdout)
	if ga.Lease.ID != "ui-tests-42" {
		t.Fatalf("the lease's id is %s, want the chosen ui-tests-42", ga.Lease.ID)
	}
	r = h.run("lease", "--platform", "ios", "--agent-id", "b", "--lease-id", "ui-tests-42", "--detach")
	if r.code != 0 {
		t.Fatalf("another agent choosing the same id\n%s", r)
	}
	if gb := parseGrant(t, r.stdout); gb.Lease.ID != "ui-tests-42" || gb.Device.ID == ga.Device.ID {
		t.Fatalf("agent b's lease %s on %s, want its own ui-tests-42", gb.Lease.ID, gb.Device.ID)
	}
	// The same owner, from another of its requesters.
	rc := h.dial()
	rc.call("1", "hello", map[string]any{"protocol": map[string]int{"min": 1, "max": 1}, "principal": "a"})
	if f := rc.call("2", "lease.request", map[string]any{"platform": "ios", "requesterId": "a/second", "leaseId": "ui-tests-42", "noWait": true}); f.code() != "LEASE_ID_TAKEN" {
		t.Errorf("agent a choosing its own lease's id again: %s, want LEASE_ID_TAKEN", f.raw)
	}
	expectFailure(t, h.run("lease", "--platform", "ios", "--agent-id", "b", "--lease-id", "has.a.dot", "--detach"), 2, "BAD_REQUEST")
	for _, agent := range []string{"a", "b"} {
		if r := h.run("lease", "renew", "ui-tests-42", "--agent-id", agent); r.code != 0 {
			t.Errorf("renew by the chosen id as %s\n%s", agent, r)
		}
	}
	if r := h.run("release", "ui-tests-42", "--agent-id", "a"); r.code != 0 {
		t.Fatalf("release by the chosen id\n%s", r)
	}
	if ls := h.leases(); len(ls) != 1 {
		t.Errorf("%d leases after a released its ui-tests-42, want b's kept", len(ls))
	}
	if r := h.run("release", "ui-tests-42", "--agent-id", "b"); r.code != 0 {
		t.Fatalf("release by the chosen id as b\n%s", r)
	}
	if r := h.run("lease", "--platform", "ios", "--agent-id", "a", "--lease-id", "ui-tests-42", "--detach"); r.code != 0 {
		t.Errorf("the chosen id once its lease ended\n%s", r)
	}

	f := newFleet(t)
	w := f.worker("worker-a", 2)
	f.await("worker A connected", 10*time.Second, connected(instanceID(t, w)))
	r = f.gw.run("lease", "--platform", "ios", "--agent-id", "c", "--lease-id", "fleet-7", "--detach")
	if r.code != 0 {
		t.Fatalf("a chosen id through the gateway\n%s", r)
	}
	if g := parseGrant(t, r.stdout); g.Lease.ID != "fleet-7" {
		t.Errorf("the gateway's lease id is %s, want the chosen fleet-7", g.Lease.ID)
	}
	// Another owner's fleet-7 is its own, beside c's.
	if r := f.gw.run("lease", "--platform", "ios", "--agent-id", "d", "--lease-id", "fleet-7", "--detach"); r.code != 0 {
		t.Fatalf("another agent choosing fleet-7 through the gateway\n%s", r)
	}
	for _, who := range []string{"c", "d"} {
		if r := f.gw.run("lease", "renew", "fleet-7", "--agent-id", who); r.code != 0 {
			t.Errorf("renew of %s's fleet-7 by the chosen id through the gateway\n%s", who, r)
		}
	}
	expectFailure(t, f.gw.run("lease", "renew", "fleet-7"), 2, "BAD_REQUEST")
	expectFailure(t, f.gw.run("lease", "renew", "fleet-8", "--agent-id", "c"), 1, "UNKNOWN_LEASE")
	if ls := w.leases(); len(ls) != 2 {
		t.Errorf("the worker holds %d leases, want c's and d's", len(ls))
	} else if _, ok := ls["fleet-7"]; ok {
		t.Errorf("the worker's lease is under the gateway's chosen id, which another owner's could collide with there: %v", ls)
	}
	if r := f.gw.run("release", "fleet-7", "--agent-id", "d"); r.code != 0 {
		t.Errorf("release of d's fleet-7 through the gateway\n%s", r)
	}
	if r := f.gw.run("release", "fleet-7", "--agent-id", "c"); r.code != 0 {
		t.Errorf("release of c's fleet-7 through the gateway\n%s", r)
	}
}

// lease cancel over a remote profile: the request named by its id is
// cancelled through DELETE /v1/lease-requests/{id}, with the outcomes and
// exits the socket's cancel has; without an id it is a usage error.
func TestLeaseCancelOverARemoteProfile(t *testing.T) {
	t.Parallel()
	h, _ := httpHome(t, "capacity.strategy", "fixed", "capacity.config.maxRunning", "1")
	_, holderSecret := h.token("agent", "remote-holder")
	_, secret := h.token("agent", "remote-agent")
	holder, rem := remoteHome(t, httpURL(t, h), holderSecret), remoteHome(t, httpURL(t, h), secret)
	blocker := parseGrant(t, holder.run("lease", "--platform", "ios", "--detach").stdout)
	waiter := rem.start("lease", "--platform", "ios", "--progress", "json")
	waiter.waitLine(waiter.stderr, "the waiter queued", func(l string) bool { return strings.Contains(l, `"stage":"queued"`) })
	var open struct {
		Requests []struct {
			ID string `json:"id"`
		} `json:"requests"`
	}
	if r := h.run("list", "--requests"); r.code != 0 || json.Unmarshal([]byte(r.stdout), &open) != nil || len(open.Requests) != 1 {
		t.Fatalf("the waiting request on the daemon's machine\n%s", r)
	}
	id := open.Requests[0].ID
	var res struct {
		Outcome   string `json:"outcome"`
		RequestID string `json:"requestId"`
		LeaseID   string `json:"leaseId"`
	}
	r := rem.run("lease", "cancel", id)
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &res) != nil || res.Outcome != "cancelled" || res.RequestID != id {
		t.Fatalf("remote lease cancel of the waiting request\n%s", r)
	}
	if code := waiter.wait(); code != 1 || !strings.Contains(waiter.stderr.text(), "CANCELLED") {
		t.Errorf("the waiting remote holder exited %d, want 1 with CANCELLED\n%s", code, waiter.dump())
	}
	r = rem.run("lease", "cancel", "req_0000000000000000")
	expectFailure(t, r, 1, "UNKNOWN_LEASE_REQUEST")
	if !strings.Contains(r.stdout, `"outcome":"not-found"`) {
		t.Errorf("a remote cancel of no request prints %q, want the not-found outcome", r.stdout)
	}
	// Another agent's request is not found, as over the socket.
	expectFailure(t, rem.run("lease", "cancel", blocker.RequestID), 1, "UNKNOWN_LEASE_REQUEST")
	r = holder.run("lease", "cancel", blocker.RequestID)
	expectFailure(t, r, 1, "REQUEST_NOT_CANCELLABLE")
	if json.Unmarshal([]byte(r.stdout), &res) != nil || res.Outcome != "not-cancellable" || res.LeaseID != blocker.Lease.ID {
		t.Errorf("a remote cancel of a granted request prints %q, want not-cancellable naming lease %s", r.stdout, blocker.Lease.ID)
	}
	expectFailure(t, rem.run("lease", "cancel"), 2, "USAGE")
}
