package mcpserver

import (
	"context"
	"encoding/json"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// quietCancels is a transport whose connections send no response to a call
// the client cancelled with notifications/cancelled, as the MCP
// specification asks of a receiver. The SDK's JSON-RPC layer answers every
// call, a cancelled one with the handler's context error (code 0, which is
// no JSON-RPC code); the client stopped waiting for it, so it is dropped
// here, where every response passes.
type quietCancels struct{ mcp.Transport }

// SupportsProtocolVersion answers as the transport it wraps, so a
// streamable transport that serves no sessionless protocol is not offered
// one.
func (t quietCancels) SupportsProtocolVersion(v string) bool {
	if pvs, ok := t.Transport.(mcp.ProtocolVersionSupporter); ok {
		return pvs.SupportsProtocolVersion(v)
	}
	return true
}

func (t quietCancels) Connect(ctx context.Context) (mcp.Connection, error) {
	c, err := t.Transport.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &quietConn{Connection: c, inFlight: map[jsonrpc.ID]bool{}}, nil
}

type quietConn struct {
	mcp.Connection

	mu sync.Mutex
	// inFlight holds the ids of the client's calls not yet answered, true
	// for those it cancelled. Only calls in flight are marked: a cancel
	// that arrives after the answer names an id the client may use again.
	inFlight map[jsonrpc.ID]bool
}

func (c *quietConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	msg, err := c.Connection.Read(ctx)
	if req, ok := msg.(*jsonrpc.Request); ok && err == nil {
		c.mu.Lock()
		switch {
		case req.IsCall():
			c.inFlight[req.ID] = false
		case req.Method == "notifications/cancelled":
			if id, ok := cancelledID(req.Params); ok {
				if _, open := c.inFlight[id]; open {
					c.inFlight[id] = true
				}
			}
		}
		c.mu.Unlock()
	}
	return msg, err
}

func (c *quietConn) Write(ctx context.Context, msg jsonrpc.Message) error {
	if resp, ok := msg.(*jsonrpc.Response); ok {
		c.mu.Lock()
		cancelled := c.inFlight[resp.ID]
		delete(c.inFlight, resp.ID)
		c.mu.Unlock()
		if cancelled {
			return nil
		}
	}
	return c.Connection.Write(ctx, msg)
}

// cancelledID reads the requestId of notifications/cancelled params.
func cancelledID(params json.RawMessage) (jsonrpc.ID, bool) {
	var p struct {
		RequestID any `json:"requestId"`
	}
	if json.Unmarshal(params, &p) != nil || p.RequestID == nil {
		return jsonrpc.ID{}, false
	}
	id, err := jsonrpc.MakeID(p.RequestID)
	return id, err == nil
}
