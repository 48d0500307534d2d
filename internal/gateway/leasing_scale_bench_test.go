package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/queue"
)

// scaleFleet is leasing over workers full workers of devices devices each,
// every one a scripted session that grants whatever it is asked, with
// waiting requests in line; grants receives each grant the gateway
// records.
type scaleFleet struct {
	f      *Fleet
	l      *Leasing
	ids    []string
	grants chan struct{}
	next   atomic.Int64 // requesters made so far
}

func fullView(id string, devices int) contract.WorkerView {
	v := *view(id, devices, devices)
	v.Devices = make([]contract.Device, devices)
	for i := range v.Devices {
		v.Devices[i] = contract.Device{ID: fmt.Sprintf("dev_%s_%d", id, i), State: contract.DeviceLeased, LeaseID: fmt.Sprintf("lse_%s_%d", id, i),
			Spec: contract.DeviceSpec{Platform: contract.PlatformIOS, Model: "iPhone 17", OSVersion: "26.1"}}
	}
	return v
}

func newScaleFleet(b *testing.B, workers, devices, waiting int) *scaleFleet {
	b.Helper()
	s := &scaleFleet{f: New(Options{Store: newMemStore(), InstanceID: "ins_gw"}), grants: make(chan struct{}, 1<<16)}
	var leases atomic.Int64
	answer := func(req contract.Request) any {
		if req.Op != contract.OpLeaseRequest {
			return nil
		}
		var in contract.LeaseRequestInput
		_ = json.Unmarshal(req.Input, &in)
		n := leases.Add(1)
		now := time.Now().UnixMilli()
		dev := fmt.Sprintf("dev_g%d", n)
		return contract.LeaseGrant{
			Device: contract.GrantDevice{ID: dev, DriverDeviceID: "UDID", Spec: contract.DeviceSpec{Platform: contract.PlatformIOS, Model: "iPhone 17", OSVersion: "26.1"}},
			Lease: contract.LeaseRecord{ID: fmt.Sprintf("lse_g%d", n), DeviceID: dev, RequesterID: in.RequesterID, OwnerID: in.Owner, GrantedAt: now,
				TTLMs: in.TTLMs, LastRenewedAt: now, TTLDeadline: now + in.TTLMs},
			RequestID: fmt.Sprintf("req_g%d", n), Source: contract.SourceWarm,
		}
	}
	for i := range workers {
		id := fmt.Sprintf("w%04d", i)
		s.ids = append(s.ids, id)
		s.f.put(fullView(id, devices))
		s.f.mu.Lock()
		s.f.workers[id].client = scriptedSession(b, answer)
		s.f.mu.Unlock()
	}
	s.l = NewLeasing(s.f, LeasingOptions{Store: recordlessStore{newQueueStore()}, DefaultTTL: time.Minute, MaxTTL: time.Hour,
		Publish: func(evs ...contract.Event) {
			for _, ev := range evs {
				if ev.Event == contract.EvGrantRecorded {
					s.grants <- struct{}{}
				}
			}
		}})
	b.Cleanup(s.l.Close)
	for range waiting {
		s.submit(b)
	}
	return s
}

// submit puts one more request in line, of a requester of its own.
func (s *scaleFleet) submit(b *testing.B) {
	c := queue.Caller{Principal: fmt.Sprintf("r%06d", s.next.Add(1))}
	if _, err := s.l.Submit(context.Background(), c, contract.LeaseRequestInput{Platform: contract.PlatformIOS}); err != nil {
		b.Fatal(err)
	}
}

// setView changes worker id's view by f, as a status read would, and tells
// the leasing.
func (s *scaleFleet) setView(id string, f func(v *contract.WorkerView)) {
	s.f.mu.Lock()
	w := s.f.workers[id]
	f(&w.view)
	w.viewGen++
	s.f.reindex(w)
	s.f.mu.Unlock()
	s.l.viewChanged(id, statusRead{}, true)
}

// A device freed on one of the full workers of 50 devices while 10,000
// requests wait: the view change, the pass that places the head, the
// dispatch to the worker, the grant's commit, and the view that shows the
// grant; a new request joins the line each time, so the line stays 10,000
// long. It reports grants a second, one at a time (the cost of one
// hand-off, not the throughput of many in flight). At 10 workers routing
// costs little and what is left is the rest of the gateway's path; at
// 1,000, routing over every view dominates.
func BenchmarkGrantsWith10000Waiting(b *testing.B) {
	for _, workers := range []int{10, 1000} {
		b.Run(fmt.Sprintf("workers=%d", workers), func(b *testing.B) { benchGrants(b, workers, 50, 10000) })
	}
}

func benchGrants(b *testing.B, workers, devices, waiting int) {
	s := newScaleFleet(b, workers, devices, waiting)
	i := 0
	b.ResetTimer()
	for b.Loop() {
		id := s.ids[i%workers]
		dev := (i / workers) % devices
		i++
		s.setView(id, func(v *contract.WorkerView) {
			v.Capacity.Global.Running--
			p := v.Capacity.Platforms[contract.PlatformIOS]
			p.Running--
			v.Capacity.Platforms = map[contract.Platform]contract.PlatformCapacity{contract.PlatformIOS: p}
			v.Devices = append([]contract.Device(nil), v.Devices...)
			v.Devices[dev].State, v.Devices[dev].LeaseID = contract.DeviceReady, ""
		})
		<-s.grants
		s.setView(id, func(v *contract.WorkerView) {
			v.Capacity.Global.Running++
			p := v.Capacity.Platforms[contract.PlatformIOS]
			p.Running++
			v.Capacity.Platforms = map[contract.Platform]contract.PlatformCapacity{contract.PlatformIOS: p}
			v.Devices = append([]contract.Device(nil), v.Devices...)
			v.Devices[dev].State, v.Devices[dev].LeaseID = contract.DeviceLeased, fmt.Sprintf("lse_again_%d", i)
		})
		s.submit(b)
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "grants/s")
}
