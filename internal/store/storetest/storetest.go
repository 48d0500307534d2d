// Package storetest is the conformance suite of simlock's store backends:
// what package store asks of every backend (atomic changes, the last
// version of a row wins, seqs that only increase, serial commits, the
// order of every list), checked through the methods alone, so that the
// in-memory backend, the SQLite one and any later one (PostgreSQL) are
// held to one set of answers. A backend's test calls Run with a function
// that opens an empty one.
package storetest

import (
	"context"
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/store"
)

// Backend is what the suite checks: the part of a store backend the
// daemon's engine, queue, fleet and job tracker use.
type Backend interface {
	Commit(ctx context.Context, c store.Change) ([]contract.Event, error)
	Reserve(ctx context.Context) (store.Reservation, error)
	Load(ctx context.Context) (store.Snapshot, error)
	Request(ctx context.Context, id string) (contract.LeaseRequestRecord, bool, error)
	RequestByKey(ctx context.Context, requesterID, key string) (contract.LeaseRequestRecord, bool, error)
	Requests(ctx context.Context, limit int) ([]contract.LeaseRequestRecord, error)
	Events(ctx context.Context, q store.EventQuery) ([]contract.Event, error)
	LastSeq(ctx context.Context) (int64, error)
	Clock(ctx context.Context) (store.Clock, bool, error)

	Workers(ctx context.Context) ([]store.Worker, error)
	PutWorker(ctx context.Context, w store.Worker) error
	DeleteWorker(ctx context.Context, id string) error
	Grants(ctx context.Context) ([]store.Grant, error)

	PutJob(ctx context.Context, j contract.Job) error
	Job(ctx context.Context, id string) (contract.Job, bool, error)
	Jobs(ctx context.Context, state string, limit int) ([]contract.Job, error)
	DeleteJobsBefore(ctx context.Context, ts int64) (int, error)
	FleetID(ctx context.Context, proposed string) (string, error)
}

// Run runs the suite, each test on a fresh, empty backend from open (which
// registers its own cleanup).
func Run(t *testing.T, open func(t *testing.T) Backend) {
	tests := []struct {
		name string
		fn   func(t *testing.T, b Backend)
	}{
		{"ChangeRoundTrips", changeRoundTrips},
		{"LastVersionOfARowWins", lastVersionWins},
		{"EmptyChangeWritesNothing", emptyChange},
		{"RefusedChangeWritesNothing", refusedChange},
		{"BeforeNamingAnUnstoredRowFails", beforeUnstored},
		{"SnapshotHoldsOnlyWhatIsLive", snapshotLive},
		{"RequestsByIDKeyAndNewestFirst", requestsQueries},
		{"SeqsOnlyIncrease", seqsIncrease},
		{"EventQueries", eventQueries},
		{"ReservationCommitsAndReleases", reservations},
		{"ReservationHoldsOtherWriters", reservationExcludes},
		{"Clock", clock},
		{"Workers", workers},
		{"Grants", grants},
		{"Jobs", jobs},
		{"PruneEvents", pruneEvents},
		{"PruneRequests", pruneRequests},
		{"PruneLeases", pruneLeases},
		{"PutClock", putClock},
		{"RelayEvents", relayEvents},
		{"RelayBatchesShareOneCommit", relayBatches},
		{"RelayBatchesCommitAllOrNothing", relayBatchesAllOrNothing},
		{"UsageOfRelayBatches", usageOfRelayBatches},
		{"UsageRollups", usageRollups},
		{"UsageOfARefusedCommit", usageOfARefusedCommit},
		{"FleetIDIsTheFirstProposed", fleetID},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, open(t)) })
	}
}

func mustCommit(t *testing.T, b Backend, c store.Change) []contract.Event {
	t.Helper()
	evs, err := b.Commit(context.Background(), c)
	if err != nil {
		t.Fatalf("Commit: %v", err)
	}
	return evs
}

func mustLoad(t *testing.T, b Backend) store.Snapshot {
	t.Helper()
	s, err := b.Load(context.Background())
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	return s
}

func device(id string, created int64, state contract.DeviceState) store.Device {
	return store.Device{ID: id, Platform: contract.PlatformIOS, Model: "iPhone 16", OSVersion: "18.0", Driver: "demo",
		DriverDeviceID: "drv-" + id, DriverData: json.RawMessage(`{"udid":"` + id + `"}`), State: state,
		CreatedAt: created, StateSince: created, LastUsedAt: created}
}

