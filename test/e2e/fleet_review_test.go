package e2e

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/simlock/simlock/internal/contract"
)

// gwCall is one call the gateway made of a scripted worker.
type gwCall struct {
	ID    json.RawMessage `json:"id"`
	Op    string          `json:"op"`
	Input json.RawMessage `json:"input"`
}

// scripted is a fake worker that joined its gateway (see join): a reader
// of its own answers the gateway's reads of it (status, catalog, config,
// event replays) from the state below, as often as the gateway asks, and
// answers the pings that keep the uplink up; every other call is handed to
// the test, which scripts the answer.
type scripted struct {
	*fakeWorker
	platform string
	calls    chan gwCall
	// stop is closed as the test ends; done once the reader returned.
	stop, done chan struct{}

	mu sync.Mutex
	// mu guards the fields below.
	max, running int
	leases       []contract.LeaseRecord
	devices      []contract.Device
	seq          int64
	// eventSeq is the seq its status says its lists reflect, and grantSeq
	// the one its grants say (0: it says none, as an older worker);
	// staleLeases, when set, are the leases its status lists instead of
	// its own (a snapshot read before what it has done since).
	eventSeq, grantSeq int64
	staleLeases        []contract.LeaseRecord
}

// fakeSubscription is the subscription id a scripted worker hands out.
const fakeSubscription = "sub_fake"

// fakeModel is the one model a scripted worker has, of the phone class, on
// fakeRuntime.
const (
	fakeModel   = "Fake Phone"
	fakeRuntime = "18.0"
)

// fakeConfig is the config a scripted worker reports, for the keys the
// gateway reads of a worker.
var fakeConfig = map[string]any{"lease.maxTtlMs": 24 * 60 * 60 * 1000, "downloads.policy": "on-request"}

// join answers the gateway's connect sequence after hello: events.subscribe
// here, then, in the background, its reads of the worker's status.get,
// catalog.get and config.get (lease.maxTtlMs, downloads.policy), as a
// running worker with maxRunning running slots of platform, free of them
// free; and every later read (those, events.replay, lease.get) as long as
// the test runs. The worker is then listed connected, and routable while
// it has a free slot (fakeJoined waits for that).
func (w *fakeWorker) join(platform string, maxRunning, free int) *scripted {
	w.t.Helper()
	s := &scripted{fakeWorker: w, platform: platform, calls: make(chan gwCall, 64),
		stop: make(chan struct{}), done: make(chan struct{}),
		max: maxRunning, running: maxRunning - free}
	ctx, cancel := context.WithTimeout(context.Background(), waitBound)
	defer cancel()
	c, err := s.read(ctx)
	if err != nil {
		w.t.Fatalf("fake worker: read the gateway's events.subscribe: %v", err)
	}
	if c.Op != "events.subscribe" {
		w.t.Fatalf("fake worker: after hello the gateway called %s, want events.subscribe", c.Op)
	}
	if err := s.answerRead(c); err != nil {
		w.t.Fatalf("fake worker: answer %s: %v", c.Op, err)
	}
	go s.loop()
	w.t.Cleanup(func() {
		close(s.stop)
		w.ws.CloseNow()
		<-s.done
	})
	return s
}

// fakeJoined dials the gateway as worker id, says hello and joins with
// maxRunning slots of platform, free of them free, and waits until the
// gateway lists it connected.
func (f *fleet) fakeJoined(id, platform string, maxRunning, free int) *scripted {
	f.t.Helper()
	w := f.fakeWorker(id)
	w.helloAsAdmin()
	s := w.join(platform, maxRunning, free)
	f.await("the scripted worker "+id+" connected", 5*time.Second, connected(id))
	return s
}

func (s *scripted) read(ctx context.Context) (gwCall, error) {
	_, b, err := s.ws.Read(ctx)
	if err != nil {
		return gwCall{}, err
	}
	var c gwCall
	if err := json.Unmarshal(b, &c); err != nil || c.Op == "" {
		return gwCall{}, fmt.Errorf("the gateway sent %q, not a call", b)
	}
	return c, nil
}

// loop reads the gateway's calls until the uplink ends: the reads are
// answered here, every other call goes to the test.
func (s *scripted) loop() {
	defer close(s.done)
	defer close(s.calls)
	for {
		c, err := s.read(context.Background())
		if err != nil {
			return
		}
		switch c.Op {
		case "status.get", "catalog.get", "config.get", "events.replay", "lease.get":
			if s.answerRead(c) != nil {
				return
			}
		default:
			select {
			case s.calls <- c:
			case <-s.stop:
				return
			}
		}
	}
}

func (s *scripted) write(b []byte) error {
	ctx, cancel := context.WithTimeout(context.Background(), commandBound)
	defer cancel()
	return s.ws.Write(ctx, websocket.MessageText, b)
}

func (s *scripted) result(id json.RawMessage, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return s.write([]byte(`{"id":` + string(id) + `,"result":` + string(b) + `}`))
}

