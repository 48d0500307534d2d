package daemon

import (
	"bufio"
	"context"
	"encoding/json"
	"net"
	"testing"

	"github.com/simlock/simlock/internal/config"
	"github.com/simlock/simlock/internal/contract"
)

// ping answers every caller that said hello, agent or admin, on a worker
// and on a gateway; the gateway here has no worker, so an answer is its
// own, not a forwarded one.
func TestPingAnswersEveryRoleInEitherModeAndAGatewayAnswersItItself(t *testing.T) {
	gcfg, err := config.Parse([]byte(`{"mode":"gateway","http":{"enabled":true,"port":0}}`))
	if err != nil {
		t.Fatal(err)
	}
	_, gwHome := startDaemonOpts(t, Options{Config: gcfg})
	_, wHome := startDaemon(t, nil)
	ctx := context.Background()
	for mode, home := range map[string]string{contract.ModeGateway: gwHome, contract.ModeWorker: wHome} {
		admin := dial(t, home, "ops", true)
		if _, err := admin.StatusWith(ctx, contract.StatusGetInput{WaitReady: true}); err != nil {
			t.Fatalf("%s: %v", mode, err)
		}
		if mode == contract.ModeGateway {
			var list contract.WorkerListResult
			if err := admin.Call(ctx, contract.OpWorkerList, contract.Empty{}, &list); err != nil || len(list.Workers) != 0 {
				t.Fatalf("gateway's workers = %+v, %v; want none, so that nothing could be forwarded", list, err)
			}
		}
		agent := dial(t, home, "agent-1", false)
		if err := agent.Ping(ctx); err != nil {
			t.Errorf("ping from an agent on a %s = %v, want an answer", mode, err)
		}
		if err := admin.Ping(ctx); err != nil {
			t.Errorf("ping from an admin on a %s = %v, want an answer", mode, err)
		}
		// Its input is {} and read strictly, as every operation's.
		if err := agent.Call(ctx, contract.OpPing, map[string]any{"extra": 1}, nil); code(err) != contract.CodeBadRequest {
			t.Errorf("ping with an unknown field on a %s = %v, want BAD_REQUEST", mode, err)
		}
	}
}

// A connection that has not said hello is nobody: its ping is refused
// like any other call, and the connection goes on.
func TestPingBeforeHelloIsRefused(t *testing.T) {
	_, home := startDaemon(t, nil)
	conn, err := net.Dial("unix", SocketPath(home))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.Write([]byte(`{"id":"1","op":"ping","input":{}}` + "\n")); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(conn).ReadBytes('\n')
	if err != nil {
		t.Fatal(err)
	}
	var resp contract.Response
	if err := json.Unmarshal(line, &resp); err != nil {
		t.Fatalf("%s: %v", line, err)
	}
	if resp.Error == nil || resp.Error.Code != contract.CodeHandshakeRequired {
		t.Errorf("ping before hello = %s, want HANDSHAKE_REQUIRED", line)
	}
}
