package daemon

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"runtime/metrics"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/simlock/simlock/internal/client"
	"github.com/simlock/simlock/internal/config"
	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/gateway/hostile"
	"github.com/simlock/simlock/internal/ownership"
	"github.com/simlock/simlock/internal/uplink"
)

// The gateway against a worker that lies (internal/gateway/hostile): each
// test here is one finding of a review that attacked a gateway with an
// honest worker and a hostile one.

// waitBound bounds every wait for something the gateway does at once.
const waitBound = 10 * time.Second

// hostileFleet is a gateway daemon in-process, with its admin session.
type hostileFleet struct {
	t     *testing.T
	gw    *Daemon
	home  string
	admin *client.Client
}

func newHostileFleet(t *testing.T) *hostileFleet {
	t.Helper()
	return newHostileFleetWith(t, `{}`)
}

// newHostileFleetWith is newHostileFleet with gateway.* keys of the test's.
func newHostileFleetWith(t *testing.T, gatewayKeys string) *hostileFleet {
	t.Helper()
	// The default heartbeat: a peer is dropped after three unanswered
	// pings, and a pong queued behind a flood's backlog on the uplink is
	// read late on a loaded machine under the race detector.
	cfg, err := config.Parse([]byte(`{"mode":"gateway","http":{"enabled":true,"port":0},"gateway":` + gatewayKeys + `}`))
	if err != nil {
		t.Fatal(err)
	}
	gw, home := startDaemonOpts(t, Options{Config: cfg})
	admin := dial(t, home, "ops", true)
	if _, err := admin.StatusWith(context.Background(), contract.StatusGetInput{WaitReady: true}); err != nil {
		t.Fatal(err)
	}
	return &hostileFleet{t: t, gw: gw, home: home, admin: admin}
}

// token makes a join token; it returns its id and secret.
func (f *hostileFleet) token(label string) (string, string) {
	f.t.Helper()
	var tok contract.TokenCreateResult
	if err := f.admin.Call(context.Background(), contract.OpTokenCreate, contract.TokenCreateInput{Role: contract.TokenWorker, Label: label}, &tok); err != nil {
		f.t.Fatal(err)
	}
	return tok.Token.ID, tok.Secret
}

// honest starts a demo worker daemon joined with a token of its own, with
// maxRunning slots, and returns its worker id once the gateway lists it
// connected.
func (f *hostileFleet) honest(label string, maxRunning int) string {
	f.t.Helper()
	_, secret := f.token(label)
	cfg, err := config.Parse([]byte(fmt.Sprintf(`{"capacity":{"strategy":"fixed","config":{"maxRunning":%d}},"gateway":{"url":%q,"token":%q,"label":%q}}`,
		maxRunning, f.gw.httpURL, secret, label)))
	if err != nil {
		f.t.Fatal(err)
	}
	_, home := startDaemon(f.t, cfg)
	in, err := ownership.LoadInstance(home)
	if err != nil {
		f.t.Fatal(err)
	}
	f.until("worker "+label+" connected", func() bool { return f.view(in.ID).Connection == contract.WorkerConnected })
	return in.ID
}

// hostile joins a lying worker as id with a token of its own, with
// maxRunning slots, connected.
func (f *hostileFleet) hostile(id string, maxRunning int) *hostile.Worker {
	f.t.Helper()
	_, secret := f.token(id)
	return f.hostileWith(id, secret, maxRunning)
}

func (f *hostileFleet) hostileWith(id, secret string, maxRunning int) *hostile.Worker {
	f.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitBound)
	defer cancel()
	w, err := hostile.Join(ctx, hostile.Options{URL: f.gw.httpURL, Token: secret, WorkerID: id, MaxRunning: maxRunning})
	if err != nil {
		f.t.Fatalf("the hostile worker %s could not join: %v", id, err)
	}
	f.t.Cleanup(w.Close)
	if err := w.Subscribed(ctx); err != nil {
		f.t.Fatal(err)
	}
	f.until("the hostile worker "+id+" connected", func() bool { return f.view(id).Connection == contract.WorkerConnected })
	return w
}

