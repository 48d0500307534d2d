package mcpserver

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// ProxyOptions configure Proxy.
type ProxyOptions struct {
	// Endpoint is the remote server's MCP endpoint (<daemon URL>/mcp).
	Endpoint string
	// Token is the bearer token sent with every request to it.
	Token string
	// HTTPClient carries the requests (TLS and its roots included); nil
	// means http.DefaultClient's transport.
	HTTPClient *http.Client
	// Logger writes to stderr: what broke and why.
	Logger *slog.Logger
}

// Proxy copies one MCP session between local (the stdio a client launched
// this process with) and the Streamable HTTP endpoint of a remote daemon
// or gateway, message by message both ways, until either side ends or ctx
// does. The remote server does the work: it sees the client's own
// initialize, calls, progress tokens and cancellations, so the session
// behaves as if the client spoke HTTP itself. Ending the session ends the
// remote one (DELETE), which withdraws its waiting requests; its leases
// stay the token's.
//
// A remote server that answers 404 for the session no longer has it (the
// gateway replica that held it went away, and another one answers now):
// the proxy opens a new session with the client's own initialize (the
// same client info and capabilities), sends it the message that was
// refused, and goes on. Nothing the agent holds is lost with the session:
// its leases live on the gateway, under the token.
func Proxy(ctx context.Context, opts ProxyOptions, local mcp.Transport) error {
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	base := http.DefaultTransport
	if opts.HTTPClient != nil && opts.HTTPClient.Transport != nil {
		base = opts.HTTPClient.Transport
	}
	p := &proxy{log: log, endpoint: opts.Endpoint}
	p.hc = &http.Client{Transport: &proxyAuth{token: opts.Token, version: &p.version, next: base}}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	remote, err := p.connect(ctx)
	if err != nil {
		return err
	}
	p.remote = remote
	defer func() { p.current().Close() }()
	near, err := local.Connect(ctx)
	if err != nil {
		return fmt.Errorf("stdio: %w", err)
	}
	defer near.Close()
	p.near = near

	errs := make(chan error, 2)
	go func() { errs <- p.up(ctx) }()
	go func() { errs <- p.down(ctx) }()
	err = <-errs
	cancel()
	if errors.Is(err, io.EOF) || errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}

// proxy is one proxied session. Its two copying loops run concurrently;
// writes to the local side are serialised by the transport.
type proxy struct {
	log      *slog.Logger
	endpoint string
	hc       *http.Client
	near     mcp.Connection

	// version is the protocol version the remote server chose, sent on
	// every request after initialize.
	version sync.Map // "v" -> string

	mu sync.Mutex
	// mu guards the fields below.
	initID any // the id of the client's initialize, to spot its answer
	// init is the client's initialize, sent again to open a new session
	// when the remote one is gone.
	init   *jsonrpc.Request
	remote mcp.Connection
	// renewed counts the sessions opened again, for the ids of their
	// initializes.
	renewed int
	listen  sync.Once

	// reconnecting is held by the one loop that opens a new session.
	reconnecting sync.Mutex
}

// connect opens a remote session (before its initialize).
func (p *proxy) connect(ctx context.Context) (mcp.Connection, error) {
	remote, err := (&mcp.StreamableClientTransport{Endpoint: p.endpoint, HTTPClient: p.hc, DisableStandaloneSSE: true}).Connect(ctx)
	if err != nil {
		return nil, fmt.Errorf("connect to %s: %w", p.endpoint, err)
	}
	return remote, nil
}

// current is the remote session in use.
func (p *proxy) current() mcp.Connection {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.remote
}

