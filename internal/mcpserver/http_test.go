package mcpserver

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/daemon"
	"github.com/simlock/simlock/internal/daemontest"
	"github.com/simlock/simlock/internal/httpapi"
)

// serveHTTP is what the binary hands a daemon to serve /mcp.
func serveHTTP(agent daemon.MCPAgent, t mcp.Transport) (httpapi.MCPSession, error) {
	return Start(Options{Dial: agent.Dial, AgentID: agent.ID, Version: "test", Logger: agent.Logger,
		Tick: 50 * time.Millisecond, LeasesOutliveSession: true, UploadURL: agent.UploadURL}, t)
}

// httpRig is a daemon with its HTTP API on, serving /mcp.
type httpRig struct {
	t  *testing.T
	dt *daemontest.Daemon
	// tr carries every request of the test, its connections closed at
	// the end.
	tr *http.Transport
	hc *http.Client
}

func newHTTPRig(t *testing.T, opts ...daemontest.Option) *httpRig {
	t.Helper()
	opts = append([]daemontest.Option{
		daemontest.Set("http.enabled", "true", "http.port", "0"),
		daemontest.DemoTimes(20*time.Millisecond, 20*time.Millisecond),
		daemontest.WithOptions(func(o *daemon.Options) { o.MCP = serveHTTP }),
	}, opts...)
	r := &httpRig{t: t, dt: daemontest.Start(t, opts...), tr: &http.Transport{}}
	r.hc = &http.Client{Transport: r.tr}
	t.Cleanup(r.tr.CloseIdleConnections)
	return r
}

// token makes a token of role and returns its id and secret.
func (r *httpRig) token(role contract.TokenRole) (string, string) {
	r.t.Helper()
	var res contract.TokenCreateResult
	if err := r.dt.Admin().Call(context.Background(), contract.OpTokenCreate, contract.TokenCreateInput{Role: role}, &res); err != nil {
		r.t.Fatal(err)
	}
	return res.Token.ID, res.Secret
}

// bearer adds a token to every request of an HTTP client.
type bearer struct {
	secret string
	next   http.RoundTripper
}

func (b bearer) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context())
	req.Header.Set("Authorization", "Bearer "+b.secret)
	return b.next.RoundTrip(req)
}

// session opens an MCP session over Streamable HTTP with the token secret.
func (r *httpRig) session(secret string, warn func(*mcp.LoggingMessageParams)) (*mcp.ClientSession, error) {
	c := mcp.NewClient(&mcp.Implementation{Name: "test"}, &mcp.ClientOptions{
		LoggingMessageHandler: func(_ context.Context, req *mcp.LoggingMessageRequest) {
			if warn != nil {
				warn(req.Params)
			}
		},
	})
	t := &mcp.StreamableClientTransport{Endpoint: r.dt.HTTPURL() + "/mcp", HTTPClient: &http.Client{Transport: bearer{secret, r.tr}}, MaxRetries: -1}
	return c.Connect(context.Background(), t, nil)
}

func (r *httpRig) mustSession(secret string) *mcp.ClientSession {
	r.t.Helper()
	cs, err := r.session(secret, nil)
	if err != nil {
		r.t.Fatal(err)
	}
	r.t.Cleanup(func() { cs.Close() })
	return cs
}

// callTool calls a tool and decodes its JSON answer.
func callTool(ctx context.Context, cs *mcp.ClientSession, name string, args map[string]any) (*mcp.CallToolResult, map[string]any, error) {
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		return nil, nil, err
	}
	var out map[string]any
	_ = json.Unmarshal([]byte(res.Content[0].(*mcp.TextContent).Text), &out)
	return res, out, nil
}

