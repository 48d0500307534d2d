package gateway

import (
	"bufio"
	"encoding/json"
	"net"
	"testing"

	"github.com/simlock/simlock/internal/client"
	"github.com/simlock/simlock/internal/contract"
)

// scriptedSession is the gateway's session of a worker the test scripts:
// the worker's end reads each call, answers hello as an admin's session,
// and hands every other call to answer, which returns the result to send
// (a *contract.Error is sent as the call's error; nil: no answer). The
// connection closes as the test ends.
func scriptedSession(t testing.TB, answer func(req contract.Request) any) *client.Client {
	t.Helper()
	gwEnd, workerEnd := net.Pipe()
	t.Cleanup(func() {
		gwEnd.Close()
		workerEnd.Close()
	})
	go func() {
		sc := bufio.NewScanner(workerEnd)
		sc.Buffer(make([]byte, 0, 1<<20), contract.MaxFrameLen)
		enc := json.NewEncoder(workerEnd)
		for sc.Scan() {
			var req contract.Request
			if json.Unmarshal(sc.Bytes(), &req) != nil {
				return
			}
			var v any
			if req.Op == contract.OpHello {
				v = contract.HelloResult{Protocol: 1, Daemon: contract.VersionRange{Min: 1, Max: 1}, Role: contract.RoleAdmin}
			} else if v = answer(req); v == nil {
				continue
			}
			if ce, ok := v.(*contract.Error); ok {
				_ = enc.Encode(contract.Response{ID: req.ID, Error: ce})
				continue
			}
			res, _ := json.Marshal(v)
			_ = enc.Encode(contract.Response{ID: req.ID, Result: res})
		}
	}()
	c, err := client.New(t.Context(), gwEnd, contract.HelloInput{})
	if err != nil {
		t.Fatal(err)
	}
	return c
}