// answerRead answers one of the gateway's reads from the worker's state.
func (s *scripted) answerRead(c gwCall) error {
	switch c.Op {
	case "events.subscribe":
		return s.result(c.ID, contract.EventsSubscribeResult{SubscriptionID: fakeSubscription})
	case "status.get":
		return s.result(c.ID, s.status())
	case "catalog.get":
		p := contract.Platform(s.platform)
		return s.result(c.ID, contract.CatalogResult{Platforms: []contract.Catalog{{
			Platform: p, Models: []string{fakeModel}, Runtimes: []string{fakeRuntime}, DefaultRuntime: fakeRuntime,
			ModelRuntimes: map[string][]string{fakeModel: {fakeRuntime}}, ModelAliases: map[string][]string{},
			ModelClasses:  map[string]contract.DeviceClass{fakeModel: "phone"},
			ClassDefaults: map[contract.DeviceClass][]string{"phone": {fakeModel}},
		}}})
	case "config.get":
		var in contract.ConfigGetInput
		_ = json.Unmarshal(c.Input, &in)
		v, ok := fakeConfig[in.Key]
		if !ok {
			b, _ := json.Marshal(map[string]any{"id": c.ID, "error": map[string]any{"code": "BAD_REQUEST", "message": "the fake worker has no config key " + in.Key}})
			return s.write(b)
		}
		return s.result(c.ID, map[string]any{"key": in.Key, "value": v})
	case "events.replay":
		return s.result(c.ID, contract.EventsReplayResult{Events: []contract.Event{}})
	case "lease.get":
		var in contract.LeaseIDInput
		_ = json.Unmarshal(c.Input, &in)
		s.mu.Lock()
		var got *contract.LeaseGetResult
		for _, l := range s.leases {
			if l.ID != in.LeaseID {
				continue
			}
			got = &contract.LeaseGetResult{Lease: l}
			for _, d := range s.devices {
				if d.ID == l.DeviceID {
					got.Device = d
				}
			}
		}
		s.mu.Unlock()
		if got == nil {
			return s.write([]byte(`{"id":` + string(c.ID) + `,"error":{"code":"UNKNOWN_LEASE","message":"no active lease"}}`))
		}
		return s.result(c.ID, got)
	}
	return fmt.Errorf("not a read: %s", c.Op)
}

// status is the worker's status.get answer: running, with its slots, its
// devices and its leases.
func (s *scripted) status() contract.Status {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := contract.Platform(s.platform)
	leases := s.leases
	if s.staleLeases != nil {
		leases = s.staleLeases
	}
	return contract.Status{
		Daemon: contract.DaemonInfo{Mode: contract.ModeWorker, Version: "fake", Health: "running",
			Protocol: contract.VersionRange{Min: 1, Max: 1}},
		Host: contract.HostInfo{OS: "linux", Arch: "amd64", CPUs: 4, RAMBytes: 8 << 30},
		Capacity: &contract.Capacity{Strategy: "fixed",
			Global: contract.GlobalCapacity{Running: s.running, MaxRunning: s.max},
			Platforms: map[contract.Platform]contract.PlatformCapacity{p: {Running: s.running, MaxRunning: s.max,
				Devices: len(s.devices), MaxDevices: s.max + len(s.devices)}}},
		Devices:  slices.Clone(s.devices),
		Leases:   slices.Clone(leases),
		EventSeq: s.eventSeq,
	}
}

// next waits, at most within, for the gateway's next call to the worker
// of op; what says what the call would show, for the failure. Another
// call first fails the test: the script did not expect it.
func (s *scripted) next(op string, within time.Duration, what string) gwCall {
	s.t.Helper()
	select {
	case c, ok := <-s.calls:
		if !ok {
			s.t.Fatalf("fake worker: the uplink ended while the test waited for %s (%s)", op, what)
		}
		if c.Op != op {
			s.t.Fatalf("fake worker: the gateway called %s (%s) while the test waited for %s (%s)", c.Op, c.Input, op, what)
		}
		return c
	case <-time.After(within):
		s.t.Fatalf("within %s the gateway sent the fake worker no %s: %s", within, op, what)
	}
	return gwCall{}
}

// serveUntil answers the gateway's reads until it calls op, and returns
// that call.
func (s *scripted) serveUntil(op string) gwCall {
	s.t.Helper()
	return s.next(op, waitBound, "the call the test scripts")
}

// nextOr waits for the gateway's next call of op to the worker, or for
// what ch brings (the end of the command or request that made the gateway
// call), whichever comes first: a call is returned with ok true, else what
// ch brought.
func nextOr[T any](s *scripted, op string, ch <-chan T) (c gwCall, v T, ok bool) {
	s.t.Helper()
	select {
	case c, open := <-s.calls:
		if !open {
			s.t.Fatalf("fake worker: the uplink ended while the test waited for %s", op)
		}
		if c.Op != op {
			s.t.Fatalf("fake worker: the gateway called %s (%s) while the test waited for %s", c.Op, c.Input, op)
		}
		return c, v, true
	case v = <-ch:
		return gwCall{}, v, false
	case <-time.After(waitBound):
		s.t.Fatalf("within %s the gateway sent the fake worker no %s, and what asked for it did not end", waitBound, op)
	}
	return gwCall{}, v, false
}

