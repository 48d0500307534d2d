package httpapi_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/httpapi"
)

func TestHealthzNeedsNoToken(t *testing.T) {
	h := newHarness(t, httpapi.Options{})
	m := readJSON(t, h.do("GET", "/v1/healthz", "", ""), http.StatusOK)
	if m["ok"] != true {
		t.Fatalf("healthz body %v", m)
	}
	if n := h.fake.callCount(); n != 0 {
		t.Fatalf("healthz called the backend %d times", n)
	}
}

func TestUnauthenticated(t *testing.T) {
	h := newHarness(t, httpapi.Options{})
	h.fake.answer(contract.OpStatusGet, contract.Status{}, nil)
	for name, auth := range map[string]string{
		"missing":        "",
		"other scheme":   "Basic " + agentSecret,
		"empty bearer":   "Bearer ",
		"unknown secret": "Bearer slk_nobody",
		"no scheme":      agentSecret,
	} {
		t.Run(name, func(t *testing.T) {
			req := h.request(t.Context(), "GET", "/v1/status", "", "")
			if auth != "" {
				req.Header.Set("Authorization", auth)
			}
			resp := h.send(req)
			readError(t, resp, contract.CodeUnauthenticated)
			if got := resp.Header.Get("WWW-Authenticate"); got != "Bearer" {
				t.Fatalf("WWW-Authenticate %q", got)
			}
		})
	}
	if n := len(h.fake.callsOf(contract.OpStatusGet)); n != 0 {
		t.Fatalf("an unauthenticated request reached the backend %d times", n)
	}
	// The same route with a good token works, so the 401s above are auth.
	readJSON(t, h.do("GET", "/v1/status", agentSecret, ""), http.StatusOK)
}

func TestAWorkerTokenOpensOnlyTheUplinkAndOnlyAWorkerTokenOpensIt(t *testing.T) {
	h := newHarness(t, httpapi.Options{})
	h.fake.answer(contract.OpStatusGet, contract.Status{}, nil)
	readError(t, h.do("GET", "/v1/status", workerSecret, ""), contract.CodeForbidden)
	if n := h.fake.callCount(); n != 0 {
		t.Errorf("a worker token's status request reached the backend %d times", n)
	}
	readError(t, h.do("GET", "/v1/uplink", "", ""), contract.CodeUnauthenticated)
	readError(t, h.do("GET", "/v1/uplink", "slk_nobody", ""), contract.CodeUnauthenticated)
	readError(t, h.do("GET", "/v1/uplink", agentSecret, ""), contract.CodeForbidden)
	readError(t, h.do("GET", "/v1/uplink", operatorSecret, ""), contract.CodeForbidden)
	h.fake.mu.Lock()
	refused, uplinks := slices.Clone(h.fake.refused), slices.Clone(h.fake.uplinks)
	h.fake.mu.Unlock()
	want := []contract.Code{contract.CodeUnauthenticated, contract.CodeUnauthenticated, contract.CodeForbidden, contract.CodeForbidden}
	if !slices.Equal(refused, want) || len(uplinks) != 0 {
		t.Fatalf("refusals told %v and uplinks served %v, want %v and none", refused, uplinks, want)
	}
	if resp := h.do("GET", "/v1/uplink", workerSecret, ""); resp.StatusCode != http.StatusNoContent {
		t.Fatalf("a worker token's uplink: status %d, want it served", resp.StatusCode)
	}
	h.fake.mu.Lock()
	defer h.fake.mu.Unlock()
	if len(h.fake.uplinks) != 1 || h.fake.uplinks[0].ID != workerToken.ID {
		t.Errorf("uplinks served %v, want the worker token's", h.fake.uplinks)
	}
}

func TestStatusPassesThrough(t *testing.T) {
	h := newHarness(t, httpapi.Options{})
	h.fake.answer(contract.OpStatusGet, contract.Status{
		Daemon:     contract.DaemonInfo{Version: "1.2.3", HTTPURL: "http://127.0.0.1:7420"},
		QueueDepth: 2,
	}, nil)
	m := readJSON(t, h.do("GET", "/v1/status", agentSecret, ""), http.StatusOK)
	daemon, _ := m["daemon"].(map[string]any)
	if daemon["httpUrl"] != "http://127.0.0.1:7420" || m["queueDepth"] != float64(2) {
		t.Fatalf("status body %v", m)
	}
}

