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

// A worker downloading a runtime for a forwarded request, for longer than
// gateway.leaseRequestTimeoutMs but with progress all along (the demo
// driver reports each tenth of its drivers.demo.downloadMs), is waited for:
// the bound is on the worker's silence, not on the whole download.
func TestAForwardedDownloadThatReportsProgressOutlivesTheSilenceBound(t *testing.T) {
	t.Parallel()
	f := newFleet(t, "gateway.leaseRequestTimeoutMs", "1500")
	w := f.worker("downloader", 2, "drivers.demo.downloadableRuntimes", `{"ios":["26.4"],"android":[]}`, "drivers.demo.downloadMs", "5000")
	f.await("the downloading worker connected", 10*time.Second, connected(instanceID(t, w)))
	started := time.Now()
	r := f.gw.run("lease", "--platform", "ios", "--os", "26.4", "--allow-download", "--agent-id", "patient", "--detach", "--progress", "json")
	took := time.Since(started)
	if r.code != 0 {
		t.Fatalf("a request whose worker downloaded for 5s with progress every 500ms, with gateway.leaseRequestTimeoutMs 1500, was not granted\n%s", r)
	}
	if g := parseGrant(t, strings.TrimSpace(r.stdout)); g.Device.Spec.OSVersion != "26.4" {
		t.Errorf("granted %+v, want iOS 26.4", g.Device.Spec)
	}
	if took < 5*time.Second {
		t.Errorf("the grant came after %s, before the 5s download could end: the test did not outlast the bound", took)
	}
}

// A worker that reports progress and then falls silent is given up on one
// gateway.leaseRequestTimeoutMs after its last word, WORKER_UNREACHABLE
// naming it.
func TestAForwardedRequestWhoseWorkerFallsSilentEndsOneBoundAfterItsLastProgress(t *testing.T) {
	t.Parallel()
	f := newFleet(t, "gateway.leaseRequestTimeoutMs", "1000")
	w := f.fakeJoined("fake-fading", "ios", 2, 2)
	ch := f.gw.runAsync("lease", "--platform", "ios", "--agent-id", "faded", "--detach")
	c := w.serveUntil("lease.request")
	var last time.Time
	for range 4 {
		// Read before it is sent: the gateway hears the progress after
		// this, so the bound counts from no earlier than last, however
		// late this goroutine runs on a loaded machine.
		last = time.Now()
		w.progress(c, contract.StageBooting)
		time.Sleep(500 * time.Millisecond) // the worker's pace, not a wait for the gateway
	}
	r := waitResult(t, ch, 10*time.Second, "a request whose worker fell silent did not end")
	e := expectFailure(t, r, 1, "WORKER_UNREACHABLE")
	if e["workerId"] != "fake-fading" {
		t.Errorf("WORKER_UNREACHABLE names worker %v, want fake-fading", e["workerId"])
	}
	if since := time.Since(last); since < time.Second {
		t.Errorf("the request ended %s after the worker's last progress, before gateway.leaseRequestTimeoutMs (1s)", since)
	}
}

// execOverHTTP runs tool args on lease as agent through the gateway's HTTP
// API in the background; the channel brings the status and body.
func execOverHTTP(f *fleet, agent, lease string) <-chan httpAnswer {
	done := make(chan httpAnswer, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), commandBound)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, "POST", f.api.base+"/v1/leases/"+lease+"/exec",
			strings.NewReader(`{"tool":"simctl","args":["spawn","booted","true"]}`))
		req.Header.Set("Authorization", "Bearer "+agent)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			done <- httpAnswer{err: err}
			return
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		done <- httpAnswer{status: resp.StatusCode, body: string(b), err: err}
	}()
	return done
}

type httpAnswer struct {
	status int
	body   string
	err    error
}

// push sends the gateway one push frame for the call c.
func (s *scripted) push(c gwCall, p contract.Push) {
	s.t.Helper()
	p.ID = c.ID
	b, _ := json.Marshal(p)
	if err := s.write(b); err != nil {
		s.t.Fatalf("fake worker: write: %v", err)
	}
}

