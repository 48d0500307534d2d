package uplink

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"testing"

	"github.com/simlock/simlock/internal/client"
	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/wire"
)

// The gateway is the typed client of the worker's daemon over the uplink:
// the client must run over a Conn as it is.
func TestTheTypedClientRunsOverAnUplink(t *testing.T) {
	worker, gw := pair(t, Options{})
	served := make(chan error, 1)
	go func() { served <- fakeDaemon(worker) }()
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	c, err := client.New(ctx, gw, contract.HelloInput{Client: "gateway"})
	if err != nil {
		t.Fatalf("hello over the uplink: %v", err)
	}
	if got := c.Hello().Principal; got != "gateway-of-test" {
		t.Fatalf("hello answered principal %q", got)
	}
	c.Close()
	if err := waitErr(t, served, "the worker's session after the client closed"); err != nil {
		t.Fatalf("the worker's session ended with %v, want the end of the stream", err)
	}
}

// fakeDaemon answers hello and nothing else, until the stream ends.
func fakeDaemon(c *Conn) error {
	r, w := wire.NewReader(c, contract.MaxFrameLen), wire.NewWriter(c)
	for {
		frame, err := r.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		var req contract.Request
		if err := json.Unmarshal(frame, &req); err != nil {
			return err
		}
		if req.Op != contract.OpHello {
			return errors.New("unexpected op " + string(req.Op))
		}
		result, _ := json.Marshal(contract.HelloResult{Protocol: contract.ProtocolMax, Role: contract.RoleAgent, Principal: "gateway-of-test",
			Daemon: contract.VersionRange{Min: contract.ProtocolMin, Max: contract.ProtocolMax}})
		if err := w.Write(contract.Response{ID: req.ID, Result: result}); err != nil {
			return err
		}
	}
}
