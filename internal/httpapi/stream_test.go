package httpapi_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/httpapi"
)

func TestRequestStreamEmitsPhasesAndEndsWhenSettled(t *testing.T) {
	h := newHarness(t, httpapi.Options{KeepAlive: 250 * time.Millisecond})
	steps := []contract.LeaseRequestStatus{
		reqStatus(1, contract.RequestQueued, &contract.LeaseProgress{Stage: contract.StageQueued, QueuePosition: 1}),
		reqStatus(2, contract.RequestStarting, &contract.LeaseProgress{Stage: contract.StageProvisioning, EtaMs: 3000}),
		reqStatus(3, contract.RequestStarting, &contract.LeaseProgress{Stage: contract.StageBooting, EtaMs: 2000}),
		grantedStatus(),
	}
	steps[3].Rev = 4
	h.fake.on(contract.OpLeaseRequestGet, func(_ context.Context, c fakeCall, _ func(contract.Push)) (any, error) {
		in := decodeInput[contract.LeaseRequestGetInput](t, c)
		return steps[min(int(in.AfterRev), len(steps)-1)], nil
	})
	h.fake.answer(contract.OpLeaseGet, contract.LeaseGetResult{Lease: steps[3].Request.Grant.Lease}, nil)

	resp := h.do("GET", "/v1/lease-requests/req_1/events", agentSecret, "")
	if cc := resp.Header.Get("Cache-Control"); cc != "no-cache" || resp.Header.Get("X-Accel-Buffering") != "no" {
		t.Fatalf("stream headers %v", resp.Header)
	}
	sr := newSSEReader(t, resp)
	sr.expectConnected()
	for _, want := range []string{"queued", "provisioning", "booting", "granted"} {
		f := sr.mustNext()
		var v map[string]any
		if err := json.Unmarshal([]byte(f.Data), &v); err != nil {
			t.Fatalf("event %+v: %v", f, err)
		}
		if f.Event != want || v["state"] != want || v["id"] != "req_1" {
			t.Fatalf("event %+v, want %s", f, want)
		}
		if want == "granted" && v["lease"] == nil {
			t.Fatalf("granted event without the lease: %v", v)
		}
	}
	sr.expectEnd()

	calls := h.fake.callsOf(contract.OpLeaseRequestGet)
	if len(calls) != 4 {
		t.Fatalf("%d lease-request.get calls, want 4", len(calls))
	}
	for i, c := range calls[1:] {
		in := decodeInput[contract.LeaseRequestGetInput](t, c)
		if in != (contract.LeaseRequestGetInput{RequestID: "req_1", AfterRev: uint64(i + 1), WaitMs: 250}) {
			t.Fatalf("wait %d: input %+v", i, in)
		}
	}
}

func TestRequestStreamKeepaliveWhenNothingChanged(t *testing.T) {
	h := newHarness(t, httpapi.Options{KeepAlive: time.Millisecond})
	calls := 0
	h.fake.on(contract.OpLeaseRequestGet, func(context.Context, fakeCall, func(contract.Push)) (any, error) {
		calls++ // one stream, calls in sequence
		if calls < 3 {
			return reqStatus(1, contract.RequestQueued, nil), nil
		}
		st := reqStatus(2, contract.RequestCancelled, nil)
		st.Request.Error = contract.Errorf(contract.CodeCancelled, "the request was cancelled")
		return st, nil
	})
	sr := newSSEReader(t, h.do("GET", "/v1/lease-requests/req_1/events", agentSecret, ""))
	sr.expectConnected()
	if f := sr.mustNext(); f.Event != "queued" {
		t.Fatalf("first event %+v", f)
	}
	if f := sr.mustNext(); f.Comment != "keepalive" {
		t.Fatalf("an unchanged revision gave %+v, want a keepalive", f)
	}
	if f := sr.mustNext(); f.Event != "cancelled" || !strings.Contains(f.Data, `"CANCELLED"`) {
		t.Fatalf("last event %+v", f)
	}
	sr.expectEnd()
}

