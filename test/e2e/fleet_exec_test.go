package e2e

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/simlock/simlock/internal/contract"
)

// pushExec sends, for the forwarded device.exec c, exec-started (out nil)
// or a chunk of output on stream.
func (s *scripted) pushExec(c gwCall, stream, chunk string) {
	s.t.Helper()
	p := map[string]any{"push": contract.PushExecStarted, "id": c.ID}
	if stream != "" {
		p = map[string]any{"push": contract.PushExecOutput, "id": c.ID, "output": map[string]any{"stream": stream, "chunk": chunk}}
	}
	b, _ := json.Marshal(p)
	if err := s.write(b); err != nil {
		s.t.Fatalf("fake worker: write: %v", err)
	}
}

// liveExec is one POST /v1/leases/{id}/exec in flight: headers says when
// the answer's status arrived (before its body may have), body when the
// whole answer did.
type liveExec struct {
	headers chan int
	body    chan string
}

func (a *api) startExec(secret, leaseID, body string) *liveExec {
	x := &liveExec{headers: make(chan int, 1), body: make(chan string, 1)}
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), commandBound)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, "POST", a.base+"/v1/leases/"+leaseID+"/exec", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+secret)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			x.headers <- 0
			x.body <- err.Error()
			return
		}
		defer resp.Body.Close()
		x.headers <- resp.StatusCode
		b, _ := io.ReadAll(resp.Body)
		x.body <- string(b)
	}()
	return x
}

func (x *liveExec) status(t *testing.T, what string) int {
	t.Helper()
	select {
	case s := <-x.headers:
		return s
	case <-time.After(5 * time.Second):
		t.Fatalf("%s: no answer within 5 s", what)
	}
	return 0
}

func (x *liveExec) whole(t *testing.T, what string) string {
	t.Helper()
	select {
	case b := <-x.body:
		return b
	case <-time.After(10 * time.Second):
		t.Fatalf("%s: the answer did not end within 10 s", what)
	}
	return ""
}

