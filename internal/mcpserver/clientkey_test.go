package mcpserver

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/daemon"
	"github.com/simlock/simlock/internal/daemontest"
	"github.com/simlock/simlock/internal/httpapi"
)

func TestLeaseInputTakesOneClientKeyUnderEitherName(t *testing.T) {
	for _, c := range []struct {
		name           string
		client, older  string
		wantField, key string
	}{
		{name: "clientKey", client: "build-1", key: "build-1"},
		{name: "older name", older: "build-1", key: "build-1"},
		{name: "both the same", client: "build-1", older: "build-1", key: "build-1"},
		{name: "two keys", client: "build-1", older: "build-2", wantField: "clientKey"},
		{name: "bad characters", client: "has space", wantField: "clientKey"},
		{name: "too long", client: strings.Repeat("k", contract.MaxIDLen+1), wantField: "clientKey"},
		{name: "none"},
	} {
		in := leaseInput{Platform: contract.PlatformIOS, ClientKey: c.client, IdempotencyKey: c.older}
		err := in.Validate()
		if c.wantField != "" {
			ce := contract.AsError(err)
			if err == nil || ce.Code != contract.CodeBadRequest || ce.Details["field"] != c.wantField {
				t.Errorf("%s: Validate = %v, want BAD_REQUEST naming %s", c.name, err, c.wantField)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: Validate = %v, want nil", c.name, err)
		}
		if got := in.request().IdempotencyKey; got != c.key {
			t.Errorf("%s: the daemon is asked with key %q, want %q", c.name, got, c.key)
		}
	}
}

func TestALeaseLeftOutIsTheSessionsOnlyOneAndSeveralMustBeNamed(t *testing.T) {
	s := newServer(Options{})
	defer s.end()
	if _, err := s.leaseArg(""); contract.AsError(err).Details["field"] != "leaseId" {
		t.Errorf("no lease held, none named: %v, want BAD_REQUEST naming leaseId", err)
	}
	s.held["lse_a"] = &heldLease{halt: make(chan struct{})}
	if id, err := s.leaseArg(""); err != nil || id != "lse_a" {
		t.Errorf("one lease held, none named: %q %v, want lse_a", id, err)
	}
	s.held["lse_b"] = &heldLease{halt: make(chan struct{})}
	_, err := s.leaseArg("")
	if ce := contract.AsError(err); ce.Details["field"] != "leaseId" || !strings.Contains(ce.Message, "lse_a, lse_b") {
		t.Errorf("two leases held, none named: %v, want BAD_REQUEST naming leaseId and both leases", err)
	}
	if id, err := s.leaseArg("lse_other"); err != nil || id != "lse_other" {
		t.Errorf("a lease named: %q %v, want it as given", id, err)
	}
}

// A lease_simulator call with a clientKey whose session ends (a client
// that lost its connection and starts over) leaves its request in line,
// and the same call from a new session of the same token joins it rather
// than making a second; it is granted there.
func TestAClientKeyJoinsTheFirstRequestFromALaterSessionOfTheSameToken(t *testing.T) {
	started := make(chan *Session, 4)
	r := newHTTPRig(t,
		daemontest.Set("capacity.strategy", "fixed", "capacity.config.maxRunning", "1"),
		daemontest.WithOptions(func(o *daemon.Options) {
			o.MCP = func(agent daemon.MCPAgent, t mcp.Transport) (httpapi.MCPSession, error) {
				sess, err := Start(Options{Dial: agent.Dial, AgentID: agent.ID, Version: "test", Logger: agent.Logger,
					Tick: 50 * time.Millisecond, LeasesOutliveSession: true}, t)
				if err == nil {
					started <- sess
				}
				return sess, err
			}
		}))
	ctx := context.Background()
	other := r.dt.Dial("other")
	held, err := other.RequestLease(ctx, contract.LeaseRequestInput{Platform: contract.PlatformIOS}, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, secret := r.token(contract.TokenAgent)
	args := map[string]any{"platform": "ios", "clientKey": "ci-run-42", "waitSeconds": 1}

	first := r.mustSession(secret)
	firstSess := <-started
	_, p1, err := callTool(ctx, first, "lease_simulator", args)
	if err != nil || p1["state"] != "pending" {
		t.Fatalf("the first call: %v %v, want pending", p1, err)
	}
	requestID := p1["requestId"]
	first.Close()
	<-firstSess.Done()

	st, err := r.dt.Admin().Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Waiting) != 1 || st.Waiting[0].RequestID != requestID {
		t.Fatalf("after the first session ended, waiting = %+v; want its keyed request %v still in line", st.Waiting, requestID)
	}

	second := r.mustSession(secret)
	_, p2, err := callTool(ctx, second, "lease_simulator", args)
	if err != nil || p2["requestId"] != requestID {
		t.Fatalf("the same call from a new session: %v %v, want request %v joined", p2, err, requestID)
	}
	if _, err := other.Release(ctx, held.Lease.ID); err != nil {
		t.Fatal(err)
	}
	res, g, err := callTool(ctx, second, "wait_for_lease", map[string]any{"requestId": requestID, "waitSeconds": 30})
	if err != nil || res.IsError || g["requestId"] != requestID {
		t.Fatalf("wait_for_lease: %v %v, want the grant of request %v", g, err, requestID)
	}
	leaseID := g["lease"].(map[string]any)["id"]
	_, again, err := callTool(ctx, second, "lease_simulator", args)
	if err != nil || again["requestId"] != requestID || again["lease"].(map[string]any)["id"] != leaseID {
		t.Errorf("the call repeated after the grant: %v %v, want the same grant (lease %v)", again, err, leaseID)
	}
}