func TestLeaseStreamKeepaliveThenLeaseLost(t *testing.T) {
	h := newHarness(t, httpapi.Options{KeepAlive: 5 * time.Millisecond})
	pushes := make(chan func(contract.Push), 1)
	h.fake.on(contract.OpLeaseWatch, func(_ context.Context, c fakeCall, push func(contract.Push)) (any, error) {
		if in := decodeInput[contract.LeaseIDInput](t, c); in.LeaseID != "lse_1" {
			t.Errorf("lease.watch input %+v", in)
		}
		pushes <- push
		return contract.LeaseWatchResult{Lease: contract.LeaseRecord{ID: "lse_1"}}, nil
	})
	sr := newSSEReader(t, h.do("GET", "/v1/leases/lse_1/events", agentSecret, ""))
	sr.expectConnected()
	if f := sr.mustNext(); f.Comment != "keepalive" {
		t.Fatalf("idle stream gave %+v, want a keepalive", f)
	}
	push := receive(t, pushes, "the lease.watch push func")
	push(contract.Push{Push: contract.PushProgress}) // not for this stream; ignored
	push(contract.Push{Push: contract.PushLeaseLost, LeaseID: "lse_1", DeviceID: "dev_1", Reason: "expired"})
	for {
		f := sr.mustNext()
		if f.Comment == "keepalive" {
			continue
		}
		if f.Event != "lease_lost" || f.Data != `{"leaseId":"lse_1","deviceId":"dev_1","reason":"expired"}` {
			t.Fatalf("event %+v", f)
		}
		break
	}
	sr.expectEnd()
}

func TestLeaseStreamUnknownLeaseIsJSON(t *testing.T) {
	h := newHarness(t, httpapi.Options{})
	h.fake.answer(contract.OpLeaseWatch, nil, contract.Errorf(contract.CodeUnknownLease, "no lease lse_404").With("leaseId", "lse_404"))
	readError(t, h.do("GET", "/v1/leases/lse_404/events", agentSecret, ""), contract.CodeUnknownLease)
}

func TestClientDisconnectEndsStreamAndSession(t *testing.T) {
	h := newHarness(t, httpapi.Options{})
	sessions := make(chan context.Context, 1)
	h.fake.on(contract.OpLeaseWatch, func(ctx context.Context, _ fakeCall, _ func(contract.Push)) (any, error) {
		sessions <- ctx
		return contract.LeaseWatchResult{}, nil
	})
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	sr := newSSEReader(t, h.send(h.request(ctx, "GET", "/v1/leases/lse_1/events", agentSecret, "")))
	sr.expectConnected()
	session := receive(t, sessions, "lease.watch")
	if session.Err() != nil {
		t.Fatal("the session ended while the client was there")
	}
	cancel()
	h.waitEnded("/v1/leases/lse_1/events")
	receive(t, session.Done(), "the backend session to end")
}

func TestCloseEndsOpenStreams(t *testing.T) {
	h := newHarness(t, httpapi.Options{KeepAlive: time.Minute})
	h.fake.answer(contract.OpLeaseWatch, contract.LeaseWatchResult{}, nil)
	// A request that never changes: the stream sits in a long wait.
	h.fake.on(contract.OpLeaseRequestGet, func(ctx context.Context, c fakeCall, _ func(contract.Push)) (any, error) {
		if decodeInput[contract.LeaseRequestGetInput](t, c).WaitMs > 0 {
			<-ctx.Done()
			return nil, contract.Errorf(contract.CodeCancelled, "session ended")
		}
		return reqStatus(1, contract.RequestQueued, nil), nil
	})
	h.fake.answer(contract.OpEventsSubscribe, contract.EventsSubscribeResult{LastSeq: 1}, nil)
	h.fake.on(contract.OpDeviceExec, func(ctx context.Context, _ fakeCall, push func(contract.Push)) (any, error) {
		push(contract.Push{Push: contract.PushExecStarted})
		<-ctx.Done()
		return nil, contract.Errorf(contract.CodeCancelled, "session ended")
	})

	var readers []*sseReader
	for _, rt := range []struct{ path, secret string }{
		{"/v1/leases/lse_1/events", agentSecret},
		{"/v1/lease-requests/req_1/events", agentSecret},
		{"/v1/events/stream", operatorSecret},
	} {
		sr := newSSEReader(t, h.do("GET", rt.path, rt.secret, ""))
		sr.expectConnected()
		readers = append(readers, sr)
	}
	if f := readers[1].mustNext(); f.Event != "queued" {
		t.Fatalf("request stream %+v", f)
	}
	exec := newSSEReader(t, h.do("POST", "/v1/leases/lse_1/exec", agentSecret, `{"tool":"adb","args":["logcat"]}`))
	exec.expectConnected()

	h.api.Close()
	for _, sr := range readers {
		sr.expectEnd()
	}
	if f := exec.mustNext(); f.Event != "error" || !strings.Contains(f.Data, `"DAEMON_STOPPING"`) {
		t.Fatalf("exec stream at Close: %+v", f)
	}
	exec.expectEnd()
	readError(t, h.do("GET", "/v1/leases/lse_1/events", agentSecret, ""), contract.CodeDaemonStopping)
	readError(t, h.do("POST", "/v1/leases/lse_1/exec", agentSecret, `{"tool":"adb","args":["devices"]}`), contract.CodeDaemonStopping)
	readJSON(t, h.do("GET", "/v1/healthz", "", ""), http.StatusOK)
}

