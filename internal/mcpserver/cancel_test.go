package mcpserver

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// scripted is a connection that reads the given messages and records what
// is written.
type scripted struct {
	mcp.Connection
	in      []jsonrpc.Message
	written []jsonrpc.Message
}

func (s *scripted) Read(context.Context) (jsonrpc.Message, error) {
	m := s.in[0]
	s.in = s.in[1:]
	return m, nil
}

func (s *scripted) Write(_ context.Context, m jsonrpc.Message) error {
	s.written = append(s.written, m)
	return nil
}

func idOf(n int64) jsonrpc.ID {
	id, err := jsonrpc.MakeID(float64(n))
	if err != nil {
		panic(err)
	}
	return id
}

func call(id int64) *jsonrpc.Request {
	return &jsonrpc.Request{ID: idOf(id), Method: "tools/call", Params: json.RawMessage(`{}`)}
}

func cancelOf(id int64) *jsonrpc.Request {
	b, _ := json.Marshal(map[string]any{"requestId": id})
	return &jsonrpc.Request{Method: "notifications/cancelled", Params: b}
}

func TestOnlyACallCancelledWhileInFlightLosesItsAnswer(t *testing.T) {
	ctx := context.Background()
	s := &scripted{in: []jsonrpc.Message{call(1), cancelOf(1), call(2), cancelOf(3), call(3)}}
	c := &quietConn{Connection: s, inFlight: map[jsonrpc.ID]bool{}}
	for range 5 {
		if _, err := c.Read(ctx); err != nil {
			t.Fatal(err)
		}
	}
	for _, id := range []int64{1, 2, 3} {
		if err := c.Write(ctx, &jsonrpc.Response{ID: idOf(id), Result: json.RawMessage(`{}`)}); err != nil {
			t.Fatal(err)
		}
	}
	var ids []jsonrpc.ID
	for _, m := range s.written {
		ids = append(ids, m.(*jsonrpc.Response).ID)
	}
	// 1 was cancelled in flight; 3's cancel came before the call, so it
	// names nothing in flight and 3 is answered.
	if len(ids) != 2 || ids[0] != idOf(2) || ids[1] != idOf(3) {
		t.Errorf("answers written for ids %v, want [2 3]", ids)
	}

	// An id answered is forgotten, and a cancel that comes after the
	// answer is ignored: the client may use the id again, and the new call
	// is answered.
	s.in = []jsonrpc.Message{cancelOf(2), call(1)}
	for range 2 {
		if _, err := c.Read(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Write(ctx, &jsonrpc.Response{ID: idOf(1), Result: json.RawMessage(`{}`)}); err != nil {
		t.Fatal(err)
	}
	if len(s.written) != 3 || len(c.inFlight) != 0 {
		t.Errorf("after reusing id 1: %d answers written, %d calls in flight; want 3 and 0", len(s.written), len(c.inFlight))
	}
}