func lease(id, deviceID string, granted int64) store.Lease {
	return store.Lease{LeaseRecord: contract.LeaseRecord{ID: id, DeviceID: deviceID, RequesterID: "agent-" + id, OwnerID: "agent-" + id,
		GrantedAt: granted, TTLMs: 60000, LastRenewedAt: granted, TTLDeadline: granted + 60000}, RequestID: "req-" + id}
}

func request(id, requester, key string, created int64, state contract.RequestState) contract.LeaseRequestRecord {
	return contract.LeaseRequestRecord{ID: id, RequesterID: requester, OwnerID: requester, IdempotencyKey: key,
		State: state, CreatedAt: created}
}

// eventName names the suite's events: no event simlock records, so not
// one docs/EVENTS.md lists.
const eventName = "storetest.event"

func event(id string, ts int64) store.NewEvent {
	return store.NewEvent{ID: id, Timestamp: ts, Event: eventName, Payload: json.RawMessage(`{"n":1}`)}
}

func changeRoundTrips(t *testing.T, b Backend) {
	d := device("dev1", 100, contract.DeviceLeased)
	l := lease("lse1", "dev1", 110)
	r := request("req1", "agent", "k1", 105, contract.RequestQueued)
	evs := mustCommit(t, b, store.Change{Devices: []store.Device{d}, Leases: []store.Lease{l}, Requests: []contract.LeaseRequestRecord{r},
		Events: []store.NewEvent{event("ev1", 100), event("ev2", 101)}})
	if len(evs) != 2 || evs[0].ID != "ev1" || evs[1].ID != "ev2" || evs[0].Seq <= 0 || evs[1].Seq != evs[0].Seq+1 {
		t.Fatalf("Commit returned events %+v, want ev1 and ev2 with consecutive seqs", evs)
	}
	if string(evs[0].Payload) != `{"n":1}` || evs[0].Event != eventName || evs[0].Timestamp != 100 {
		t.Errorf("the committed event came back as %+v", evs[0])
	}
	s := mustLoad(t, b)
	if len(s.Devices) != 1 || !reflect.DeepEqual(s.Devices[0], d) {
		t.Errorf("Load devices = %+v, want %+v", s.Devices, d)
	}
	if len(s.Leases) != 1 || s.Leases[0] != l {
		t.Errorf("Load leases = %+v, want %+v", s.Leases, l)
	}
	if len(s.Requests) != 1 || !reflect.DeepEqual(s.Requests[0], r) {
		t.Errorf("Load requests = %+v, want %+v", s.Requests, r)
	}
	got, err := b.Events(context.Background(), store.EventQuery{})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, evs) {
		t.Errorf("Events = %+v, want what Commit returned, %+v", got, evs)
	}
}

func lastVersionWins(t *testing.T, b Backend) {
	d1 := device("dev1", 100, contract.DeviceReady)
	d2 := d1
	d2.State, d2.StateSince = contract.DeviceLeased, 120
	r1 := request("req1", "agent", "", 100, contract.RequestQueued)
	r2 := r1
	r2.State = contract.RequestStarting
	mustCommit(t, b, store.Change{Devices: []store.Device{d1, d2}, Requests: []contract.LeaseRequestRecord{r1, r2}})
	s := mustLoad(t, b)
	if len(s.Devices) != 1 || s.Devices[0].State != contract.DeviceLeased {
		t.Errorf("a device named twice in one change was stored as %+v, want its last version (leased)", s.Devices)
	}
	if len(s.Requests) != 1 || s.Requests[0].State != contract.RequestStarting {
		t.Errorf("a request named twice in one change was stored as %+v, want its last version (starting)", s.Requests)
	}
	// A later change replaces the row.
	d3 := d2
	d3.State = contract.DeviceReclaiming
	mustCommit(t, b, store.Change{Devices: []store.Device{d3}, Before: store.Before{Devices: map[string]store.Device{d2.ID: d2}}})
	if s := mustLoad(t, b); len(s.Devices) != 1 || s.Devices[0].State != contract.DeviceReclaiming {
		t.Errorf("after an update the device is %+v, want reclaiming", s.Devices)
	}
}

