package httpapi_test

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/httpapi"
)

// rawGuard bounds each raw connection's wait for its answer and for its
// close: far beyond the bounds the server is given here, so reaching it is
// the failure the tests name.
const rawGuard = 5 * time.Second

// rawOutcome is what one raw client saw.
type rawOutcome struct {
	status int
	code   contract.Code
	closed bool // the server closed the connection after its answer
	err    error
}

// sendTrickling opens a raw connection to h, sends head (the request line
// and headers, ending with the blank line) and first (the start of the
// body), then trickles one more byte every tick until the connection
// fails or the answer has come; and reads the answer.
func sendTrickling(h *harness, head, first string, tick time.Duration) rawOutcome {
	conn, err := net.Dial("tcp", strings.TrimPrefix(h.srv.URL, "http://"))
	if err != nil {
		return rawOutcome{err: err}
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(rawGuard))
	if _, err := io.WriteString(conn, head+first); err != nil {
		return rawOutcome{err: err}
	}
	answered := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(tick)
		defer t.Stop()
		for {
			select {
			case <-answered:
				return
			case <-t.C:
				if _, err := conn.Write([]byte("x")); err != nil {
					return
				}
			}
		}
	})
	defer wg.Wait()
	defer close(answered)
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		if errors.Is(err, os.ErrDeadlineExceeded) {
			return rawOutcome{err: fmt.Errorf("no answer within %s", rawGuard)}
		}
		return rawOutcome{err: fmt.Errorf("no answer: %w", err)}
	}
	var body struct {
		Error contract.Error `json:"error"`
	}
	_ = json.NewDecoder(resp.Body).Decode(&body)
	resp.Body.Close()
	out := rawOutcome{status: resp.StatusCode, code: body.Error.Code}
	// Whatever the server sends after its answer is not read: only
	// whether the connection ends.
	_, err = io.Copy(io.Discard, br)
	out.closed = !errors.Is(err, os.ErrDeadlineExceeded)
	return out
}

// sendMany runs n raw clients at once and returns what each saw.
func sendMany(h *harness, n int, head, first string, tick time.Duration) []rawOutcome {
	out := make([]rawOutcome, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { out[i] = sendTrickling(h, head, first, tick) })
	}
	wg.Wait()
	return out
}

// checkAll checks that every client got the answer with code and then saw
// its connection closed.
func checkAll(t *testing.T, what string, outs []rawOutcome, code contract.Code) {
	t.Helper()
	for i, o := range outs {
		switch {
		case o.err != nil:
			t.Errorf("%s, client %d: %v", what, i, o.err)
		case o.status != code.HTTPStatus() || o.code != code:
			t.Errorf("%s, client %d: %d %s, want %d %s", what, i, o.status, o.code, code.HTTPStatus(), code)
		case !o.closed:
			t.Errorf("%s, client %d: the connection stayed open after the %d answer", what, i, o.status)
		}
	}
}

func rawHead(method, path, secret string, length int) string {
	auth := ""
	if secret != "" {
		auth = "Authorization: Bearer " + secret + "\r\n"
	}
	return fmt.Sprintf("%s %s HTTP/1.1\r\nHost: x\r\n%sContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", method, path, auth, length)
}

// A request that declares a body over the limit is answered 413
// BODY_TOO_LARGE at once, however slowly the body would come, and its
// connection is closed: 75 such trickling clients are all answered, and
// the daemon is asked nothing.
func TestADeclaredBodyOverTheLimitIsRefusedBeforeItIsRead(t *testing.T) {
	h := newHarness(t, httpapi.Options{})
	h.fake.answer(contract.OpLeaseRequestCreate, reqStatus(1, contract.RequestQueued, nil), nil)
	outs := sendMany(h, 75, rawHead("POST", "/v1/lease-requests", agentSecret, 100000), "{", time.Second)
	checkAll(t, "a declared 100000-byte body", outs, contract.CodeBodyTooLarge)
	if n := h.fake.callCount(); n != 0 {
		t.Errorf("the daemon was asked %d times for requests whose bodies were too large", n)
	}
}