// quiet checks that the gateway calls nothing of the worker for window,
// reads aside; why says what a call would mean. It returns the calls that
// came.
func (s *scripted) quiet(window time.Duration, why string) []gwCall {
	s.t.Helper()
	timer := time.NewTimer(window)
	defer timer.Stop()
	var came []gwCall
	for {
		select {
		case c, ok := <-s.calls:
			if !ok {
				return came
			}
			s.t.Errorf("%s: the gateway called %s (%s)", why, c.Op, c.Input)
			came = append(came, c)
		case <-timer.C:
			return came
		}
	}
}

// refuse answers c with the error code.
func (s *scripted) refuse(c gwCall, code, msg string) {
	s.t.Helper()
	b, _ := json.Marshal(map[string]any{"id": c.ID, "error": map[string]any{"code": code, "message": msg}})
	if err := s.write(b); err != nil {
		s.t.Fatalf("fake worker: write: %v", err)
	}
}

// progress pushes one step of the lease request c, as a worker does while
// it readies the device.
func (s *scripted) progress(c gwCall, stage contract.Stage) {
	s.t.Helper()
	b, _ := json.Marshal(map[string]any{"push": contract.PushProgress, "id": c.ID, "progress": map[string]any{"stage": stage, "etaMs": 1000}})
	if err := s.write(b); err != nil {
		s.t.Fatalf("fake worker: write: %v", err)
	}
}

// reply answers c with the result v.
func (s *scripted) reply(c gwCall, v any) {
	s.t.Helper()
	if err := s.result(c.ID, v); err != nil {
		s.t.Fatalf("fake worker: answer %s: %v", c.Op, err)
	}
}

// requestIn decodes a forwarded lease.request.
func requestIn(t *testing.T, c gwCall) contract.LeaseRequestInput {
	t.Helper()
	var in contract.LeaseRequestInput
	if err := json.Unmarshal(c.Input, &in); err != nil {
		t.Fatalf("the forwarded lease.request's input %s: %v", c.Input, err)
	}
	return in
}

func fakeID(prefix string) string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return prefix + hex.EncodeToString(b)
}

// grant grants the lease.request c: a lease for the requester the gateway
// forwarded, whose ownerId is ownerEcho ("" echoes the owner forwarded),
// kept in the worker's status from now on.
func (s *scripted) grant(c gwCall, ownerEcho string) contract.LeaseRecord {
	s.t.Helper()
	in := requestIn(s.t, c)
	if ownerEcho == "" {
		ownerEcho = in.Owner
	}
	now := time.Now().UnixMilli()
	ttl := in.TTLMs
	if ttl == 0 {
		ttl = 30 * 60 * 1000
	}
	dev := contract.Device{ID: fakeID("dev_"), DriverDeviceID: fakeID("fake-"), Driver: "fake",
		Spec:  contract.DeviceSpec{Platform: contract.Platform(s.platform), Model: fakeModel, OSVersion: fakeRuntime},
		State: contract.DeviceLeased, CreatedAt: now, StateSince: now}
	l := contract.LeaseRecord{ID: fakeID("lse_"), DeviceID: dev.ID, RequesterID: in.RequesterID, OwnerID: ownerEcho,
		GrantedAt: now, TTLMs: ttl, LastRenewedAt: now, TTLDeadline: now + ttl}
	dev.LeaseID = l.ID
	s.mu.Lock()
	s.devices = append(s.devices, dev)
	s.leases = append(s.leases, l)
	s.running++
	grantSeq := s.grantSeq
	s.mu.Unlock()
	s.reply(c, contract.LeaseGrant{
		EventSeq:    grantSeq,
		Device:      contract.GrantDevice{ID: dev.ID, DriverDeviceID: dev.DriverDeviceID, Spec: dev.Spec},
		Lease:       l,
		Environment: map[string]string{},
		RequestID:   fakeID("req_"),
		Source:      contract.SourceProvisioned,
	})
	return l
}

// forget drops a lease from the worker's state, as a worker whose lease
// ended does.
func (s *scripted) forget(leaseID string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.leases = slices.DeleteFunc(s.leases, func(l contract.LeaseRecord) bool { return l.ID == leaseID })
	s.devices = slices.DeleteFunc(s.devices, func(d contract.Device) bool { return d.LeaseID == leaseID })
}