func emptyChange(t *testing.T, b Backend) {
	evs, err := b.Commit(context.Background(), store.Change{})
	if err != nil || evs != nil {
		t.Fatalf("Commit(empty) = %v, %v; want nil, nil", evs, err)
	}
	if seq, err := b.LastSeq(context.Background()); err != nil || seq != 0 {
		t.Errorf("LastSeq after an empty change = %d, %v; want 0", seq, err)
	}
}

func refusedChange(t *testing.T, b Backend) {
	good := device("dev1", 100, contract.DeviceReady)
	for name, c := range map[string]store.Change{
		"a device without an id":      {Devices: []store.Device{good, {State: contract.DeviceReady}}},
		"driver data that is no JSON": {Devices: []store.Device{good, {ID: "dev2", DriverData: json.RawMessage(`{`)}}},
		"a lease without an id":       {Devices: []store.Device{good}, Leases: []store.Lease{{}}},
		"a request without an id":     {Devices: []store.Device{good}, Requests: []contract.LeaseRequestRecord{{}}},
		"an event without an id":      {Devices: []store.Device{good}, Events: []store.NewEvent{{Event: eventName}}},
		"a payload that is no JSON":   {Devices: []store.Device{good}, Events: []store.NewEvent{{ID: "ev1", Payload: json.RawMessage(`nope`)}}},
		"a grant without a worker":    {Devices: []store.Device{good}, Grants: []store.Grant{{Key: "w.l"}}},
	} {
		if _, err := b.Commit(context.Background(), c); err == nil {
			t.Errorf("Commit of %s succeeded, want an error", name)
		}
	}
	s := mustLoad(t, b)
	if len(s.Devices) != 0 {
		t.Errorf("refused changes left devices %+v, want none", s.Devices)
	}
	if seq, _ := b.LastSeq(context.Background()); seq != 0 {
		t.Errorf("refused changes moved LastSeq to %d", seq)
	}
}

func beforeUnstored(t *testing.T, b Backend) {
	was := device("dev1", 100, contract.DeviceReady)
	d := was
	d.State = contract.DeviceLeased
	_, err := b.Commit(context.Background(), store.Change{Devices: []store.Device{d}, Events: []store.NewEvent{event("ev1", 1)},
		Before: store.Before{Devices: map[string]store.Device{d.ID: was}}})
	if err == nil {
		t.Fatal("a change whose Before names a device never stored committed")
	}
	if s := mustLoad(t, b); len(s.Devices) != 0 {
		t.Errorf("the failed change stored %+v", s.Devices)
	}
	l := lease("lse1", "dev1", 100)
	renewed := l
	renewed.LastRenewedAt, renewed.TTLDeadline = 200, 200+l.TTLMs
	if _, err := b.Commit(context.Background(), store.Change{Leases: []store.Lease{renewed},
		Before: store.Before{Leases: map[string]store.Lease{l.UniqueKey(): l}}}); err == nil {
		t.Fatal("a change whose Before names a lease never stored committed")
	}
	if seq, _ := b.LastSeq(context.Background()); seq != 0 {
		t.Errorf("the failed changes gave seqs (LastSeq %d)", seq)
	}
}

func snapshotLive(t *testing.T, b Backend) {
	ended := lease("lse0", "dev1", 50)
	ended.EndedAt, ended.EndReason = 60, "explicit"
	mustCommit(t, b, store.Change{
		Devices: []store.Device{device("dev2", 200, contract.DeviceReady), device("dev1", 100, contract.DeviceLeased),
			device("dev3", 50, contract.DeviceDeleted)},
		Leases: []store.Lease{lease("lse2", "dev2", 300), ended, lease("lse1", "dev1", 200)},
		Requests: []contract.LeaseRequestRecord{request("req2", "b", "", 20, contract.RequestQueued),
			request("req1", "a", "", 10, contract.RequestStarting), request("req3", "c", "", 5, contract.RequestGranted),
			request("req4", "d", "", 6, contract.RequestCancelled), request("req5", "e", "", 7, contract.RequestFailed)},
	})
	s := mustLoad(t, b)
	var ids []string
	for _, d := range s.Devices {
		ids = append(ids, d.ID)
	}
	if !reflect.DeepEqual(ids, []string{"dev1", "dev2"}) {
		t.Errorf("Load devices %v, want dev1, dev2 (not deleted, by creation)", ids)
	}
	ids = nil
	for _, l := range s.Leases {
		ids = append(ids, l.ID)
	}
	if !reflect.DeepEqual(ids, []string{"lse1", "lse2"}) {
		t.Errorf("Load leases %v, want lse1, lse2 (active, by grant)", ids)
	}
	ids = nil
	for _, r := range s.Requests {
		ids = append(ids, r.ID)
	}
	if !reflect.DeepEqual(ids, []string{"req1", "req2"}) {
		t.Errorf("Load requests %v, want req1, req2 (open, by creation)", ids)
	}
}