// renew replaces the remote session old, which the server no longer has,
// with a new one initialized as the client initialized the first: the
// client's initialize is sent again (under an id of the proxy's own, its
// answer kept from the client, which has had one), then the initialized
// notification. When another loop has already replaced old, its
// replacement is returned.
func (p *proxy) renew(ctx context.Context, old mcp.Connection) (mcp.Connection, error) {
	p.reconnecting.Lock()
	defer p.reconnecting.Unlock()
	p.mu.Lock()
	cur, init := p.remote, p.init
	p.renewed++
	n := p.renewed
	p.mu.Unlock()
	if cur != old {
		return cur, nil
	}
	if init == nil {
		return nil, errors.New("the remote MCP session ended before it was initialized")
	}
	p.log.Warn("the remote MCP server no longer has this session (a gateway replica went away?); opening a new one", "endpoint", p.endpoint)
	next, err := p.connect(ctx)
	if err != nil {
		return nil, err
	}
	id, err := jsonrpc.MakeID(fmt.Sprintf("simlock-mcp-proxy-reinitialize-%d", n))
	if err != nil {
		next.Close()
		return nil, err
	}
	again := &jsonrpc.Request{ID: id, Method: init.Method, Params: init.Params}
	if err := next.Write(ctx, again); err != nil {
		next.Close()
		return nil, fmt.Errorf("initialize a new session on %s: %w", p.endpoint, err)
	}
	for {
		msg, err := next.Read(ctx)
		if err != nil {
			next.Close()
			return nil, fmt.Errorf("initialize a new session on %s: %w", p.endpoint, err)
		}
		res, ok := msg.(*jsonrpc.Response)
		if !ok || res.ID != id {
			continue // nothing else is the client's before its session is up
		}
		if res.Error != nil {
			next.Close()
			return nil, fmt.Errorf("initialize a new session on %s: %w", p.endpoint, res.Error)
		}
		break
	}
	if err := next.Write(ctx, &jsonrpc.Request{Method: "notifications/initialized", Params: json.RawMessage(`{}`)}); err != nil {
		next.Close()
		return nil, fmt.Errorf("initialize a new session on %s: %w", p.endpoint, err)
	}
	p.mu.Lock()
	p.remote = next
	p.mu.Unlock()
	old.Close() // the server has no session to end: no DELETE is sent
	return next, nil
}

// up copies the client's messages to the remote server.
func (p *proxy) up(ctx context.Context) error {
	for {
		msg, err := p.near.Read(ctx)
		if err != nil {
			return err
		}
		if req, ok := msg.(*jsonrpc.Request); ok && req.Method == "initialize" && req.ID.IsValid() {
			p.mu.Lock()
			p.initID, p.init = req.ID.Raw(), req
			p.mu.Unlock()
		}
		remote := p.current()
		err = remote.Write(ctx, msg)
		if errors.Is(err, mcp.ErrSessionMissing) {
			// The server did nothing with the message: it goes to the
			// new session.
			if remote, err = p.renew(ctx, remote); err == nil {
				err = remote.Write(ctx, msg)
			}
		}
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			// A message the server refused is answered for the client, so
			// that its call ends; the session goes on.
			p.log.Warn("remote MCP server refused a message", "err", err)
			if req, ok := msg.(*jsonrpc.Request); ok && req.ID.IsValid() {
				_ = p.near.Write(ctx, &jsonrpc.Response{ID: req.ID, Error: &jsonrpc.Error{Code: -32603, Message: "simlock mcp proxy: " + err.Error()}})
			}
		}
	}
}

// down copies the remote server's messages to the client, and opens the
// server's own stream once the session is initialized.
func (p *proxy) down(ctx context.Context) error {
	for {
		remote := p.current()
		msg, err := remote.Read(ctx)
		if errors.Is(err, mcp.ErrSessionMissing) {
			if _, err = p.renew(ctx, remote); err == nil {
				continue
			}
		}
		if err != nil {
			if ctx.Err() == nil {
				p.log.Error("the remote MCP session ended", "endpoint", p.endpoint, "err", err)
			}
			return fmt.Errorf("remote %s: %w", p.endpoint, err)
		}
		if res, ok := msg.(*jsonrpc.Response); ok {
			p.noteInitialized(ctx, res)
		}
		if err := p.near.Write(ctx, msg); err != nil {
			return err
		}
	}
}