// A body within the limit that does not arrive whole within the bound is
// cut with 408 BODY_TIMEOUT and its connection closed, whatever the route:
// one that decodes a body, one that reads none, one that is not a route,
// and without a token. 75 trickling clients on one route are all answered.
func TestASlowBodyIsCutWhateverTheRoute(t *testing.T) {
	h := newHarness(t, httpapi.Options{BodyTimeout: 300 * time.Millisecond})
	h.fake.answer(contract.OpLeaseRequestCreate, reqStatus(1, contract.RequestQueued, nil), nil)
	h.fake.answer(contract.OpStatusGet, map[string]any{}, nil)
	h.fake.answer(contract.OpLeaseRelease, contract.ReleaseResult{LeaseID: "lse_1", Released: true}, nil)

	outs := sendMany(h, 75, rawHead("POST", "/v1/lease-requests", agentSecret, 1000), `{"platform`, 100*time.Millisecond)
	checkAll(t, "a trickled body within the limit", outs, contract.CodeBodyTimeout)

	for _, r := range []struct{ method, path, secret string }{
		{"GET", "/v1/status", agentSecret},              // reads no body
		{"DELETE", "/v1/leases/lse_1", agentSecret},     // reads no body
		{"POST", "/v1/leases/lse_1/renew", agentSecret}, // decodes an optional body
		{"POST", "/v1/no-such-route", agentSecret},      // no route
		{"GET", "/v1/healthz", ""},                      // needs no token
		{"POST", "/v1/lease-requests", ""},              // no token
	} {
		what := r.method + " " + r.path
		checkAll(t, what+" with a trickled body", sendMany(h, 1, rawHead(r.method, r.path, r.secret, 50), "{", 100*time.Millisecond), contract.CodeBodyTimeout)
		checkAll(t, what+" declaring 100000 bytes", sendMany(h, 1, rawHead(r.method, r.path, r.secret, 100000), "{", time.Second), contract.CodeBodyTooLarge)
	}
	if n := h.fake.callCount(); n != 0 {
		t.Errorf("the daemon was asked %d times for requests whose bodies never came", n)
	}
}

// A body that arrives whole in time is served, and its connection kept.
func TestAWholeBodyIsServedOnAKeptConnection(t *testing.T) {
	h := newHarness(t, httpapi.Options{BodyTimeout: 300 * time.Millisecond})
	h.fake.answer(contract.OpLeaseRequestCreate, reqStatus(1, contract.RequestQueued, nil), nil)
	body := `{"platform":"ios"}`
	conn, err := net.Dial("tcp", strings.TrimPrefix(h.srv.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(rawGuard))
	br := bufio.NewReader(conn)
	for i := range 2 {
		if _, err := io.WriteString(conn, rawHead("POST", "/v1/lease-requests", agentSecret, len(body))+body); err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("request %d on one connection: %v", i, err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusCreated || resp.Close {
			t.Fatalf("request %d: %d, close %v; want 201 on a kept connection", i, resp.StatusCode, resp.Close)
		}
	}
}

// A client that sends its whole body at once reads the refusal of it, not
// a reset: a body over the limit, declared or not, is answered 413 while
// the client is still writing it, and the connection lingers, reading and
// dropping the rest, until the client has the answer.
func TestARefusedBodyIsAnsweredToAClientStillSendingIt(t *testing.T) {
	h := newHarness(t, httpapi.Options{})
	body := strings.Repeat("x", 4<<20)
	for i := range 40 {
		declared := i%2 == 0
		var rd io.Reader = strings.NewReader(body)
		if !declared {
			rd = io.MultiReader(rd) // no length known: sent chunked
		}
		req, err := http.NewRequest("POST", h.srv.URL+"/v1/lease-requests", rd)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+agentSecret)
		req.Header.Set("Content-Type", "application/json")
		resp, err := h.client.Do(req)
		if err != nil {
			t.Fatalf("request %d (declared %v): %v, want the 413 answer", i, declared, err)
		}
		var got struct {
			Error struct{ Code contract.Code } `json:"error"`
		}
		err = json.NewDecoder(resp.Body).Decode(&got)
		resp.Body.Close()
		if resp.StatusCode != http.StatusRequestEntityTooLarge || got.Error.Code != contract.CodeBodyTooLarge || err != nil {
			t.Fatalf("request %d (declared %v): %d %s (%v), want 413 BODY_TOO_LARGE", i, declared, resp.StatusCode, got.Error.Code, err)
		}
	}
}
