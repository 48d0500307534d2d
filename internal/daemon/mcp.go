package daemon

import (
	"context"
	"log/slog"
	"net"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/simlock/simlock/internal/client"
	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/httpapi"
)

// MCPServe serves one MCP session of /mcp for agent on t (the binary's is
// mcpserver.Start). The daemon cannot import the MCP server, which is one
// of its clients, so whoever starts the daemon hands it in.
type MCPServe func(agent MCPAgent, t mcp.Transport) (httpapi.MCPSession, error)

// MCPAgent is who an MCP session of /mcp acts as, and how it reaches the
// daemon.
type MCPAgent struct {
	// ID is the token's id: the principal the token has on every other
	// HTTP route, so a lease made over /mcp is the token's.
	ID string
	// Dial opens an in-process session acting as the token (autostart
	// is meaningless here: the daemon is running).
	Dial    func(ctx context.Context, autostart bool) (*client.Client, error)
	Logger  *slog.Logger
	Version string
	// UploadURL gives the session's one-time upload URLs (app_upload_url).
	UploadURL httpapi.MintUpload
}

// mcpStart is the HTTP API's MCPStart, nil without Options.MCP.
func (d *Daemon) mcpStart() httpapi.MCPStart {
	if d.opts.MCP == nil {
		return nil
	}
	return d.startMCP
}

// startMCP starts an MCP session acting as tok.
func (d *Daemon) startMCP(tok contract.TokenRecord, t mcp.Transport, uploads httpapi.MintUpload) (httpapi.MCPSession, error) {
	agent := MCPAgent{
		ID:        tok.ID,
		Dial:      func(ctx context.Context, _ bool) (*client.Client, error) { return d.dialAs(ctx, tok) },
		Logger:    d.log.With("module", "mcp", "tokenId", tok.ID),
		Version:   d.opts.Version,
		UploadURL: uploads,
	}
	return d.opts.MCP(agent, t)
}

// dialAs opens a session with this daemon over an in-memory pipe, served
// like a socket's connection but acting as tok: its role and principal,
// confined as remote (a remote surface never names a host path). It fails
// once the token is revoked or the daemon stops.
func (d *Daemon) dialAs(ctx context.Context, tok contract.TokenRecord) (*client.Client, error) {
	if d.tokens == nil || !d.tokens.has(tok.ID) {
		return nil, contract.Errorf(contract.CodeUnauthenticated, "the token was revoked")
	}
	server, near := net.Pipe()
	c := newConn(d, server)
	c.as = &tok
	d.mu.Lock()
	if d.stopping {
		d.mu.Unlock()
		c.close()
		server.Close()
		near.Close()
		return nil, contract.Errorf(contract.CodeDaemonStopping, "the daemon is stopping")
	}
	d.conns[c] = struct{}{}
	d.mu.Unlock()
	go c.run()
	cl, err := client.New(ctx, near, contract.HelloInput{Principal: tok.ID, Client: "simlock-mcp-http", Remote: true})
	if err != nil {
		near.Close()
		return nil, err
	}
	return cl, nil
}

// helloAs answers the hello of an in-process session acting as c.as.
func (c *conn) helloAs(in contract.HelloInput) (any, error) {
	tok := *c.as
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.sess != nil {
		return nil, contract.Errorf(contract.CodeBadRequest, "hello was already sent on this connection")
	}
	c.sess = newSession(c.d, c.ctx, tok.SessionRole(), tok.ID, c.push, c.close)
	c.sess.remote = true
	return contract.HelloResult{
		Protocol:      min(in.Protocol.Max, contract.ProtocolMax),
		Daemon:        contract.VersionRange{Min: contract.ProtocolMin, Max: contract.ProtocolMax},
		DaemonVersion: c.d.opts.Version,
		Role:          tok.SessionRole(),
		Principal:     tok.ID,
		Remote:        true,
	}, nil
}

// has reports whether the token with this id is known (not revoked).
func (b *tokenBook) has(id string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	_, ok := b.hashOf[id]
	return ok
}
