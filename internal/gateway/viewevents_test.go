package gateway

import (
	"context"
	"encoding/json"
	"reflect"
	"testing"
	"testing/synctest"
	"time"

	"github.com/simlock/simlock/internal/contract"
)

// foldBase is a worker's view as a status read showed it: dev_1 leased by
// lse_1, dev_2 ready, dev_3 reclaiming, one request waiting.
func foldBase() contract.WorkerView {
	spec := contract.DeviceSpec{Platform: contract.PlatformAndroid, Model: "Pixel 9", OSVersion: "35"}
	return contract.WorkerView{ID: "w1",
		Devices: []contract.Device{
			{ID: "dev_1", Spec: spec, State: contract.DeviceLeased, LeaseID: "lse_1", WorkerID: "w1"},
			{ID: "dev_2", Spec: spec, State: contract.DeviceReady, Address: "emulator-5556", WorkerID: "w1"},
			{ID: "dev_3", Spec: spec, State: contract.DeviceReclaiming, Address: "emulator-5558", WorkerID: "w1"},
		},
		Leases: []contract.LeaseRecord{{ID: "lse_1", DeviceID: "dev_1", RequesterID: "gw:ins:a", OwnerID: "gw:ins:a", GrantedAt: 1000,
			TTLMs: 60_000, LastRenewedAt: 1000, TTLDeadline: 61_000, WorkerID: "w1"}},
		Waiting: []contract.WaitingRequest{{RequestID: "req_9", RequesterID: "gw:ins:b", Spec: contract.RequestSpec{Platform: contract.PlatformAndroid},
			Stage: "queued", WorkerID: "w1"}},
		QueueDepth: 1,
	}
}

func ev(name string, seq, at int64, payload map[string]any) contract.Event {
	b, _ := json.Marshal(payload)
	return contract.Event{Seq: seq, Timestamp: at, Event: name, Payload: b}
}

// granted is a lease.granted of dev_2 as the engine now tells it.
func granted(seq int64, fields map[string]any) contract.Event {
	p := map[string]any{"leaseId": "lse_2", "deviceId": "dev_2", "requester": "gw:ins:b", "requestId": "req_9", "source": "warm",
		"mode": "full", "ownerId": "gw:ins:b", "ttlMs": 30_000, "ttlDeadline": 35_000, "workerId": "w1"}
	for k, v := range fields {
		if v == nil {
			delete(p, k)
		} else {
			p[k] = v
		}
	}
	return ev(contract.EvLeaseGranted, seq, 5000, p)
}

// Each event the view can take is folded into it exactly; every other
// event that changes a worker's status, and every event that names what
// the view does not hold or lacks what its fold needs, asks for a read and
// leaves the view as it was.
func TestFoldEvent(t *testing.T) {
	for _, tc := range foldEventCases() {
		t.Run(tc.name, func(t *testing.T) {
			v, want := foldBase(), foldBase()
			before := foldBase()
			shared := v // shares v's slices, as a copy handed out under the lock does
			if tc.change != nil {
				tc.change(&want)
			}
			if got := foldEvent(&v, tc.ev); got != tc.want {
				t.Fatalf("foldEvent = %d, want %d", got, tc.want)
			}
			if !reflect.DeepEqual(v, want) {
				t.Errorf("view after the fold:\n got %+v\nwant %+v", v, want)
			}
			if !reflect.DeepEqual(shared, before) {
				t.Errorf("the fold wrote into slices a copy of the view shares: %+v", shared)
			}
		})
	}
}

// foldCase is one event folded into foldBase: the outcome wanted, and
// change, which makes the view wanted from foldBase (nil: unchanged).
type foldCase struct {
	name   string
	ev     contract.Event
	want   foldOutcome
	change func(v *contract.WorkerView)
}

