package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http/httptest"
	"net/url"
	"testing"
	"time"

	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/httpapi"
)

// strictBackend takes a call only if its input is one the daemon would
// take, and answers each with UNKNOWN_LEASE; it reports an input that the
// HTTP layer let through invalid.
type strictBackend struct {
	*fakeBackend
	invalid func(op contract.Op, input []byte, err error)
}

func (b strictBackend) Call(_ context.Context, _ contract.TokenRecord, op contract.Op, input any, _ func(contract.Push)) (any, error) {
	raw, err := json.Marshal(input)
	if err != nil {
		b.invalid(op, nil, err)
		return nil, err
	}
	var in contract.Validator
	switch op {
	case contract.OpLeaseRequestCreate:
		in = new(contract.LeaseRequestInput)
	case contract.OpLeaseRenew:
		in = new(contract.LeaseRenewInput)
	case contract.OpDeviceExec:
		in = new(contract.ExecInput)
	case contract.OpComponentInstall:
		in = new(contract.ComponentInstallInput)
	default:
		return nil, contract.Errorf(contract.CodeUnknownLease, "no such lease")
	}
	if err := contract.DecodeInput(raw, in); err != nil {
		b.invalid(op, raw, err)
		return nil, err
	}
	return nil, contract.Errorf(contract.CodeUnknownLease, "no such lease")
}

// FuzzRequestBodies sends every route that takes a body anything as its
// body and its path id. No request panics or answers 5xx; a refusal is a
// JSON error with a code; and whatever reaches the daemon is an input the
// daemon itself would take.
func FuzzRequestBodies(f *testing.F) {
	for _, seed := range []string{
		`{"platform":"ios","device":"iPhone 16","os":"18","ttlMs":60000}`, `{"platform":"android","class":"tablet","noWait":true}`,
		`{"ttlMs":60000}`, `{"tool":"simctl","args":["io","booted","screenshot","-"]}`, `{"platform":"ios","version":"26.4"}`,
		`{}`, ``, `null`, `[]`, `{"platform":"ios"}{"platform":"ios"}`, `{"PLATFORM":"ios"}`, `{"ttlMs":-1}`, `{"ttlMs":1e308}`,
		`{"platform":"ios","platform":"android"}`, "{\"device\":\"\xff\"}", `{"os":"<0"}`, `{"args":[null]}`,
	} {
		f.Add(uint8(0), "lse_1", []byte(seed))
	}
	f.Add(uint8(1), "_1", []byte(`{}`)) // a renewal's path id reached the daemon unchecked
	var bad []string
	backend := strictBackend{fakeBackend: newFakeBackend(), invalid: func(op contract.Op, input []byte, err error) {
		bad = append(bad, string(op)+" "+string(input)+": "+err.Error())
	}}
	api := httpapi.New(httpapi.Options{Backend: backend})
	f.Cleanup(api.Close)
	routes := []string{"/v1/lease-requests", "/v1/leases/%s/renew", "/v1/leases/%s/exec", "/v1/components/install"}
	f.Fuzz(func(t *testing.T, which uint8, id string, body []byte) {
		bad = bad[:0]
		route := routes[int(which)%len(routes)]
		path := route
		if i := len("/v1/leases/"); len(route) > i && route[:i] == "/v1/leases/" {
			path = "/v1/leases/" + url.PathEscape(id) + route[i+2:]
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		req := httptest.NewRequestWithContext(ctx, "POST", path, bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+operatorSecret)
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		api.ServeHTTP(rec, req)
		if len(bad) > 0 {
			t.Fatalf("POST %s %q reached the daemon invalid: %v", path, body, bad)
		}
		if rec.Code >= 500 {
			t.Fatalf("POST %s %q answered %d: %s", path, body, rec.Code, rec.Body)
		}
		if rec.Code >= 400 {
			var e struct {
				Error struct {
					Code string `json:"code"`
				} `json:"error"`
			}
			if err := json.Unmarshal(rec.Body.Bytes(), &e); err != nil || e.Error.Code == "" {
				t.Fatalf("POST %s %q answered %d without a JSON error: %q", path, body, rec.Code, rec.Body)
			}
		}
	})
}