// openSlots frees n of the worker's running slots and tells the gateway
// with a capacity.changed event, after which it reads the status again.
func (s *scripted) openSlots(n int) {
	s.t.Helper()
	s.mu.Lock()
	s.running = max(s.running-n, 0)
	s.seq++
	ev := contract.Event{ID: fakeID("evt_"), Seq: s.seq, Timestamp: time.Now().UnixMilli(), Event: "capacity.changed",
		Payload: json.RawMessage(`{}`)}
	s.mu.Unlock()
	b, _ := json.Marshal(map[string]any{"push": contract.PushEvent, "subscriptionId": fakeSubscription, "event": ev})
	if err := s.write(b); err != nil {
		s.t.Fatalf("fake worker: write: %v", err)
	}
}

// gwStatus is the part of the gateway's `status --json` these tests read.
type gwStatus struct {
	QueueDepth int `json:"queueDepth"`
	Waiting    []struct {
		RequestID   string `json:"requestId"`
		RequesterID string `json:"requesterId"`
		Stage       string `json:"stage"`
		WorkerID    string `json:"workerId"`
	} `json:"waiting"`
	Leases  []leaseRec `json:"leases"`
	Devices []struct {
		ID       string `json:"id"`
		WorkerID string `json:"workerId"`
		State    string `json:"state"`
		LeaseID  string `json:"leaseId"`
	} `json:"devices"`
}

func (f *fleet) status() gwStatus {
	f.t.Helper()
	r := f.gw.run("status", "--json")
	var st gwStatus
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &st) != nil {
		f.t.Fatalf("status --json on the gateway\n%s", r)
	}
	return st
}

// expectQueueEmpty checks the gateway's queue holds nothing.
func (f *fleet) expectQueueEmpty(why string) {
	f.t.Helper()
	if st := f.status(); st.QueueDepth != 0 || len(st.Waiting) != 0 {
		f.t.Errorf("%s: the gateway's status shows queueDepth %d and waiting %+v, want an empty queue", why, st.QueueDepth, st.Waiting)
	}
}

// startQueued starts `simlock lease` on the gateway for agent and waits
// until it reads queued.
func (f *fleet) startQueued(agent string) *proc {
	f.t.Helper()
	p := f.gw.start("lease", "--platform", "ios", "--agent-id", agent, "--detach", "--progress", "json")
	p.waitLine(p.stderr, agent+" queued", func(s string) bool { return strings.Contains(s, `"stage":"queued"`) })
	return p
}

// R2-P2: a forwarded lease.request the worker never answers ends
// WORKER_UNREACHABLE once gateway.leaseRequestTimeoutMs passed, and is not
// sent again.
func TestAForwardedLeaseRequestTheWorkerNeverAnswersEndsWorkerUnreachable(t *testing.T) {
	t.Parallel()
	f := newFleet(t, "gateway.leaseRequestTimeoutMs", "1000")
	w := f.fakeJoined("fake-mute", "ios", 2, 2)
	started := time.Now()
	ch := f.gw.runAsync("lease", "--platform", "ios", "--agent-id", "unanswered", "--detach")
	w.serveUntil("lease.request") // and never answered
	r := waitResult(t, ch, 10*time.Second, "a lease.request the worker never answers, with gateway.leaseRequestTimeoutMs 1000, did not end")
	expectFailure(t, r, 1, "WORKER_UNREACHABLE")
	if took := time.Since(started); took < time.Second {
		t.Errorf("the request ended WORKER_UNREACHABLE after %s, before gateway.leaseRequestTimeoutMs (1s) passed", took)
	}
	w.quiet(1500*time.Millisecond, "the request that ended WORKER_UNREACHABLE was sent again")
	f.expectQueueEmpty("after the request ended WORKER_UNREACHABLE")
}

// R1-ET: a forwarded device.exec the worker never answers ends EXEC_TIMEOUT
// once gateway.execTimeoutMs passed.
func TestAForwardedExecTheWorkerNeverAnswersEndsExecTimeout(t *testing.T) {
	t.Parallel()
	f := newFleet(t, "gateway.execTimeoutMs", "1000")
	w := f.fakeJoined("fake-exec", "ios", 2, 2)
	agent, leaseID, _ := f.grantOver(w, "exec-agent")

	started := time.Now()
	done := execOverHTTP(f, agent, leaseID)
	w.serveUntil("device.exec") // and never answered
	var a httpAnswer
	select {
	case a = <-done:
	case <-time.After(10 * time.Second):
		t.Fatalf("an exec the worker never answers, with gateway.execTimeoutMs 1000, had no answer 10s later")
	}
	if a.err != nil {
		t.Fatalf("exec through the gateway: %v", a.err)
	}
	if a.status != http.StatusGatewayTimeout || !strings.Contains(a.body, `"EXEC_TIMEOUT"`) {
		t.Errorf("an exec the worker never answers ended %d %s, want 504 EXEC_TIMEOUT", a.status, a.body)
	}
	if took := time.Since(started); took < time.Second {
		t.Errorf("the exec ended after %s, before gateway.execTimeoutMs (1s) passed", took)
	}
}

