package httpapi_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/httpapi"
)

// The secrets the fake backend knows.
const (
	agentSecret    = "slk_agent_secret"
	operatorSecret = "slk_operator_secret"
	workerSecret   = "slk_worker_secret"
)

var (
	agentToken    = contract.TokenRecord{ID: "tok_agent1", Role: contract.TokenAgent, CreatedAt: 1}
	operatorToken = contract.TokenRecord{ID: "tok_op1", Role: contract.TokenOperator, CreatedAt: 1}
	workerToken   = contract.TokenRecord{ID: "tok_w1", Role: contract.TokenWorker, CreatedAt: 1}
)

// fakeCall is one Backend.Call as the fake saw it; Input is the input as
// JSON, which is what the real dispatcher reads.
type fakeCall struct {
	Op    contract.Op
	Token contract.TokenRecord
	Input json.RawMessage
	Ctx   context.Context
}

type opFunc func(ctx context.Context, c fakeCall, push func(contract.Push)) (any, error)

// fakeBackend is an in-memory Backend: a token table and one scriptable
// handler per operation, recording every call.
type fakeBackend struct {
	tokens map[string]contract.TokenRecord

	mu    sync.Mutex
	ops   map[contract.Op]opFunc
	calls []fakeCall
	// uplinks are the tokens that reached Uplink; refused the codes
	// UplinkRefused was told.
	uplinks []contract.TokenRecord
	refused []contract.Code
}

func newFakeBackend() *fakeBackend {
	return &fakeBackend{
		tokens: map[string]contract.TokenRecord{agentSecret: agentToken, operatorSecret: operatorToken, workerSecret: workerToken},
		ops:    map[contract.Op]opFunc{},
	}
}

func (f *fakeBackend) Authenticate(_ context.Context, secret string) (contract.TokenRecord, error) {
	tok, ok := f.tokens[secret]
	if !ok {
		return contract.TokenRecord{}, contract.Errorf(contract.CodeUnauthenticated, "unknown or revoked token")
	}
	return tok, nil
}

func (f *fakeBackend) Call(ctx context.Context, tok contract.TokenRecord, op contract.Op, input any, push func(contract.Push)) (any, error) {
	raw, err := json.Marshal(input)
	if err != nil {
		return nil, fmt.Errorf("fake: encode input: %w", err)
	}
	c := fakeCall{Op: op, Token: tok, Input: raw, Ctx: ctx}
	f.mu.Lock()
	f.calls = append(f.calls, c)
	h := f.ops[op]
	f.mu.Unlock()
	if h == nil {
		return nil, contract.Errorf(contract.CodeInternal, "fake: no handler for %s", op)
	}
	return h(ctx, c, push)
}

// on scripts op.
func (f *fakeBackend) on(op contract.Op, h opFunc) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.ops[op] = h
}

// answer scripts op to return res, err every time.
func (f *fakeBackend) answer(op contract.Op, res any, err error) {
	f.on(op, func(context.Context, fakeCall, func(contract.Push)) (any, error) { return res, err })
}

func (f *fakeBackend) callsOf(op contract.Op) []fakeCall {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []fakeCall
	for _, c := range f.calls {
		if c.Op == op {
			out = append(out, c)
		}
	}
	return out
}

func (f *fakeBackend) callCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.calls)
}

// harness is an httptest server running the API on a fake backend.
type harness struct {
	t      *testing.T
	fake   *fakeBackend
	api    *httpapi.Server
	srv    *httptest.Server
	client *http.Client
	// ended receives the path of every request whose handler returned.
	ended chan string
}

// testTimeout bounds every wait of a test, so a broken stream fails the
// test instead of hanging it.
const testTimeout = 10 * time.Second

func newHarness(t *testing.T, opts httpapi.Options) *harness {
	t.Helper()
	h := &harness{t: t, fake: newFakeBackend(), ended: make(chan string, 100)}
	opts.Backend = h.fake
	h.api = httpapi.New(opts)
	h.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.api.ServeHTTP(w, r)
		select {
		case h.ended <- r.URL.Path:
		default:
		}
	}))
	t.Cleanup(func() {
		h.api.Close()
		h.srv.Close()
	})
	h.client = &http.Client{Timeout: testTimeout}
	return h
}

// request builds a request; secret "" sends no Authorization header.
func (h *harness) request(ctx context.Context, method, path, secret, body string) *http.Request {
	h.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, h.srv.URL+path, rd)
	if err != nil {
		h.t.Fatal(err)
	}
	if secret != "" {
		req.Header.Set("Authorization", "Bearer "+secret)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	return req
}