// noteInitialized takes the protocol version from the answer to the
// client's initialize and, for versions that have one, opens the server's
// standalone stream, which carries what is not an answer to a call (a
// warning that a lease was lost).
func (p *proxy) noteInitialized(ctx context.Context, res *jsonrpc.Response) {
	p.mu.Lock()
	isInit := p.initID != nil && res.ID.Raw() == p.initID
	p.mu.Unlock()
	if !isInit || res.Error != nil {
		return
	}
	var r struct {
		ProtocolVersion string `json:"protocolVersion"`
	}
	if json.Unmarshal(res.Result, &r) != nil || r.ProtocolVersion == "" {
		return
	}
	p.version.Store("v", r.ProtocolVersion)
	// From 2026-07-28 there is no standalone stream.
	if r.ProtocolVersion >= "2026-07-28" {
		return
	}
	p.listen.Do(func() { go p.standalone(ctx) })
}

// standalone reads the server's standalone stream (GET) and copies each
// message to the client, reconnecting with Last-Event-ID when it breaks.
func (p *proxy) standalone(ctx context.Context) {
	last := ""
	for ctx.Err() == nil {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.endpoint, nil)
		if err != nil {
			return
		}
		req.Header.Set("Accept", "text/event-stream")
		req.Header.Set("Mcp-Session-Id", p.current().SessionID())
		if last != "" {
			req.Header.Set("Last-Event-ID", last)
		}
		res, err := p.hc.Do(req)
		switch {
		case err != nil:
			if ctx.Err() == nil {
				p.log.Warn("the remote MCP server's stream broke; reconnecting", "err", err)
			}
		case res.StatusCode == http.StatusNotFound:
			// The session is gone; the calls' loops open a new one, and
			// this stream follows it.
			res.Body.Close()
			last = ""
		case res.StatusCode == http.StatusMethodNotAllowed:
			// The server has no standalone stream: everything comes on
			// the calls' own streams.
			res.Body.Close()
			return
		case res.StatusCode != http.StatusOK:
			res.Body.Close()
			p.log.Warn("the remote MCP server refused its stream", "status", res.Status)
			return
		default:
			last = p.events(ctx, res.Body, last)
			res.Body.Close()
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
}

// events copies the messages of one server-sent event stream to the
// client and returns the id of the last event read.
func (p *proxy) events(ctx context.Context, body io.Reader, last string) string {
	sc := bufio.NewScanner(body)
	sc.Buffer(make([]byte, 64*1024), 16<<20)
	var data strings.Builder
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if data.Len() > 0 {
				if msg, err := jsonrpc.DecodeMessage([]byte(data.String())); err == nil {
					if p.near.Write(ctx, msg) != nil {
						return last
					}
				}
				data.Reset()
			}
		case strings.HasPrefix(line, "data:"):
			if data.Len() > 0 {
				data.WriteByte('\n')
			}
			data.WriteString(strings.TrimPrefix(strings.TrimPrefix(line, "data:"), " "))
		case strings.HasPrefix(line, "id:"):
			last = strings.TrimSpace(strings.TrimPrefix(line, "id:"))
		}
	}
	return last
}

// proxyAuth adds the bearer token, and the protocol version once known, to
// every request to the remote server.
type proxyAuth struct {
	token   string
	version *sync.Map
	next    http.RoundTripper
}

func (a *proxyAuth) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context())
	if a.token != "" {
		req.Header.Set("Authorization", "Bearer "+a.token)
	}
	if v, ok := a.version.Load("v"); ok && req.Header.Get("Mcp-Protocol-Version") == "" {
		req.Header.Set("Mcp-Protocol-Version", v.(string))
	}
	return a.next.RoundTrip(req)
}