// R1-H6: a gateway lease's owner is the owner the gateway forwarded, never
// what the worker's grant echoes: the holder the gateway authorized, in a
// session of its own (not an admin's), renews it.
func TestALeasesOwnerIsTheOneTheGatewayForwardedNotTheWorkersEcho(t *testing.T) {
	t.Parallel()
	f := newFleet(t)
	w := f.fakeJoined("fake-liar", "ios", 2, 2)
	ch := f.gw.runAsync("lease", "--platform", "ios", "--agent-id", "real-holder", "--detach")
	c := w.serveUntil("lease.request")
	if in := requestIn(t, c); in.Owner != "real-holder" {
		t.Errorf("the forwarded lease.request names owner %q, want real-holder", in.Owner)
	}
	l := w.grant(c, "worker-rewrote-this")
	r := awaitResult(t, ch)
	if r.code != 0 {
		t.Fatalf("lease through the gateway\n%s", r)
	}
	g := parseGrant(t, strings.TrimSpace(r.stdout))
	if g.Lease.OwnerID != "real-holder" {
		t.Errorf("the grant's lease.ownerId = %q, want real-holder (the worker echoed worker-rewrote-this)", g.Lease.OwnerID)
	}

	// The holder's own session: no admin token, so the gateway checks
	// the owner it recorded.
	rc := f.gw.dial()
	expectResult(t, rc.call("1", "hello", helloInput("real-holder", "")), nil)
	b, _ := json.Marshal(map[string]any{"id": "2", "op": "lease.renew", "input": map[string]any{"leaseId": g.Lease.ID}})
	rc.write(append(b, '\n'))
	answered := make(chan string, 1)
	go func() {
		_ = rc.c.SetReadDeadline(time.Now().Add(commandBound))
		line, err := rc.r.ReadString('\n')
		if err != nil {
			line = "(no answer: " + err.Error() + ")"
		}
		answered <- strings.TrimSpace(line)
	}()
	c, refused, forwarded := nextOr(w, "lease.renew", answered)
	if !forwarded {
		t.Fatalf("the real holder's renew was not forwarded to the worker; the gateway answered %s", refused)
	}
	var in contract.LeaseRenewInput
	if json.Unmarshal(c.Input, &in) != nil || in.LeaseID != l.ID {
		t.Errorf("the forwarded lease.renew is %s, want the worker's lease %s", c.Input, l.ID)
	}
	w.reply(c, l)
	var rec contract.LeaseRecord
	select {
	case line := <-answered:
		var resp struct {
			Result *contract.LeaseRecord `json:"result"`
		}
		if json.Unmarshal([]byte(line), &resp) != nil || resp.Result == nil {
			t.Fatalf("the real holder's renew answered %s, want the lease", line)
		}
		rec = *resp.Result
	case <-time.After(waitBound):
		t.Fatalf("the real holder's renew had no answer within %s", waitBound)
	}
	if rec.ID != g.Lease.ID || rec.OwnerID != "real-holder" {
		t.Errorf("the renewed lease is %+v, want %s owned by real-holder", rec, g.Lease.ID)
	}
}

// R2-P1: a worker that pushed progress for a lease.request and then
// answers NO_CAPACITY failed the request: that is its answer, not a stale
// view, so the request is not sent again and ends NO_CAPACITY.
func TestNoCapacityAfterProgressIsTheRequestsEndNotABounce(t *testing.T) {
	t.Parallel()
	f := newFleet(t)
	w := f.fakeJoined("fake-progress", "ios", 2, 2)
	ch := f.gw.runAsync("lease", "--platform", "ios", "--agent-id", "progressed", "--detach", "--progress", "json")
	c := w.serveUntil("lease.request")
	w.progress(c, contract.StageProvisioning)
	w.refuse(c, "NO_CAPACITY", "the device could not be started after all")
	again, r, sent := nextOr(w, "lease.request", ch)
	if sent {
		w.refuse(again, "NO_CAPACITY", "still none")
		t.Fatalf("after progress then NO_CAPACITY the gateway sent the request to the worker again: %s", again.Input)
	}
	expectFailure(t, r, 11, "NO_CAPACITY")
	w.quiet(time.Second, "the request that ended NO_CAPACITY after progress was sent again")
	f.expectQueueEmpty("after the request ended NO_CAPACITY")
}