// A forwarded command that writes output every 500 ms for 3 s runs to its
// end with gateway.execTimeoutMs 1000: each chunk restarts the bound on
// the worker's silence.
func TestAForwardedExecThatKeepsWritingOutlivesTheSilenceBound(t *testing.T) {
	t.Parallel()
	f := newFleet(t, "gateway.execTimeoutMs", "1000")
	w := f.fakeJoined("fake-chatty", "ios", 2, 2)
	agent, leaseID, _ := f.grantOver(w, "chatty-agent")

	done := execOverHTTP(f, agent, leaseID)
	c := w.serveUntil("device.exec")
	w.push(c, contract.Push{Push: contract.PushExecStarted})
	for i := range 6 {
		time.Sleep(500 * time.Millisecond) // the command's pace
		select {
		case a := <-done:
			t.Fatalf("the exec ended after %d chunks, 500 ms apart, with gateway.execTimeoutMs 1000: %d %s", i, a.status, a.body)
		default:
		}
		w.push(c, contract.Push{Push: contract.PushExecOutput, Output: &contract.ExecOutput{Stream: "stdout", Chunk: "tick\n"}})
	}
	w.reply(c, contract.ExecResult{ExitCode: 0})
	var a httpAnswer
	select {
	case a = <-done:
	case <-time.After(10 * time.Second):
		t.Fatalf("the exec the worker ended had no answer 10s later")
	}
	if a.err != nil || a.status != http.StatusOK || strings.Contains(a.body, "EXEC_TIMEOUT") || strings.Count(a.body, "tick") != 6 {
		t.Errorf("an exec writing every 500 ms for 3 s, with gateway.execTimeoutMs 1000, answered %d %s (%v), want 200 with six chunks and no EXEC_TIMEOUT", a.status, a.body, a.err)
	}
}

// nextOfEither waits for the gateway's next call of op to a or b and
// returns the worker it went to and the call.
func nextOfEither(t *testing.T, op string, a, b *scripted) (*scripted, gwCall) {
	t.Helper()
	select {
	case c, ok := <-a.calls:
		if !ok || c.Op != op {
			t.Fatalf("the gateway called %s (%s) of the first worker while the test waited for %s", c.Op, c.Input, op)
		}
		return a, c
	case c, ok := <-b.calls:
		if !ok || c.Op != op {
			t.Fatalf("the gateway called %s (%s) of the second worker while the test waited for %s", c.Op, c.Input, op)
		}
		return b, c
	case <-time.After(waitBound):
		t.Fatalf("within %s the gateway sent neither worker a %s", waitBound, op)
	}
	return nil, gwCall{}
}

// A worker that answers DAEMON_STOPPING before any progress is stopping,
// not the gateway: the request goes to the other worker and is granted.
func TestAWorkerStoppingBeforeProgressSendsTheRequestToAnother(t *testing.T) {
	t.Parallel()
	f := newFleet(t)
	a := f.fakeJoined("fake-stop-a", "ios", 2, 2)
	b := f.fakeJoined("fake-stop-b", "ios", 2, 2)
	ch := f.gw.runAsync("lease", "--platform", "ios", "--agent-id", "rerouted", "--detach")
	first, c := nextOfEither(t, "lease.request", a, b)
	first.refuse(c, "DAEMON_STOPPING", "the daemon is stopping")
	other := a
	if first == a {
		other = b
	}
	c, ended, placed := nextOr(other, "lease.request", ch)
	if !placed {
		t.Fatalf("a request whose worker answered DAEMON_STOPPING before progress ended instead of going to the other worker\n%s", ended)
	}
	l := other.grant(c, "")
	r := awaitResult(t, ch)
	if r.code != 0 {
		t.Fatalf("a request whose first worker answered DAEMON_STOPPING before progress was not granted by the other\n%s", r)
	}
	if g := parseGrant(t, strings.TrimSpace(r.stdout)); !strings.HasSuffix(g.Lease.ID, "."+l.ID) {
		t.Errorf("granted lease %s, want the other worker's %s", g.Lease.ID, l.ID)
	}
}