func requestsQueries(t *testing.T, b Backend) {
	ctx := context.Background()
	mustCommit(t, b, store.Change{Requests: []contract.LeaseRequestRecord{
		request("req1", "a", "k", 10, contract.RequestGranted),
		request("req2", "b", "k", 20, contract.RequestQueued),
		request("req3", "a", "", 30, contract.RequestQueued),
	}})
	if r, ok, err := b.Request(ctx, "req2"); err != nil || !ok || r.RequesterID != "b" {
		t.Errorf("Request(req2) = %+v, %v, %v", r, ok, err)
	}
	if _, ok, err := b.Request(ctx, "nope"); err != nil || ok {
		t.Errorf("Request(nope) found one (%v, %v)", ok, err)
	}
	if r, ok, err := b.RequestByKey(ctx, "a", "k"); err != nil || !ok || r.ID != "req1" {
		t.Errorf("RequestByKey(a, k) = %+v, %v, %v; want req1", r, ok, err)
	}
	if _, ok, err := b.RequestByKey(ctx, "c", "k"); err != nil || ok {
		t.Errorf("RequestByKey(c, k) found one: the key is the requester's own (%v)", err)
	}
	if _, ok, err := b.RequestByKey(ctx, "a", ""); err != nil || ok {
		t.Errorf("RequestByKey(a, \"\") found one: requests without a key are never the same request (%v)", err)
	}
	rs, err := b.Requests(ctx, 2)
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != 2 || rs[0].ID != "req3" || rs[1].ID != "req2" {
		t.Errorf("Requests(2) = %+v, want req3, req2 (newest first)", rs)
	}
}

func seqsIncrease(t *testing.T, b Backend) {
	var last int64
	for i := range 3 {
		evs := mustCommit(t, b, store.Change{Events: []store.NewEvent{event("a"+string(rune('0'+i)), int64(i)), event("b"+string(rune('0'+i)), int64(i))}})
		for _, e := range evs {
			if e.Seq <= last {
				t.Fatalf("commit %d gave seq %d after %d", i, e.Seq, last)
			}
			last = e.Seq
		}
	}
	if seq, err := b.LastSeq(context.Background()); err != nil || seq != last {
		t.Errorf("LastSeq = %d, %v; want %d", seq, err, last)
	}
}

func eventQueries(t *testing.T, b Backend) {
	ctx := context.Background()
	var all []contract.Event
	for i := range 5 {
		all = append(all, mustCommit(t, b, store.Change{Events: []store.NewEvent{event("ev"+string(rune('0'+i)), int64(100*(i+1)))}})...)
	}
	ids := func(evs []contract.Event) []string {
		var out []string
		for _, e := range evs {
			out = append(out, e.ID)
		}
		return out
	}
	for _, tc := range []struct {
		q    store.EventQuery
		want []string
	}{
		{store.EventQuery{}, []string{"ev0", "ev1", "ev2", "ev3", "ev4"}},
		{store.EventQuery{Limit: 2}, []string{"ev3", "ev4"}},
		{store.EventQuery{AfterSeq: all[1].Seq, Limit: 2}, []string{"ev2", "ev3"}},
		{store.EventQuery{SinceTs: 400}, []string{"ev3", "ev4"}},
		{store.EventQuery{SinceTs: 200, AfterSeq: all[2].Seq}, []string{"ev3", "ev4"}},
	} {
		got, err := b.Events(ctx, tc.q)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(ids(got), tc.want) {
			t.Errorf("Events(%+v) = %v, want %v", tc.q, ids(got), tc.want)
		}
	}
}