// R1-C3b: a worker that answers a renew UNKNOWN_LEASE proves the gateway's
// record of the lease wrong: the renew fails UNKNOWN_LEASE and the gateway
// forgets the lease, so its requester may lease again.
func TestARenewAnsweredUnknownLeaseForgetsTheLease(t *testing.T) {
	t.Parallel()
	f := newFleet(t)
	w := f.fakeJoined("fake-forgetful", "ios", 2, 2)
	ch := f.gw.runAsync("lease", "--platform", "ios", "--agent-id", "forgotten", "--detach")
	l := w.grant(w.serveUntil("lease.request"), "")
	r := awaitResult(t, ch)
	if r.code != 0 {
		t.Fatalf("lease through the gateway\n%s", r)
	}
	g := parseGrant(t, strings.TrimSpace(r.stdout))

	renew := f.gw.runAsync("lease", "renew", "--agent-id", "forgotten", g.Lease.ID)
	c, rr, forwarded := nextOr(w, "lease.renew", renew)
	if !forwarded {
		t.Fatalf("the renew was not forwarded to the worker\n%s", rr)
	}
	w.forget(l.ID)
	w.refuse(c, "UNKNOWN_LEASE", "no active lease "+l.ID)
	expectFailure(t, awaitResult(t, renew), 1, "UNKNOWN_LEASE")

	again := f.gw.runAsync("lease", "--platform", "ios", "--agent-id", "forgotten", "--detach")
	c, r, forwarded = nextOr(w, "lease.request", again)
	if !forwarded {
		e := cliError(t, r)
		t.Fatalf("after the worker answered UNKNOWN_LEASE, a new lease for the same requester was not forwarded: it ended %v (exit %d)", e["code"], r.code)
	}
	w.grant(c, "")
	if r := awaitResult(t, again); r.code != 0 {
		t.Errorf("the new lease\n%s", r)
	}
}

// R3-C1: a dispatch attempt that ends in a worker's refusal serves the
// queue again: the next request in line is sent at once, with no view
// change to prompt it.
func TestAFailedDispatchSendsTheNextRequestInLineAtOnce(t *testing.T) {
	t.Parallel()
	f := newFleet(t)
	w := f.fakeJoined("fake-refuser", "ios", 2, 0)
	first := f.startQueued("first")
	second := f.startQueued("second")
	w.openSlots(2)
	c := w.serveUntil("lease.request")
	if in := requestIn(t, c); !strings.HasSuffix(in.RequesterID, ":first") {
		t.Fatalf("the first lease.request is for %q, want first's", in.RequesterID)
	}
	w.refuse(c, "FORBIDDEN", "this worker refuses the request")
	c = w.next("lease.request", 5*time.Second, "after the first attempt failed, the second request in line was not dispatched")
	if in := requestIn(t, c); !strings.HasSuffix(in.RequesterID, ":second") {
		t.Errorf("the second lease.request is for %q, want second's", in.RequesterID)
	}
	w.grant(c, "")
	if code := first.wait(); code != 1 || !strings.Contains(first.stderr.text(), "FORBIDDEN") {
		t.Errorf("first ended %d, want 1 with the worker's FORBIDDEN\n%s", code, first.dump())
	}
	if code := second.wait(); code != 0 {
		t.Errorf("second ended %d, want its grant\n%s", code, second.dump())
	}
}

// R2-H6: at most one lease.request in flight per worker per serving pass:
// a worker that reports several free slots gets the first of several
// queued requests, and the others stay queued until it answers.
func TestOnePassSendsAWorkerOneRequestAtATime(t *testing.T) {
	t.Parallel()
	f := newFleet(t)
	w := f.fakeJoined("fake-busy", "ios", 3, 0)
	procs := []*proc{f.startQueued("q1"), f.startQueued("q2"), f.startQueued("q3")}
	w.openSlots(3)
	c := w.serveUntil("lease.request")
	if in := requestIn(t, c); !strings.HasSuffix(in.RequesterID, ":q1") {
		t.Errorf("the first lease.request is for %q, want q1's, the first in line", in.RequesterID)
	}
	st := f.status()
	stages := map[string]int{}
	for _, wr := range st.Waiting {
		stages[wr.Stage]++
	}
	if stages["starting"] != 1 || stages["queued"] != 2 {
		t.Errorf("with the first lease.request unanswered the gateway shows %+v, want one request starting and two queued", st.Waiting)
	}
	more := w.quiet(time.Second, "a second lease.request came while the first was unanswered")
	for _, c := range append([]gwCall{c}, more...) {
		w.grant(c, "")
	}
	for range 2 - len(more) {
		w.grant(w.serveUntil("lease.request"), "")
	}
	for _, p := range procs {
		if code := p.wait(); code != 0 {
			t.Errorf("%s ended %d\n%s", p, code, p.dump())
		}
	}
}

