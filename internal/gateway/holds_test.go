package gateway

import (
	"context"
	"encoding/json"
	"slices"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/queue"
)

// A grant whose worker's view took it before the gateway judged it (its
// lease.granted and capacity.changed folded while the grant waited for the
// events before it) holds nothing once judged: the view counts it already,
// and a hold on top would count the device's slot twice until some other
// change of the view, keeping a free slot from the next request.
func TestAGrantTheViewShowsAlreadyHoldsNothing(t *testing.T) {
	var fleet atomic.Pointer[Fleet]
	var asked atomic.Int32
	f, l := oneWorkerLeasing(t, LeasingOptions{}, func(req contract.Request) any {
		if req.Op != contract.OpLeaseRequest {
			return nil
		}
		var in contract.LeaseRequestInput
		_ = json.Unmarshal(req.Input, &in)
		n := int(asked.Add(1))
		id, dev := "lse_"+strconv.Itoa(n), "dev_"+strconv.Itoa(n)
		spec := contract.DeviceSpec{Platform: contract.PlatformIOS, Model: "iPhone 17", OSVersion: "26.1"}
		now := time.Now().UnixMilli()
		g := contract.LeaseGrant{Device: contract.GrantDevice{ID: dev, DriverDeviceID: "UDID-" + dev, Spec: spec},
			Lease: contract.LeaseRecord{ID: id, DeviceID: dev, RequesterID: in.RequesterID, OwnerID: in.Owner, GrantedAt: now,
				TTLMs: in.TTLMs, LastRenewedAt: now, TTLDeadline: now + in.TTLMs},
			RequestID: "req_w" + strconv.Itoa(n), Source: contract.SourceProvisioned}
		// The worker's events, relayed and folded before its answer is
		// judged: the view shows the lease, its device and the capacity.
		f := fleet.Load()
		f.mu.Lock()
		w := f.workers["w1"]
		w.view.Capacity = capacity(n, 2)
		w.view.Leases = append(slices.Clone(w.view.Leases), g.Lease)
		w.view.Devices = append(slices.Clone(w.view.Devices), contract.Device{ID: dev, Spec: spec, State: contract.DeviceLeased, LeaseID: id, WorkerID: "w1"})
		w.counts = countView(w.view.Devices, w.view.Leases)
		w.viewGen++
		f.reindex(w)
		f.mu.Unlock()
		return g
	}, 0)
	fleet.Store(f)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := l.Acquire(ctx, queue.Caller{Principal: "tok_a"}, contract.LeaseRequestInput{Platform: contract.PlatformIOS}, nil); err != nil {
		t.Fatal(err)
	}
	// One of the worker's two slots is taken, and its view says so.
	next, stop := context.WithTimeout(context.Background(), 2*time.Second)
	defer stop()
	if _, err := l.Acquire(next, queue.Caller{Principal: "tok_b"}, contract.LeaseRequestInput{Platform: contract.PlatformIOS}, nil); err != nil {
		t.Fatalf("the second request, with one of the worker's two slots free: %v; the first grant's hold outlived the view that shows its lease", err)
	}
	if n := asked.Load(); n != 2 {
		t.Errorf("the worker was asked %d times, want 2", n)
	}
}