func TestStatusSummaryIsAskedOfTheDaemonAndABadValueIsRefused(t *testing.T) {
	h := newHarness(t, httpapi.Options{})
	h.fake.answer(contract.OpStatusGet, contract.Status{}, nil)
	readJSON(t, h.do("GET", "/v1/status?summary=true", agentSecret, ""), http.StatusOK)
	calls := h.fake.callsOf(contract.OpStatusGet)
	if len(calls) != 1 || string(calls[0].Input) != `{"summary":true}` {
		t.Fatalf("status.get was called with %v, want one call with summary true", calls)
	}
	e := readError(t, h.do("GET", "/v1/status?summary=maybe", agentSecret, ""), contract.CodeBadRequest)
	if e["field"] != "summary" {
		t.Fatalf("error %+v, want one naming summary", e)
	}
	if n := len(h.fake.callsOf(contract.OpStatusGet)); n != 1 {
		t.Fatalf("a bad summary reached the daemon (%d calls)", n)
	}
}

func TestOperatorRoutesRefuseAgents(t *testing.T) {
	h := newHarness(t, httpapi.Options{})
	h.fake.answer(contract.OpListGet, contract.ListGetResult{}, nil)
	for _, path := range []string{"/v1/devices", "/v1/lease-requests", "/v1/events", "/v1/events/stream", "/v1/tokens"} {
		readError(t, h.do("GET", path, agentSecret, ""), contract.CodeForbidden)
	}
	if n := h.fake.callCount(); n != 0 {
		t.Fatalf("agent requests on operator routes reached the backend %d times", n)
	}
	m := readJSON(t, h.do("GET", "/v1/devices", operatorSecret, ""), http.StatusOK)
	if devs, ok := m["devices"].([]any); !ok || len(devs) != 0 {
		t.Fatalf("devices %v, want an empty array", m)
	}
	c := h.fake.callsOf(contract.OpListGet)[0]
	if in := decodeInput[contract.ListGetInput](t, c); in.Kind != contract.ListDevices || c.Token.ID != operatorToken.ID {
		t.Fatalf("list.get call %+v", c)
	}
}

// The retry routes are operators' only, and a bad id or list state is a
// BAD_REQUEST naming the field; none of them reaches the daemon.
func TestRetryAndFailedListRoutesRefuseBadInputBeforeTheDaemon(t *testing.T) {
	h := newHarness(t, httpapi.Options{})
	for _, path := range []string{"/v1/devices/dev_1/retry", "/v1/lease-requests/req_1/retry"} {
		readError(t, h.do("POST", path, agentSecret, ""), contract.CodeForbidden)
	}
	for path, field := range map[string]string{
		"/v1/devices/bad!id/retry":        "deviceId",
		"/v1/lease-requests/bad!id/retry": "requestId",
	} {
		if e := readError(t, h.do("POST", path, operatorSecret, ""), contract.CodeBadRequest); e["field"] != field {
			t.Errorf("POST %.40s…: %v, want BAD_REQUEST on %s", path, e, field)
		}
	}
	if e := readError(t, h.do("GET", "/v1/lease-requests?state=closed", operatorSecret, ""), contract.CodeBadRequest); e["field"] != "state" {
		t.Errorf("state=closed: %v, want BAD_REQUEST on state", e)
	}
	if n := h.fake.callCount(); n != 0 {
		t.Errorf("refused requests reached the backend %d times", n)
	}
}

func TestUnknownRouteAndWrongMethodAreJSON(t *testing.T) {
	h := newHarness(t, httpapi.Options{})
	readError(t, h.do("GET", "/nope", agentSecret, ""), contract.CodeUnknownRoute)
	readError(t, h.do("GET", "/v1/nope", agentSecret, ""), contract.CodeUnknownRoute)
	readError(t, h.do("GET", "/v1/leases/lse_1/nope", "", ""), contract.CodeUnknownRoute)
	// Unclean paths are not redirected to a route they might resemble.
	for _, p := range []string{"/v1/lease-requests//events", "/v1/leases/", "/v1/./status"} {
		req := h.request(t.Context(), "GET", "", agentSecret, "")
		req.URL.Path = p
		readError(t, h.send(req), contract.CodeUnknownRoute)
	}

	resp := h.do("PUT", "/v1/status", agentSecret, "")
	readError(t, resp, contract.CodeMethodNotAllowed)
	if allow := resp.Header.Get("Allow"); !strings.Contains(allow, "GET") || strings.Contains(allow, "PUT") {
		t.Fatalf("Allow %q", allow)
	}
	resp = h.do("GET", "/v1/leases/lse_1/renew", agentSecret, "")
	readError(t, resp, contract.CodeMethodNotAllowed)
	if allow := resp.Header.Get("Allow"); allow != "POST" {
		t.Fatalf("Allow %q, want POST", allow)
	}
}

