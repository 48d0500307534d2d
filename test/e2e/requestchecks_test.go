package e2e

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
)

// Everything a lease request can be refused for is refused before anything
// starts, on every surface, with exit 2: a TTL with no unit (USAGE, with the
// unit it was likely meant in), a TTL below lease.minTtlMs (BAD_REQUEST
// naming the minimum; over the socket, HTTP and MCP too), a malformed OS
// version (BAD_REQUEST, not RUNTIME_MISSING), and a --bind-pid with no
// process (BAD_REQUEST naming the flag). After them no request was stored,
// no device created and no lease granted.
func TestARefusedRequestStartsNothing(t *testing.T) {
	t.Parallel()
	h, a := httpHome(t)
	f := h.follow()

	gone := sleeper(t)
	deadPID := gone.Process.Pid
	_ = gone.Process.Kill()
	_ = gone.Wait()

	for _, c := range []struct {
		name    string
		args    []string
		code    string
		message string
	}{
		{"a ttl with no unit", []string{"--ttl", "5"}, "USAGE", "--ttl 5 has no unit; did you mean 5m? (a number with ms, s, m, h or d)"},
		{"a timeout with no unit", []string{"--timeout", "30"}, "USAGE", "--timeout 30 has no unit; did you mean 30m? (a number with ms, s, m, h or d)"},
		{"a ttl below the minimum", []string{"--ttl", "5s"}, "BAD_REQUEST", "--ttl 5s is below the 10s minimum (lease.minTtlMs)"},
		{"a malformed os on ios", []string{"--os", "garbage"}, "BAD_REQUEST", `--os garbage: "garbage" is not a version`},
		{"a code name on ios", []string{"--os", "Baklava"}, "BAD_REQUEST", `--os Baklava: iOS versions are numbers`},
		{"a bind-pid with no process", []string{"--bind-pid", strconv.Itoa(deadPID)}, "BAD_REQUEST", "--bind-pid " + strconv.Itoa(deadPID) + ": no process"},
	} {
		r := h.run(append([]string{"lease", "--platform", "ios", "--agent-id", "refused", "--detach"}, c.args...)...)
		e := expectFailure(t, r, 2, c.code)
		if !strings.HasPrefix(message(e), c.message) {
			t.Errorf("%s: message %q, want it to start %q", c.name, message(e), c.message)
		}
	}
	r := h.run("lease", "--platform", "android", "--agent-id", "refused", "--detach", "--os", "garbage")
	if e := expectFailure(t, r, 2, "BAD_REQUEST"); e["flag"] != "--os" {
		t.Errorf("android --os garbage: %v, want BAD_REQUEST naming --os", e)
	}
	if e := expectFailure(t, h.run("lease", "--platform", "ios", "--ttl", "5s", "--detach"), 2, "BAD_REQUEST"); e["minTtlMs"] != float64(10_000) || e["flag"] != "--ttl" {
		t.Errorf("--ttl 5s: %v, want minTtlMs 10000 and flag --ttl", e)
	}

	// The socket.
	rc := h.dial()
	if fr := rc.call("1", "hello", helloInput("raw", "")); fr.Error != nil {
		t.Fatalf("hello: %s", fr.raw)
	}
	fr := rc.call("2", "lease.request", map[string]any{"platform": "ios", "ttlMs": 5})
	expectError(t, fr, "BAD_REQUEST")
	if fr.Error["field"] != "ttlMs" || fr.Error["minTtlMs"] != float64(10_000) {
		t.Errorf("socket ttlMs 5: %s, want BAD_REQUEST naming ttlMs and minTtlMs", fr.raw)
	}

	// HTTP.
	_, agent := h.token("agent", "refused")
	for _, body := range []string{`{"platform":"ios","ttlMs":5}`, `{"platform":"ios","os":"garbage"}`} {
		got := a.do("POST", "/v1/lease-requests", agent, body)
		if got.status != 400 || got.errCode() != "BAD_REQUEST" {
			t.Errorf("POST %s: %d %s, want 400 BAD_REQUEST", body, got.status, got.raw)
		}
	}

	// MCP.
	m := h.mcpConnect("refused-mcp")
	res, out := m.call("lease_simulator", map[string]any{"platform": "ios", "ttlMs": 5}, nil)
	if !res.IsError || out["code"] != "BAD_REQUEST" || out["field"] != "ttlMs" || out["minTtlMs"] != float64(10_000) {
		t.Errorf("MCP ttlMs 5: isError %v, %v; want BAD_REQUEST naming ttlMs and minTtlMs", res.IsError, out)
	}

	// Nothing started.
	if ls := h.leases(); len(ls) != 0 {
		t.Errorf("refused requests left leases: %+v", ls)
	}
	var devs struct {
		Devices []json.RawMessage `json:"devices"`
	}
	if r := h.run("list", "--devices"); r.code != 0 || json.Unmarshal([]byte(r.stdout), &devs) != nil || len(devs.Devices) != 0 {
		t.Errorf("refused requests created devices\n%s", r)
	}
	// A request that is stored is heard; none of the refused ones was.
	g := h.leaseDetached("accepted", "ios", "--ttl", "10m")
	ev := f.next("the first lease.requested", isEvent("lease.requested"))
	if ev.str("requester") != "accepted" {
		t.Errorf("the first request stored is %s's, want the accepted one's", ev.str("requester"))
	}

	// A renewal is bound by the same minimum, and changes nothing.
	r = h.run("lease", "renew", g.Lease.ID, "--agent-id", "accepted", "--ttl", "5s")
	if e := expectFailure(t, r, 2, "BAD_REQUEST"); message(e) != "--ttl 5s is below the 10s minimum (lease.minTtlMs)" {
		t.Errorf("renew --ttl 5s: %q, want it below the 10s minimum", message(e))
	}
	if l := h.leases()[g.Lease.ID]; l.TTLMs != 600_000 {
		t.Errorf("a refused renewal changed the lease's TTL to %d", l.TTLMs)
	}
}