// view is the gateway's view of a worker (zero when it has none).
func (f *hostileFleet) view(id string) contract.WorkerView {
	f.t.Helper()
	var v contract.WorkerView
	if err := f.admin.Call(context.Background(), contract.OpWorkerGet, contract.WorkerIDInput{WorkerID: id}, &v); err != nil {
		var ce *contract.Error
		if errors.As(err, &ce) && ce.Code == contract.CodeUnknownWorker {
			return contract.WorkerView{}
		}
		f.t.Fatal(err)
	}
	return v
}

// findings are the gateway's findings against worker id (zero when none).
func (f *hostileFleet) findings(id string) contract.WorkerFindings {
	if fs := f.view(id).Findings; fs != nil {
		return *fs
	}
	return contract.WorkerFindings{}
}

// until polls cond until it holds, failing after waitBound naming what.
func (f *hostileFleet) until(what string, cond func() bool) {
	f.t.Helper()
	f.untilWithin(waitBound, what, cond)
}

func (f *hostileFleet) untilWithin(bound time.Duration, what string, cond func() bool) {
	f.t.Helper()
	deadline := time.Now().Add(bound)
	for !cond() {
		if time.Now().After(deadline) {
			f.t.Fatalf("within %s: %s did not happen", bound, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// agent is a session of the gateway as principal (its owner id).
func (f *hostileFleet) agent(principal string) *client.Client {
	return dial(f.t, f.home, principal, false)
}

// A hostile worker reports a lease with a victim's chosen id, requester
// and owner, under the gateway's prefix: the gateway never indexes it, so
// the victim's renew, exec (stdin included) and release go to the honest
// worker that has its lease, the hostile one receives none of them, and
// the victim's lease goes on working.
func TestAHostileWorkersLeaseClaimsNeverTakeAVictimsLease(t *testing.T) {
	f := newHostileFleet(t)
	honestID := f.honest("honest", 2)
	liar := f.hostile("ins_liar", 0)
	ctx := context.Background()
	victim := f.agent("victim")
	g, err := victim.RequestLease(ctx, contract.LeaseRequestInput{Platform: contract.PlatformIOS, LeaseID: "build-42"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if g.Lease.ID != "build-42" || g.Lease.WorkerID != honestID {
		t.Fatalf("the victim's grant = %+v, want build-42 on the honest worker", g.Lease)
	}
	lies := []contract.LeaseRecord{
		{ID: "build-42", IDChosenByRequester: true, RequesterID: liar.Prefix() + "victim", OwnerID: "victim"},
		{ID: "lse_stolen", RequesterID: liar.Prefix() + "victim", OwnerID: "victim"},
	}
	if err := liar.Claim(ctx, lies...); err != nil {
		t.Fatal(err)
	}
	f.until("the liar's claims read and refused", func() bool { return f.findings("ins_liar").UngrantedLeases == 2 })

	if _, err := victim.Renew(ctx, "build-42", 0); err != nil {
		t.Errorf("the victim's renew after the lie: %v", err)
	}
	stdin := "secret input"
	_, _ = victim.Exec(ctx, contract.ExecInput{LeaseID: "build-42", Tool: "simctl", Args: []string{"list"}, Stdin: &stdin}, func(contract.ExecOutput) {})
	var got contract.LeaseGetResult
	if err := victim.Call(ctx, contract.OpLeaseGet, contract.LeaseIDInput{LeaseID: "build-42"}, &got); err != nil || got.Lease.WorkerID != honestID {
		t.Errorf("the victim's lease.get = %+v, %v; want its lease on the honest worker", got.Lease, err)
	}
	for _, op := range []contract.Op{contract.OpLeaseRenew, contract.OpDeviceExec, contract.OpLeaseGet, contract.OpLeaseRelease} {
		if cs := liar.Calls(op); len(cs) != 0 {
			t.Errorf("the hostile worker received the victim's %s: %s", op, cs[0].Input)
		}
	}
	ls, err := victim.Leases(ctx)
	if err != nil || len(ls) != 1 || ls[0].ID != "build-42" || ls[0].WorkerID != honestID {
		t.Errorf("the victim's leases = %+v, %v; want its one lease, on the honest worker", ls, err)
	}
	st, err := victim.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range st.Devices {
		if d.WorkerID == "ins_liar" && d.LeaseID != "" {
			t.Errorf("the victim's status names the liar's device %s as leased by %s", d.ID, d.LeaseID)
		}
	}
	if _, err := victim.Release(ctx, "build-42"); err != nil {
		t.Errorf("the victim's release: %v", err)
	}
	if cs := liar.Calls(contract.OpLeaseRelease); len(cs) != 0 {
		t.Errorf("the hostile worker received the victim's release: %s", cs[0].Input)
	}
}

// A lie about a requester's lease locks nobody out: the requester it
// names leases as usual (no REQUESTER_ALREADY_LEASED), and so does anyone
// else.
func TestAHostileWorkersLieDoesNotLockARequesterOut(t *testing.T) {
	f := newHostileFleet(t)
	honestID := f.honest("honest", 2)
	liar := f.hostile("ins_liar", 0)
	ctx := context.Background()
	if err := liar.Claim(ctx, contract.LeaseRecord{ID: "lse_lockout", RequesterID: liar.Prefix() + "victim2", OwnerID: "victim2"}); err != nil {
		t.Fatal(err)
	}
	f.until("the liar's claim read and refused", func() bool { return f.findings("ins_liar").UngrantedLeases == 1 })
	g, err := f.agent("victim2").RequestLease(ctx, contract.LeaseRequestInput{Platform: contract.PlatformIOS, NoWait: true}, nil)
	if err != nil {
		t.Fatalf("the requester the lie named: %v, want its lease", err)
	}
	if g.Lease.WorkerID != honestID {
		t.Errorf("its lease is on %s, want the honest worker", g.Lease.WorkerID)
	}
}

// A worker that grants a device twice has the second grant refused and
// given back, the request goes back in line, and the first lease stays the
// gateway's; one that grants a lease id twice has nothing released, which
// would end the first lease. The request is not sent to that worker again
// while the lease its grant contradicted lives: a worker that lies at
// every grant does not keep the fleet queue deciding in a loop.
func TestADoubleGrantIsGivenBackAndTheFirstLeaseStays(t *testing.T) {
	f := newHostileFleet(t)
	twice := f.hostile("ins_twice", 5)
	ctx := context.Background()
	twice.GrantAs("", "dev_same")
	first, err := f.agent("a").RequestLease(ctx, contract.LeaseRequestInput{Platform: contract.PlatformIOS}, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = f.agent("b").RequestLease(ctx, contract.LeaseRequestInput{Platform: contract.PlatformIOS, TimeoutMs: 1500}, nil)
	if code(err) != contract.CodeQueueTimeout {
		t.Errorf("b's request, only ever granted a device a holds: %v, want it to wait and time out (QUEUE_TIMEOUT)", err)
	}
	if n := f.findings("ins_twice").DoubleGrants; n == 0 || n > 2 {
		t.Errorf("%d double grants counted on the worker for b's one request, want it sent there once (or twice, racing the read of the view)", n)
	}
	released := map[string]bool{}
	for _, c := range twice.Calls(contract.OpLeaseRelease) {
		released[strings.Trim(strings.TrimPrefix(string(c.Input), `{"leaseId":`), `"}`)] = true
	}
	if !released["lse_hostile_2"] {
		t.Errorf("the second grant of dev_same was not given back; releases: %v", released)
	}
	workerLease := strings.TrimPrefix(first.Lease.ID, "ins_twice.")
	if released[workerLease] {
		t.Errorf("the first lease %s was released by the gateway", workerLease)
	}
	if _, err := f.agent("a").Renew(ctx, first.Lease.ID, 0); err != nil {
		t.Errorf("a's renew of the first lease: %v", err)
	}

	// Now the same lease id again: refused, and nothing released.
	twice.GrantAs(workerLease, "")
	before := len(twice.Calls(contract.OpLeaseRelease))
	_, err = f.agent("c").RequestLease(ctx, contract.LeaseRequestInput{Platform: contract.PlatformIOS, TimeoutMs: 1500}, nil)
	if code(err) != contract.CodeQueueTimeout {
		t.Errorf("c's request, only ever granted a's lease id: %v, want QUEUE_TIMEOUT", err)
	}
	if cs := twice.Calls(contract.OpLeaseRelease); len(cs) != before {
		t.Errorf("a grant repeating lease %s was given back, ending the first lease: %s", workerLease, cs[len(cs)-1].Input)
	}
	if n := len(twice.Calls(contract.OpLeaseRequest)); n > 5 {
		t.Errorf("the worker was asked %d times for a, b and c's requests, want each sent to it at most twice: a double grant set the queue deciding in a loop", n)
	}
	var got contract.LeaseGetResult
	if err := f.agent("a").Call(ctx, contract.OpLeaseGet, contract.LeaseIDInput{LeaseID: first.Lease.ID}, &got); err != nil || got.Lease.OwnerID != "a" {
		t.Errorf("a's lease after the double grants: %+v, %v; want a's still", got.Lease, err)
	}
}

// heapBytesNow is the live heap after a collection.
func heapBytesNow() int64 {
	runtime.GC()
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(s)
	return int64(s[0].Value.Uint64())
}

// One join token, many throwaway worker ids with large views: the gateway
// keeps one view, its heap grows by one view's worth, not six; revoking
// the token drops that view too.
func TestThrowawayWorkerIDsOfOneTokenKeepOneViewAndARevokeDropsIt(t *testing.T) {
	f := newHostileFleet(t)
	ctx := context.Background()
	tokID, secret := f.token("throwaway")
	const pad = 8000
	base := heapBytesNow()
	first := f.hostileWith("ins_throwaway_0", secret, 1)
	first.Pad(pad)
	if err := first.Relay(ctx, "capacity.changed", map[string]any{}); err != nil {
		t.Fatal(err)
	}
	f.until("the padded view read", func() bool { return len(f.view("ins_throwaway_0").Devices) == pad })
	oneView := heapBytesNow() - base
	for i := 1; i <= 5; i++ {
		id := fmt.Sprintf("ins_throwaway_%d", i)
		dctx, cancel := context.WithTimeout(ctx, waitBound)
		w, err := hostile.Join(dctx, hostile.Options{URL: f.gw.httpURL, Token: secret, WorkerID: id, Pad: pad})
		cancel()
		var re *uplink.RefusedError
		if err == nil {
			t.Errorf("throwaway id %d with the same token joined, want 403 FORBIDDEN", i)
			t.Cleanup(w.Close)
			f.until("the throwaway view read", func() bool { return len(f.view(id).Devices) == pad })
		} else if !errors.As(err, &re) || re.Status != 403 || re.Code != contract.CodeForbidden {
			t.Errorf("throwaway id %d with the same token: %v, want 403 FORBIDDEN", i, err)
		}
	}
	var list contract.WorkerListResult
	if err := f.admin.Call(ctx, contract.OpWorkerList, contract.Empty{}, &list); err != nil {
		t.Fatal(err)
	}
	if len(list.Workers) != 1 {
		t.Errorf("the gateway knows %d workers after 6 ids dialed with one token, want 1", len(list.Workers))
	}
	if grown := heapBytesNow() - base; grown > oneView*3/2 {
		t.Errorf("the heap grew %d bytes after 6 ids dialed with large views, one view is %d: more than one view is kept", grown, oneView)
	}
	if f.view("ins_throwaway_0").Connection != contract.WorkerConnected {
		t.Error("the first id lost its uplink to the refused ones")
	}
	var res contract.TokenRevokeResult
	if err := f.admin.Call(ctx, contract.OpTokenRevoke, contract.TokenRevokeInput{ID: tokID}, &res); err != nil {
		t.Fatal(err)
	}
	f.until("the revoked worker disconnected", func() bool { return f.view("ins_throwaway_0").Connection == contract.WorkerDisconnected })
	if v := f.view("ins_throwaway_0"); len(v.Devices) != 0 || v.Capacity != nil {
		t.Errorf("after its token was revoked the view keeps %d devices, want it dropped", len(v.Devices))
	}
	// What the closed uplink held goes as its goroutines end: the heap
	// is given a few seconds to settle, and a kept view never does.
	grown := heapBytesNow() - base
	for settle := time.Now().Add(5 * time.Second); grown > oneView/2 && time.Now().Before(settle); grown = heapBytesNow() - base {
		time.Sleep(100 * time.Millisecond)
	}
	if grown > oneView/2 {
		t.Errorf("the heap is %d bytes over the start after the revoke, one view is %d: the view is kept", grown, oneView)
	}
}

// 2,000 dials with invented worker ids and a bad token, and more with a
// token another id holds, write one worker.rejected per code from this
// address, and make no worker.
func TestRefusedDialsWithInventedIDsWriteABoundedNumberOfEvents(t *testing.T) {
	f := newHostileFleet(t)
	ctx := context.Background()
	_, secret := f.token("taken")
	f.hostileWith("ins_taken", secret, 0)
	for i := range 2000 {
		token := "slk_not_a_token"
		if i%10 == 0 {
			token = secret
		}
		dctx, cancel := context.WithTimeout(ctx, waitBound)
		_, err := hostile.Join(dctx, hostile.Options{URL: f.gw.httpURL, Token: token, WorkerID: fmt.Sprintf("ins_invented_%d", i)})
		cancel()
		if err == nil {
			t.Fatalf("dial %d was accepted", i)
		}
	}
	evs, err := f.admin.Replay(ctx, contract.EventsReplayInput{SinceTs: 1, Limit: 10000})
	if err != nil {
		t.Fatal(err)
	}
	rejected := 0
	for _, ev := range evs {
		if ev.Event == "worker.rejected" {
			rejected++
		}
	}
	if rejected == 0 || rejected > 2 {
		t.Errorf("2000 refused dials wrote %d worker.rejected, want one per code from this address (2)", rejected)
	}
	var list contract.WorkerListResult
	if err := f.admin.Call(ctx, contract.OpWorkerList, contract.Empty{}, &list); err != nil {
		t.Fatal(err)
	}
	if len(list.Workers) != 1 {
		t.Errorf("the gateway knows %d workers, want the one that joined", len(list.Workers))
	}
}

// A worker that floods events, of its own names and of the gateway's, has
// the flood dropped and counted: the gateway's log takes at most the
// relay's burst and rate, none of the gateway's names, and the worker stays
// connected.
func TestAnEventFloodIsDroppedAndCountedAndTheUplinkStays(t *testing.T) {
	f := newHostileFleet(t)
	flooder := f.hostile("ins_flooder", 0)
	ctx := context.Background()
	start := time.Now()
	if err := flooder.Flood(ctx, "worker.connected", map[string]any{"workerId": "ins_someone_else"}, 100); err != nil {
		t.Fatal(err)
	}
	if err := flooder.Flood(ctx, "lease.renewed", map[string]any{"leaseId": "lse_x"}, 20000); err != nil {
		t.Fatal(err)
	}
	relayed := func() (renewed, connected int) {
		after := int64(0)
		for {
			evs, err := f.admin.Replay(ctx, contract.EventsReplayInput{SinceTs: 1, AfterSeq: after, Limit: 1000})
			if err != nil {
				t.Fatal(err)
			}
			if len(evs) == 0 {
				return renewed, connected
			}
			for _, ev := range evs {
				switch {
				case ev.Event == "lease.renewed":
					renewed++
				case ev.Event == "worker.connected" && strings.HasPrefix(ev.ID, "evt_hostile_"): // the worker's, not the gateway's own
					connected++
				}
				after = ev.Seq
			}
		}
	}
	var renewed, connected int
	var fs contract.WorkerFindings
	var replayed time.Time
	// 20,100 events through the gateway take a while under the race
	// detector on a busy machine: the bound is generous, the assertions
	// below are what fails. The log is read whole at most every 250 ms,
	// not at each poll: reading thousands of events a hundred times a
	// second would slow the gateway it waits for.
	f.untilWithin(time.Minute, "the flood relayed or dropped to its last event", func() bool {
		if time.Since(replayed) < 250*time.Millisecond {
			return false
		}
		replayed = time.Now()
		renewed, connected = relayed()
		fs = f.findings("ins_flooder")
		return int(fs.EventsRefused+fs.EventsDropped)+renewed+connected == 20100
	})
	if bound := 5000 + int(50*time.Since(start).Seconds()) + 50; renewed > bound {
		t.Errorf("the gateway relayed %d of the 20000 events, want at most its burst and rate (%d)", renewed, bound)
	}
	if int(fs.EventsDropped)+renewed != 20000 {
		t.Errorf("%d events dropped and %d relayed, want the 20000 accounted for on the worker's view", fs.EventsDropped, renewed)
	}
	if connected != 0 || fs.EventsRefused != 100 {
		t.Errorf("%d worker.connected events the worker relayed reached the gateway's log and %d were refused, want none and 100", connected, fs.EventsRefused)
	}
	if f.view("ins_flooder").Connection != contract.WorkerConnected {
		t.Error("the flood ended the uplink; it should be dropped, not fatal")
	}
}

// A worker stamps the events it relays with a clock of its own: one
// stamped at the epoch would be older than any retention, and the age
// prune takes every seq up to the newest old event, so the gateway's own
// history (its start, its tokens, its grants) would go at the next prune.
// The gateway takes a worker's time only within a day before its own and
// never after it: the prune after the lie keeps the gateway's log.
func TestARelayedEventsClockCannotPruneTheGatewaysLog(t *testing.T) {
	f := newHostileFleet(t)
	liar := f.hostile("ins_clock", 0)
	ctx := context.Background()
	far := time.Now().Add(10 * 365 * 24 * time.Hour).UnixMilli()
	for _, at := range []int64{1, far} {
		if err := liar.RelayAt(ctx, "queue.changed", map[string]any{"depth": 0}, at); err != nil {
			t.Fatal(err)
		}
	}
	log := func() (own []string, lies []contract.Event) {
		evs, err := f.admin.Replay(ctx, contract.EventsReplayInput{SinceTs: 1, Limit: 10000})
		if err != nil {
			t.Fatal(err)
		}
		for _, ev := range evs {
			if strings.HasPrefix(ev.ID, "evt_hostile_") {
				lies = append(lies, ev)
			} else {
				own = append(own, ev.Event)
			}
		}
		return own, lies
	}
	f.until("both stamped events relayed", func() bool { _, lies := log(); return len(lies) == 2 })
	now := time.Now()
	_, lies := log()
	for _, ev := range lies {
		if ev.Timestamp < now.Add(-time.Minute).UnixMilli() || ev.Timestamp > now.UnixMilli() {
			t.Errorf("a relayed event the worker stamped at its whim is in the gateway's log at %d, want the gateway's time of the relay (about %d)",
				ev.Timestamp, now.UnixMilli())
		}
	}
	if err := f.gw.pruneHistory(ctx, now); err != nil {
		t.Fatal(err)
	}
	own, lies := log()
	if !slices.Contains(own, "daemon.started") || !slices.Contains(own, "worker.connected") || len(lies) != 2 {
		t.Errorf("after the prune the gateway's log holds %v of its own and %d relayed, want its start and the worker's connect kept, and both relayed",
			own, len(lies))
	}
}

// A worker relaying lease.requested and lease.granted events of its own
// making, under the gateway's requester prefix, adds nothing to the
// gateway's usage; a request and grant the gateway made do count.
func TestAFakeLeaseGrantedDoesNotMoveTheGatewaysUsage(t *testing.T) {
	f := newHostileFleet(t)
	f.honest("honest", 2)
	faker := f.hostile("ins_faker", 0)
	ctx := context.Background()
	from := time.Now().Add(-time.Minute).UnixMilli()
	if _, err := f.agent("real").RequestLease(ctx, contract.LeaseRequestInput{Platform: contract.PlatformIOS}, nil); err != nil {
		t.Fatal(err)
	}
	for i := range 50 {
		if err := faker.Relay(ctx, "lease.requested", map[string]any{"requestId": fmt.Sprintf("req_fake_%d", i),
			"requester": faker.Prefix() + "agent", "requestSpec": map[string]any{"platform": "ios"}}); err != nil {
			t.Fatal(err)
		}
		if err := faker.Relay(ctx, "lease.granted", map[string]any{"requestId": fmt.Sprintf("req_fake_%d", i), "leaseId": fmt.Sprintf("lse_fake_%d", i),
			"deviceId": "dev_fake", "requester": faker.Prefix() + "agent", "source": "warm"}); err != nil {
			t.Fatal(err)
		}
	}
	var res contract.UsageResult
	f.until("the fake grants relayed", func() bool {
		evs, err := f.admin.Replay(ctx, contract.EventsReplayInput{SinceTs: from, Limit: 10000})
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, ev := range evs {
			if ev.Event == "lease.granted" && strings.Contains(string(ev.Payload), "lse_fake_") {
				n++
			}
		}
		return n == 50
	})
	if err := f.admin.Call(ctx, contract.OpUsageGet, contract.UsageGetInput{From: from}, &res); err != nil {
		t.Fatal(err)
	}
	if n := sum(res.Totals.Granted); n != 1 || res.Totals.Requests != 1 {
		t.Errorf("usage counts %d requests and %d grants (%v), want the one the gateway made, none of the 50 relayed", res.Totals.Requests, n, res.Totals.Granted)
	}
	if fw, ok := res.ByWorker["ins_faker"]; ok {
		t.Errorf("the faker's usage = %+v, want none", fw.Totals)
	}
}

func sum(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

// gateway.maxWorkers is the fleet's cap: past it, a new worker id, even
// with a join token of its own, is refused 503 TOO_MANY_WORKERS and kept
// nowhere, while the known one still joins.
func TestANewWorkerPastGatewayMaxWorkersIsRefused(t *testing.T) {
	f := newHostileFleetWith(t, `{"maxWorkers":1}`)
	_, firstSecret := f.token("first")
	first := f.hostileWith("ins_first", firstSecret, 0)
	ctx := context.Background()
	_, secret := f.token("second")
	dctx, cancel := context.WithTimeout(ctx, waitBound)
	defer cancel()
	second, err := hostile.Join(dctx, hostile.Options{URL: f.gw.httpURL, Token: secret, WorkerID: "ins_second"})
	if err == nil {
		t.Cleanup(second.Close)
	}
	var re *uplink.RefusedError
	if !errors.As(err, &re) || re.Status != 503 || re.Code != contract.CodeTooManyWorkers {
		t.Errorf("a second worker past gateway.maxWorkers 1: %v, want 503 TOO_MANY_WORKERS", err)
	}
	if v := f.view("ins_second"); v.ID != "" {
		t.Errorf("the gateway lists the refused id: %+v", v)
	}
	first.Close()
	f.until("the first worker disconnected", func() bool { return f.view("ins_first").Connection == contract.WorkerDisconnected })
	f.hostileWith("ins_first", firstSecret, 0)
}

// A join token joins one worker id: a second id dialing with it (a shared
// token, or a stolen one) is refused 403 and takes nothing over; the first
// keeps its uplink and its id.
func TestASecondWorkerIDWithAJoinTokenIsForbiddenAndTheFirstKeepsIt(t *testing.T) {
	f := newHostileFleet(t)
	ctx := context.Background()
	_, secret := f.token("shared")
	f.hostileWith("ins_first", secret, 1)
	dctx, cancel := context.WithTimeout(ctx, waitBound)
	defer cancel()
	_, err := hostile.Join(dctx, hostile.Options{URL: f.gw.httpURL, Token: secret, WorkerID: "ins_second"})
	var re *uplink.RefusedError
	if !errors.As(err, &re) || re.Status != 403 || re.Code != contract.CodeForbidden || !strings.Contains(re.Message, "ins_first") {
		t.Fatalf("a second worker id with the first's token: %v, want 403 FORBIDDEN naming the first", err)
	}
	if f.view("ins_first").Connection != contract.WorkerConnected {
		t.Error("the first worker lost its uplink")
	}
	if v := f.view("ins_second"); v.ID != "" {
		t.Errorf("the gateway lists the refused id: %+v", v)
	}
}

// Through the gateway, a chosen lease id is resolved within its owner's
// leases: another owner naming it gets UNKNOWN_LEASE on every operation,
// never FORBIDDEN, and learns nothing of it.
func TestAnotherOwnersChosenIDIsUnknownThroughTheGateway(t *testing.T) {
	f := newHostileFleet(t)
	f.honest("honest", 2)
	ctx := context.Background()
	if _, err := f.agent("owner-a").RequestLease(ctx, contract.LeaseRequestInput{Platform: contract.PlatformIOS, LeaseID: "build-42"}, nil); err != nil {
		t.Fatal(err)
	}
	b := f.agent("owner-b")
	for _, c := range []struct {
		op contract.Op
		in any
	}{
		{contract.OpLeaseRenew, contract.LeaseRenewInput{LeaseID: "build-42"}},
		{contract.OpLeaseGet, contract.LeaseIDInput{LeaseID: "build-42"}},
		{contract.OpLeaseWatch, contract.LeaseIDInput{LeaseID: "build-42"}},
		{contract.OpLeaseRelease, contract.LeaseIDInput{LeaseID: "build-42"}},
		{contract.OpDeviceExec, contract.ExecInput{LeaseID: "build-42", Tool: "simctl", Args: []string{"list"}}},
	} {
		if err := b.Call(ctx, c.op, c.in, nil); code(err) != contract.CodeUnknownLease {
			t.Errorf("another owner's %s of build-42: %v, want UNKNOWN_LEASE", c.op, err)
		}
	}
	if ls, err := b.Leases(ctx); err != nil || len(ls) != 0 {
		t.Errorf("the other owner's leases = %+v, %v; want none", ls, err)
	}
	if _, err := f.agent("owner-a").Renew(ctx, "build-42", 0); err != nil {
		t.Errorf("the owner's own renew of build-42: %v", err)
	}
}

// A worker whose status offers room it refuses (NO_CAPACITY to every
// request) has the request bounced back in line, as a stale view would;
// it is asked again after its view moves, but after each refusal only
// once its view has moved twice as many times as before: its refusals,
// and the reads of its view they ask for, do not keep the fleet queue
// deciding in a loop. The waiting request reaches the honest worker once
// it has room.
func TestAWorkerThatRefusesTheRoomItOffersIsNotAskedInALoop(t *testing.T) {
	f := newHostileFleet(t)
	honestID := f.honest("honest", 1)
	liar := f.hostile("ins_full", 5)
	liar.Refuse(contract.CodeNoCapacity)
	ctx := context.Background()
	holder := f.agent("holder")
	g, err := holder.RequestLease(ctx, contract.LeaseRequestInput{Platform: contract.PlatformIOS}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if g.Lease.WorkerID != honestID {
		t.Fatalf("the first lease is on %s, want the honest worker (the liar refuses all)", g.Lease.WorkerID)
	}
	done := make(chan error, 1)
	var second contract.LeaseGrant
	go func() {
		var err error
		second, err = f.agent("waiter").RequestLease(ctx, contract.LeaseRequestInput{Platform: contract.PlatformIOS, TimeoutMs: 60000}, nil)
		done <- err
	}()
	wctx, cancel := context.WithTimeout(ctx, waitBound)
	defer cancel()
	if _, err := liar.Await(wctx, contract.OpLeaseRequest, 1); err != nil {
		t.Fatal(err)
	}
	// Sixty moves of the liar's view, each a read of it: those the
	// gateway makes after the liar's refusals, and one after each event
	// of the liar's while they do not come.
	end := len(liar.Calls(contract.OpStatusGet)) + 60
	for reads := len(liar.Calls(contract.OpStatusGet)); reads < end; reads = len(liar.Calls(contract.OpStatusGet)) {
		if err := liar.Relay(ctx, "capacity.changed", map[string]any{}); err != nil {
			t.Fatal(err)
		}
		if _, err := liar.Await(wctx, contract.OpStatusGet, reads+1); err != nil {
			t.Fatal(err)
		}
	}
	asked := len(liar.Calls(contract.OpLeaseRequest))
	if _, err := holder.Release(ctx, g.Lease.ID); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil || second.Lease.WorkerID != honestID {
		t.Errorf("the waiter's request: %v on %q, want the honest worker's freed slot", err, second.Lease.WorkerID)
	}
	if asked > 10 {
		t.Errorf("the liar was asked %d times for one waiting request while its view moved 60 times, want a few (its refusals kept the fleet queue deciding in a loop)", asked)
	}
}

// A worker that refuses a request for what its catalog lists (here
// RUNTIME_MISSING, before any progress) has its catalog read again at
// once, not on the next 30 s tick: its view was stale in what a status
// read does not bring.
func TestARefusalForWhatTheCatalogListsReadsTheCatalogAgain(t *testing.T) {
	f := newHostileFleet(t)
	liar := f.hostile("ins_gone", 2)
	liar.Refuse(contract.CodeRuntimeMissing)
	ctx := context.Background()
	wctx, cancel := context.WithTimeout(ctx, waitBound)
	defer cancel()
	reads := len(liar.Calls(contract.OpCatalogGet))
	go func() {
		_, _ = f.agent("waiter").RequestLease(wctx, contract.LeaseRequestInput{Platform: contract.PlatformIOS, TimeoutMs: 5000}, nil)
	}()
	if _, err := liar.Await(wctx, contract.OpLeaseRequest, 1); err != nil {
		t.Fatal(err)
	}
	if _, err := liar.Await(wctx, contract.OpCatalogGet, reads+1); err != nil {
		t.Fatalf("after a RUNTIME_MISSING refusal the gateway did not read the worker's catalog again: %v", err)
	}
}