// foldEventCases are TestFoldEvent's cases, and FuzzFoldEvent's seeds.
func foldEventCases() []foldCase {
	lease2 := contract.LeaseRecord{ID: "lse_2", DeviceID: "dev_2", RequesterID: "gw:ins:b", OwnerID: "gw:ins:b", GrantedAt: 5000,
		TTLMs: 30_000, LastRenewedAt: 5000, TTLDeadline: 35_000, WorkerID: "w1"}
	return []foldCase{
		{name: "granted", ev: granted(2, nil), want: foldChanged, change: func(v *contract.WorkerView) {
			v.Leases = append(v.Leases, lease2)
			d := &v.Devices[1]
			d.State, d.LeaseID, d.StateSince, d.LastUsedAt = contract.DeviceLeased, "lse_2", 5000, 5000
			v.Waiting = []contract.WaitingRequest{}
		}},
		{name: "granted with a chosen id", ev: granted(2, map[string]any{"leaseId": "lse_k", "chosenLeaseId": "mine", "requestId": "req_other"}),
			want: foldChanged, change: func(v *contract.WorkerView) {
				l := lease2
				l.ID, l.Key, l.IDChosenByRequester = "mine", "lse_k", true
				v.Leases = append(v.Leases, l)
				d := &v.Devices[1]
				d.State, d.LeaseID, d.LeaseKey, d.StateSince, d.LastUsedAt = contract.DeviceLeased, "mine", "lse_k", 5000, 5000
			}},
		{name: "granted by an older worker: no ownerId", ev: granted(2, map[string]any{"ownerId": nil}), want: foldNeedsRead},
		{name: "granted by an older worker: no ttlMs", ev: granted(2, map[string]any{"ttlMs": nil}), want: foldNeedsRead},
		{name: "granted by an older worker: no ttlDeadline", ev: granted(2, map[string]any{"ttlDeadline": nil}), want: foldNeedsRead},
		{name: "granted on an unknown device", ev: granted(2, map[string]any{"deviceId": "dev_404"}), want: foldNeedsRead},
		{name: "granted on a device another lease holds", ev: granted(2, map[string]any{"deviceId": "dev_1"}), want: foldNeedsRead},
		{name: "granted again under a lease the view holds on another device", ev: granted(2, map[string]any{"leaseId": "lse_1"}), want: foldNeedsRead},
		{name: "granted under the id another owner's lease of the device has", ev: granted(2, map[string]any{"leaseId": "lse_k2", "chosenLeaseId": "lse_1", "deviceId": "dev_1"}),
			want: foldNeedsRead},
		{name: "granted again, the same lease on its device", ev: granted(2, map[string]any{"leaseId": "lse_1", "deviceId": "dev_1"}), want: foldChanged,
			change: func(v *contract.WorkerView) {
				l := lease2
				l.ID, l.DeviceID = "lse_1", "dev_1"
				v.Leases = []contract.LeaseRecord{l}
				v.Devices[0].StateSince, v.Devices[0].LastUsedAt = 5000, 5000
				v.Waiting = []contract.WaitingRequest{}
			}},
		{name: "granted with a ttl out of bounds", ev: granted(2, map[string]any{"ttlMs": contract.MaxTTLMs + 1}), want: foldNeedsRead},
		{name: "granted with no owner", ev: granted(2, map[string]any{"ownerId": ""}), want: foldNeedsRead},
		{name: "granted with a lease id holding a dot", ev: granted(2, map[string]any{"leaseId": "a.b"}), want: foldNeedsRead},
		{name: "granted with a negative deadline", ev: granted(2, map[string]any{"ttlDeadline": -1}), want: foldNeedsRead},
		{name: "renewed", ev: ev(contract.EvLeaseRenewed, 2, 7000, map[string]any{"leaseId": "lse_1", "ttlMs": 90_000, "ttlDeadline": 97_000}),
			want: foldChanged, change: func(v *contract.WorkerView) {
				v.Leases[0].TTLMs, v.Leases[0].TTLDeadline, v.Leases[0].LastRenewedAt = 90_000, 97_000, 7000
			}},
		{name: "renewed, unknown lease", ev: ev(contract.EvLeaseRenewed, 2, 7000, map[string]any{"leaseId": "lse_x", "ttlMs": 1, "ttlDeadline": 1}), want: foldNeedsRead},
		{name: "renewed, no deadline", ev: ev(contract.EvLeaseRenewed, 2, 7000, map[string]any{"leaseId": "lse_1", "ttlMs": 1}), want: foldNeedsRead},
		{name: "renewed past the largest ttl", ev: ev(contract.EvLeaseRenewed, 2, 7000, map[string]any{"leaseId": "lse_1", "ttlMs": contract.MaxTTLMs + 1, "ttlDeadline": 1}), want: foldNeedsRead},
		{name: "released", ev: ev(contract.EvLeaseReleased, 2, 8000, map[string]any{"leaseId": "lse_1", "deviceId": "dev_1", "reason": "explicit", "ownerId": "gw:ins:a"}),
			want: foldChanged, change: func(v *contract.WorkerView) {
				v.Leases = []contract.LeaseRecord{}
				v.Devices[0].State, v.Devices[0].LeaseID = contract.DeviceReclaiming, ""
			}},
		{name: "expired", ev: ev(contract.EvLeaseExpired, 2, 8000, map[string]any{"leaseId": "lse_1", "deviceId": "dev_1", "ownerId": "gw:ins:a"}),
			want: foldChanged, change: func(v *contract.WorkerView) {
				v.Leases = []contract.LeaseRecord{}
				v.Devices[0].State, v.Devices[0].LeaseID = contract.DeviceReclaiming, ""
			}},
		{name: "released, unknown lease", ev: ev(contract.EvLeaseReleased, 2, 8000, map[string]any{"leaseId": "lse_x"}), want: foldNeedsRead},
		{name: "reclaimed ready", ev: ev(contract.EvDeviceReclaimed, 2, 9000, map[string]any{"deviceId": "dev_3", "strategy": "wipe", "state": "ready"}),
			want: foldChanged, change: func(v *contract.WorkerView) {
				v.Devices[2].State, v.Devices[2].StateSince, v.Devices[2].LastUsedAt = contract.DeviceReady, 9000, 9000
			}},
		{name: "reclaimed shut down", ev: ev(contract.EvDeviceReclaimed, 2, 9000, map[string]any{"deviceId": "dev_3", "state": "shutdown"}),
			want: foldChanged, change: func(v *contract.WorkerView) {
				v.Devices[2].State, v.Devices[2].StateSince, v.Devices[2].LastUsedAt, v.Devices[2].Address = contract.DeviceShutdown, 9000, 9000, ""
			}},
		{name: "reclaimed by an older worker: no state", ev: ev(contract.EvDeviceReclaimed, 2, 9000, map[string]any{"deviceId": "dev_3"}), want: foldNeedsRead},
		{name: "reclaimed into a state no clean leaves", ev: ev(contract.EvDeviceReclaimed, 2, 9000, map[string]any{"deviceId": "dev_3", "state": "leased"}), want: foldNeedsRead},
		{name: "reclaimed, not being cleaned in the view", ev: ev(contract.EvDeviceReclaimed, 2, 9000, map[string]any{"deviceId": "dev_2", "state": "ready"}), want: foldNeedsRead},
		{name: "reclaimed, unknown device", ev: ev(contract.EvDeviceReclaimed, 2, 9000, map[string]any{"deviceId": "dev_404", "state": "ready"}), want: foldNeedsRead},
		{name: "capacity", ev: ev(contract.EvCapacityChanged, 2, 9000, map[string]any{"strategy": "fixed", "global": map[string]any{"running": 3, "maxRunning": 3, "warm": 2},
			"platforms": map[string]any{"android": map[string]any{"running": 3, "warm": 2}}}),
			want: foldChanged, change: func(v *contract.WorkerView) {
				v.Capacity = &contract.Capacity{Strategy: "fixed", Global: contract.GlobalCapacity{Running: 3, MaxRunning: 3, Warm: 2},
					Platforms: map[contract.Platform]contract.PlatformCapacity{contract.PlatformAndroid: {Running: 3, Warm: 2}}}
			}},
		{name: "capacity, an empty payload", ev: ev(contract.EvCapacityChanged, 2, 9000, map[string]any{"workerId": "w1"}), want: foldNeedsRead},
		{name: "capacity, no platforms", ev: ev(contract.EvCapacityChanged, 2, 9000, map[string]any{"global": map[string]any{"warm": 1}}), want: foldNeedsRead},
		{name: "capacity, negative", ev: ev(contract.EvCapacityChanged, 2, 9000, map[string]any{"global": map[string]any{"warm": -1}, "platforms": map[string]any{}}), want: foldNeedsRead},
		{name: "capacity, not a report", ev: ev(contract.EvCapacityChanged, 2, 9000, map[string]any{"global": "lots"}), want: foldNeedsRead},
		{name: "queue depth", ev: ev(contract.EvQueueChanged, 2, 9000, map[string]any{"depth": 4}), want: foldChanged,
			change: func(v *contract.WorkerView) { v.QueueDepth = 4 }},
		{name: "queue depth, negative", ev: ev(contract.EvQueueChanged, 2, 9000, map[string]any{"depth": -4}), want: foldNeedsRead},
		{name: "queue depth, missing", ev: ev(contract.EvQueueChanged, 2, 9000, map[string]any{}), want: foldNeedsRead},
		{name: "requested", ev: ev(contract.EvLeaseRequested, 2, 9000, map[string]any{"requestId": "req_10"}), want: foldNone},
		{name: "rejected", ev: ev(contract.EvLeaseRejected, 2, 9000, map[string]any{"requestId": "req_9", "reason": "timeout"}), want: foldChanged,
			change: func(v *contract.WorkerView) { v.Waiting = []contract.WaitingRequest{} }},
		{name: "rejected, not waiting here", ev: ev(contract.EvLeaseRejected, 2, 9000, map[string]any{"requestId": "req_x"}), want: foldNone},
		{name: "another lease event", ev: ev(contract.EvLeaseQueued, 2, 9000, map[string]any{"requestId": "req_10"}), want: foldNeedsRead},
		{name: "another device event", ev: ev(contract.EvDeviceReady, 2, 9000, map[string]any{"deviceId": "dev_3"}), want: foldNeedsRead},
		{name: "a warm-pool event", ev: ev("warm-pool.changed", 2, 9000, map[string]any{}), want: foldNeedsRead},
		{name: "a daemon event", ev: ev(contract.EvDaemonStopping, 2, 9000, map[string]any{}), want: foldNeedsRead},
		{name: "a payload that is not an object", ev: contract.Event{Seq: 2, Event: contract.EvLeaseRenewed, Payload: json.RawMessage(`[1]`)}, want: foldNeedsRead},
		{name: "an event the view does not show", ev: ev(contract.EvCatalogChanged, 2, 9000, map[string]any{}), want: foldNone},
	}
}

