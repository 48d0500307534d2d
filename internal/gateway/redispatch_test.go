package gateway

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/queue"
)

// grantingWorker grants every lease.request, telling requests of each.
type grantingWorker struct {
	requests chan contract.LeaseRequestInput
}

// grantingFleet is a fleet of one connected worker w1 of two free slots,
// a grantingWorker on its session.
func grantingFleet(t *testing.T) (*Fleet, *grantingWorker) {
	t.Helper()
	f := New(Options{Store: newMemStore(), InstanceID: "ins_gw"})
	f.put(*view("w1", 0, 2))
	w := &grantingWorker{requests: make(chan contract.LeaseRequestInput, 4)}
	f.mu.Lock()
	f.workers["w1"].client = scriptedSession(t, w.answer)
	f.mu.Unlock()
	return f, w
}

// answer grants a lease.request and tells the test of it.
func (w *grantingWorker) answer(req contract.Request) any {
	if req.Op != contract.OpLeaseRequest {
		return nil
	}
	var in contract.LeaseRequestInput
	_ = json.Unmarshal(req.Input, &in)
	w.requests <- in
	now := time.Now().UnixMilli()
	return contract.LeaseGrant{
		Device: contract.GrantDevice{ID: "dev_1", DriverDeviceID: "UDID-1", Spec: contract.DeviceSpec{Platform: contract.PlatformIOS, Model: "iPhone 17", OSVersion: "26.1"}},
		Lease: contract.LeaseRecord{ID: "lse_1", DeviceID: "dev_1", RequesterID: in.RequesterID, OwnerID: in.Owner, GrantedAt: now,
			TTLMs: in.TTLMs, LastRenewedAt: now, TTLDeadline: now + in.TTLMs},
		RequestID: "req_w1", Source: contract.SourceProvisioned,
	}
}

// R1-C1: a request routed to a worker whose session is not there yet (its
// view reads connected before the hello is done) goes back in line, and is
// sent to the worker once its session exists and its view moves: it is not
// lost, and it does not fail.
func TestARequestRoutedBeforeAWorkersSessionExistsIsSentOnceItDoes(t *testing.T) {
	f := New(Options{Store: newMemStore(), InstanceID: "ins_gw"})
	f.put(*view("w1", 0, 2)) // connected, no session yet
	st := newQueueStore()
	l := NewLeasing(f, LeasingOptions{Store: st, DefaultTTL: time.Minute, MaxTTL: time.Hour})
	defer l.Close()
	ctx := context.Background()
	sub, err := l.Submit(ctx, queue.Caller{Principal: "tok_a"}, contract.LeaseRequestInput{Platform: contract.PlatformIOS})
	if err != nil {
		t.Fatal(err)
	}
	id := sub.Request.ID
	state := func() contract.RequestState {
		got, err := l.RequestStatus(ctx, queue.Caller{Admin: true}, contract.LeaseRequestGetInput{RequestID: id})
		if err != nil {
			t.Fatal(err)
		}
		return got.Request.State
	}
	// The dispatch bounced: back in line, the worker stale for the
	// request's class of need.
	deadline := time.Now().Add(5 * time.Second)
	for {
		var skipped bool
		l.q.View(func() {
			for k := range l.stale {
				skipped = skipped || k.worker == "w1"
			}
		})
		if skipped {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the request routed to a worker with no session was not put back in line skipping it (state %s)", state())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if s := state(); s != contract.RequestQueued {
		t.Fatalf("after its dispatch found no session the request is %s, want queued", s)
	}

	w := &grantingWorker{requests: make(chan contract.LeaseRequestInput, 4)}
	c := scriptedSession(t, w.answer)
	f.mu.Lock()
	f.workers["w1"].client = c
	f.workers["w1"].viewGen++
	f.mu.Unlock()
	l.viewChanged("w1", statusRead{}, true)
	select {
	case in := <-w.requests:
		if in.RequesterID != l.idx.prefix+"tok_a" {
			t.Errorf("the worker was asked for requester %q, want %q", in.RequesterID, l.idx.prefix+"tok_a")
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("once the worker's session exists the request was not sent to it (state %s)", state())
	}
	for deadline := time.Now().Add(5 * time.Second); state() != contract.RequestGranted; {
		if time.Now().After(deadline) {
			t.Fatalf("the request sent once the session existed is %s, want granted", state())
		}
		time.Sleep(10 * time.Millisecond)
	}
}