// get does an HTTP GET with a token and returns the status.
func (r *httpRig) get(path, secret string) int {
	r.t.Helper()
	req, _ := http.NewRequest("GET", r.dt.HTTPURL()+path, nil)
	req.Header.Set("Authorization", "Bearer "+secret)
	resp, err := r.hc.Do(req)
	if err != nil {
		r.t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// A lease made over /mcp is the token's: seen and renewed with the same
// token over HTTP, and neither seen nor released by another token, whose
// own MCP session cannot reach it, nor name the first session.
func TestMCPSessionsOfTwoTokensAreIsolatedAndALeaseIsItsTokens(t *testing.T) {
	r := newHTTPRig(t)
	ctx := context.Background()
	idA, secretA := r.token(contract.TokenAgent)
	_, secretB := r.token(contract.TokenAgent)
	a, b := r.mustSession(secretA), r.mustSession(secretB)

	res, g, err := callTool(ctx, a, "lease_simulator", map[string]any{"platform": "ios"})
	if err != nil || res.IsError {
		t.Fatalf("lease over /mcp: %v %v", err, g)
	}
	lease := g["lease"].(map[string]any)
	leaseID := lease["id"].(string)
	if lease["ownerId"] != idA {
		t.Errorf("lease owner %v, want the token's principal %s", lease["ownerId"], idA)
	}
	if got := r.get("/v1/leases/"+leaseID, secretA); got != http.StatusOK {
		t.Errorf("GET the lease with its token = %d, want 200", got)
	}
	req, _ := http.NewRequest("POST", r.dt.HTTPURL()+"/v1/leases/"+leaseID+"/renew", strings.NewReader(`{}`))
	req.Header.Set("Authorization", "Bearer "+secretA)
	req.Header.Set("Content-Type", "application/json")
	if resp, err := r.hc.Do(req); err != nil {
		t.Fatal(err)
	} else if resp.Body.Close(); resp.StatusCode != http.StatusOK {
		t.Errorf("renew over HTTP with the token = %d, want 200", resp.StatusCode)
	}
	if got := r.get("/v1/leases/"+leaseID, secretB); got != http.StatusNotFound {
		t.Errorf("GET the lease with another token = %d, want 404", got)
	}
	res, out, err := callTool(ctx, b, "release_simulator", map[string]any{"leaseId": leaseID})
	if err != nil || !res.IsError || out["code"] != string(contract.CodeForbidden) {
		t.Errorf("another token's release over /mcp = %v %v, want the FORBIDDEN tool error", out, err)
	}
	// B naming A's session is told there is no such session of B's.
	req, _ = http.NewRequest("GET", r.dt.HTTPURL()+"/mcp", nil)
	req.Header.Set("Authorization", "Bearer "+secretB)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Mcp-Session-Id", a.ID())
	resp, err := r.hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var body struct{ Error contract.Error }
	_ = json.NewDecoder(resp.Body).Decode(&body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound || body.Error.Code != contract.CodeUnknownMCPSession {
		t.Errorf("another token naming the session = %d %s, want 404 UNKNOWN_MCP_SESSION", resp.StatusCode, body.Error.Code)
	}
	if got := r.get("/v1/leases/"+leaseID, secretA); got != http.StatusOK {
		t.Errorf("after another token's attempts the lease is %d, want still 200", got)
	}
}

// Cancelling a lease_simulator call over HTTP withdraws its request:
// nothing of it waits in the queue afterwards.
func TestACancelledCallOverHTTPWithdrawsTheRequest(t *testing.T) {
	r := newHTTPRig(t, daemontest.Set("capacity.strategy", "fixed", "capacity.config.maxRunning", "1"))
	ctx := context.Background()
	other := r.dt.Dial("other")
	if _, err := other.RequestLease(ctx, contract.LeaseRequestInput{Platform: contract.PlatformIOS}, nil); err != nil {
		t.Fatal(err)
	}
	_, secret := r.token(contract.TokenAgent)
	cs := r.mustSession(secret)
	admin := r.dt.Admin()
	evs, _, err := admin.Subscribe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	callCtx, cancel := context.WithCancel(ctx)
	errs := make(chan error, 1)
	go func() {
		_, _, err := callTool(callCtx, cs, "lease_simulator", map[string]any{"platform": "ios"})
		errs <- err
	}()
	queued := awaitEvent(t, evs, "lease.queued", "")
	cancel()
	<-errs
	rejected := awaitEvent(t, evs, "lease.rejected", "cancelled")
	if rejected["requestId"] != queued["requestId"] {
		t.Errorf("withdrawn request %v, want the queued %v", rejected["requestId"], queued["requestId"])
	}
	st, err := admin.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.QueueDepth != 0 || len(st.Waiting) != 0 {
		t.Errorf("after the cancel: queue depth %d, waiting %v; want none", st.QueueDepth, st.Waiting)
	}
}

// A worker token opens no MCP session.
func TestAWorkerTokenIsRefusedAtMCP(t *testing.T) {
	r := newHTTPRig(t, daemontest.Gateway())
	secret := r.dt.WorkerToken()
	_, err := r.session(secret, nil)
	if err == nil || !strings.Contains(err.Error(), "Forbidden") {
		t.Fatalf("a worker token's session: %v, want refused (403 Forbidden)", err)
	}
}

// Revoking a token ends its MCP sessions at once: a request one of them
// waits on is withdrawn, while the leases they made stay the token's,
// until their TTL or an operator ends them.
func TestRevokingATokenEndsItsMCPSessionAndLeavesItsLeases(t *testing.T) {
	r := newHTTPRig(t, daemontest.Set("capacity.strategy", "fixed", "capacity.config.maxRunning", "1"))
	ctx := context.Background()
	holder, holderSecret := r.token(contract.TokenAgent)
	waiter, waiterSecret := r.token(contract.TokenAgent)
	hs, ws := r.mustSession(holderSecret), r.mustSession(waiterSecret)
	res, g, err := callTool(ctx, hs, "lease_simulator", map[string]any{"platform": "android"})
	if err != nil || res.IsError {
		t.Fatalf("lease: %v %v", err, g)
	}
	leaseID := g["lease"].(map[string]any)["id"].(string)
	admin := r.dt.Admin()
	evs, _, err := admin.Subscribe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	go func() { _, _, _ = callTool(ctx, ws, "lease_simulator", map[string]any{"platform": "android"}) }()
	queued := awaitEvent(t, evs, "lease.queued", "")
	revoke := func(id string) {
		var rv contract.TokenRevokeResult
		if err := admin.Call(ctx, contract.OpTokenRevoke, contract.TokenRevokeInput{ID: id}, &rv); err != nil || !rv.Revoked {
			t.Fatalf("revoke: %v %v", rv, err)
		}
	}
	revoke(waiter)
	rejected := awaitEvent(t, evs, "lease.rejected", "cancelled")
	if rejected["requestId"] != queued["requestId"] {
		t.Errorf("withdrawn request %v, want the revoked token's %v", rejected["requestId"], queued["requestId"])
	}
	revoke(holder)
	if _, _, err := callTool(ctx, hs, "lease_status", map[string]any{"leaseId": leaseID}); err == nil {
		t.Errorf("a tool call of a revoked token's session succeeded")
	}
	leases, err := admin.Leases(ctx)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, l := range leases {
		found = found || l.ID == leaseID
	}
	if !found {
		t.Errorf("lease %s ended with its token's session; want it kept", leaseID)
	}
}
