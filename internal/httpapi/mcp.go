package httpapi

import (
	"crypto/rand"
	"net/http"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/openapi"
)

// MCPSession is one MCP session the /mcp route serves (mcpserver.Session).
type MCPSession interface {
	// Initialized reports whether the client completed the initialize
	// handshake.
	Initialized() bool
	// Close ends the session.
	Close()
	// Done is closed once the session has ended.
	Done() <-chan struct{}
}

// MCPStart starts an MCP session acting as tok on t. The daemon's answer
// reaches its operations in-process, as tok's principal, confined as
// remote. uploads gives the session's one-time upload URLs (app_upload_url).
type MCPStart func(tok contract.TokenRecord, t mcp.Transport, uploads MintUpload) (MCPSession, error)

// The defaults of the /mcp bounds.
const (
	DefaultMaxMCPSessions         = 256
	DefaultMaxMCPSessionsPerToken = 16
	DefaultMCPSessionIdle         = 30 * time.Minute
	// mcpMaxBody bounds one POST to /mcp: JSON-RPC messages, larger than
	// the API's bodies when a tool carries a file inline.
	mcpMaxBody = 32 << 20
)

// mcpSessionHeader names an MCP session (Streamable HTTP transport).
const mcpSessionHeader = "Mcp-Session-Id"

// mcpHub holds the MCP sessions of one Server.
type mcpHub struct {
	start            MCPStart
	max, maxPerToken int
	idle             time.Duration

	mu sync.Mutex
	// mu guards the fields below.
	byID    map[string]*mcpConn
	byToken map[string]map[*mcpConn]struct{}
	closed  bool
}

// mcpConn is one session, served over the HTTP requests that name it.
type mcpConn struct {
	id    string
	tokID string
	t     *mcp.StreamableServerTransport
	sess  MCPSession

	mu sync.Mutex
	// mu guards the fields below: the requests in flight, and the timer
	// that ends the session once none has come for the idle bound.
	busy  int
	timer *time.Timer
}

func newMCPHub(opts Options) *mcpHub {
	h := &mcpHub{
		start: opts.MCP, max: opts.MaxMCPSessions, maxPerToken: opts.MaxMCPSessionsPerToken, idle: opts.MCPSessionIdle,
		byID: map[string]*mcpConn{}, byToken: map[string]map[*mcpConn]struct{}{},
	}
	if h.max <= 0 {
		h.max = DefaultMaxMCPSessions
	}
	if h.maxPerToken <= 0 {
		h.maxPerToken = DefaultMaxMCPSessionsPerToken
	}
	if h.idle <= 0 {
		h.idle = DefaultMCPSessionIdle
	}
	return h
}

// serveMCP serves POST, GET and DELETE /mcp: the MCP Streamable HTTP
// transport. A POST without a session id starts a session acting as tok;
// every later request names it, and only tok may.
func (s *Server) serveMCP(w http.ResponseWriter, r *http.Request, tok contract.TokenRecord) error {
	h := s.mcp
	if h.start == nil {
		return contract.Errorf(contract.CodeUnknownRoute, "this daemon serves no MCP sessions")
	}
	id := r.Header.Get(mcpSessionHeader)
	if id == "" {
		if r.Method != http.MethodPost {
			return contract.BadRequest(mcpSessionHeader, "%s /mcp names a session: send the %s header the initialize answer gave", r.Method, mcpSessionHeader)
		}
		return h.open(w, r, tok, s.uploadMinter(r, tok))
	}
	c := h.lookup(id, tok)
	if c == nil {
		// Unknown, ended, or another token's: the same answer, so a
		// session id tells nobody else anything. A client starts a new
		// session on 404 (the transport's rule).
		return contract.Errorf(contract.CodeUnknownMCPSession, "no MCP session %s of this token; start a new one (POST initialize without %s)", contract.Clip(id), mcpSessionHeader)
	}
	if r.Method == http.MethodDelete {
		c.sess.Close()
		w.WriteHeader(http.StatusNoContent)
		return nil
	}
	c.serve(h, w, r)
	return nil
}

// open starts a session for tok and serves its first request.
func (h *mcpHub) open(w http.ResponseWriter, r *http.Request, tok contract.TokenRecord, uploads MintUpload) error {
	c := &mcpConn{id: rand.Text(), tokID: tok.ID}
	c.t = &mcp.StreamableServerTransport{SessionID: c.id}
	if err := h.admit(c); err != nil {
		return err
	}
	sess, err := h.start(tok, c.t, uploads)
	if err != nil {
		h.forget(c)
		return err
	}
	h.mu.Lock()
	c.sess = sess
	h.byID[c.id] = c
	h.mu.Unlock()
	go func() {
		<-sess.Done()
		h.forget(c)
	}()
	if revoked(r.Context()) {
		// The token ended while the session started.
		sess.Close()
		return errTokenRevoked
	}
	c.serve(h, w, r)
	if !sess.Initialized() {
		// Not an initialize that succeeded (a probe, a failed handshake):
		// nobody can name this session, so it ends now.
		sess.Close()
	}
	return nil
}