func TestStreamThatFallsBehindEnds(t *testing.T) {
	h := newHarness(t, httpapi.Options{KeepAlive: time.Minute})
	h.fake.on(contract.OpLeaseWatch, func(_ context.Context, _ fakeCall, push func(contract.Push)) (any, error) {
		// Pushed before the stream reads any: far more than it buffers.
		pushed := make(chan struct{})
		go func() {
			for range 1000 {
				push(contract.Push{Push: contract.PushProgress})
			}
			close(pushed)
		}()
		select {
		case <-pushed:
			return contract.LeaseWatchResult{}, nil
		case <-time.After(testTimeout / 2):
			return nil, contract.Errorf(contract.CodeInternal, "push blocked the backend")
		}
	})
	sr := newSSEReader(t, h.do("GET", "/v1/leases/lse_1/events", agentSecret, ""))
	sr.expectConnected()
	sr.expectEnd()
}

func event(seq int64) contract.Event {
	return contract.Event{ID: "evt_" + strconv.FormatInt(seq, 10), Seq: seq, Timestamp: 1796008195000 + seq, Event: "lease.renewed", Payload: json.RawMessage(`{}`)}
}

func TestEventsStreamResumesWithoutDuplicates(t *testing.T) {
	h := newHarness(t, httpapi.Options{KeepAlive: time.Minute})
	live := make(chan func(contract.Push), 1)
	h.fake.on(contract.OpEventsSubscribe, func(_ context.Context, _ fakeCall, push func(contract.Push)) (any, error) {
		// Event 5 was committed before the subscription and published
		// after it: it is both pushed and stored.
		push(contract.Push{Push: contract.PushEvent, Event: new(event(5))})
		push(contract.Push{Push: contract.PushEvent, Event: new(event(6))})
		live <- push
		return contract.EventsSubscribeResult{SubscriptionID: "sub_1", LastSeq: 5}, nil
	})
	h.fake.on(contract.OpEventsReplay, func(_ context.Context, c fakeCall, _ func(contract.Push)) (any, error) {
		in := decodeInput[contract.EventsReplayInput](t, c)
		var evs []contract.Event
		// The store already has 6, which was pushed too.
		for seq := in.AfterSeq + 1; seq <= 6 && len(evs) < in.Limit; seq++ {
			evs = append(evs, event(seq))
		}
		return contract.EventsReplayResult{Events: evs}, nil
	})

	req := h.request(t.Context(), "GET", "/v1/events/stream", operatorSecret, "")
	req.Header.Set("Last-Event-ID", "2")
	sr := newSSEReader(t, h.send(req))
	sr.expectConnected()
	push := receive(t, live, "events.subscribe")
	push(contract.Push{Push: contract.PushEvent, Event: new(event(6))}) // a repeat
	push(contract.Push{Push: contract.PushEvent, Event: new(event(7))})

	for _, want := range []int64{3, 4, 5, 6, 7} {
		f := sr.mustNext()
		var ev contract.Event
		if err := json.Unmarshal([]byte(f.Data), &ev); err != nil {
			t.Fatal(err)
		}
		if f.Event != "" || f.ID != strconv.FormatInt(want, 10) || ev.Seq != want || ev.ID != event(want).ID {
			t.Fatalf("frame %+v, want event %d", f, want)
		}
	}
	calls := h.fake.callsOf(contract.OpEventsReplay)
	if len(calls) != 1 || decodeInput[contract.EventsReplayInput](t, calls[0]) != (contract.EventsReplayInput{AfterSeq: 2, Limit: 1000}) {
		t.Fatalf("replay calls %+v", calls)
	}
	// Anything else would have been sent before 8.
	push(contract.Push{Push: contract.PushEvent, Event: new(event(8))})
	if f := sr.mustNext(); f.ID != "8" {
		t.Fatalf("frame %+v, want event 8", f)
	}
}