// A grant never makes a view hold more leases than a status may list.
func TestFoldEventKeepsAViewWithinAStatusBounds(t *testing.T) {
	v := foldBase()
	v.Leases = make([]contract.LeaseRecord, maxRecords)
	if got := foldEvent(&v, granted(2, nil)); got != foldNeedsRead {
		t.Errorf("a grant into a view of %d leases = %d, want foldNeedsRead", maxRecords, got)
	}
	if len(v.Leases) != maxRecords || v.Devices[1].State != contract.DeviceReady {
		t.Errorf("the refused fold changed the view: %d leases, dev_2 %s", len(v.Leases), v.Devices[1].State)
	}
}

// foldFleet is a fleet with one connected worker w1, on link 1, whose
// status read at seq 10 showed foldBase.
func foldFleet(t *testing.T) (*Fleet, *worker) {
	t.Helper()
	f := New(Options{Store: newMemStore(), InstanceID: "ins_gw"})
	w := &worker{view: contract.WorkerView{ID: "w1", Connection: contract.WorkerConnected}, gen: 1}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.workers["w1"] = w
	f.applyStatusLocked(w, 1, statusOf(foldBase(), 10))
	return f, w
}

// statusOf is the status a worker whose view is v answers at seq.
func statusOf(v contract.WorkerView, seq int64) contract.Status {
	return contract.Status{Daemon: contract.DaemonInfo{Version: "1", Health: "running"}, Devices: v.Devices, Leases: v.Leases,
		Waiting: v.Waiting, QueueDepth: v.QueueDepth, EventSeq: seq}
}