func reservations(t *testing.T, b Backend) {
	ctx := context.Background()
	res, err := b.Reserve(ctx)
	if err != nil {
		t.Fatal(err)
	}
	evs, err := res.Commit(ctx, store.Change{Devices: []store.Device{device("dev1", 1, contract.DeviceReady)}, Events: []store.NewEvent{event("ev1", 1)}})
	if err != nil || len(evs) != 1 || evs[0].Seq <= 0 {
		t.Fatalf("a reservation's Commit = %+v, %v", evs, err)
	}
	res.Release() // after Commit: no effect
	res, err = b.Reserve(ctx)
	if err != nil {
		t.Fatalf("Reserve after a reservation committed: %v", err)
	}
	res.Release()
	res.Release()
	if s := mustLoad(t, b); len(s.Devices) != 1 {
		t.Errorf("after a committed and a released reservation the store holds %d devices, want 1", len(s.Devices))
	}
	// The lock was given back: a plain commit goes through.
	mustCommit(t, b, store.Change{Events: []store.NewEvent{event("ev2", 2)}})
}

func reservationExcludes(t *testing.T, b Backend) {
	ctx := context.Background()
	res, err := b.Reserve(ctx)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan []contract.Event, 1)
	go func() {
		evs, err := b.Commit(ctx, store.Change{Events: []store.NewEvent{event("later", 2)}})
		if err != nil {
			evs = nil
		}
		done <- evs
	}()
	// While the reservation is held the other commit must wait: one that
	// returns meanwhile got past the write lock. (The bound only gives a
	// commit that ignores the lock time to finish; a correct backend
	// waits it out.)
	select {
	case evs := <-done:
		res.Release()
		t.Fatalf("a commit went through while a reservation was held (got %+v): the reservation does not hold the write lock", evs)
	case <-time.After(300 * time.Millisecond):
	}
	// The other commit may run only after this one: its seq is the
	// greater.
	first, err := res.Commit(ctx, store.Change{Events: []store.NewEvent{event("first", 1)}})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case later := <-done:
		if len(later) != 1 || later[0].Seq <= first[0].Seq {
			t.Errorf("a commit made while a reservation was held got %+v, want a seq after the reservation's %d", later, first[0].Seq)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("a commit waiting for a reservation was not let through when it committed")
	}
}

func clock(t *testing.T, b Backend) {
	ctx := context.Background()
	if _, ok, err := b.Clock(ctx); err != nil || ok {
		t.Fatalf("an empty store has a clock reading (%v, %v)", ok, err)
	}
	want := store.Clock{WallMs: 1000, BootNs: 2000, BootID: "boot"}
	mustCommit(t, b, store.Change{Clock: &want})
	if got, ok, err := b.Clock(ctx); err != nil || !ok || got != want {
		t.Errorf("Clock = %+v, %v, %v; want %+v", got, ok, err, want)
	}
}

func workers(t *testing.T, b Backend) {
	ctx := context.Background()
	w2 := store.Worker{ID: "w2", Label: "two", LastSeq: 5, LastSeenAt: 10, TokenID: "tok"}
	w1 := store.Worker{ID: "w1", Label: "one", Drained: true}
	for _, w := range []store.Worker{w2, w1} {
		if err := b.PutWorker(ctx, w); err != nil {
			t.Fatal(err)
		}
	}
	w2.LastSeq = 7
	if err := b.PutWorker(ctx, w2); err != nil {
		t.Fatal(err)
	}
	got, err := b.Workers(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, []store.Worker{w1, w2}) {
		t.Errorf("Workers = %+v, want w1, w2 by id with w2's last write", got)
	}
	if err := b.DeleteWorker(ctx, "w1"); err != nil {
		t.Fatal(err)
	}
	if err := b.DeleteWorker(ctx, "never"); err != nil {
		t.Errorf("DeleteWorker of an unknown id: %v", err)
	}
	if got, _ := b.Workers(ctx); !reflect.DeepEqual(got, []store.Worker{w2}) {
		t.Errorf("after DeleteWorker(w1): %+v", got)
	}
}