func TestEventsStreamLiveOnlyWithoutLastEventID(t *testing.T) {
	h := newHarness(t, httpapi.Options{KeepAlive: time.Minute})
	live := make(chan func(contract.Push), 1)
	h.fake.on(contract.OpEventsSubscribe, func(_ context.Context, _ fakeCall, push func(contract.Push)) (any, error) {
		live <- push
		return contract.EventsSubscribeResult{LastSeq: 41}, nil
	})
	sr := newSSEReader(t, h.do("GET", "/v1/events/stream", operatorSecret, ""))
	sr.expectConnected()
	push := receive(t, live, "events.subscribe")
	push(contract.Push{Push: contract.PushEvent, Event: new(event(41))})
	push(contract.Push{Push: contract.PushEvent, Event: new(event(42))})
	if f := sr.mustNext(); f.ID != "42" {
		t.Fatalf("frame %+v, want event 42", f)
	}
	if n := len(h.fake.callsOf(contract.OpEventsReplay)); n != 0 {
		t.Fatalf("replayed %d times without Last-Event-ID", n)
	}
}

func TestEventsStreamFromZeroReplaysFromTheOldest(t *testing.T) {
	h := newHarness(t, httpapi.Options{KeepAlive: time.Minute})
	h.fake.answer(contract.OpEventsSubscribe, contract.EventsSubscribeResult{LastSeq: 2}, nil)
	h.fake.answer(contract.OpEventsReplay, contract.EventsReplayResult{Events: []contract.Event{event(1), event(2)}}, nil)
	sr := newSSEReader(t, h.do("GET", "/v1/events/stream?lastEventId=0", operatorSecret, ""))
	sr.expectConnected()
	for _, want := range []string{"1", "2"} {
		if f := sr.mustNext(); f.ID != want {
			t.Fatalf("frame %+v, want %s", f, want)
		}
	}
	in := decodeInput[contract.EventsReplayInput](t, h.fake.callsOf(contract.OpEventsReplay)[0])
	if in.SinceTs == 0 && in.AfterSeq == 0 {
		t.Fatalf("replay input %+v asks for the newest events, not the oldest", in)
	}
}

func TestEventsStreamBadLastEventID(t *testing.T) {
	h := newHarness(t, httpapi.Options{})
	h.fake.answer(contract.OpEventsSubscribe, contract.EventsSubscribeResult{}, nil)
	req := h.request(t.Context(), "GET", "/v1/events/stream", operatorSecret, "")
	req.Header.Set("Last-Event-ID", "-3")
	e := readError(t, h.send(req), contract.CodeBadRequest)
	if e["field"] != "Last-Event-ID" {
		t.Fatalf("error %v", e)
	}
	e = readError(t, h.do("GET", "/v1/events/stream?lastEventId=x", operatorSecret, ""), contract.CodeBadRequest)
	if e["field"] != "lastEventId" {
		t.Fatalf("error %v", e)
	}
}