func TestBodyTooLarge(t *testing.T) {
	h := newHarness(t, httpapi.Options{})
	h.fake.answer(contract.OpLeaseRequestCreate, reqStatus(1, contract.RequestQueued, nil), nil)
	big := `{"platform":"ios","device":"` + strings.Repeat("x", 64<<10) + `"}`

	e := readError(t, h.do("POST", "/v1/lease-requests", agentSecret, big), contract.CodeBodyTooLarge)
	if e["maxBytes"] != float64(64<<10) {
		t.Fatalf("maxBytes %v", e["maxBytes"])
	}
	// Without a Content-Length the limit is found by reading.
	req := h.request(t.Context(), "POST", "/v1/lease-requests", agentSecret, big)
	req.Body = io.NopCloser(io.MultiReader(strings.NewReader(big)))
	req.ContentLength = -1
	readError(t, h.send(req), contract.CodeBodyTooLarge)

	if n := h.fake.callCount(); n != 0 {
		t.Fatalf("oversized bodies reached the backend %d times", n)
	}
}

func TestMaxBodyOption(t *testing.T) {
	h := newHarness(t, httpapi.Options{MaxBody: 10})
	e := readError(t, h.do("POST", "/v1/lease-requests", agentSecret, `{"platform":"ios"}`), contract.CodeBodyTooLarge)
	if e["maxBytes"] != float64(10) {
		t.Fatalf("maxBytes %v", e["maxBytes"])
	}
}

func TestUnsupportedMediaType(t *testing.T) {
	h := newHarness(t, httpapi.Options{})
	h.fake.answer(contract.OpLeaseRequestCreate, reqStatus(1, contract.RequestQueued, nil), nil)
	for _, ct := range []string{"text/plain", "", "application/x-www-form-urlencoded"} {
		req := h.request(t.Context(), "POST", "/v1/lease-requests", agentSecret, `{"platform":"ios"}`)
		req.Header.Set("Content-Type", ct)
		readError(t, h.send(req), contract.CodeUnsupportedMediaType)
	}
	req := h.request(t.Context(), "POST", "/v1/lease-requests", agentSecret, `{"platform":"ios"}`)
	req.Header.Set("Content-Type", "application/json; charset=utf-8")
	readJSON(t, h.send(req), http.StatusCreated)
}

func TestBadBodyNamesTheField(t *testing.T) {
	h := newHarness(t, httpapi.Options{})
	h.fake.answer(contract.OpLeaseRequestCreate, reqStatus(1, contract.RequestQueued, nil), nil)
	for body, field := range map[string]string{
		`{"platform":"ios","colour":"red"}`:                 "colour",
		`{"platform":"ios","model":"iPhone 16"}`:            "model", // the contract's name is not the HTTP one
		`{"platform":"ios","os":"18.x"}`:                    "os",
		`{"platform":"ios","device":"iPhone","class":"tv"}`: "class",
		`{"platform":"ios","ttlMs":"long"}`:                 "ttlMs",
		`{}`:                                                "platform",
	} {
		e := readError(t, h.do("POST", "/v1/lease-requests", agentSecret, body), contract.CodeBadRequest)
		if e["field"] != field {
			t.Errorf("body %s: field %v, want %s (%v)", body, e["field"], field, e)
		}
	}
	if n := h.fake.callCount(); n != 0 {
		t.Fatalf("bad bodies reached the backend %d times", n)
	}
}

func TestAgentCannotSeeOthersLeases(t *testing.T) {
	h := newHarness(t, httpapi.Options{})
	forbidden := contract.Errorf(contract.CodeForbidden, "lease lse_2 belongs to someone else")
	h.fake.answer(contract.OpLeaseGet, nil, forbidden)
	h.fake.answer(contract.OpLeaseRenew, nil, forbidden)
	h.fake.answer(contract.OpLeaseRelease, nil, forbidden)
	h.fake.answer(contract.OpLeaseWatch, nil, forbidden)
	h.fake.answer(contract.OpDeviceExec, nil, forbidden)
	h.fake.answer(contract.OpLeaseRequestGet, nil, forbidden)
	h.fake.answer(contract.OpLeaseCancel, nil, forbidden)

	for _, rt := range []struct{ method, path, body string }{
		{"GET", "/v1/leases/lse_2", ""},
		{"POST", "/v1/leases/lse_2/renew", ""},
		{"DELETE", "/v1/leases/lse_2", ""},
		{"GET", "/v1/leases/lse_2/events", ""},
		{"POST", "/v1/leases/lse_2/exec", `{"tool":"simctl","args":["list"]}`},
	} {
		e := readError(t, h.do(rt.method, rt.path, agentSecret, rt.body), contract.CodeUnknownLease)
		if e["leaseId"] != "lse_2" || strings.Contains(e["message"].(string), "someone else") {
			t.Errorf("%s %s: %v", rt.method, rt.path, e)
		}
	}
	for _, rt := range []struct{ method, path string }{
		{"GET", "/v1/lease-requests/req_2"},
		{"GET", "/v1/lease-requests/req_2/events"},
		{"DELETE", "/v1/lease-requests/req_2"},
	} {
		e := readError(t, h.do(rt.method, rt.path, agentSecret, ""), contract.CodeUnknownLeaseRequest)
		if e["requestId"] != "req_2" {
			t.Errorf("%s %s: %v", rt.method, rt.path, e)
		}
	}
	// An operator is told the truth.
	readError(t, h.do("GET", "/v1/leases/lse_2", operatorSecret, ""), contract.CodeForbidden)
	readError(t, h.do("GET", "/v1/lease-requests/req_2", operatorSecret, ""), contract.CodeForbidden)
}