func (f *Fleet) foldForTest(w *worker, evs ...contract.Event) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.foldRelayedLocked(w, evs)
}

func (f *Fleet) readForTest(w *worker, s contract.Status) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.applyStatusLocked(w, 1, s)
}

// A status read and the events folded into a view never undo each other,
// whatever order they arrive in: a read in flight while events are folded,
// older than they are, has them folded again on top when it comes; an
// event a read applied already shows changes nothing; a read older than
// the one applied is dropped.
func TestFoldsAndStatusReadsInAnyOrder(t *testing.T) {
	f, w := foldFleet(t)
	w.reading = true // a read is asked for; the events come before it
	ended := ev(contract.EvLeaseExpired, 11, 8000, map[string]any{"leaseId": "lse_1", "deviceId": "dev_1", "ownerId": "gw:ins:a"})
	clean := ev(contract.EvDeviceReclaimed, 12, 9000, map[string]any{"deviceId": "dev_1", "state": "ready"})
	if f.foldForTest(w, ended, clean) {
		t.Fatal("a lease end and its device's clean asked for a status read")
	}
	if w.view.Devices[0].State != contract.DeviceReady || len(w.view.Leases) != 0 {
		t.Fatalf("after the folds dev_1 is %s with %d leases, want ready with none", w.view.Devices[0].State, len(w.view.Leases))
	}
	if c := w.counts[contract.PlatformAndroid]; c.leases != 0 || c.devices[contract.DeviceReady] != 2 {
		t.Errorf("counts after the folds = %+v, want no lease and 2 ready devices", c)
	}

	// A read made after the end but before the clean arrives now.
	mid := foldBase()
	mid.Leases = []contract.LeaseRecord{}
	mid.Devices[0].State, mid.Devices[0].LeaseID = contract.DeviceReclaiming, ""
	f.readForTest(w, statusOf(mid, 11))
	if got := w.view.Devices[0].State; got != contract.DeviceReady {
		t.Errorf("a read older than a folded clean left dev_1 %s, want ready (the clean folded again on top)", got)
	}
	if len(w.folds) != 0 || w.reading {
		t.Errorf("after the read at 11 the link keeps folds %v (reading %v), want none: the next read is asked for after them", w.folds, w.reading)
	}

	// A read older than the one applied is dropped.
	f.readForTest(w, statusOf(foldBase(), 10))
	if got := w.view.Devices[0].State; got != contract.DeviceReady || len(w.view.Leases) != 0 {
		t.Errorf("a read older than the one applied made dev_1 %s with %d leases, want ready with none", got, len(w.view.Leases))
	}

	// A read that shows a grant, and then the grant's event.
	after := foldBase()
	after.Leases = []contract.LeaseRecord{{ID: "lse_2", DeviceID: "dev_2", RequesterID: "gw:ins:b", OwnerID: "gw:ins:b", GrantedAt: 5000,
		TTLMs: 30_000, LastRenewedAt: 5000, TTLDeadline: 35_000, WorkerID: "w1"}}
	after.Devices[0].State, after.Devices[0].LeaseID = contract.DeviceReady, ""
	after.Devices[1].State, after.Devices[1].LeaseID = contract.DeviceLeased, "lse_2"
	after.Waiting = []contract.WaitingRequest{}
	f.readForTest(w, statusOf(after, 13))
	if len(w.folds) != 0 {
		t.Errorf("a read newer than every fold kept %d of them", len(w.folds))
	}
	gen := w.viewGen
	if f.foldForTest(w, granted(13, map[string]any{"ttlDeadline": 99_999})) {
		t.Error("an event the applied read shows asked for a read")
	}
	if w.viewGen != gen || w.view.Leases[0].TTLDeadline != 35_000 {
		t.Errorf("an event the applied read shows changed the view (gen %d → %d, deadline %d)", gen, w.viewGen, w.view.Leases[0].TTLDeadline)
	}
}

