package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
)

// status is the part of status.get these tests read.
type status struct {
	Daemon struct {
		PID      int    `json:"pid"`
		Health   string `json:"health"`
		Protocol struct {
			Min int `json:"min"`
			Max int `json:"max"`
		} `json:"protocol"`
	} `json:"daemon"`
}

// Bad frames get their error and the session goes on; a version mismatch is
// refused with both ranges; another client is served meanwhile.
func TestBadFramesKeepSessionAlive(t *testing.T) {
	t.Parallel()
	h := newHome(t, fastDemo...)
	pid := h.startDaemon()
	rc := h.dial()

	// Garbage.
	rc.write([]byte("not json\n"))
	f := rc.await("null")
	expectError(t, f, "BAD_FRAME")

	// Another client leases while this session misbehaves.
	other := h.runAsync("lease", "--platform", "android", "--detach", "--agent-id", "other")

	// A frame over 1 MiB, then a well-formed but unknown top-level field.
	big := bytes.Repeat([]byte("a"), 1<<20)
	rc.write(append(append([]byte(`{"id":"big","op":"status.get","input":{"pad":"`), big...), []byte("\"}}\n")...))
	f = rc.await("null")
	expectError(t, f, "BAD_FRAME")
	if max, _ := f.Error["maxBytes"].(float64); max != 1<<20 {
		t.Errorf("oversized frame: maxBytes = %v, want %d: %s", f.Error["maxBytes"], 1<<20, f.raw)
	}
	rc.write([]byte(`{"id":"5","op":"status.get","extra":true}` + "\n"))
	expectError(t, rc.await(`"5"`), "BAD_FRAME")

	// Before hello.
	expectError(t, rc.call("6", "status.get", nil), "HANDSHAKE_REQUIRED")
	expectError(t, rc.call("7", "lease.request", map[string]any{"platform": "ios"}), "HANDSHAKE_REQUIRED")

	var hello struct {
		Protocol  int    `json:"protocol"`
		Role      string `json:"role"`
		Principal string `json:"principal"`
	}
	expectResult(t, rc.call("8", "hello", helloInput("raw-client", "")), &hello)
	if hello.Protocol != 1 || hello.Role != "agent" || hello.Principal != "raw-client" {
		t.Errorf("hello result: %+v", hello)
	}
	statusOK := func(id string) status {
		t.Helper()
		var st status
		expectResult(t, rc.call(id, "status.get", nil), &st)
		if st.Daemon.PID != pid || st.Daemon.Health != "running" {
			t.Fatalf("status.get: pid %d health %q, want pid %d running", st.Daemon.PID, st.Daemon.Health, pid)
		}
		return st
	}
	st := statusOK("s1")

	f = rc.call("9", "nope", nil)
	expectError(t, f, "UNKNOWN_REQUEST")
	if f.Error["op"] != "nope" {
		t.Errorf("UNKNOWN_REQUEST does not name the op: %s", f.raw)
	}
	statusOK("s2")

	f = rc.call("10", "lease.request", map[string]any{"platform": "ios", "bogusField": 1})
	expectError(t, f, "BAD_REQUEST")
	if f.Error["field"] != "bogusField" || !strings.Contains(message(f.Error), "bogusField") {
		t.Errorf("BAD_REQUEST does not name the unknown field: %s", f.raw)
	}
	statusOK("s3")

	// A client speaking only a future protocol, on its own connection.
	rc2 := h.dial()
	f = rc2.call("1", "hello", map[string]any{"protocol": map[string]int{"min": 99, "max": 100}})
	expectError(t, f, "PROTOCOL_VERSION_UNSUPPORTED")
	var ranges struct {
		Client *struct{ Min, Max int } `json:"client"`
		Daemon *struct{ Min, Max int } `json:"daemon"`
	}
	b, _ := json.Marshal(f.Error)
	_ = json.Unmarshal(b, &ranges)
	if ranges.Client == nil || ranges.Client.Min != 99 || ranges.Client.Max != 100 {
		t.Errorf("details.client is not {99,100}: %s", f.raw)
	}
	if ranges.Daemon == nil || ranges.Daemon.Min != st.Daemon.Protocol.Min || ranges.Daemon.Max != st.Daemon.Protocol.Max {
		t.Errorf("details.daemon is not the daemon's range %+v: %s", st.Daemon.Protocol, f.raw)
	}
	// The refused hello opened no session; a good one still can.
	expectError(t, rc2.call("2", "status.get", nil), "HANDSHAKE_REQUIRED")
	expectResult(t, rc2.call("3", "hello", helloInput("raw-client-2", "")), nil)
	var st2 status
	expectResult(t, rc2.call("4", "status.get", nil), &st2)
	if st2.Daemon.PID != pid {
		t.Errorf("status.get on the second connection: pid %d, want %d", st2.Daemon.PID, pid)
	}

	r := awaitResult(t, other)
	if r.code != 0 {
		t.Fatalf("the other client's lease failed\n%s", r)
	}
	g := parseGrant(t, strings.TrimSpace(r.stdout))
	if g.Device.Spec.Platform != "android" || g.Lease.RequesterID != "other" {
		t.Errorf("the other client's grant: platform %q requester %q", g.Device.Spec.Platform, g.Lease.RequesterID)
	}
	statusOK("s4")
}