func TestCreateLeaseRequest(t *testing.T) {
	h := newHarness(t, httpapi.Options{})
	st := reqStatus(1, contract.RequestQueued, &contract.LeaseProgress{Stage: contract.StageQueued, QueuePosition: 2})
	h.fake.answer(contract.OpLeaseRequestCreate, st, nil)

	req := h.request(t.Context(), "POST", "/v1/lease-requests", agentSecret,
		`{"platform":"ios","device":"iPhone 16","os":"18","ttlMs":600000,"timeoutMs":30000}`)
	req.Header.Set("Idempotency-Key", "run-42/step-1")
	resp := h.send(req)
	m := readJSON(t, resp, http.StatusCreated)
	if loc := resp.Header.Get("Location"); loc != "/v1/lease-requests/req_1" {
		t.Fatalf("Location %q", loc)
	}
	v, _ := m["request"].(map[string]any)
	want := map[string]any{
		"id": "req_1", "requesterId": agentToken.ID, "state": "queued",
		"queuePosition": float64(2), "createdAt": "2026-11-30T03:09:55.501Z",
	}
	for k, w := range want {
		if v[k] != w {
			t.Errorf("request.%s = %v, want %v", k, v[k], w)
		}
	}
	if spec, _ := v["spec"].(map[string]any); spec["model"] != "iPhone 16" {
		t.Errorf("request.spec %v", v["spec"])
	}
	for _, k := range []string{"etaMs", "lease", "error", "settledAt"} {
		if _, ok := v[k]; ok {
			t.Errorf("a queued request shows %s: %v", k, v)
		}
	}

	calls := h.fake.callsOf(contract.OpLeaseRequestCreate)
	if len(calls) != 1 || calls[0].Token.ID != agentToken.ID {
		t.Fatalf("calls %+v", calls)
	}
	in := decodeInput[contract.LeaseRequestInput](t, calls[0])
	wantIn := contract.LeaseRequestInput{
		Platform: contract.PlatformIOS, Model: "iPhone 16", OSVersion: "18",
		TTLMs: 600000, TimeoutMs: 30000, IdempotencyKey: "run-42/step-1",
	}
	if in != wantIn {
		t.Fatalf("input %+v, want %+v", in, wantIn)
	}
}

func TestCreateLeaseRequestChecksIdempotencyKey(t *testing.T) {
	h := newHarness(t, httpapi.Options{})
	h.fake.answer(contract.OpLeaseRequestCreate, reqStatus(1, contract.RequestQueued, nil), nil)
	for _, key := range []string{"", strings.Repeat("k", 201), "caf\u00e9", "tab\there"} {
		req := h.request(t.Context(), "POST", "/v1/lease-requests", agentSecret, `{"platform":"ios"}`)
		req.Header["Idempotency-Key"] = []string{key}
		e := readError(t, h.send(req), contract.CodeBadRequest)
		if e["field"] != "Idempotency-Key" {
			t.Errorf("key %q: %v", key, e)
		}
	}
	if n := h.fake.callCount(); n != 0 {
		t.Fatalf("bad keys reached the backend %d times", n)
	}
	// 200 characters is fine.
	req := h.request(t.Context(), "POST", "/v1/lease-requests", agentSecret, `{"platform":"ios"}`)
	req.Header.Set("Idempotency-Key", strings.Repeat("k", 200))
	readJSON(t, h.send(req), http.StatusCreated)
}

func TestNoCapacitySetsRetryAfter(t *testing.T) {
	h := newHarness(t, httpapi.Options{})
	h.fake.answer(contract.OpLeaseRequestCreate, nil, contract.Errorf(contract.CodeNoCapacity, "no device is free"))
	resp := h.do("POST", "/v1/lease-requests", agentSecret, `{"platform":"ios","noWait":true}`)
	readError(t, resp, contract.CodeNoCapacity)
	if got := resp.Header.Get("Retry-After"); got != "5" {
		t.Fatalf("Retry-After %q", got)
	}
}

func TestNonContractErrorIsInternal(t *testing.T) {
	h := newHarness(t, httpapi.Options{})
	h.fake.answer(contract.OpLeaseList, nil, fmt.Errorf("disk on fire"))
	readError(t, h.do("GET", "/v1/leases", agentSecret, ""), contract.CodeInternal)
}

