package httpapi_test

import (
	"context"
	"encoding/json"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/httpapi"
)

// revokeBound is how soon a revoked token's streams must end.
const revokeBound = time.Second

// endsRevoked checks that a stream ends within revokeBound, its last frame
// an error event with UNAUTHENTICATED. The rest of the stream is read in
// a goroutine, so a stream that stays open fails the test by name.
func endsRevoked(t *testing.T, what string, r *sseReader) {
	t.Helper()
	rest := make(chan string, 1)
	go func() {
		b, _ := io.ReadAll(r.br)
		rest <- string(b)
	}()
	var text string
	select {
	case text = <-rest:
	case <-time.After(revokeBound):
		t.Fatalf("%s was still open %s after its token was revoked", what, revokeBound)
	}
	frames := strings.Split(strings.TrimSpace(text), "\n\n")
	last := frames[len(frames)-1]
	var body struct {
		Error contract.Error `json:"error"`
	}
	data, _ := strings.CutPrefix(last, "event: error\ndata: ")
	if data == last || json.Unmarshal([]byte(data), &body) != nil || body.Error.Code != contract.CodeUnauthenticated {
		t.Fatalf("%s ended with %q after its token was revoked, want an error event with UNAUTHENTICATED", what, last)
	}
}

// Revoking a token ends everything it holds open at once: every kind of
// stream ends with an UNAUTHENTICATED error event, a long poll and a
// command not yet started are answered 401, and a request that
// authenticated just before the revocation is cut as it starts. Another
// token's stream goes on.
func TestEndTokenEndsItsStreamsCommandsAndLongPolls(t *testing.T) {
	h := newHarness(t, httpapi.Options{KeepAlive: time.Minute})
	const otherSecret = "slk_operator_two"
	other := contract.TokenRecord{ID: "tok_op2", Role: contract.TokenOperator, CreatedAt: 1}
	h.fake.tokens[otherSecret] = other

	h.fake.answer(contract.OpLeaseWatch, contract.LeaseWatchResult{}, nil)
	parked := make(chan struct{}, 2)
	h.fake.on(contract.OpLeaseRequestGet, func(ctx context.Context, c fakeCall, _ func(contract.Push)) (any, error) {
		if decodeInput[contract.LeaseRequestGetInput](t, c).WaitMs > 0 {
			parked <- struct{}{}
			<-ctx.Done()
			return nil, contract.Errorf(contract.CodeDaemonConnectionLost, "connection closed")
		}
		return reqStatus(1, contract.RequestQueued, nil), nil
	})
	eventPushes := make(chan func(contract.Push), 2)
	h.fake.on(contract.OpEventsSubscribe, func(_ context.Context, _ fakeCall, push func(contract.Push)) (any, error) {
		eventPushes <- push
		return contract.EventsSubscribeResult{LastSeq: 1}, nil
	})
	h.fake.on(contract.OpJobFollow, func(ctx context.Context, _ fakeCall, push func(contract.Push)) (any, error) {
		push(contract.Push{Push: contract.PushJob, Job: &contract.JobEvent{Phase: &contract.JobPhase{Phase: "download"}}})
		<-ctx.Done()
		return nil, contract.Errorf(contract.CodeDaemonConnectionLost, "connection closed")
	})
	h.fake.on(contract.OpDeviceExec, func(ctx context.Context, _ fakeCall, push func(contract.Push)) (any, error) {
		push(contract.Push{Push: contract.PushExecStarted})
		<-ctx.Done()
		return nil, contract.Errorf(contract.CodeDaemonConnectionLost, "connection closed")
	})

	lease := newSSEReader(t, h.do("GET", "/v1/leases/lse_1/events", operatorSecret, ""))
	lease.expectConnected()
	request := newSSEReader(t, h.do("GET", "/v1/lease-requests/req_1/events", operatorSecret, ""))
	request.expectConnected()
	if f := request.mustNext(); f.Event != "queued" {
		t.Fatalf("request stream %+v", f)
	}
	events := newSSEReader(t, h.do("GET", "/v1/events/stream", operatorSecret, ""))
	events.expectConnected()
	receive(t, eventPushes, "the first events.subscribe")
	job := newSSEReader(t, h.do("GET", "/v1/jobs/job_1/events", operatorSecret, ""))
	job.expectConnected()
	if f := job.mustNext(); f.Event != "phase" {
		t.Fatalf("job stream %+v", f)
	}
	exec := newSSEReader(t, h.do("POST", "/v1/leases/lse_1/exec", operatorSecret, `{"tool":"adb","args":["logcat"],"requesterId":"tok_agent1"}`))
	exec.expectConnected()
	otherEvents := newSSEReader(t, h.do("GET", "/v1/events/stream", otherSecret, ""))
	otherEvents.expectConnected()
	otherPush := receive(t, eventPushes, "the other token's events.subscribe")
	polled := make(chan map[string]any, 1)
	go func() {
		resp, err := h.client.Do(h.request(t.Context(), "GET", "/v1/lease-requests/req_1?wait=60", operatorSecret, ""))
		if err != nil {
			polled <- map[string]any{"err": err.Error()}
			return
		}
		defer resp.Body.Close()
		var m map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&m)
		m["status"] = resp.StatusCode
		polled <- m
	}()
	// The request stream and the long poll both park in a wait.
	receive(t, parked, "the request stream's wait")
	receive(t, parked, "the long poll's wait")

	h.api.EndToken(operatorToken.ID)

	for _, s := range []struct {
		what string
		r    *sseReader
	}{{"the lease stream", lease}, {"the request stream", request}, {"the event stream", events}, {"the job stream", job}, {"the exec stream", exec}} {
		endsRevoked(t, s.what, s.r)
	}
	var m map[string]any
	select {
	case m = <-polled:
	case <-time.After(revokeBound):
		t.Fatalf("the long poll was still waiting %s after its token was revoked", revokeBound)
	}
	if m["status"] != 401 {
		t.Errorf("the long poll after its token was revoked: %v, want 401 UNAUTHENTICATED", m)
	} else if e, _ := m["error"].(map[string]any); e["code"] != string(contract.CodeUnauthenticated) {
		t.Errorf("the long poll after its token was revoked: %v, want UNAUTHENTICATED", m)
	}
	// The fake still knows the secret, as a request authenticated a moment
	// before the revocation would: it is cut as it starts.
	readError(t, h.do("GET", "/v1/leases/lse_1/events", operatorSecret, ""), contract.CodeUnauthenticated)

	// Another token's stream is untouched.
	otherPush(contract.Push{Push: contract.PushEvent, Event: &contract.Event{ID: "evt_2", Seq: 2, Event: "lease.renewed", Payload: json.RawMessage(`{}`)}})
	if f := otherEvents.mustNext(); f.ID != "2" {
		t.Fatalf("the other token's stream: %+v, want event 2", f)
	}
}