func grants(t *testing.T, b Backend) {
	ctx := context.Background()
	g := func(key string, at int64) store.Grant {
		return store.Grant{Key: key, WorkerID: "w1", WorkerLeaseID: key + "-lse", DeviceID: "d", OwnerID: "o", RequesterID: "r",
			RequestID: "req", GrantedAt: at, Platform: contract.PlatformAndroid}
	}
	mustCommit(t, b, store.Change{Grants: []store.Grant{g("b", 20), g("a", 20), g("c", 10)}})
	got, err := b.Grants(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, []store.Grant{g("c", 10), g("a", 20), g("b", 20)}) {
		t.Errorf("Grants = %+v, want c, a, b (oldest first, then by key)", got)
	}
	mustCommit(t, b, store.Change{Grants: []store.Grant{g("d", 30)}, EndedGrants: []string{"a", "c", "d"}})
	if got, _ := b.Grants(ctx); !reflect.DeepEqual(got, []store.Grant{g("b", 20)}) {
		t.Errorf("after ending a, c and d (d written in the same change): %+v, want b only", got)
	}
}

func jobs(t *testing.T, b Backend) {
	ctx := context.Background()
	pct := 50.0
	j1 := contract.Job{ID: "job1", Kind: contract.JobKindInstall, CreatedAt: 10, State: "running",
		Workers: []contract.JobWorker{{WorkerID: "w1", Percent: &pct}}}
	j2 := contract.Job{ID: "job2", Kind: contract.JobKindInstall, CreatedAt: 20, EndedAt: 25, State: "succeeded", Workers: []contract.JobWorker{}}
	j3 := contract.Job{ID: "job3", Kind: contract.JobKindInstall, CreatedAt: 30, EndedAt: 40, State: "failed", Workers: []contract.JobWorker{}}
	for _, j := range []contract.Job{j1, j2, j3} {
		if err := b.PutJob(ctx, j); err != nil {
			t.Fatal(err)
		}
	}
	got, ok, err := b.Job(ctx, "job1")
	if err != nil || !ok || !reflect.DeepEqual(got, j1) {
		t.Errorf("Job(job1) = %+v, %v, %v; want %+v", got, ok, err, j1)
	}
	if ok && got.Workers[0].Percent == &pct {
		t.Error("Job returned the caller's pointer: a read must be a copy")
	}
	ids := func(js []contract.Job) []string {
		out := []string{}
		for _, j := range js {
			out = append(out, j.ID)
		}
		return out
	}
	if js, err := b.Jobs(ctx, "", 10); err != nil || !reflect.DeepEqual(ids(js), []string{"job3", "job2", "job1"}) {
		t.Errorf("Jobs(any, 10) = %v, %v; want newest first", ids(js), err)
	}
	if js, err := b.Jobs(ctx, "", 2); err != nil || !reflect.DeepEqual(ids(js), []string{"job3", "job2"}) {
		t.Errorf("Jobs(any, 2) = %v, %v", ids(js), err)
	}
	if js, err := b.Jobs(ctx, "running", 10); err != nil || !reflect.DeepEqual(ids(js), []string{"job1"}) {
		t.Errorf("Jobs(running) = %v, %v", ids(js), err)
	}
	if js, err := b.Jobs(ctx, "nothing", 10); err != nil || js == nil || len(js) != 0 {
		t.Errorf("Jobs of a state none is in = %#v, %v; want an empty list", js, err)
	}
	n, err := b.DeleteJobsBefore(ctx, 40)
	if err != nil || n != 1 {
		t.Errorf("DeleteJobsBefore(40) = %d, %v; want 1 (job2 ended at 25; job1 runs; job3 ended at 40)", n, err)
	}
	if _, ok, _ := b.Job(ctx, "job2"); ok {
		t.Error("job2 is still there after DeleteJobsBefore")
	}
}

// fleetID: the first id proposed is the fleet's, whatever is proposed
// later.
func fleetID(t *testing.T, b Backend) {
	ctx := context.Background()
	for i, proposed := range []string{"first", "second", "first"} {
		got, err := b.FleetID(ctx, proposed)
		if err != nil {
			t.Fatal(err)
		}
		if got != "first" {
			t.Fatalf("FleetID(%q), call %d = %q; want the first proposed, %q", proposed, i+1, got, "first")
		}
	}
}