func TestGetLeaseRequestLongPoll(t *testing.T) {
	h := newHarness(t, httpapi.Options{})
	h.fake.on(contract.OpLeaseRequestGet, func(_ context.Context, c fakeCall, _ func(contract.Push)) (any, error) {
		in := decodeInput[contract.LeaseRequestGetInput](t, c)
		if in.AfterRev == 0 {
			return reqStatus(3, contract.RequestQueued, nil), nil
		}
		return reqStatus(4, contract.RequestStarting, &contract.LeaseProgress{Stage: contract.StageBooting, EtaMs: 2000}), nil
	})
	get := func(query string) []contract.LeaseRequestGetInput {
		t.Helper()
		before := len(h.fake.callsOf(contract.OpLeaseRequestGet))
		m := readJSON(t, h.do("GET", "/v1/lease-requests/req_1"+query, agentSecret, ""), http.StatusOK)
		if _, ok := m["request"].(map[string]any); !ok {
			t.Fatalf("body %v", m)
		}
		var ins []contract.LeaseRequestGetInput
		for _, c := range h.fake.callsOf(contract.OpLeaseRequestGet)[before:] {
			ins = append(ins, decodeInput[contract.LeaseRequestGetInput](t, c))
		}
		return ins
	}

	if ins := get(""); len(ins) != 1 || ins[0] != (contract.LeaseRequestGetInput{RequestID: "req_1"}) {
		t.Fatalf("without wait: %+v", ins)
	}
	if ins := get("?wait=0"); len(ins) != 1 {
		t.Fatalf("wait=0: %+v", ins)
	}
	ins := get("?wait=5")
	if len(ins) != 2 || ins[0] != (contract.LeaseRequestGetInput{RequestID: "req_1"}) ||
		ins[1] != (contract.LeaseRequestGetInput{RequestID: "req_1", AfterRev: 3, WaitMs: 5000}) {
		t.Fatalf("wait=5: %+v", ins)
	}
	if ins := get("?wait=600"); len(ins) != 2 || ins[1].WaitMs != 60000 {
		t.Fatalf("wait=600 is not clamped to 60s: %+v", ins)
	}
	for _, bad := range []string{"-1", "1.5", "soon"} {
		e := readError(t, h.do("GET", "/v1/lease-requests/req_1?wait="+bad, agentSecret, ""), contract.CodeBadRequest)
		if e["field"] != "wait" {
			t.Errorf("wait=%s: %v", bad, e)
		}
	}

	// The view of the second answer: a booting request shows its estimate.
	m := readJSON(t, h.do("GET", "/v1/lease-requests/req_1?wait=1", agentSecret, ""), http.StatusOK)
	v := m["request"].(map[string]any)
	if v["state"] != "booting" || v["etaMs"] != float64(2000) {
		t.Fatalf("view %v", v)
	}
}

func TestGetLeaseRequestDoesNotWaitOnSettled(t *testing.T) {
	h := newHarness(t, httpapi.Options{})
	st := reqStatus(7, contract.RequestFailed, nil)
	st.Request.SettledAt = st.Request.CreatedAt + 1000
	st.Request.Error = contract.Errorf(contract.CodeQueueTimeout, "waited 30s")
	h.fake.answer(contract.OpLeaseRequestGet, st, nil)
	m := readJSON(t, h.do("GET", "/v1/lease-requests/req_1?wait=30", agentSecret, ""), http.StatusOK)
	if n := len(h.fake.callsOf(contract.OpLeaseRequestGet)); n != 1 {
		t.Fatalf("a settled request was read %d times", n)
	}
	v := m["request"].(map[string]any)
	e, _ := v["error"].(map[string]any)
	if v["state"] != "failed" || e["code"] != "QUEUE_TIMEOUT" || v["settledAt"] != "2026-11-30T03:09:56.501Z" {
		t.Fatalf("view %v", v)
	}
}

// grantedStatus is a request granted lease lse_1 with a 10-minute ttl.
func grantedStatus() contract.LeaseRequestStatus {
	st := reqStatus(5, contract.RequestGranted, nil)
	lease := contract.LeaseRecord{
		ID: "lse_1", DeviceID: "dev_1", RequesterID: agentToken.ID, OwnerID: agentToken.ID,
		GrantedAt: 1796008200000, TTLMs: 600000, LastRenewedAt: 1796008200000, TTLDeadline: 1796008800000,
	}
	st.Request.LeaseID = "lse_1"
	st.Request.SettledAt = lease.GrantedAt
	st.Request.Grant = &contract.LeaseGrant{
		Device: contract.GrantDevice{
			ID: "dev_1", DriverDeviceID: "4F1C0B9E-1111-2222-3333-444455556666",
			Spec: contract.DeviceSpec{Platform: contract.PlatformIOS, Model: "iPhone 16", OSVersion: "18.2"},
			Mode: "full",
		},
		Lease:       lease,
		Environment: map[string]string{"SIMLOCK_UDID": "4F1C0B9E-1111-2222-3333-444455556666"},
		RequestID:   "req_1",
		Source:      contract.SourceWarm,
		Timing:      contract.Timing{EstimatedBootMs: 1000, EstimatedReadyMs: 1500},
	}
	return st
}

