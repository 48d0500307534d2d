package e2e

import (
	"encoding/json"
	"strings"
	"testing"
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