// Events folded while no status read is in flight are not kept; past
// maxFolds folded while one is, the kept events are dropped and a read is
// asked for; an event no fold takes asks for one.
func TestFoldsPastTheirBoundAskForARead(t *testing.T) {
	f, w := foldFleet(t)
	renew := func(seq int64) contract.Event {
		return ev(contract.EvLeaseRenewed, seq, 7000+seq, map[string]any{"leaseId": "lse_1", "ttlMs": 60_000, "ttlDeadline": 67_000 + seq})
	}
	// With no read in flight nothing is kept, however many: the next
	// read is asked for after them and shows them.
	for i := range int64(4 * maxFolds) {
		if f.foldForTest(w, renew(11+i)) {
			t.Fatalf("fold %d with no read in flight asked for a read", i+1)
		}
	}
	if len(w.folds) != 0 {
		t.Fatalf("%d folds kept with no read in flight, want none", len(w.folds))
	}
	f.readForTest(w, statusOf(foldBase(), 10+4*maxFolds))
	w.reading = true
	for i := range int64(maxFolds) {
		if f.foldForTest(w, renew(11+4*maxFolds+i)) {
			t.Fatalf("fold %d of %d asked for a read", i+1, maxFolds)
		}
	}
	if !f.foldForTest(w, renew(11+5*maxFolds)) {
		t.Errorf("fold %d, past the bound, asked for no read", maxFolds+1)
	}
	if len(w.folds) > maxFolds {
		t.Errorf("%d folds kept, more than %d", len(w.folds), maxFolds)
	}
	if !f.foldForTest(w, ev(contract.EvDeviceReady, 500, 9000, map[string]any{"deviceId": "dev_3"})) {
		t.Error("device.ready, which no fold takes, asked for no read")
	}
}