func TestGrantedRequestShowsTheCurrentLease(t *testing.T) {
	h := newHarness(t, httpapi.Options{})
	st := grantedStatus()
	h.fake.answer(contract.OpLeaseRequestGet, st, nil)

	// Renewed since the grant: the deadline is the lease's, not the grant's.
	renewed := st.Request.Grant.Lease
	renewed.TTLMs, renewed.TTLDeadline = 1200000, 1796009500000
	h.fake.answer(contract.OpLeaseGet, contract.LeaseGetResult{Lease: renewed, RequestID: "req_1"}, nil)
	v := readJSON(t, h.do("GET", "/v1/lease-requests/req_1", agentSecret, ""), http.StatusOK)["request"].(map[string]any)
	l, _ := v["lease"].(map[string]any)
	want := map[string]any{
		"id": "lse_1", "requestId": "req_1", "requesterId": agentToken.ID, "platform": "ios",
		"device": "iPhone 16", "os": "18.2", "udid": "4F1C0B9E-1111-2222-3333-444455556666",
		"deviceId": "dev_1", "createdAt": "2026-11-30T03:10:00.000Z", "expiresAt": "2026-11-30T03:31:40.000Z",
		"ttlMs": float64(1200000), "mode": "full",
	}
	for k, w := range want {
		if l[k] != w {
			t.Errorf("lease.%s = %v, want %v", k, l[k], w)
		}
	}
	if dp, ok := l["dataPlane"]; !ok || dp != nil {
		t.Errorf("dataPlane %v, %v; want null", dp, ok)
	}
	if _, ok := l["active"]; ok {
		t.Errorf("a held lease shows active: %v", l)
	}
	if env, _ := l["environment"].(map[string]any); env["SIMLOCK_UDID"] == nil {
		t.Errorf("environment %v", l["environment"])
	}
	// The grant's source and timing, as the socket's grant says them.
	if tm, _ := l["timing"].(map[string]any); l["source"] != "warm" || tm == nil || tm["estimatedReadyMs"] != float64(1500) {
		t.Errorf("lease source %v, timing %v; want warm and the grant's estimates", l["source"], l["timing"])
	}
	if c := h.fake.callsOf(contract.OpLeaseGet); len(c) != 1 || decodeInput[contract.LeaseIDInput](t, c[0]).LeaseID != "lse_1" {
		t.Fatalf("lease.get calls %+v", c)
	}

	// Ended since: the grant's values, marked inactive.
	h.fake.answer(contract.OpLeaseGet, nil, contract.Errorf(contract.CodeUnknownLease, "no lease lse_1"))
	v = readJSON(t, h.do("GET", "/v1/lease-requests/req_1", agentSecret, ""), http.StatusOK)["request"].(map[string]any)
	l, _ = v["lease"].(map[string]any)
	if l["active"] != false || l["expiresAt"] != "2026-11-30T03:20:00.000Z" || l["ttlMs"] != float64(600000) {
		t.Fatalf("ended lease view %v", l)
	}
}

func TestCancelLeaseRequest(t *testing.T) {
	h := newHarness(t, httpapi.Options{})
	cases := []struct {
		res    contract.LeaseCancelResult
		status int
		code   contract.Code
		lease  string
	}{
		{contract.LeaseCancelResult{Outcome: contract.CancelCancelled, RequestID: "req_1"}, http.StatusNoContent, "", ""},
		{contract.LeaseCancelResult{Outcome: contract.CancelNotFound}, http.StatusNotFound, contract.CodeUnknownLeaseRequest, ""},
		{contract.LeaseCancelResult{Outcome: contract.CancelNotCancellable, RequestID: "req_1", LeaseID: "lse_9"}, http.StatusConflict, contract.CodeRequestNotCancellable, "lse_9"},
		{contract.LeaseCancelResult{Outcome: contract.CancelNotCancellable, RequestID: "req_1"}, http.StatusConflict, contract.CodeRequestNotCancellable, ""},
	}
	for _, tc := range cases {
		h.fake.answer(contract.OpLeaseCancel, tc.res, nil)
		resp := h.do("DELETE", "/v1/lease-requests/req_1", agentSecret, "")
		if tc.code == "" {
			body, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != tc.status || len(body) != 0 {
				t.Fatalf("%s: status %d body %q", tc.res.Outcome, resp.StatusCode, body)
			}
			continue
		}
		e := readError(t, resp, tc.code)
		if e["requestId"] != "req_1" {
			t.Errorf("%s: %v", tc.res.Outcome, e)
		}
		if tc.lease != "" && (e["leaseId"] != tc.lease || !strings.Contains(e["message"].(string), tc.lease)) {
			t.Errorf("%s: %v does not name lease %s", tc.res.Outcome, e, tc.lease)
		}
		if tc.lease == "" && e["leaseId"] != nil {
			t.Errorf("%s: %v names a lease", tc.res.Outcome, e)
		}
	}
	for _, c := range h.fake.callsOf(contract.OpLeaseCancel) {
		if in := decodeInput[contract.LeaseCancelInput](t, c); in != (contract.LeaseCancelInput{RequestID: "req_1"}) {
			t.Fatalf("lease.cancel input %+v", in)
		}
	}
}

