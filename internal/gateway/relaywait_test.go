package gateway

import (
	"context"
	"encoding/json"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/queue"
)

// A grant's judgement waits for the worker's events up to the grant's
// seq to be relayed and told: it returns as the relay tells them, not
// before; it gives up, saying so, when the link ends or the wait's bound
// passes.
func TestAwaitRelayedReturnsOnceTheRelayToldTheGrantsSeq(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := New(Options{Store: newMemStore(), InstanceID: "ins_gw"})
		f.put(*view("w1", 0, 2))
		f.mu.Lock()
		w := f.workers["w1"]
		w.gen = 1
		w.toldUpTo(4)
		f.mu.Unlock()
		if !f.awaitRelayed(context.Background(), "w1", 1, 4) {
			t.Fatal("a wait for events already told did not return at once, reached")
		}

		var got atomic.Int32 // 0 waiting, 1 reached, 2 gave up
		go func() {
			if f.awaitRelayed(context.Background(), "w1", 1, 7) {
				got.Store(1)
			} else {
				got.Store(2)
			}
		}()
		synctest.Wait()
		f.mu.Lock()
		w.toldUpTo(6) // not yet the grant's
		f.mu.Unlock()
		synctest.Wait()
		if g := got.Load(); g != 0 {
			t.Fatalf("the wait for seq 7 ended (%d) when the relay had told 6", g)
		}
		f.mu.Lock()
		w.toldUpTo(7)
		f.mu.Unlock()
		synctest.Wait()
		if g := got.Load(); g != 1 {
			t.Fatalf("the wait for seq 7 did not end reached (%d) once the relay told 7", g)
		}

		// The link ends under a wait: it gives up at once.
		got.Store(0)
		go func() {
			if !f.awaitRelayed(context.Background(), "w1", 1, 9) {
				got.Store(2)
			}
		}()
		synctest.Wait()
		f.mu.Lock()
		w.link = nil
		w.wakeTold()
		f.mu.Unlock()
		synctest.Wait()
		if g := got.Load(); g != 2 {
			t.Fatalf("a wait whose link ended did not give up (%d)", g)
		}

		// Nothing comes: the bound ends it.
		f.put(*view("w2", 0, 2))
		f.mu.Lock()
		f.workers["w2"].gen = 1
		f.mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), relayWait)
		defer cancel()
		start := time.Now()
		if f.awaitRelayed(ctx, "w2", 1, 3) {
			t.Fatal("a wait for events never relayed said they were")
		}
		if d := time.Since(start); d != relayWait {
			t.Errorf("a wait for events never relayed lasted %v, want its bound %v", d, relayWait)
		}
	})
}

// earlyWorker grants lease.requests with new lease ids; the first grant's
// lease it ends before it answers, telling the gateway's leasing of the
// end as the relay would (first), so the gateway judges a grant of a
// lease that already ended.
type earlyWorker struct {
	l     *Leasing
	asked atomic.Int32
}

func (w *earlyWorker) answer(req contract.Request) any {
	if req.Op != contract.OpLeaseRequest {
		return nil
	}
	var in contract.LeaseRequestInput
	_ = json.Unmarshal(req.Input, &in)
	n := w.asked.Add(1)
	id := "lse_" + string(rune('0'+n))
	if n == 1 {
		payload, _ := json.Marshal(map[string]any{"leaseId": id, "deviceId": "dev_1"})
		w.l.onEvent("w1", contract.Event{Seq: 2, Event: contract.EvLeaseExpired, Payload: payload})
	}
	return grantOnDev1(in, id, "req_w1", 0)
}