// A worker whose status says no eventSeq is not folded: every event that
// changes its status asks for a read, as before.
func TestAWorkerWithoutEventSeqIsNotFolded(t *testing.T) {
	f, w := foldFleet(t)
	f.readForTest(w, statusOf(foldBase(), 0))
	if !f.foldForTest(w, ev(contract.EvLeaseRenewed, 11, 7000, map[string]any{"leaseId": "lse_1", "ttlMs": 90_000, "ttlDeadline": 97_000})) {
		t.Error("a renewal of a worker that says no eventSeq asked for no read")
	}
	if w.view.Leases[0].TTLMs != 60_000 {
		t.Errorf("a worker that says no eventSeq had its view folded: ttlMs %d", w.view.Leases[0].TTLMs)
	}
}

// A view kept from events tells the leasing with a read of gen 0, a kick
// of the line: told while a status read waits to be told, it does not
// replace that read, whose leases are still to be reconciled.
func TestAFoldDoesNotReplaceAPendingStatusRead(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := New(Options{Store: newMemStore(), InstanceID: "ins_gw"})
		unblock := make(chan struct{})
		var told []uint64
		f.changed = func(_ string, r statusRead, _ bool) {
			told = append(told, r.gen)
			if len(told) == 1 {
				<-unblock
			}
		}
		w := &worker{view: contract.WorkerView{ID: "w1"}}
		f.mu.Lock()
		f.notifyLater(w, statusRead{gen: 1})
		f.mu.Unlock()
		synctest.Wait() // the first is being told
		f.mu.Lock()
		f.notifyLater(w, statusRead{gen: 2})
		f.notifyLater(w, statusRead{})
		f.mu.Unlock()
		close(unblock)
		synctest.Wait()
		if !reflect.DeepEqual(told, []uint64{1, 2}) {
			t.Errorf("reads told = %v, want [1 2]: the read of gen 2 is told, not replaced by the fold's kick", told)
		}
	})
}