func TestExecStreamsOutputThenExit(t *testing.T) {
	h := newHarness(t, httpapi.Options{KeepAlive: time.Minute})
	h.fake.on(contract.OpDeviceExec, func(_ context.Context, _ fakeCall, push func(contract.Push)) (any, error) {
		push(contract.Push{Push: contract.PushExecStarted})
		push(contract.Push{Push: contract.PushExecOutput, Output: &contract.ExecOutput{Stream: "stdout", Chunk: "line 1\nline 2\n"}})
		push(contract.Push{Push: contract.PushExecOutput, Output: &contract.ExecOutput{Stream: "stderr", Chunk: "warning"}})
		return contract.ExecResult{ExitCode: 3}, nil
	})
	resp := h.do("POST", "/v1/leases/lse_1/exec", agentSecret, `{"tool":"simctl","args":["spawn","booted","log"],"stdin":"hi"}`)
	sr := newSSEReader(t, resp)
	sr.expectConnected()
	for _, want := range []sseFrame{
		{Event: "output", Data: `{"stream":"stdout","chunk":"line 1\nline 2\n"}`},
		{Event: "output", Data: `{"stream":"stderr","chunk":"warning"}`},
		{Event: "exit", Data: `{"exitCode":3}`},
	} {
		if f := sr.mustNext(); f != want {
			t.Fatalf("frame %+v, want %+v", f, want)
		}
	}
	sr.expectEnd()
	in := decodeInput[contract.ExecInput](t, h.fake.callsOf(contract.OpDeviceExec)[0])
	if in.LeaseID != "lse_1" || in.Tool != "simctl" || len(in.Args) != 3 || in.Stdin == nil || *in.Stdin != "hi" {
		t.Fatalf("exec input %+v", in)
	}
}

func TestExecRefusedBeforeStartIsJSON(t *testing.T) {
	h := newHarness(t, httpapi.Options{})
	h.fake.answer(contract.OpDeviceExec, nil, contract.Errorf(contract.CodePassthroughRefused, "erase would touch devices simlock does not own"))
	readError(t, h.do("POST", "/v1/leases/lse_1/exec", agentSecret, `{"tool":"simctl","args":["erase","all"]}`), contract.CodePassthroughRefused)

	e := readError(t, h.do("POST", "/v1/leases/lse_1/exec", agentSecret, `{"args":["devices"]}`), contract.CodeBadRequest)
	if e["field"] != "tool" {
		t.Fatalf("error %v", e)
	}
}

func TestExecErrorAfterStartIsAnEvent(t *testing.T) {
	h := newHarness(t, httpapi.Options{KeepAlive: time.Minute})
	h.fake.on(contract.OpDeviceExec, func(_ context.Context, _ fakeCall, push func(contract.Push)) (any, error) {
		push(contract.Push{Push: contract.PushExecStarted})
		return nil, contract.Errorf(contract.CodeExecTimeout, "the command ran longer than 10m")
	})
	sr := newSSEReader(t, h.do("POST", "/v1/leases/lse_1/exec", agentSecret, `{"tool":"adb","args":["logcat"]}`))
	sr.expectConnected()
	f := sr.mustNext()
	var body struct{ Error map[string]any }
	if err := json.Unmarshal([]byte(f.Data), &body); err != nil {
		t.Fatal(err)
	}
	if f.Event != "error" || body.Error["code"] != "EXEC_TIMEOUT" {
		t.Fatalf("frame %+v", f)
	}
	sr.expectEnd()
}

func TestExecClientDisconnectEndsTheSession(t *testing.T) {
	h := newHarness(t, httpapi.Options{KeepAlive: time.Minute})
	sessions := make(chan context.Context, 1)
	blocked := make(chan struct{}, 1)
	h.fake.on(contract.OpDeviceExec, func(ctx context.Context, _ fakeCall, push func(contract.Push)) (any, error) {
		push(contract.Push{Push: contract.PushExecStarted})
		sessions <- ctx
		// The command runs until its session ends, its output coming all
		// the while; a push must not block once the client is gone.
		stopped := make(chan struct{})
		go func() {
			defer close(stopped)
			tick := contract.Push{Push: contract.PushExecOutput, Output: &contract.ExecOutput{Stream: "stdout", Chunk: "tick\n"}}
			for ctx.Err() == nil {
				push(tick)
			}
			// Output already in flight when the session ended.
			for range 100 {
				push(tick)
			}
		}()
		<-ctx.Done()
		select {
		case <-stopped:
		case <-time.After(testTimeout / 2):
			blocked <- struct{}{}
		}
		return nil, contract.Errorf(contract.CodeCancelled, "stopped")
	})
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	sr := newSSEReader(t, h.send(h.request(ctx, "POST", "/v1/leases/lse_1/exec", agentSecret, `{"tool":"adb","args":["logcat"]}`)))
	sr.expectConnected()
	if f := sr.mustNext(); f.Event != "output" {
		t.Fatalf("frame %+v", f)
	}
	session := receive(t, sessions, "device.exec")
	cancel()
	h.waitEnded("/v1/leases/lse_1/exec")
	receive(t, session.Done(), "the exec session to end")
	select {
	case <-blocked:
		t.Fatal("a push blocked after the client left")
	default:
	}
}