// R1-P4: the uplink dying under a forwarded renew makes the renew fail
// WORKER_UNREACHABLE, and the lease is kept.
func TestAnUplinkThatDiesMidRenewMakesItWorkerUnreachable(t *testing.T) {
	t.Parallel()
	f := newFleet(t)
	w := f.fakeJoined("fake-dies", "ios", 2, 2)
	ch := f.gw.runAsync("lease", "--platform", "ios", "--agent-id", "stranded", "--detach")
	w.grant(w.serveUntil("lease.request"), "")
	r := awaitResult(t, ch)
	if r.code != 0 {
		t.Fatalf("lease through the gateway\n%s", r)
	}
	g := parseGrant(t, strings.TrimSpace(r.stdout))
	renew := f.gw.runAsync("lease", "renew", "--agent-id", "stranded", g.Lease.ID)
	if _, rr, forwarded := nextOr(w, "lease.renew", renew); !forwarded {
		t.Fatalf("the renew was not forwarded to the worker\n%s", rr)
	}
	w.ws.CloseNow()
	expectFailure(t, awaitResult(t, renew), 1, "WORKER_UNREACHABLE")
	// Not forgotten: the worker is away, not the lease.
	expectFailure(t, f.gw.run("lease", "renew", "--agent-id", "stranded", g.Lease.ID), 1, "WORKER_UNREACHABLE")
}

// R1-H8: release --all with a worker unreachable releases what it can and
// answers WORKER_UNREACHABLE naming the leases it released and the workers
// it could not reach.
func TestReleaseAllWithAWorkerUnreachableNamesWhatItReleasedAndWhoDidNotAnswer(t *testing.T) {
	t.Parallel()
	f := newFleet(t)
	a, b := f.worker("worker-a", 1), f.worker("worker-b", 1)
	idA, idB := instanceID(t, a), instanceID(t, b)
	f.await("both workers connected", 5*time.Second, connected(idA, idB))
	g1 := f.gw.leaseDetached("h8-one", "ios")
	g2 := f.gw.leaseDetached("h8-two", "ios")
	if g1.Lease.WorkerID == g2.Lease.WorkerID {
		t.Fatalf("two leases on one worker of one slot: %s and %s", g1.Lease.ID, g2.Lease.ID)
	}
	reachable, away := g1, g2
	awayHome, reachableHome := b, a
	if g2.Lease.WorkerID == idA {
		awayHome, reachableHome = a, b
	}
	pid := lockPID(awayHome.Dir)
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	defer syscall.Kill(pid, syscall.SIGCONT)
	f.await("the stopped worker dropped", 5*time.Second, func(ws map[string]workerLine) bool {
		return ws[away.Lease.WorkerID].Connection == "disconnected"
	})
	e := expectFailure(t, f.gw.run("release", "--all", "--yes"), 1, "WORKER_UNREACHABLE")
	released, _ := e["releasedLeaseIds"].([]any)
	if len(released) != 1 || released[0] != reachable.Lease.ID {
		t.Errorf("release --all's releasedLeaseIds = %v, want [%s] (the reachable worker's lease)", e["releasedLeaseIds"], reachable.Lease.ID)
	}
	unreachable, _ := e["unreachableWorkers"].([]any)
	if len(unreachable) != 1 || unreachable[0] != away.Lease.WorkerID {
		t.Errorf("release --all's unreachableWorkers = %v, want [%s]", e["unreachableWorkers"], away.Lease.WorkerID)
	}
	if ls := reachableHome.leases(); len(ls) != 0 {
		t.Errorf("the reachable worker still holds %+v after release --all", ls)
	}
}

// R6-3: the lease ids in a gateway's status (leases[].id, devices[].leaseId)
// are the gateway's ids, and renew takes the id read there.
func TestTheLeaseIDsInAGatewaysStatusAreTheGatewaysAndRenewTakesThem(t *testing.T) {
	t.Parallel()
	f := newFleet(t)
	a := f.worker("worker-a", 1)
	idA := instanceID(t, a)
	f.await("worker A connected", 5*time.Second, connected(idA))
	g := f.gw.leaseDetached("r63", "ios")
	var st gwStatus
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(pollEvery) {
		st = f.status()
		if len(st.Leases) > 0 || time.Now().After(deadline) {
			break
		}
	}
	if len(st.Leases) != 1 {
		t.Fatalf("within 5s the gateway's status listed leases %+v, want the one lease", st.Leases)
	}
	if st.Leases[0].ID != g.Lease.ID {
		t.Errorf("status leases[].id = %q, want the gateway's id %q", st.Leases[0].ID, g.Lease.ID)
	}
	var onDevice []string
	for _, d := range st.Devices {
		if d.LeaseID != "" {
			onDevice = append(onDevice, d.LeaseID)
		}
	}
	if len(onDevice) != 1 || onDevice[0] != g.Lease.ID {
		t.Errorf("status devices[].leaseId = %v, want [%s]", onDevice, g.Lease.ID)
	}
	if r := f.gw.run("lease", "renew", "--agent-id", "r63", st.Leases[0].ID); r.code != 0 {
		t.Errorf("renew of the id read from status\n%s", r)
	}
}