func TestLeaseRoutes(t *testing.T) {
	h := newHarness(t, httpapi.Options{})
	lease := contract.LeaseRecord{ID: "lse_1", DeviceID: "dev_1", RequesterID: agentToken.ID, GrantedAt: 1796008200000, TTLMs: 600000, TTLDeadline: 1796008800000}
	h.fake.answer(contract.OpLeaseGet, contract.LeaseGetResult{
		Lease: lease, RequestID: "req_1",
		Device: contract.Device{ID: "dev_1", DriverDeviceID: "emulator-5554", Spec: contract.DeviceSpec{Platform: contract.PlatformAndroid, Model: "pixel_8", OSVersion: "35"}, Address: "127.0.0.1:5554"},
	}, nil)
	l := readJSON(t, h.do("GET", "/v1/leases/lse_1", agentSecret, ""), http.StatusOK)["lease"].(map[string]any)
	if l["udid"] != "emulator-5554" || l["address"] != "127.0.0.1:5554" || l["expiresAt"] != "2026-11-30T03:20:00.000Z" || l["platform"] != "android" {
		t.Fatalf("lease view %v", l)
	}

	renewed := lease
	renewed.TTLMs, renewed.TTLDeadline = 900000, 1796009100000
	h.fake.answer(contract.OpLeaseRenew, renewed, nil)
	m := readJSON(t, h.do("POST", "/v1/leases/lse_1/renew", agentSecret, `{"ttlMs":900000}`), http.StatusOK)
	if m["leaseId"] != "lse_1" || m["expiresAt"] != "2026-11-30T03:25:00.000Z" || m["ttlMs"] != float64(900000) {
		t.Fatalf("renew %v", m)
	}
	if n, ok := m["notices"].([]any); !ok || len(n) != 0 {
		t.Fatalf("notices %v", m["notices"])
	}
	readJSON(t, h.do("POST", "/v1/leases/lse_1/renew", agentSecret, ""), http.StatusOK)
	renews := h.fake.callsOf(contract.OpLeaseRenew)
	if in := decodeInput[contract.LeaseRenewInput](t, renews[0]); in != (contract.LeaseRenewInput{LeaseID: "lse_1", TTLMs: 900000}) {
		t.Fatalf("renew input %+v", in)
	}
	if in := decodeInput[contract.LeaseRenewInput](t, renews[1]); in != (contract.LeaseRenewInput{LeaseID: "lse_1"}) {
		t.Fatalf("renew input without a body %+v", in)
	}

	h.fake.answer(contract.OpLeaseRelease, contract.ReleaseResult{LeaseID: "lse_1", DeviceID: "dev_1", Released: true}, nil)
	m = readJSON(t, h.do("DELETE", "/v1/leases/lse_1", agentSecret, ""), http.StatusAccepted)
	dev, _ := m["device"].(map[string]any)
	if m["released"] != true || m["leaseId"] != "lse_1" || dev["id"] != "dev_1" || dev["state"] != "reclaiming" {
		t.Fatalf("release %v", m)
	}

	h.fake.answer(contract.OpLeaseList, contract.LeaseListResult{}, nil)
	if ls, ok := readJSON(t, h.do("GET", "/v1/leases", agentSecret, ""), http.StatusOK)["leases"].([]any); !ok || len(ls) != 0 {
		t.Fatalf("leases is not an empty array")
	}
}

