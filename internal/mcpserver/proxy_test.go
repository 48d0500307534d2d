package mcpserver

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// replicaStandIn serves MCP as one gateway replica would; replace swaps
// in another replica, which knows none of the first one's sessions. It
// records the client name of each initialize it gets.
type replicaStandIn struct {
	mu      sync.Mutex
	h       *mcp.StreamableHTTPHandler
	servers []*mcp.Server
	inits   []string
}

func newReplica() *replicaStandIn {
	s := &replicaStandIn{}
	s.replace()
	return s
}

func (s *replicaStandIn) newHandler() *mcp.StreamableHTTPHandler {
	srv := mcp.NewServer(&mcp.Implementation{Name: "replica", Version: "1"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "ping", Description: "answers pong"}, func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, struct{}, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "pong"}}}, struct{}{}, nil
	})
	s.servers = append(s.servers, srv)
	return mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
}

func (s *replicaStandIn) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodPost {
		b, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(b))
		var m struct {
			Method string `json:"method"`
			Params struct {
				ClientInfo struct {
					Name string `json:"name"`
				} `json:"clientInfo"`
			} `json:"params"`
		}
		if json.Unmarshal(b, &m) == nil && m.Method == "initialize" {
			s.mu.Lock()
			s.inits = append(s.inits, m.Params.ClientInfo.Name)
			s.mu.Unlock()
		}
	}
	s.mu.Lock()
	h := s.h
	s.mu.Unlock()
	h.ServeHTTP(w, r)
}

func (s *replicaStandIn) replace() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.h = s.newHandler()
}

// close ends every session the replicas served (a replica replaced had
// one left, which its server would have lost with its machine).
func (s *replicaStandIn) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, srv := range s.servers {
		for ss := range srv.Sessions() {
			ss.Close()
		}
	}
}

func (s *replicaStandIn) initializes() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.inits)
}

// When the remote answers 404 for the proxied session (the replica that
// held it went away), the proxy initializes a new one as the client did
// and the client's call is answered as if nothing happened.
func TestTheProxyOpensANewSessionWhenTheRemoteNoLongerHasIt(t *testing.T) {
	remote := newReplica()
	ts := httptest.NewServer(remote)
	defer ts.Close()
	defer remote.close()
	defer ts.CloseClientConnections()

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	near, far := mcp.NewInMemoryTransports()
	done := make(chan error, 1)
	go func() { done <- Proxy(ctx, ProxyOptions{Endpoint: ts.URL, HTTPClient: ts.Client()}, far) }()
	defer func() {
		cancel()
		<-done
	}()
	sess, err := mcp.NewClient(&mcp.Implementation{Name: "agent-7", Version: "1"}, nil).Connect(ctx, near, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	ping := func(when string) {
		t.Helper()
		res, err := sess.CallTool(ctx, &mcp.CallToolParams{Name: "ping"})
		if err != nil {
			t.Fatalf("ping %s: %v", when, err)
		}
		if len(res.Content) != 1 || res.Content[0].(*mcp.TextContent).Text != "pong" || res.IsError {
			t.Fatalf("ping %s answered %+v, want pong", when, res)
		}
	}
	ping("on the first replica")
	remote.replace()
	ping("once another replica answers")
	ping("again on the new session")
	if got := remote.initializes(); !slices.Equal(got, []string{"agent-7", "agent-7"}) {
		t.Errorf("initializes from clients %q, want the client's own twice", got)
	}
}