func TestLeaseStreamTellsOfACrashAndARecovery(t *testing.T) {
	h := newHarness(t, httpapi.Options{KeepAlive: time.Hour})
	pushes := make(chan func(contract.Push), 1)
	h.fake.on(contract.OpLeaseWatch, func(_ context.Context, _ fakeCall, push func(contract.Push)) (any, error) {
		pushes <- push
		return contract.LeaseWatchResult{Lease: contract.LeaseRecord{ID: "lse_1"}}, nil
	})
	sr := newSSEReader(t, h.do("GET", "/v1/leases/lse_1/events", agentSecret, ""))
	sr.expectConnected()
	push := receive(t, pushes, "the lease.watch push func")
	push(contract.Push{Push: contract.PushDeviceUnhealthy, LeaseID: "lse_1", DeviceID: "dev_1"})
	push(contract.Push{Push: contract.PushDeviceRecovered, LeaseID: "lse_1", DeviceID: "dev_1", Attempts: 2})
	push(contract.Push{Push: contract.PushLeaseLost, LeaseID: "lse_1", DeviceID: "dev_1", Reason: "device-lost"})
	want := []struct{ event, data string }{
		{"device_unhealthy", `{"deviceId":"dev_1","leaseId":"lse_1"}`},
		{"device_recovered", `{"attempts":2,"deviceId":"dev_1","leaseId":"lse_1"}`},
		{"lease_lost", `{"leaseId":"lse_1","deviceId":"dev_1","reason":"device-lost"}`},
	}
	for _, w := range want {
		if f := sr.mustNext(); f.Event != w.event || f.Data != w.data {
			t.Fatalf("event %+v, want %s %s", f, w.event, w.data)
		}
	}
	sr.expectEnd()
}

func TestRequestStreamTellsAReconnectingEventSourceToStop(t *testing.T) {
	h := newHarness(t, httpapi.Options{})
	h.fake.answer(contract.OpLeaseRequestGet, reqStatus(9, contract.RequestCancelled, nil), nil)
	// The first connection sees the settled request, with its id.
	sr := newSSEReader(t, h.do("GET", "/v1/lease-requests/req_1/events", agentSecret, ""))
	sr.expectConnected()
	f := sr.mustNext()
	if f.Event != "cancelled" || f.ID != "9" {
		t.Fatalf("event %+v, want cancelled with id 9", f)
	}
	sr.expectEnd()
	// Reconnecting with that id is answered 204: EventSource stops.
	req := h.request(t.Context(), "GET", "/v1/lease-requests/req_1/events", agentSecret, "")
	req.Header.Set("Last-Event-ID", "9")
	resp := h.send(req)
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		t.Errorf("reconnect after the terminal event: %d, want 204", resp.StatusCode)
	}
}

