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

	remote, err := (&mcp.StreamableClientTransport{Endpoint: opts.Endpoint, HTTPClient: p.hc, DisableStandaloneSSE: true}).Connect(ctx)
	if err != nil {
		return fmt.Errorf("connect to %s: %w", opts.Endpoint, err)
	}
	defer remote.Close()
	near, err := local.Connect(ctx)
	if err != nil {
		return fmt.Errorf("stdio: %w", err)
	}
	defer near.Close()
	p.near, p.remote = near, remote

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
	remote   mcp.Connection

	// version is the protocol version the remote server chose, sent on
	// every request after initialize.
	version sync.Map // "v" -> string

	mu     sync.Mutex
	initID any // the id of the client's initialize, to spot its answer
	listen sync.Once
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
			p.initID = req.ID.Raw()
			p.mu.Unlock()
		}
		if err := p.remote.Write(ctx, msg); err != nil {
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
		msg, err := p.remote.Read(ctx)
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
		req.Header.Set("Mcp-Session-Id", p.remote.SessionID())
		if last != "" {
			req.Header.Set("Last-Event-ID", last)
		}
		res, err := p.hc.Do(req)
		switch {
		case err != nil:
			if ctx.Err() == nil {
				p.log.Warn("the remote MCP server's stream broke; reconnecting", "err", err)
			}
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
