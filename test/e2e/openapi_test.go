package e2e

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// checkAnswer runs the OpenAPI check over resp as the answer to method
// path, and reads its body whole as a client would; it returns what the
// check recorded and the read's error.
func checkAnswer(t *testing.T, method, path string, resp *http.Response) (violations []string, readErr error) {
	t.Helper()
	c, err := apiContract()
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequest(method, "http://127.0.0.1"+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	record := func(msg string) error {
		violations = append(violations, msg)
		return errors.New(msg)
	}
	resp = c.checkResponse(req, resp, record)
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
	}
	return violations, sc.Err()
}

func answer(status int, contentType, body string) *http.Response {
	return &http.Response{StatusCode: status, Header: http.Header{"Content-Type": {contentType}},
		Body: io.NopCloser(strings.NewReader(body))}
}

func TestTheOpenAPICheckCatchesAnAnswerThatBreaksTheDescription(t *testing.T) {
	const lease = `{"lease":{"id":"lse_1","requesterId":"tok_1","platform":"ios","device":"iPhone 16","os":"18.0","udid":"U","deviceId":"dev_1",` +
		`"createdAt":"2026-01-01T00:00:00.000Z","expiresAt":"2026-01-01T00:10:00.000Z","ttlMs":600000,"mode":"full","dataPlane":null}}`
	for _, tc := range []struct {
		name, method, path string
		resp               *http.Response
		want               string // "" when the answer fits
	}{
		{"a lease that fits", "GET", "/v1/leases/lse_1", answer(200, "application/json", lease), ""},
		{"a lease without its id", "GET", "/v1/leases/lse_1",
			answer(200, "application/json", strings.Replace(lease, `"id":"lse_1",`, "", 1)), "GET /v1/leases/lse_1 answered 200"},
		{"a platform outside the enum", "GET", "/v1/leases/lse_1",
			answer(200, "application/json", strings.Replace(lease, `"ios"`, `"windows"`, 1)), "answered 200"},
		{"a status the route does not answer", "GET", "/v1/leases/lse_1",
			answer(http.StatusTeapot, "application/json", `{"error":{"code":"INTERNAL","message":"x"}}`), "answered 418"},
		{"an error with a code not in the table", "GET", "/v1/leases/lse_1",
			answer(404, "application/json", `{"error":{"code":"NO_SUCH_THING","message":"x"}}`), "answered 404"},
		{"plain text where JSON is declared", "GET", "/v1/leases/lse_1", answer(200, "text/plain", "ok"), "answered 200 text/plain"},
		{"an unknown route's error", "GET", "/v1/nowhere",
			answer(404, "application/json", `{"error":{"code":"UNKNOWN_ROUTE","message":"no route"}}`), ""},
		{"an unknown route answering success", "GET", "/v1/nowhere", answer(200, "application/json", `{}`), "no operation matches"},
		{"a stream event that fits", "GET", "/v1/leases/lse_1/events",
			answer(200, "text/event-stream", ": connected\n\nevent: lease_lost\ndata: {\"leaseId\":\"lse_1\",\"deviceId\":\"d\",\"reason\":\"expired\"}\n\n"), ""},
		{"a stream event whose data breaks its schema", "GET", "/v1/leases/lse_1/events",
			answer(200, "text/event-stream", ": connected\n\nevent: lease_lost\ndata: {\"leaseId\":\"lse_1\",\"reason\":\"sunspots\"}\n\n"), `event "lease_lost"`},
		{"a stream event the stream does not have", "GET", "/v1/leases/lse_1/events",
			answer(200, "text/event-stream", "event: granted\ndata: {}\n\n"), `event "granted" is not one of the stream's`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			violations, readErr := checkAnswer(t, tc.method, tc.path, tc.resp)
			if tc.want == "" {
				if len(violations) > 0 || readErr != nil {
					t.Fatalf("a fitting answer was refused: %v (read: %v)", violations, readErr)
				}
				return
			}
			if len(violations) != 1 || !strings.Contains(violations[0], tc.want) || !strings.HasPrefix(violations[0], "OpenAPI violation: ") {
				t.Fatalf("violations %q, want one naming %q", violations, tc.want)
			}
			if readErr == nil || readErr.Error() != violations[0] {
				t.Fatalf("reading the body ended with %v, want the violation", readErr)
			}
		})
	}
}

func TestTheDaemonServesTheCheckedInDescription(t *testing.T) {
	_, a := httpHome(t)
	r := a.do("GET", "/v1/openapi.json", "", "")
	want, err := os.ReadFile(filepath.Join(moduleRoot, "docs", "openapi.json"))
	if err != nil {
		t.Fatal(err)
	}
	if r.status != 200 || !bytes.Equal([]byte(r.raw), want) {
		t.Fatalf("GET /v1/openapi.json answered %d with %d bytes, not docs/openapi.json (%d bytes)", r.status, len(r.raw), len(want))
	}
	if r.body["openapi"] != "3.1.0" {
		t.Fatalf("openapi %v", r.body["openapi"])
	}
}