func (h *harness) send(req *http.Request) *http.Response {
	h.t.Helper()
	resp, err := h.client.Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	h.t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// do sends a request and returns the response.
func (h *harness) do(method, path, secret, body string) *http.Response {
	h.t.Helper()
	return h.send(h.request(h.t.Context(), method, path, secret, body))
}

// waitEnded waits until the handler of a request to path has returned.
func (h *harness) waitEnded(path string) {
	h.t.Helper()
	timeout := time.After(testTimeout)
	for {
		select {
		case p := <-h.ended:
			if p == path {
				return
			}
		case <-timeout:
			h.t.Fatalf("the handler of %s did not return", path)
		}
	}
}

// readJSON decodes resp's body as a JSON object, checking status and
// Content-Type.
func readJSON(t *testing.T, resp *http.Response, status int) map[string]any {
	t.Helper()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != status {
		t.Fatalf("status %d, want %d; body %s", resp.StatusCode, status, body)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Fatalf("Content-Type %q, want application/json; body %s", ct, body)
	}
	var m map[string]any
	if err := json.Unmarshal(body, &m); err != nil {
		t.Fatalf("body is not a JSON object: %v: %s", err, body)
	}
	return m
}

// readError checks that resp is the error code with its status and returns
// the error object.
func readError(t *testing.T, resp *http.Response, code contract.Code) map[string]any {
	t.Helper()
	m := readJSON(t, resp, code.HTTPStatus())
	e, ok := m["error"].(map[string]any)
	if !ok {
		t.Fatalf("no error object in %v", m)
	}
	if e["code"] != string(code) {
		t.Fatalf("error code %v, want %s (%v)", e["code"], code, e)
	}
	if msg, _ := e["message"].(string); msg == "" {
		t.Fatalf("error without a message: %v", e)
	}
	return e
}

// decodeInput reads a recorded call's input.
func decodeInput[T any](t *testing.T, c fakeCall) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(c.Input, &v); err != nil {
		t.Fatalf("input of %s: %v", c.Op, err)
	}
	return v
}

// sseFrame is one block of an event stream.
type sseFrame struct {
	Comment string
	Event   string
	ID      string
	Data    string
}

type sseReader struct {
	t  *testing.T
	br *bufio.Reader
}

func newSSEReader(t *testing.T, resp *http.Response) *sseReader {
	t.Helper()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(resp.Body)
		t.Fatalf("stream status %d: %s", resp.StatusCode, body)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("stream Content-Type %q", ct)
	}
	return &sseReader{t: t, br: bufio.NewReader(resp.Body)}
}

// next reads one frame; ok is false at the end of the stream.
func (r *sseReader) next() (f sseFrame, ok bool) {
	r.t.Helper()
	started := false
	for {
		line, err := r.br.ReadString('\n')
		if err == io.EOF && line == "" && !started {
			return f, false
		}
		if err != nil {
			r.t.Fatalf("read stream: %v (partial %q)", err, line)
		}
		line = strings.TrimSuffix(line, "\n")
		if line == "" {
			if started {
				return f, true
			}
			continue
		}
		started = true
		name, value, _ := strings.Cut(line, ":")
		value = strings.TrimPrefix(value, " ")
		switch name {
		case "":
			f.Comment = value
		case "event":
			f.Event = value
		case "id":
			f.ID = value
		case "data":
			f.Data = value
		default:
			r.t.Fatalf("unexpected stream line %q", line)
		}
	}
}

// mustNext reads a frame and fails at the end of the stream.
func (r *sseReader) mustNext() sseFrame {
	r.t.Helper()
	f, ok := r.next()
	if !ok {
		r.t.Fatal("the stream ended early")
	}
	return f
}

// expectEnd checks that the stream ends with no more frames.
func (r *sseReader) expectEnd() {
	r.t.Helper()
	if f, ok := r.next(); ok {
		r.t.Fatalf("want the end of the stream, got %+v", f)
	}
}

// expectConnected reads the stream's first comment.
func (r *sseReader) expectConnected() {
	r.t.Helper()
	if f := r.mustNext(); f.Comment != "connected" {
		r.t.Fatalf("first frame %+v, want : connected", f)
	}
}

// reqStatus makes a lease request status at revision rev.
func reqStatus(rev uint64, state contract.RequestState, progress *contract.LeaseProgress) contract.LeaseRequestStatus {
	return contract.LeaseRequestStatus{
		Request: contract.LeaseRequestRecord{
			ID:          "req_1",
			RequesterID: agentToken.ID,
			OwnerID:     agentToken.ID,
			Spec:        contract.RequestSpec{Platform: contract.PlatformIOS, Model: "iPhone 16"},
			State:       state,
			CreatedAt:   1796008195501,
		},
		Progress: progress,
		Rev:      rev,
	}
}

// receive waits for a value on ch.
func receive[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(testTimeout):
		t.Fatalf("timed out waiting for %s", what)
		panic("unreachable")
	}
}

// Uplink answers as a gateway that accepted the uplink would, without the
// WebSocket: 101 is not what the tests look at, only who got here.
func (f *fakeBackend) Uplink(w http.ResponseWriter, _ *http.Request, tok contract.TokenRecord) error {
	f.mu.Lock()
	f.uplinks = append(f.uplinks, tok)
	f.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (f *fakeBackend) UplinkRefused(_ *http.Request, err *contract.Error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.refused = append(f.refused, err.Code)
}