func TestOperatorLists(t *testing.T) {
	now := time.UnixMilli(1796008800000)
	h := newHarness(t, httpapi.Options{Now: func() time.Time { return now }})

	rec := reqStatus(1, contract.RequestQueued, nil).Request
	rec.QueuePosition = 1
	h.fake.answer(contract.OpListGet, contract.ListGetResult{Requests: []contract.LeaseRequestRecord{rec}}, nil)
	rs := readJSON(t, h.do("GET", "/v1/lease-requests", operatorSecret, ""), http.StatusOK)["requests"].([]any)
	r0 := rs[0].(map[string]any)
	if r0["id"] != "req_1" || r0["stage"] != "queued" || r0["queuePosition"] != float64(1) || r0["createdAt"] != float64(rec.CreatedAt) {
		t.Fatalf("requests %v", rs)
	}
	if spec, _ := r0["spec"].(map[string]any); spec["platform"] != "ios" {
		t.Fatalf("spec %v", r0)
	}

	h.fake.answer(contract.OpEventsReplay, contract.EventsReplayResult{}, nil)
	readJSON(t, h.do("GET", "/v1/events?since=10m&limit=50", operatorSecret, ""), http.StatusOK)
	readJSON(t, h.do("GET", "/v1/events", operatorSecret, ""), http.StatusOK)
	calls := h.fake.callsOf(contract.OpEventsReplay)
	if in := decodeInput[contract.EventsReplayInput](t, calls[0]); in != (contract.EventsReplayInput{SinceTs: now.Add(-10 * time.Minute).UnixMilli(), Limit: 50}) {
		t.Fatalf("replay input %+v", in)
	}
	if in := decodeInput[contract.EventsReplayInput](t, calls[1]); in != (contract.EventsReplayInput{}) {
		t.Fatalf("replay input without since %+v", in)
	}
	// limit is 1 to 10000, as the docs say: 0 is not "the default".
	for _, bad := range []string{"0", "-3", "10001", "many"} {
		if e := readError(t, h.do("GET", "/v1/events?limit="+bad, operatorSecret, ""), contract.CodeBadRequest); e["field"] != "limit" {
			t.Errorf("limit=%s: %v, want BAD_REQUEST on limit", bad, e)
		}
	}
	e := readError(t, h.do("GET", "/v1/events?since=yesterday", operatorSecret, ""), contract.CodeBadRequest)
	if e["field"] != "since" {
		t.Fatalf("bad since: %v", e)
	}
	// afterSeq reads on from a seq a client saw (a console filling a gap).
	readJSON(t, h.do("GET", "/v1/events?afterSeq=41&limit=100", operatorSecret, ""), http.StatusOK)
	if calls := h.fake.callsOf(contract.OpEventsReplay); decodeInput[contract.EventsReplayInput](t, calls[len(calls)-1]) != (contract.EventsReplayInput{AfterSeq: 41, Limit: 100}) {
		t.Errorf("replay input for afterSeq=41 = %+v", decodeInput[contract.EventsReplayInput](t, calls[len(calls)-1]))
	}
	for _, bad := range []string{"-1", "x"} {
		if e := readError(t, h.do("GET", "/v1/events?afterSeq="+bad, operatorSecret, ""), contract.CodeBadRequest); e["field"] != "afterSeq" {
			t.Errorf("afterSeq=%s: %v, want BAD_REQUEST on afterSeq", bad, e)
		}
	}

	h.fake.answer(contract.OpTokenList, contract.TokenListResult{Tokens: []contract.TokenRecord{agentToken}}, nil)
	ts := readJSON(t, h.do("GET", "/v1/tokens", operatorSecret, ""), http.StatusOK)["tokens"].([]any)
	if len(ts) != 1 || ts[0].(map[string]any)["id"] != agentToken.ID {
		t.Fatalf("tokens %v", ts)
	}
}

func TestDownloadingRequestShowsComponentWaitingAndPercent(t *testing.T) {
	h := newHarness(t, httpapi.Options{})
	pct := 41
	st := reqStatus(3, contract.RequestQueued, &contract.LeaseProgress{Stage: contract.StageDownloading, Component: "26.4", Percent: &pct})
	h.fake.answer(contract.OpLeaseRequestGet, st, nil)
	v := readJSON(t, h.do("GET", "/v1/lease-requests/req_1", agentSecret, ""), http.StatusOK)["request"].(map[string]any)
	if v["state"] != "downloading" || v["component"] != "26.4" || v["waiting"] != false || v["percent"] != float64(41) {
		t.Fatalf("view %v, want downloading 26.4, waiting false, percent 41", v)
	}
	if _, ok := v["queuePosition"]; ok {
		t.Errorf("a downloading view carries a queue position: %v", v)
	}
}

// A body that does not arrive whole within the bound is answered 408
// BODY_TIMEOUT, and nothing is asked of the daemon.
func TestATricklingBodyIsCutOff(t *testing.T) {
	h := newHarness(t, httpapi.Options{BodyTimeout: 200 * time.Millisecond})
	conn, err := net.Dial("tcp", strings.TrimPrefix(h.srv.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(testTimeout))
	fmt.Fprintf(conn, "POST /v1/lease-requests HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"plat", agentSecret)
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("no answer to a body that stopped arriving: %v", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusRequestTimeout {
		t.Errorf("status %d, want 408", resp.StatusCode)
	}
	readError(t, resp, contract.CodeBodyTimeout)
	if n := h.fake.callCount(); n != 0 {
		t.Errorf("the daemon was asked %d times for a request whose body never came", n)
	}
}
