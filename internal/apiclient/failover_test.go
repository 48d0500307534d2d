package apiclient_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/simlock/simlock/internal/apiclient"
	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/daemontest"
)

// standIn is a replica stand-in: it counts the calls it gets, with the
// Idempotency-Key each carried, and answers them with h.
type standIn struct {
	*httptest.Server
	mu    sync.Mutex
	calls []string // "METHOD /path key"
}

func newStandIn(t *testing.T, h http.HandlerFunc) *standIn {
	s := &standIn{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.calls = append(s.calls, strings.TrimSpace(r.Method+" "+r.URL.Path+" "+r.Header.Get("Idempotency-Key")))
		s.mu.Unlock()
		h(w, r)
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *standIn) got() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.calls...)
}

// answering answers every call 200 with an empty JSON object (201 for a
// lease request, as the API does).
func answering(w http.ResponseWriter, r *http.Request) {
	_, _ = io.Copy(io.Discard, r.Body)
	w.Header().Set("Content-Type", "application/json")
	if r.Method == http.MethodPost && r.URL.Path == "/v1/lease-requests" {
		w.WriteHeader(http.StatusCreated)
		io.WriteString(w, `{"request":{"id":"req_1","state":"granted"}}`)
		return
	}
	io.WriteString(w, `{}`)
}

// notLeading refuses every call as a replica that does not lead, in the
// HTTP API's error shape.
func notLeading(leader string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		e := contract.Errorf(contract.CodeNotLeader, "this gateway replica does not lead").With("leaderUrl", leader).With("term", 4)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusServiceUnavailable)
		json.NewEncoder(w).Encode(map[string]any{"error": e})
	}
}

// breaking reads the call whole, then drops the connection unanswered: a
// server that went away after the call reached it.
func breaking(w http.ResponseWriter, r *http.Request) {
	_, _ = io.Copy(io.Discard, r.Body)
	panic(http.ErrAbortHandler)
}

func deadURL(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	u := "http://" + l.Addr().String()
	l.Close()
	return u
}

func TestParseURLsTakesAListOfBaseURLs(t *testing.T) {
	for _, tc := range []struct {
		raw  string
		want int
	}{
		{"https://gw-1.example:7430", 1},
		{"https://gw-1.example:7430,https://gw-2.example:7430/, http://127.0.0.1:7430", 3},
		{"https://gw-1.example:7430,", 0},
		{",https://gw-1.example:7430", 0},
		{"https://gw-1.example:7430,https://gw-2.example:7430/mcp", 0},
		{"https://gw-1.example:7430,ftp://gw-2.example", 0},
		{"", 0},
	} {
		us, err := apiclient.ParseURLs(tc.raw)
		switch {
		case tc.want == 0 && (err == nil || code(err) != contract.CodeUsage):
			t.Errorf("ParseURLs(%q) = %v, %v; want USAGE", tc.raw, us, err)
		case tc.want > 0 && (err != nil || len(us) != tc.want):
			t.Errorf("ParseURLs(%q) = %v, %v; want %d URLs", tc.raw, us, err, tc.want)
		}
	}
}