// Roles: an agent session may not use admin operations or touch another
// principal's lease; a wrong admin token is refused; the token file is
// private.
func TestRoles(t *testing.T) {
	t.Parallel()
	h := newHome(t, fastDemo...)
	g := h.leaseDetached("owner", "ios", "--ttl", "10m")
	lease := map[string]any{"leaseId": g.Lease.ID}

	fi, err := os.Stat(h.path("admin.token"))
	if err != nil {
		t.Fatal(err)
	}
	if mode := fi.Mode(); mode.Perm() != 0o600 || !mode.IsRegular() {
		t.Errorf("admin.token mode = %v, want -rw-------", mode)
	}

	agent := h.dial()
	var hello struct {
		Role      string `json:"role"`
		Principal string `json:"principal"`
	}
	expectResult(t, agent.call("1", "hello", helloInput("intruder", "")), &hello)
	if hello.Role != "agent" || hello.Principal != "intruder" {
		t.Fatalf("hello without a token: %+v, want role agent", hello)
	}
	for i, op := range []string{"list.get", "events.subscribe", "events.replay", "config.get", "lease.release-all", "daemon.stop"} {
		f := agent.call(fmt.Sprintf("admin-%d", i), op, nil)
		expectError(t, f, "FORBIDDEN")
	}
	expectError(t, agent.call("2", "lease.renew", lease), "FORBIDDEN")
	expectError(t, agent.call("3", "lease.release", lease), "FORBIDDEN")
	var mine struct {
		Leases []leaseRec `json:"leases"`
	}
	expectResult(t, agent.call("4", "lease.list", nil), &mine)
	if len(mine.Leases) != 0 {
		t.Errorf("lease.list shows an agent another principal's leases: %+v", mine.Leases)
	}

	// Nothing happened to the lease.
	if got := h.leases()[g.Lease.ID]; got != g.Lease {
		t.Errorf("the owner's lease changed after forbidden calls:\nbefore %+v\nafter  %+v", g.Lease, got)
	}

	// The owner itself may renew it.
	owner := h.dial()
	expectResult(t, owner.call("1", "hello", helloInput("owner", "")), nil)
	var rec leaseRec
	expectResult(t, owner.call("2", "lease.renew", lease), &rec)
	if rec.ID != g.Lease.ID || rec.TTLDeadline < g.Lease.TTLDeadline {
		t.Errorf("owner's renew: %+v", rec)
	}

	// A wrong token opens no session.
	wrong := h.dial()
	expectError(t, wrong.call("1", "hello", helloInput("x", "not-the-token")), "ADMIN_AUTHENTICATION_FAILED")
	expectError(t, wrong.call("2", "list.get", map[string]any{"kind": "leases"}), "HANDSHAKE_REQUIRED")
	r := h.run("list", "--leases", "--token", "not-the-token")
	expectFailure(t, r, 1, "ADMIN_AUTHENTICATION_FAILED")

	// The right token gives the admin role.
	admin := h.dial()
	expectResult(t, admin.call("1", "hello", helloInput("op", h.adminToken())), &hello)
	if hello.Role != "admin" {
		t.Fatalf("hello with the admin token: role %q", hello.Role)
	}
	var list struct {
		Leases []leaseRec `json:"leases"`
	}
	expectResult(t, admin.call("2", "list.get", map[string]any{"kind": "leases"}), &list)
	if len(list.Leases) != 1 || list.Leases[0].ID != g.Lease.ID {
		t.Errorf("admin list.get leases: %+v", list.Leases)
	}
}