// A worker's lease that ended there before the gateway judged its grant
// (its end relayed first) is not indexed as a live lease holding its
// device: nobody heard of it, and the request waits again and is granted
// the next lease the worker gives it.
func TestAGrantWhoseLeaseEndedBeforeItWasJudgedPutsTheRequestBackInLine(t *testing.T) {
	w := &earlyWorker{}
	_, l := oneWorkerLeasing(t, LeasingOptions{}, w.answer, 0)
	w.l = l
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	g, err := l.Acquire(ctx, queue.Caller{Principal: "tok_a"}, contract.LeaseRequestInput{Platform: contract.PlatformIOS}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if want := gatewayLeaseID("w1", "lse_2"); g.Lease.ID != want {
		t.Errorf("the request was granted lease %s, want %s: the lease that ended before its grant was judged was granted", g.Lease.ID, want)
	}
	var held bool
	l.q.View(func() { _, held = l.idx.ofWorker("w1", "lse_1") })
	if held {
		t.Error("the lease the worker ended before its grant was judged is indexed as live")
	}
	if n := w.asked.Load(); n != 2 {
		t.Errorf("the worker was asked %d times, want 2", n)
	}
}

// reusingWorker grants every lease.request on its one device dev_1, with
// new lease ids and event seqs; before it answers the second it ends the
// first lease, whose lease.expired the relay tells only once the gateway
// waits for the events before the second grant, as when the grant's
// answer overtakes the event on the gateway's side.
type reusingWorker struct {
	asked atomic.Int32
}

func (w *reusingWorker) answer(req contract.Request) any {
	if req.Op != contract.OpLeaseRequest {
		return nil
	}
	var in contract.LeaseRequestInput
	_ = json.Unmarshal(req.Input, &in)
	n := w.asked.Add(1)
	id := "lse_" + string(rune('0'+n))
	seq := int64(2 * n)
	return grantOnDev1(in, id, "req_w"+string(rune('0'+n)), seq)
}

// A worker that ends a lease and grants its device again at once: the
// grant's answer can reach the gateway before the end's lease.expired is
// relayed. The gateway judges the grant once the events before it are
// told, so it is the device's next lease, not a second grant of it.
func TestAGrantOfADeviceJustFreedIsJudgedAfterTheEndBeforeIt(t *testing.T) {
	w := &reusingWorker{}
	f, l := oneWorkerLeasing(t, LeasingOptions{}, w.answer, 2) // the first grant's event is told
	// Once the gateway waits for seq 4 (the grant of lse_2), the relay
	// tells lease.expired of lse_1 (seq 3) and the grant's: the answer
	// overtook the events on the gateway's side. A gateway that judged
	// the grant without waiting never gets here, and refuses it as a
	// second grant of dev_1.
	var once sync.Once
	f.mu.Lock()
	f.awaiting = func(string) {
		once.Do(func() {
			go func() {
				payload, _ := json.Marshal(map[string]any{"leaseId": "lse_1", "deviceId": "dev_1"})
				l.onEvent("w1", contract.Event{Seq: 3, Event: contract.EvLeaseExpired, Payload: payload})
				f.mu.Lock()
				f.workers["w1"].toldUpTo(4)
				f.mu.Unlock()
			}()
		})
	}
	f.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := l.Acquire(ctx, queue.Caller{Principal: "tok_a"}, contract.LeaseRequestInput{Platform: contract.PlatformIOS}, nil); err != nil {
		t.Fatal(err)
	}
	doubles := func() int64 {
		v, err := f.View("w1")
		if err != nil || v.Findings == nil {
			return 0
		}
		return v.Findings.DoubleGrants
	}
	g, err := l.Acquire(ctx, queue.Caller{Principal: "tok_b"}, contract.LeaseRequestInput{Platform: contract.PlatformIOS}, nil)
	if n := doubles(); n > 0 {
		t.Fatalf("the worker's grant of the device it had just freed was refused as a double grant (%d), want it granted", n)
	}
	if err != nil {
		t.Fatalf("the second request: %v, want granted", err)
	}
	if want := gatewayLeaseID("w1", "lse_2"); g.Lease.ID != want {
		t.Errorf("the second request was granted %s, want %s", g.Lease.ID, want)
	}
	if n := w.asked.Load(); n != 2 {
		t.Errorf("the worker was asked %d times, want 2", n)
	}
}

// earlyEnds keeps, per worker, the latest earlyMax ends, and forgets one
// once taken.
func TestEarlyEndsAreBoundedAndTakenOnce(t *testing.T) {
	var e earlyEnds
	for i := range earlyMax + 1 {
		e.note("w1", "lse_"+strconv.Itoa(i))
	}
	if e.take("w1", "lse_0") {
		t.Error("the oldest of earlyMax+1 ends is still remembered, want it forgotten")
	}
	if !e.take("w1", "lse_1") {
		t.Error("the second oldest end was forgotten, want it remembered")
	}
	if e.take("w1", "lse_1") {
		t.Error("an end was taken twice")
	}
	if e.take("w2", "lse_2") {
		t.Error("an end of w1 was taken for w2")
	}
	if n := len(e.byWorker["w1"].order); n != earlyMax-1 {
		t.Errorf("%d ends remembered after one taken, want %d", n, earlyMax-1)
	}
}

// grantOnDev1 is a worker's grant of its device dev_1 for in, under lease
// id, answering the worker's request reqID, with the grant's event seq.
func grantOnDev1(in contract.LeaseRequestInput, id, reqID string, seq int64) contract.LeaseGrant {
	now := time.Now().UnixMilli()
	return contract.LeaseGrant{
		Device: contract.GrantDevice{ID: "dev_1", DriverDeviceID: "UDID-1", Spec: contract.DeviceSpec{Platform: contract.PlatformIOS, Model: "iPhone 17", OSVersion: "26.1"}},
		Lease: contract.LeaseRecord{ID: id, DeviceID: "dev_1", RequesterID: in.RequesterID, OwnerID: in.Owner, GrantedAt: now,
			TTLMs: in.TTLMs, LastRenewedAt: now, TTLDeadline: now + in.TTLMs},
		RequestID: reqID, Source: contract.SourceProvisioned, EventSeq: seq,
	}
}

// A grant whose own lease.granted is the last event of the worker's
// decision is judged once the events before it are told: the gateway
// does not wait for the relay of the event that only repeats its answer.
func TestAGrantIsJudgedWithoutWaitingForItsOwnRelayedEvent(t *testing.T) {
	f, l := oneWorkerLeasing(t, LeasingOptions{}, func(req contract.Request) any {
		if req.Op != contract.OpLeaseRequest {
			return nil
		}
		var in contract.LeaseRequestInput
		_ = json.Unmarshal(req.Input, &in)
		return grantOnDev1(in, "lse_1", "req_w1", 5) // its lease.granted is seq 5
	}, 4) // every event before the grant's own
	var waited atomic.Int32
	f.mu.Lock()
	f.awaiting = func(string) { waited.Add(1) }
	f.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	g, err := l.Acquire(ctx, queue.Caller{Principal: "tok_a"}, contract.LeaseRequestInput{Platform: contract.PlatformIOS}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if n := waited.Load(); n != 0 {
		t.Errorf("the gateway waited %d times for the relay before it judged the grant, want none: the events before it were told", n)
	}
	if want := gatewayLeaseID("w1", "lse_1"); g.Lease.ID != want {
		t.Errorf("granted %s, want %s", g.Lease.ID, want)
	}
}

// A relayed end of a lease the index holds when the relay looks, but that
// a status read ends (as untold) before the decision that ends it, is
// told to the lease's holders once, with the relayed end's reason: the
// read left it for the relay to tell, and the relay is this one.
func TestARelayedEndThatASnapshotOvertakesIsToldOnce(t *testing.T) {
	var mu sync.Mutex
	var told []string
	w := &reusingWorker{}
	_, l := oneWorkerLeasing(t, LeasingOptions{LeaseEnded: func(r contract.LeaseRecord, reason string) {
		mu.Lock()
		defer mu.Unlock()
		told = append(told, r.ID+" "+reason)
	}}, w.answer, 2)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	g, err := l.Acquire(ctx, queue.Caller{Principal: "tok_a"}, contract.LeaseRequestInput{Platform: contract.PlatformIOS}, nil)
	if err != nil {
		t.Fatal(err)
	}
	l.endingRelayed = func(id string) {
		// A status read after the end, reconciled first.
		l.q.View(func() {
			if e, ok := l.idx.ofWorker("w1", id); ok {
				l.idx.endedBySnapshot(e)
			}
		})
	}
	payload, _ := json.Marshal(map[string]any{"leaseId": "lse_1", "deviceId": "dev_1"})
	l.onEvent("w1", contract.Event{Seq: 3, Event: contract.EvLeaseExpired, Payload: payload})
	mu.Lock()
	defer mu.Unlock()
	if want := []string{g.Lease.ID + " " + string(contract.EndExpired)}; !slices.Equal(told, want) {
		t.Errorf("the holders were told %q, want %q", told, want)
	}
}

// oneWorkerLeasing is a leasing (opts with its store and TTLs set) over a
// fleet of one worker, w1, with room for two devices, whose uplink is a
// scripted session answering with answer, its events up to told relayed.
// It closes with the test.
func oneWorkerLeasing(t *testing.T, opts LeasingOptions, answer func(contract.Request) any, told int64) (*Fleet, *Leasing) {
	t.Helper()
	f := New(Options{Store: newMemStore(), InstanceID: "ins_gw"})
	f.put(*view("w1", 0, 2))
	opts.Store, opts.DefaultTTL, opts.MaxTTL = newQueueStore(), time.Minute, time.Hour
	l := NewLeasing(f, opts)
	t.Cleanup(l.Close)
	c := scriptedSession(t, answer)
	f.mu.Lock()
	f.workers["w1"].client, f.workers["w1"].gen = c, 1
	f.workers["w1"].toldUpTo(told)
	f.mu.Unlock()
	return f, l
}