// admit counts c against the bounds, or refuses it.
func (h *mcpHub) admit(c *mcpConn) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	total := 0
	for _, set := range h.byToken {
		total += len(set)
	}
	switch {
	case h.closed:
		return errStopping()
	case total >= h.max:
		return contract.Errorf(contract.CodeTooManyStreams, "%d MCP sessions are open, the most the daemon serves (http.maxMcpSessions); end one (DELETE /mcp) or try again later", total).
			With("maxMcpSessions", h.max)
	case len(h.byToken[c.tokID]) >= h.maxPerToken:
		return contract.Errorf(contract.CodeTooManyStreams, "this token has %d MCP sessions open, the most one token may (http.maxMcpSessionsPerToken); end one first (DELETE /mcp)", len(h.byToken[c.tokID])).
			With("maxMcpSessionsPerToken", h.maxPerToken)
	}
	set := h.byToken[c.tokID]
	if set == nil {
		set = map[*mcpConn]struct{}{}
		h.byToken[c.tokID] = set
	}
	set[c] = struct{}{}
	return nil
}

// forget lets go of an ended (or never started) session.
func (h *mcpHub) forget(c *mcpConn) {
	h.mu.Lock()
	if h.byID[c.id] == c {
		delete(h.byID, c.id)
	}
	if set := h.byToken[c.tokID]; set != nil {
		delete(set, c)
		if len(set) == 0 {
			delete(h.byToken, c.tokID)
		}
	}
	h.mu.Unlock()
	c.mu.Lock()
	if c.timer != nil {
		c.timer.Stop()
	}
	c.mu.Unlock()
}

// lookup finds session id when it is tok's.
func (h *mcpHub) lookup(id string, tok contract.TokenRecord) *mcpConn {
	h.mu.Lock()
	defer h.mu.Unlock()
	c := h.byID[id]
	if c == nil || c.tokID != tok.ID {
		return nil
	}
	return c
}

// serve hands r to the session's transport; while no request of the
// session is in flight, the idle bound runs.
func (c *mcpConn) serve(h *mcpHub, w http.ResponseWriter, r *http.Request) {
	c.mu.Lock()
	c.busy++
	if c.timer != nil {
		c.timer.Stop()
	}
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.busy--; c.busy == 0 {
			if c.timer == nil {
				c.timer = time.AfterFunc(h.idle, c.sess.Close)
			} else {
				c.timer.Reset(h.idle)
			}
		}
	}()
	// The transport takes the request's context for the stream it
	// serves; the call it carries runs on the session's own.
	c.t.ServeHTTP(w, r)
}

// endToken ends the MCP sessions of token id, and waits for their ends.
// A session still starting is ended by its own request, which EndToken
// cancelled.
func (h *mcpHub) endToken(id string) {
	h.mu.Lock()
	var ends []MCPSession
	for c := range h.byToken[id] {
		if c.sess != nil {
			ends = append(ends, c.sess)
		}
	}
	h.mu.Unlock()
	endAll(ends)
}

// close ends every session and refuses new ones.
func (h *mcpHub) close() {
	h.mu.Lock()
	h.closed = true
	var ends []MCPSession
	for _, set := range h.byToken {
		for c := range set {
			if c.sess != nil {
				ends = append(ends, c.sess)
			}
		}
	}
	h.mu.Unlock()
	endAll(ends)
}

// mcpEndBound bounds the wait for sessions to let go of what they hold.
const mcpEndBound = 15 * time.Second

// endAll closes sessions and waits, within mcpEndBound, for each to end.
func endAll(ss []MCPSession) {
	for _, sess := range ss {
		sess.Close()
	}
	timeout := time.NewTimer(mcpEndBound)
	defer timeout.Stop()
	for _, sess := range ss {
		select {
		case <-sess.Done():
		case <-timeout.C:
			return
		}
	}
}

// mcpDoc describes one method of /mcp, the MCP Streamable HTTP endpoint.
func mcpDoc(id, summary, what string) routeDoc {
	return routeDoc{
		id: id, tag: "mcp", summary: summary,
		description: "The MCP Streamable HTTP endpoint (docs/MCP.md): simlock's MCP tools for an agent token (or an operator token), each call acting as the token's principal. " + what +
			" The transport's own refusals (a malformed message, a wrong Accept or Content-Type) are plain text.",
		params: []openapi.Param{{Name: mcpSessionHeader, In: "header", Description: "The MCP session, as the initialize answer named it; absent only on initialize."}},
		replies: []openapi.Response{
			{Status: http.StatusOK, Description: "JSON-RPC messages: an event stream of them, or one as JSON.",
				Bodies:  []openapi.Body{{ContentType: openapi.EventStream}, {Type: typeOf[map[string]any]()}},
				Headers: map[string]string{mcpSessionHeader: "The session's id (on the answer to initialize)."}},
			{Status: http.StatusAccepted, Description: "A notification or response was taken."},
			{Status: http.StatusNoContent, Description: "The session ended (DELETE)."},
		},
		errors: []contract.Code{contract.CodeUnknownMCPSession, contract.CodeTooManyStreams, contract.CodeUnknownRoute},
	}
}