func TestACallGoesOnToTheNextURLWhenTheFirstIsDead(t *testing.T) {
	b := newStandIn(t, answering)
	c := newClient(t, apiclient.Options{URL: deadURL(t) + "," + b.URL})
	if _, err := c.Status(t.Context()); err != nil {
		t.Fatalf("status with the first URL dead: %v", err)
	}
	if got := b.got(); len(got) != 1 || got[0] != "GET /v1/status" {
		t.Errorf("the second URL got %q, want the status call", got)
	}
	if c.URL() != b.URL {
		t.Errorf("URL in use %s, want %s, the one that answered", c.URL(), b.URL)
	}
	// The next call goes straight to the one in use.
	if _, err := c.Leases(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := b.got(); len(got) != 2 {
		t.Errorf("the second URL got %q, want the lease list too", got)
	}
	// A call that reached no server may go on whatever it is: a POST
	// without an idempotency key too.
	c = newClient(t, apiclient.Options{URL: deadURL(t) + "," + b.URL})
	if _, err := c.RenewLease(t.Context(), "lease_1", 0); err != nil {
		t.Fatalf("renew with the first URL dead: %v", err)
	}
	if got := b.got(); len(got) != 3 || got[2] != "POST /v1/leases/lease_1/renew" {
		t.Errorf("the second URL got %q, want the renewal last", got)
	}
}

// The HTTP client lent to another protocol (the MCP relay) fails over as
// the client's own calls do.
func TestTheLentHTTPClientGoesOnToTheNextURL(t *testing.T) {
	b := newStandIn(t, answering)
	c := newClient(t, apiclient.Options{URL: deadURL(t) + "," + b.URL})
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, c.Endpoint("/mcp"), strings.NewReader(`{"jsonrpc":"2.0"}`))
	if err != nil {
		t.Fatal(err)
	}
	res, err := c.HTTPClient().Do(req)
	if err != nil {
		t.Fatalf("POST /mcp with the first URL dead: %v", err)
	}
	res.Body.Close()
	if got := b.got(); len(got) != 1 || got[0] != "POST /mcp" {
		t.Errorf("the second URL got %q, want the MCP message", got)
	}
	if c.Endpoint("/mcp") != b.URL+"/mcp" {
		t.Errorf("endpoint in use %s, want the second URL's", c.Endpoint("/mcp"))
	}
}

// A replica that does not lead did nothing with the call: it goes on to
// the next URL, a POST without an idempotency key too.
func TestACallNotLeaderGoesOnToTheNextURL(t *testing.T) {
	b := newStandIn(t, answering)
	a := newStandIn(t, notLeading(b.URL))
	c := newClient(t, apiclient.Options{URL: a.URL + "," + b.URL})
	if _, err := c.RenewLease(t.Context(), "lease_1", 0); err != nil {
		t.Fatalf("renew with the first replica not leading: %v", err)
	}
	if got := b.got(); len(got) != 1 || got[0] != "POST /v1/leases/lease_1/renew" {
		t.Errorf("the leader got %q, want the renewal", got)
	}
	if got := a.got(); len(got) != 1 {
		t.Errorf("the follower got %q, want the renewal once", got)
	}
}

// With one URL, NOT_LEADER is the call's answer, code and details, as
// before there were lists.
func TestOneURLNotLeaderIsTheCallsError(t *testing.T) {
	a := newStandIn(t, notLeading("https://gw-2.example:7430"))
	c := newClient(t, apiclient.Options{URL: a.URL})
	_, err := c.Status(t.Context())
	var ce *contract.Error
	if code(err) != contract.CodeNotLeader || !asError(err, &ce) || ce.Details["leaderUrl"] != "https://gw-2.example:7430" {
		t.Fatalf("status = %v, want NOT_LEADER naming the leader", err)
	}
}

// A connection that broke after the call was sent may have reached a
// leader that acted on it: a POST without an idempotency key is not sent
// again; a GET, and a lease request (which always carries a key), are.
func TestABrokenCallIsSentAgainOnlyWhenThatIsSafe(t *testing.T) {
	b := newStandIn(t, answering)
	a := newStandIn(t, breaking)
	c := newClient(t, apiclient.Options{URL: a.URL + "," + b.URL})

	_, err := c.RenewLease(t.Context(), "lease_1", 0)
	if code(err) != contract.CodeDaemonConnectionLost {
		t.Errorf("renew over a connection that broke = %v, want DAEMON_CONNECTION_LOST", err)
	}
	if got := b.got(); len(got) != 0 {
		t.Fatalf("the second URL got %q: a POST without an idempotency key was sent twice", got)
	}

	if _, err := c.Leases(t.Context()); err != nil {
		t.Errorf("a GET over a connection that broke: %v, want it answered by the second URL", err)
	}
	if _, err := c.CreateLeaseRequest(t.Context(), contract.LeaseRequestInput{Platform: contract.PlatformIOS}); err != nil {
		t.Errorf("a lease request over a connection that broke: %v, want it answered by the second URL", err)
	}
	gotA, gotB := a.got(), b.got()
	if len(gotB) != 2 || gotB[0] != "GET /v1/leases" || !strings.HasPrefix(gotB[1], "POST /v1/lease-requests apiclient-") {
		t.Fatalf("the second URL got %q, want the lease list and the keyed lease request", gotB)
	}
	// The one in use is now the second: the first saw the renewal and
	// the list only.
	if len(gotA) != 2 {
		t.Errorf("the first URL got %q", gotA)
	}
}