// The exec-started path through a gateway, on a scripted worker: a
// refusal before the command starts is a plain JSON error; the worker's
// exec-started is relayed at once, so a command that prints nothing has a
// 200 stream before it ends, and ends as the worker says (its exit code,
// or its error inside the stream); two commands in flight on one worker
// each get their own output; and output or an answer the worker sends
// after the gateway gave up (EXEC_TIMEOUT) reaches nobody and leaves the
// uplink serving.
func TestTheExecStartedPathThroughAGateway(t *testing.T) {
	t.Parallel()
	f := newFleet(t, "gateway.execTimeoutMs", "1500")
	w := f.fakeJoined("fake-exec-path", "ios", 2, 2)
	lease := func(label string) (string, string) {
		_, agent := f.gw.token("agent", label)
		r := f.api.do("POST", "/v1/lease-requests", agent, `{"platform":"ios"}`)
		if r.status != 201 {
			t.Fatalf("create: %d %s", r.status, r.raw)
		}
		w.grant(w.serveUntil("lease.request"), "")
		return agent, f.api.awaitState(agent, requestOf(t, r)["id"].(string), "granted")["lease"].(map[string]any)["id"].(string)
	}
	agentA, leaseA := lease("exec-a")
	agentB, leaseB := lease("exec-b")
	body := `{"tool":"simctl","args":["listapps","booted"]}`

	// Refused before it started: a plain JSON error.
	x := f.api.startExec(agentA, leaseA, body)
	w.refuse(w.serveUntil("device.exec"), "PASSTHROUGH_REFUSED", "simctl listapps is not allowed here")
	if s := x.status(t, "a refused exec"); s != http.StatusUnprocessableEntity {
		t.Errorf("an exec the worker refused before starting it answered %d %s, want 422", s, x.whole(t, "a refused exec"))
	}

	// Started and silent: the stream opens at exec-started, before the
	// worker's answer, which then ends it.
	x = f.api.startExec(agentA, leaseA, body)
	c := w.serveUntil("device.exec")
	w.pushExec(c, "", "")
	if s := x.status(t, "a started, silent exec"); s != http.StatusOK {
		t.Fatalf("a started exec answered %d before the worker ended it, want a 200 stream", s)
	}
	w.reply(c, contract.ExecResult{ExitCode: 0})
	if b := x.whole(t, "a silent exec"); !strings.Contains(b, "event: exit") || !strings.Contains(b, `"exitCode":0`) || strings.Contains(b, "event: output") {
		t.Errorf("a silent exec's stream is %q, want only its exit 0", b)
	}
	// Started, then failed on the worker: the error is in the stream.
	x = f.api.startExec(agentA, leaseA, body)
	c = w.serveUntil("device.exec")
	w.pushExec(c, "", "")
	if s := x.status(t, "a started exec that fails"); s != http.StatusOK {
		t.Fatalf("a started exec answered %d, want a 200 stream", s)
	}
	w.refuse(c, "INTERNAL", "the command could not be waited for")
	if b := x.whole(t, "a started exec that fails"); !strings.Contains(b, "event: error") || !strings.Contains(b, `"INTERNAL"`) {
		t.Errorf("a started exec that failed on the worker streamed %q, want its error event", b)
	}

	// Two in flight on one worker: each output goes to its own caller.
	xa, xb := f.api.startExec(agentA, leaseA, body), f.api.startExec(agentB, leaseB, body)
	ca, cb := w.serveUntil("device.exec"), w.serveUntil("device.exec")
	// They may come in either order: each is known by its lease.
	if strings.HasSuffix(leaseA, "."+requestLease(t, cb)) {
		ca, cb = cb, ca
	}
	for _, c := range []gwCall{ca, cb} {
		w.pushExec(c, "", "")
	}
	w.pushExec(ca, "stdout", "for-a-1\n")
	w.pushExec(cb, "stdout", "for-b-1\n")
	w.pushExec(ca, "stderr", "for-a-2\n")
	w.reply(cb, contract.ExecResult{ExitCode: 2})
	w.reply(ca, contract.ExecResult{ExitCode: 1})
	ba, bb := xa.whole(t, "exec A"), xb.whole(t, "exec B")
	if !strings.Contains(ba, "for-a-1") || !strings.Contains(ba, "for-a-2") || strings.Contains(ba, "for-b") || !strings.Contains(ba, `"exitCode":1`) {
		t.Errorf("exec A streamed %q, want its two chunks and exit 1 only", ba)
	}
	if !strings.Contains(bb, "for-b-1") || strings.Contains(bb, "for-a") || !strings.Contains(bb, `"exitCode":2`) {
		t.Errorf("exec B streamed %q, want its chunk and exit 2 only", bb)
	}

	// Past gateway.execTimeoutMs without an answer: EXEC_TIMEOUT; what the
	// worker sends for that call later (a late started, late output, a
	// late answer) goes nowhere, and the next exec is served as usual.
	x = f.api.startExec(agentA, leaseA, body)
	late := w.serveUntil("device.exec")
	if s := x.status(t, "an exec the worker does not answer in time"); s != http.StatusGatewayTimeout {
		t.Fatalf("an exec unanswered past gateway.execTimeoutMs answered %d %s, want 504", s, x.whole(t, "the timed-out exec"))
	}
	// The gateway tells the worker to stop it.
	if cc := w.serveUntil("call.cancel"); !strings.Contains(string(cc.Input), string(late.ID)) {
		t.Errorf("the gateway cancelled %s, want the timed-out call %s", cc.Input, late.ID)
	}
	w.pushExec(late, "", "")
	w.pushExec(late, "stdout", "too-late\n")
	w.reply(late, contract.ExecResult{ExitCode: 0})
	x = f.api.startExec(agentA, leaseA, body)
	c = w.serveUntil("device.exec")
	w.pushExec(c, "", "")
	w.pushExec(c, "stdout", "on-time\n")
	w.reply(c, contract.ExecResult{ExitCode: 0})
	if b := x.whole(t, "the exec after a late answer"); !strings.Contains(b, "on-time") || strings.Contains(b, "too-late") || !strings.Contains(b, `"exitCode":0`) {
		t.Errorf("the exec after a timed-out one streamed %q, want its own output and exit 0 only", b)
	}
	if ws := f.workers(); ws["fake-exec-path"].Connection != "connected" {
		t.Errorf("after late pushes for a timed-out exec the worker is %+v, want it connected", ws["fake-exec-path"])
	}
}

// requestLease is the worker lease id a forwarded device.exec names.
func requestLease(t *testing.T, c gwCall) string {
	t.Helper()
	var in contract.ExecInput
	if err := json.Unmarshal(c.Input, &in); err != nil {
		t.Fatalf("device.exec input %s: %v", c.Input, err)
	}
	return in.LeaseID
}