// Event streams are capped per token and in all: one past a cap is a 503
// TOO_MANY_STREAMS with Retry-After, before anything is asked of the
// daemon, and closing a stream gives its place back.
func TestEventStreamsAreCapped(t *testing.T) {
	h := newHarness(t, httpapi.Options{KeepAlive: time.Minute, MaxStreams: 3, MaxStreamsPerToken: 2})
	h.fake.answer(contract.OpEventsSubscribe, contract.EventsSubscribeResult{LastSeq: 1}, nil)
	h.fake.answer(contract.OpLeaseWatch, contract.LeaseWatchResult{}, nil)
	open := func(path, secret string) context.CancelFunc {
		t.Helper()
		ctx, cancel := context.WithCancel(t.Context())
		newSSEReader(t, h.send(h.request(ctx, "GET", path, secret, ""))).expectConnected()
		return cancel
	}
	// Each path below ends only as the test says, so waitEnded on it
	// waits for that stream and no refused request.
	closeFirst := open("/v1/leases/lse_1/events", operatorSecret)
	open("/v1/events/stream", operatorSecret)
	before := h.fake.callCount()
	resp := h.do("GET", "/v1/events/stream", operatorSecret, "")
	if e := readError(t, resp, contract.CodeTooManyStreams); e["maxStreamsPerToken"] != float64(2) || resp.Header.Get("Retry-After") != "5" {
		t.Errorf("a third stream of one token: %v (Retry-After %q), want TOO_MANY_STREAMS naming maxStreamsPerToken 2", e, resp.Header.Get("Retry-After"))
	}
	if n := h.fake.callCount(); n != before {
		t.Errorf("a refused stream asked the daemon %d times, want never", n-before)
	}
	open("/v1/leases/lse_2/events", agentSecret) // another token: within its own cap, the third in all
	if e := readError(t, h.do("GET", "/v1/leases/lse_3/events", agentSecret, ""), contract.CodeTooManyStreams); e["maxStreams"] != float64(3) {
		t.Errorf("a fourth stream in all: %v, want TOO_MANY_STREAMS naming maxStreams 3", e)
	}
	closeFirst()
	h.waitEnded("/v1/leases/lse_1/events")
	open("/v1/leases/lse_3/events", agentSecret) // its place is free again
}

// An exec is a stream: it takes a place under the token's and the
// daemon's stream caps while it runs, is refused TOO_MANY_STREAMS past
// them before anything is asked of the daemon, and gives its place back
// when it ends.
func TestExecCountsAgainstTheStreamCaps(t *testing.T) {
	h := newHarness(t, httpapi.Options{KeepAlive: time.Minute, MaxStreams: 8, MaxStreamsPerToken: 2})
	h.fake.on(contract.OpDeviceExec, func(ctx context.Context, c fakeCall, push func(contract.Push)) (any, error) {
		push(contract.Push{Push: contract.PushExecStarted})
		push(contract.Push{Push: contract.PushExecOutput, Output: &contract.ExecOutput{Stream: "stdout", Chunk: "running\n"}})
		if decodeInput[contract.ExecInput](t, c).LeaseID == "lse_2" {
			return contract.ExecResult{}, nil // ends at once, were it run
		}
		<-ctx.Done()
		return nil, contract.Errorf(contract.CodeCancelled, "the caller went away")
	})
	h.fake.answer(contract.OpLeaseWatch, contract.LeaseWatchResult{}, nil)
	open := func(method, path, body string) context.CancelFunc {
		t.Helper()
		ctx, cancel := context.WithCancel(t.Context())
		sr := newSSEReader(t, h.send(h.request(ctx, method, path, agentSecret, body)))
		sr.expectConnected()
		if method == "POST" {
			if f := sr.mustNext(); f.Event != "output" {
				t.Fatalf("exec frame %+v, want its output", f)
			}
		}
		return cancel
	}
	const run = `{"tool":"adb","args":["logcat"]}`
	closeFirst := open("POST", "/v1/leases/lse_1/exec", run)
	open("GET", "/v1/leases/lse_1/events", "")
	before := h.fake.callCount()
	// (Paths differ, so waitEnded below waits for the first exec alone.)
	resp := h.do("POST", "/v1/leases/lse_2/exec", agentSecret, run)
	if e := readError(t, resp, contract.CodeTooManyStreams); e["maxStreamsPerToken"] != float64(2) {
		t.Errorf("an exec past the token's cap: %v, want TOO_MANY_STREAMS naming maxStreamsPerToken 2", e)
	}
	if n := h.fake.callCount(); n != before {
		t.Errorf("a refused exec asked the daemon %d times, want never", n-before)
	}
	closeFirst()
	h.waitEnded("/v1/leases/lse_1/exec")
	open("POST", "/v1/leases/lse_3/exec", run) // its place is free again
}
