package e2e

import (
	"strings"
	"testing"
)

// simlock retry cleans a quarantined device now (its backoff is an hour
// away here), and makes a failed lease request again, as it was stored,
// for the same requester; what has not failed is NOT_RETRYABLE, over the
// CLI and HTTP alike.
func TestRetryCleansAQuarantinedDeviceNowAndMakesAFailedRequestAgain(t *testing.T) {
	t.Parallel()
	h, a := httpHome(t, append([]string{"warmPool.quarantine.retryBackoffMs", "3600000",
		"capacity.strategy", "fixed", "capacity.config.maxRunning", "1"}, fastDemo...)...)
	_, ops := h.token("operator", "ops")
	f := h.follow()
	g := h.leaseDetached("a", "ios")
	inject(t, h, g.Device.ID, "reclaim-fail")
	if r := h.run("release", g.Lease.ID, "--agent-id", "a"); r.code != 0 {
		t.Fatalf("release\n%s", r)
	}
	f.next("device.quarantined", isEvent("device.quarantined", "deviceId", g.Device.ID))

	if r := a.do("POST", "/v1/devices/"+g.Device.ID+"/retry", ops, ""); r.status != 200 || r.obj("device")["state"] != "quarantined" {
		t.Fatalf("POST /v1/devices/%s/retry = %d %s, want 200 with the device as found, quarantined", g.Device.ID, r.status, r.raw)
	}
	f.next("device.quarantine-recovered", isEvent("device.quarantine-recovered", "deviceId", g.Device.ID))
	expectFailure(t, h.run("retry", g.Device.ID), 1, "NOT_RETRYABLE")
	if r := a.do("POST", "/v1/devices/"+g.Device.ID+"/retry", ops, ""); r.status != 409 || r.errCode() != "NOT_RETRYABLE" {
		t.Errorf("retry of a device that is not quarantined = %d %s, want 409 NOT_RETRYABLE", r.status, r.raw)
	}

	// A request that failed (it timed out in line on a full machine) is
	// made again.
	held := h.leaseDetached("holder", "ios")
	_, late := h.token("agent", "late")
	r := a.do("POST", "/v1/lease-requests", late, `{"platform":"ios","timeoutMs":1000,"ttlMs":120000}`)
	failed := a.awaitState(late, requestOf(t, r)["id"].(string), "failed", "granted")
	requester, _ := failed["requesterId"].(string)
	if failed["state"] != "failed" {
		t.Fatalf("the request on a full machine = %v, want failed (timed out)", failed)
	}
	list := a.do("GET", "/v1/lease-requests?state=failed", ops, "")
	listed, _ := list.body["requests"].([]any)
	if list.status != 200 || len(listed) != 1 || listed[0].(map[string]any)["id"] != failed["id"] ||
		listed[0].(map[string]any)["error"].(map[string]any)["code"] != "QUEUE_TIMEOUT" {
		t.Errorf("GET /v1/lease-requests?state=failed = %d %s, want the timed-out request with its QUEUE_TIMEOUT", list.status, list.raw)
	}
	if r := h.run("release", held.Lease.ID, "--agent-id", "holder"); r.code != 0 {
		t.Fatalf("release\n%s", r)
	}
	again := h.run("retry", failed["id"].(string))
	if again.code != 0 || !strings.Contains(again.stdout, `"requesterId":"`+requester+`"`) || strings.Contains(again.stdout, failed["id"].(string)) {
		t.Fatalf("simlock retry of the failed request\n%s\nwant a new request for requester %s", again, requester)
	}
	if r := a.do("POST", "/v1/lease-requests/"+failed["id"].(string)+"/retry", ops, ""); r.status != 201 && r.errCode() != "REQUESTER_ALREADY_LEASED" {
		t.Errorf("a second retry over HTTP = %d %s, want 201 or REQUESTER_ALREADY_LEASED (late holds the first retry's lease)", r.status, r.raw)
	}
	if r := a.do("GET", "/v1/lease-requests/"+failed["id"].(string), ops, ""); requestOf(t, r)["state"] != "failed" {
		t.Errorf("the retried request is now %s, want it left failed", r.raw)
	}
	if list := a.do("GET", "/v1/lease-requests?state=failed", ops, ""); list.status != 200 || strings.Contains(list.raw, failed["id"].(string)) {
		t.Errorf("after its retry, GET /v1/lease-requests?state=failed = %d %s, want the retried request gone from it", list.status, list.raw)
	}
	if r := a.do("POST", "/v1/lease-requests/req_nobody/retry", ops, ""); r.status != 404 || r.errCode() != "UNKNOWN_LEASE_REQUEST" {
		t.Errorf("retry of an unknown request = %d %s, want 404 UNKNOWN_LEASE_REQUEST", r.status, r.raw)
	}
	expectFailure(t, h.run("retry", "lse_1"), 2, "USAGE")
}