// A worker that answers DAEMON_STOPPING after progress ends the request
// with a code that names it, never DAEMON_STOPPING (which reads as the
// gateway stopping); the request is not sent again.
func TestAWorkerStoppingAfterProgressEndsTheRequestNamingIt(t *testing.T) {
	t.Parallel()
	f := newFleet(t)
	w := f.fakeJoined("fake-stop-late", "ios", 2, 2)
	ch := f.gw.runAsync("lease", "--platform", "ios", "--agent-id", "stopped", "--detach")
	c := w.serveUntil("lease.request")
	w.progress(c, contract.StageBooting)
	w.refuse(c, "DAEMON_STOPPING", "the daemon is stopping")
	r := waitResult(t, ch, 10*time.Second, "a request whose worker stopped after progress did not end")
	e := expectFailure(t, r, 1, "WORKER_UNREACHABLE")
	if e["workerId"] != "fake-stop-late" || e["reason"] != "worker-stopping" {
		t.Errorf("the request ended %v, want WORKER_UNREACHABLE naming workerId fake-stop-late with reason worker-stopping", e)
	}
	w.quiet(time.Second, "the request that ended with its worker stopping was sent again")
}

// The requester's timeoutMs counts its time in the gateway's line, as a
// worker counts it in its own: a request the worker took on is not cut
// off by it while the worker reports progress, and one that comes back to
// the line past it (its worker's view was stale) fails QUEUE_TIMEOUT at
// once instead of being placed again.
func TestARequestersTimeoutCountsItsTimeInTheGatewaysLine(t *testing.T) {
	t.Parallel()
	f := newFleet(t, "gateway.leaseRequestTimeoutMs", "3000")
	w := f.fakeJoined("fake-slow", "ios", 2, 2)

	ch := f.gw.runAsync("lease", "--platform", "ios", "--agent-id", "started", "--timeout", "1s", "--detach")
	c := w.serveUntil("lease.request")
	for range 3 {
		w.progress(c, contract.StageBooting)
		time.Sleep(500 * time.Millisecond) // the worker's pace, past the requester's 1s
	}
	w.grant(c, "")
	if r := waitResult(t, ch, 10*time.Second, "a request its worker took on did not end"); r.code != 0 {
		t.Errorf("a request its worker readied for 1.5s with progress, with --timeout 1s, was not granted\n%s", r)
	}

	ch = f.gw.runAsync("lease", "--platform", "ios", "--agent-id", "bounced", "--timeout", "1s", "--detach")
	c = w.serveUntil("lease.request")
	time.Sleep(1200 * time.Millisecond) // past the requester's timeout, before any progress
	w.refuse(c, "NO_CAPACITY", "no room after all")
	r := waitResult(t, ch, 10*time.Second, "a request back in line past its timeout did not end")
	expectFailure(t, r, 10, "QUEUE_TIMEOUT")
}

// A forwarded command whose worker falls silent after some output ends
// EXEC_TIMEOUT one gateway.execTimeoutMs after its last chunk, and the
// worker is told to stop it.
func TestAForwardedExecThatFallsSilentEndsExecTimeout(t *testing.T) {
	t.Parallel()
	f := newFleet(t, "gateway.execTimeoutMs", "1000")
	w := f.fakeJoined("fake-hush", "ios", 2, 2)
	agent, leaseID, _ := f.grantOver(w, "hush-agent")

	done := execOverHTTP(f, agent, leaseID)
	c := w.serveUntil("device.exec")
	w.push(c, contract.Push{Push: contract.PushExecStarted})
	var last time.Time
	for range 2 {
		time.Sleep(500 * time.Millisecond) // the command's pace
		w.push(c, contract.Push{Push: contract.PushExecOutput, Output: &contract.ExecOutput{Stream: "stdout", Chunk: "tick\n"}})
		last = time.Now()
	}
	w.next("call.cancel", waitBound, "the gateway telling the worker to stop a command silent past gateway.execTimeoutMs")
	var a httpAnswer
	select {
	case a = <-done:
	case <-time.After(10 * time.Second):
		t.Fatalf("an exec whose worker fell silent had no answer 10s later")
	}
	if a.err != nil || !strings.Contains(a.body, `"EXEC_TIMEOUT"`) {
		t.Errorf("an exec whose worker fell silent answered %d %s (%v), want EXEC_TIMEOUT", a.status, a.body, a.err)
	}
	if since := time.Since(last); since < time.Second {
		t.Errorf("the exec ended %s after its last chunk, before gateway.execTimeoutMs (1s)", since)
	}
}