// R2-C2, R1-H10: one request.dispatched event per grant, with the request,
// the worker, the requester, the platform, the model, the reason and the
// time it queued; none for an attempt that bounced off a stale view, and
// one only for an attempt whose worker pushed progress before it granted.
func TestOneRequestDispatchedEventPerGrantAndNoneForABounce(t *testing.T) {
	t.Parallel()
	f := newFleet(t)
	w := f.fakeJoined("fake-stale", "ios", 2, 2)
	_, agent := f.gw.token("agent", "dispatched")
	r := f.api.do("POST", "/v1/lease-requests", agent, `{"platform":"ios"}`)
	if r.status != 201 {
		t.Fatalf("create: %d %s", r.status, r.raw)
	}
	req := requestOf(t, r)
	id, requester := req["id"].(string), req["requesterId"].(string)
	w.refuse(w.serveUntil("lease.request"), "NO_CAPACITY", "the view was stale")
	c := w.next("lease.request", waitBound, "the request that bounced off a stale view was not sent again once the view moved")
	// Progress, then the grant: dispatched once, whichever records it.
	w.progress(c, contract.StageProvisioning)
	w.progress(c, contract.StageBooting)
	w.grant(c, "")
	f.api.awaitState(agent, id, "granted")
	var dispatched []event
	for _, ev := range events(t, f.gw) {
		if ev.Event == "request.dispatched" {
			dispatched = append(dispatched, ev)
		}
	}
	if len(dispatched) != 1 {
		t.Fatalf("the gateway logged %d request.dispatched events for one grant after one bounce, want 1: %+v", len(dispatched), dispatched)
	}
	ev := dispatched[0]
	for k, want := range map[string]string{"requestId": id, "workerId": "fake-stale", "requesterId": requester,
		"platform": "ios", "model": fakeModel, "reason": "free-capacity"} {
		if ev.str(k) != want {
			t.Errorf("request.dispatched %s = %q, want %q (payload %v)", k, ev.str(k), want, ev.Payload)
		}
	}
	if q, ok := ev.Payload["queuedMs"].(float64); !ok || q < 0 {
		t.Errorf("request.dispatched queuedMs = %v, want a number >= 0 (payload %v)", ev.Payload["queuedMs"], ev.Payload)
	}
}

// A grant through the gateway names the gateway's request, the one its
// client made and can read back, not the request the gateway made of the
// worker.
func TestAGrantThroughTheGatewayNamesTheGatewaysRequest(t *testing.T) {
	t.Parallel()
	f := newFleet(t)
	a := f.worker("worker-a", 1)
	f.await("worker A connected", 5*time.Second, connected(instanceID(t, a)))
	_, agent := f.gw.token("agent", "named")
	r := f.api.do("POST", "/v1/lease-requests", agent, `{"platform":"ios"}`)
	if r.status != 201 {
		t.Fatalf("create: %d %s", r.status, r.raw)
	}
	id := requestOf(t, r)["id"].(string)
	lease, _ := f.api.awaitState(agent, id, "granted")["lease"].(map[string]any)
	if lease == nil || lease["requestId"] != id {
		t.Errorf("the granted request %s shows a lease whose requestId is %v, want the gateway's request %s", id, lease["requestId"], id)
	}
	if got, ok := lease["requestId"].(string); ok && got != id {
		if rep := f.api.do("GET", "/v1/lease-requests/"+got, agent, ""); rep.status != 200 {
			t.Errorf("the grant's requestId %s cannot be read back on the gateway: %d %s", got, rep.status, rep.raw)
		}
	}
}

// Two requests are never sent to a worker on the strength of one free
// slot: while the first is in flight, a view read that still shows the
// slot free (the worker has not answered yet) sends nothing more; the
// second goes once the worker's view has room again. (Without the hold, a
// second request raced the first to the one slot, and the worker could
// serve the later one: arrival order broken.)
func TestADispatchInFlightHoldsTheSlotItCountsOn(t *testing.T) {
	t.Parallel()
	f := newFleet(t)
	w := f.fakeJoined("fake-one", "ios", 1, 0)
	first, second := f.startQueued("h1"), f.startQueued("h2")
	w.openSlots(1)
	c := w.serveUntil("lease.request")
	if in := requestIn(t, c); !strings.HasSuffix(in.RequesterID, ":h1") {
		t.Fatalf("the first lease.request is for %q, want h1's", in.RequesterID)
	}
	w.openSlots(0) // the view is read again while h1 is in flight: one slot, still free
	if more := w.quiet(time.Second, "a second lease.request was sent on the slot the first counts on"); len(more) > 0 {
		return
	}
	w.grant(c, "")
	if code := first.wait(); code != 0 {
		t.Fatalf("h1 ended %d\n%s", code, first.dump())
	}
	w.openSlots(1)
	c = w.serveUntil("lease.request")
	if in := requestIn(t, c); !strings.HasSuffix(in.RequesterID, ":h2") {
		t.Errorf("the next lease.request is for %q, want h2's", in.RequesterID)
	}
	w.grant(c, "")
	if code := second.wait(); code != 0 {
		t.Errorf("h2 ended %d\n%s", code, second.dump())
	}
}
