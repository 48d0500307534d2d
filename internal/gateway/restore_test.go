package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/queue"
)

// countingWorker grants every lease.request a lease and a device of its
// own, and tells the test whom each was for, in the order asked.
type countingWorker struct {
	mu    sync.Mutex
	n     int
	asked chan string
}

func (w *countingWorker) answer(req contract.Request) any {
	if req.Op != contract.OpLeaseRequest {
		return nil
	}
	var in contract.LeaseRequestInput
	_ = json.Unmarshal(req.Input, &in)
	w.mu.Lock()
	w.n++
	n := w.n
	w.mu.Unlock()
	w.asked <- in.RequesterID
	now := time.Now().UnixMilli()
	dev, lse := fmt.Sprintf("dev_%d", n), fmt.Sprintf("lse_%d", n)
	return contract.LeaseGrant{
		Device: contract.GrantDevice{ID: dev, DriverDeviceID: "UDID-" + dev, Spec: contract.DeviceSpec{Platform: contract.PlatformIOS, Model: "iPhone 17", OSVersion: "26.1"}},
		Lease: contract.LeaseRecord{ID: lse, DeviceID: dev, RequesterID: in.RequesterID, OwnerID: in.Owner, GrantedAt: now,
			TTLMs: in.TTLMs, LastRenewedAt: now, TTLDeadline: now + in.TTLMs},
		RequestID: "req_w" + lse, Source: contract.SourceProvisioned,
	}
}

// A gateway that starts over the store of one that died puts the requests
// it left waiting back in line: they wait for the workers to dial in again
// (none is connected at start) rather than fail, keep their ids, and are
// granted in the order they first queued in.
func TestASecondLeasingRestoresTheWaitingRequestsAndGrantsThemInOrder(t *testing.T) {
	ctx := context.Background()
	st := newQueueStore()
	f1 := New(Options{Store: newMemStore(), InstanceID: "ins_gw"})
	f1.put(*view("w1", 2, 2)) // full: every request waits
	l1 := NewLeasing(f1, LeasingOptions{Store: st, DefaultTTL: time.Minute, MaxTTL: time.Hour})
	var ids []string
	for _, who := range []string{"tok_c", "tok_a", "tok_b"} {
		sub, err := l1.Submit(ctx, queue.Caller{Principal: who}, contract.LeaseRequestInput{Platform: contract.PlatformIOS})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, sub.Request.ID)
	}
	l1.Close() // as the process ends: the records stay open

	f2 := New(Options{Store: newMemStore(), InstanceID: "ins_gw"})
	f2.put(*remembered("w1")) // known from the store, not dialled in yet
	l2 := NewLeasing(f2, LeasingOptions{Store: st, DefaultTTL: time.Minute, MaxTTL: time.Hour})
	defer l2.Close()
	snap, err := st.Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := l2.Restore(ctx, snap.Requests); err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		got, err := l2.RequestStatus(ctx, queue.Caller{Admin: true}, contract.LeaseRequestGetInput{RequestID: id})
		if err != nil || got.Request.State != contract.RequestQueued {
			t.Fatalf("request %s after the restore, with no worker connected yet: %s %+v (%v), want queued", id, got.Request.State, got.Request.Error, err)
		}
	}

	w := &countingWorker{asked: make(chan string, 8)}
	f2.put(*view("w1", 0, 4)) // the worker dials in again, with room
	c := scriptedSession(t, w.answer)
	f2.mu.Lock()
	f2.workers["w1"].client = c
	f2.workers["w1"].viewGen++
	f2.mu.Unlock()
	l2.viewChanged("w1", statusRead{}, true)
	var order []string
	for range 3 {
		select {
		case r := <-w.asked:
			order = append(order, strings.TrimPrefix(r, l2.idx.prefix))
		case <-time.After(5 * time.Second):
			t.Fatalf("the worker was asked for %v only, want all three restored requests", order)
		}
	}
	if want := []string{"tok_c", "tok_a", "tok_b"}; !slices.Equal(order, want) {
		t.Fatalf("the restored requests were sent in the order %v, want the order they queued in %v", order, want)
	}
	for _, id := range ids {
		for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
			got, err := l2.RequestStatus(ctx, queue.Caller{Admin: true}, contract.LeaseRequestGetInput{RequestID: id})
			if err == nil && got.Request.State == contract.RequestGranted {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("restored request %s is %s (%v), want granted", id, got.Request.State, err)
			}
		}
	}
}

// remembered is the view of a worker the gateway knows from its store at
// start: disconnected until it dials in again.
func remembered(id string) *contract.WorkerView {
	v := view(id, 2, 2)
	v.Connection = contract.WorkerDisconnected
	return v
}

// A request made right after a start, while a worker the gateway
// remembers has not dialled in again, waits for it rather than fail the
// fast-fail table; a gateway that remembers no worker refuses it at once,
// and so does one whose workers are all back.
func TestARequestMadeWhileTheWorkersRejoinWaitsForThem(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name  string
		views []*contract.WorkerView
		wait  bool
	}{
		{"a remembered worker not back yet", []*contract.WorkerView{remembered("w1")}, true},
		{"no worker remembered", nil, false},
		{"a drained worker not back", []*contract.WorkerView{func() *contract.WorkerView { v := remembered("w1"); v.Drained = true; return v }()}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := New(Options{Store: newMemStore(), InstanceID: "ins_gw"})
			for _, v := range tc.views {
				f.put(*v)
			}
			l := NewLeasing(f, LeasingOptions{Store: newQueueStore(), DefaultTTL: time.Minute, MaxTTL: time.Hour})
			defer l.Close()
			if err := l.Restore(ctx, nil); err != nil {
				t.Fatal(err)
			}
			sub, err := l.Submit(ctx, queue.Caller{Principal: "tok_a"}, contract.LeaseRequestInput{Platform: contract.PlatformIOS})
			waits := err == nil && sub.Request.State == contract.RequestQueued
			if waits != tc.wait {
				t.Fatalf("a request made after the start: %+v (%v); waits %t, want %t", sub.Request, err, waits, tc.wait)
			}
		})
	}
}