// A lease request the CLI or an agent sends without a key is given one, the
// same on every attempt.
func TestALeaseRequestAlwaysCarriesAnIdempotencyKey(t *testing.T) {
	a := newStandIn(t, breaking)
	b := newStandIn(t, answering)
	c := newClient(t, apiclient.Options{URL: a.URL + "," + b.URL})
	if _, err := c.CreateLeaseRequest(t.Context(), contract.LeaseRequestInput{Platform: contract.PlatformIOS}); err != nil {
		t.Fatal(err)
	}
	ga, gb := a.got(), b.got()
	if len(ga) != 1 || len(gb) != 1 || !strings.HasPrefix(ga[0], "POST /v1/lease-requests apiclient-") || ga[0] != gb[0] {
		t.Fatalf("the replicas got %q and %q, want the same keyed lease request", ga, gb)
	}
}

// A request followed on a replica that goes silent mid-stream (the leader's
// machine gone) is followed on the next one, resuming with Last-Event-ID:
// the wait ends with the grant as if nothing broke.
func TestARequestStreamThatBreaksResumesOnTheNextURL(t *testing.T) {
	d, secret := httpDaemon(t, daemontest.DemoTimes(300*time.Millisecond, 300*time.Millisecond))
	target, _ := url.Parse(d.HTTPURL())
	proxy := httputil.NewSingleHostReverseProxy(target)
	gone := make(chan struct{})
	var mu sync.Mutex
	cut := false
	a := newStandIn(t, func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		silent := cut
		if strings.HasSuffix(r.URL.Path, "/events") {
			cut = true
		}
		mu.Unlock()
		switch {
		case silent:
			select { // a machine that no longer answers
			case <-r.Context().Done():
			case <-gone:
			}
		case strings.HasSuffix(r.URL.Path, "/events"):
			proxy.ServeHTTP(&cutAfterFirstEvent{ResponseWriter: w}, r)
		default:
			proxy.ServeHTTP(w, r)
		}
	})
	t.Cleanup(func() { close(gone) }) // before a's Close, which waits for it
	var lastIDs []string
	b := newStandIn(t, func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/events") {
			mu.Lock()
			lastIDs = append(lastIDs, r.Header.Get("Last-Event-ID"))
			mu.Unlock()
		}
		proxy.ServeHTTP(w, r)
	})
	c := newClient(t, apiclient.Options{URL: a.URL + "," + b.URL, Token: secret})
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	g, err := c.RequestLease(ctx, contract.LeaseRequestInput{Platform: contract.PlatformIOS}, nil)
	if err != nil {
		t.Fatalf("RequestLease through a stream whose server went silent: %v", err)
	}
	if g.Lease.ID == "" {
		t.Fatal("no lease")
	}
	mu.Lock()
	defer mu.Unlock()
	if len(lastIDs) == 0 || lastIDs[0] == "" {
		t.Fatalf("the next URL's stream opened with Last-Event-IDs %q, want a resume naming the last event", lastIDs)
	}
}

func asError(err error, ce **contract.Error) bool { return errors.As(err, ce) }