// An event no fold takes has the status read even when the last read
// applied is newer than it: the status is read after it as it always was.
func TestAnEventNoFoldTakesIsReadWhateverItsSeq(t *testing.T) {
	f, w := foldFleet(t)
	if !f.foldForTest(w, ev(contract.EvDeviceReady, 5, 9000, map[string]any{"deviceId": "dev_3"})) {
		t.Error("device.ready at a seq below the applied read's asked for no read")
	}
	if f.foldForTest(w, ev(contract.EvLeaseRenewed, 5, 9000, map[string]any{"leaseId": "lse_1", "ttlMs": 1, "ttlDeadline": 1})) {
		t.Error("a renewal the applied read shows asked for a read")
	}
}

// A lease's end, its device's clean and a grant that the applied read
// shows already ask for no read: the view holds what they did, so their
// folds would not find the lease or the device as they name it, and a
// read for each of them would make each read's own older events ask for
// the next (a busy worker read without end).
func TestAChangeTheAppliedReadShowsAsksForNoRead(t *testing.T) {
	f, w := foldFleet(t)
	ended := ev(contract.EvLeaseExpired, 11, 8000, map[string]any{"leaseId": "lse_1", "deviceId": "dev_1", "ownerId": "gw:ins:a"})
	clean := ev(contract.EvDeviceReclaimed, 12, 9000, map[string]any{"deviceId": "dev_1", "state": "ready"})
	after := foldBase()
	after.Leases = []contract.LeaseRecord{{ID: "lse_2", DeviceID: "dev_2", RequesterID: "gw:ins:b", OwnerID: "gw:ins:b", GrantedAt: 5000,
		TTLMs: 30_000, LastRenewedAt: 5000, TTLDeadline: 35_000, WorkerID: "w1"}}
	after.Devices[0].State, after.Devices[0].LeaseID = contract.DeviceReady, ""
	after.Devices[1].State, after.Devices[1].LeaseID = contract.DeviceLeased, "lse_2"
	after.Waiting = nil
	f.readForTest(w, statusOf(after, 13))
	if f.foldForTest(w, ended, clean, granted(13, nil)) {
		t.Error("a lease end, its clean and a grant that the applied read (seq 13) shows asked for a read")
	}
	if len(w.view.Leases) != 1 || w.view.Devices[0].State != contract.DeviceReady {
		t.Errorf("events the read shows changed the view: %d leases, dev_1 %s", len(w.view.Leases), w.view.Devices[0].State)
	}
}

// A view kept from events is wrong once one that changes it is lost: an
// event dropped over the worker's rate, or refused, asks for a status
// read when its name is of one that changes the worker's status, and
// only then.
func TestALostEventOfTheViewAsksForARead(t *testing.T) {
	f, w := foldFleet(t)
	f.opts.Relay = func(context.Context, string, []contract.Event, int64) error { return nil }
	f.opts.RelayRate, f.opts.RelayBurst = 1, 1
	renewed := ev(contract.EvLeaseRenewed, 11, 7000, map[string]any{"leaseId": "lse_1", "ttlMs": 60_000, "ttlDeadline": 67_000})
	ended := ev(contract.EvLeaseExpired, 12, 8000, map[string]any{"leaseId": "lse_1", "deviceId": "dev_1", "ownerId": "gw:ins:a"})
	if _, read := f.relay(context.Background(), w, "w1", []contract.Event{renewed, ended}, 12); !read {
		t.Error("a lease end dropped over the rate asked for no status read")
	}
	if w.view.Leases[0].TTLDeadline != 67_000 {
		t.Errorf("the renewal kept within the rate was not folded: deadline %d", w.view.Leases[0].TTLDeadline)
	}
	w.relayed = newTokenBucket(1, 1, time.Now())
	other := ev(contract.EvMaintenanceStarted, 14, 9000, map[string]any{})
	if _, read := f.relay(context.Background(), w, "w1", []contract.Event{ev(contract.EvLeaseRenewed, 13, 8500,
		map[string]any{"leaseId": "lse_1", "ttlMs": 60_000, "ttlDeadline": 68_500}), other}, 14); read {
		t.Error("a dropped event that changes no status asked for a status read")
	}
}
