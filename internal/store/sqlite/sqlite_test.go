package sqlite

import (
	"bufio"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/store"
)

func openAt(t testing.TB, path string) *DB {
	t.Helper()
	db, err := Open(context.Background(), path)
	if err != nil {
		t.Fatalf("Open(%q): %v", path, err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func openTemp(t testing.TB) (*DB, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "simlock.db")
	return openAt(t, path), path
}

func commit(t testing.TB, db *DB, c store.Change) []contract.Event {
	t.Helper()
	evs, err := db.Commit(context.Background(), c)
	if err != nil {
		t.Fatalf("Commit: %v", err)
	}
	return evs
}

func load(t testing.TB, db *DB) store.Snapshot {
	t.Helper()
	s, err := db.Load(context.Background())
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	return s
}

// count reads a table size directly, for rows no API method returns.
func count(t testing.TB, db *DB, table string) int {
	t.Helper()
	var n int
	if err := db.r.QueryRow("SELECT count(*) FROM " + table).Scan(&n); err != nil {
		t.Fatalf("count %s: %v", table, err)
	}
	return n
}

func userVersion(t testing.TB, path string) int {
	t.Helper()
	raw, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	var v int
	if err := raw.QueryRow("PRAGMA user_version").Scan(&v); err != nil {
		t.Fatal(err)
	}
	return v
}

// rawAtSchema makes a database at path that has run the first n
// migrations, and returns it open outside the store, to fill as a build of
// that schema would have.
func rawAtSchema(t testing.TB, path string, n int) *sql.DB {
	t.Helper()
	raw, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	ms, err := migrations()
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range ms[:n] {
		if _, err := raw.Exec(m.sql); err != nil {
			t.Fatalf("%s: %v", m.name, err)
		}
	}
	return raw
}

func device(id string, createdAt int64) store.Device {
	return store.Device{
		ID:             id,
		Platform:       contract.PlatformIOS,
		Model:          "iPhone 16",
		OSVersion:      "18.2",
		Driver:         "simctl",
		DriverDeviceID: "UDID-" + id,
		Address:        "127.0.0.1:5555",
		DriverData:     json.RawMessage(`{"runtime":"com.apple.CoreSimulator.SimRuntime.iOS-18-2","cloned":true}`),
		State:          contract.DeviceReady,
		CreatedAt:      createdAt,
		StateSince:     createdAt + 1,
		LastUsedAt:     createdAt + 2,
	}
}

func lease(id, deviceID string, grantedAt int64) store.Lease {
	return store.Lease{
		LeaseRecord: contract.LeaseRecord{
			ID:            id,
			DeviceID:      deviceID,
			RequesterID:   "agent-1",
			OwnerID:       "owner-1",
			GrantedAt:     grantedAt,
			TTLMs:         60_000,
			LastRenewedAt: grantedAt + 5,
			TTLDeadline:   grantedAt + 60_005,
		},
		RequestID: "req-for-" + id,
	}
}

func request(id string, state contract.RequestState, createdAt int64) contract.LeaseRequestRecord {
	r := contract.LeaseRequestRecord{
		ID:          id,
		RequesterID: "agent-1",
		OwnerID:     "owner-1",
		Spec:        contract.RequestSpec{Platform: contract.PlatformAndroid, Class: contract.ClassPhone, OSVersion: "15"},
		State:       state,
		CreatedAt:   createdAt,
		Policy:      contract.WaitPolicy{TimeoutMs: 30_000, TTLMs: 60_000},
	}
	switch state {
	case contract.RequestQueued:
		r.Stage = contract.StageQueued
		r.QueuePosition = 2
	case contract.RequestStarting:
		r.Stage = contract.StageBooting
	}
	if state.Terminal() {
		r.SettledAt = createdAt + 10
	}
	return r
}

func event(id string, ts int64) store.NewEvent {
	return store.NewEvent{ID: id, Timestamp: ts, Event: "lease.renewed", Payload: json.RawMessage(`{"id":"` + id + `"}`)}
}

func TestFreshDatabaseMigrates(t *testing.T) {
	db, path := openTemp(t)
	entries, err := os.ReadDir("migrations")
	if err != nil {
		t.Fatal(err)
	}
	want := 0
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".sql") {
			want++
		}
	}
	if want == 0 {
		t.Fatal("no migrations found")
	}
	if got := userVersion(t, path); got != want {
		t.Errorf("user_version = %d, want %d (number of migrations)", got, want)
	}
	for _, table := range []string{"devices", "leases", "lease_requests", "events"} {
		if n := count(t, db, table); n != 0 {
			t.Errorf("fresh table %s has %d rows", table, n)
		}
	}
	var mode string
	if err := db.w.QueryRow("PRAGMA journal_mode").Scan(&mode); err != nil {
		t.Fatal(err)
	}
	if mode != "wal" {
		t.Errorf("journal_mode = %q, want wal", mode)
	}
	var fk, sync int
	if err := db.w.QueryRow("PRAGMA foreign_keys").Scan(&fk); err != nil {
		t.Fatal(err)
	}
	if err := db.w.QueryRow("PRAGMA synchronous").Scan(&sync); err != nil {
		t.Fatal(err)
	}
	if fk != 1 || sync != 1 {
		t.Errorf("foreign_keys = %d, synchronous = %d; want 1 (on), 1 (NORMAL)", fk, sync)
	}
}

func TestReopenIsIdempotent(t *testing.T) {
	path := filepath.Join(t.TempDir(), "simlock.db")
	db, err := Open(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	commit(t, db, store.Change{Devices: []store.Device{device("d1", 100)}, Events: []store.NewEvent{event("e1", 100)}})
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	v1 := userVersion(t, path)
	for i := 0; i < 2; i++ {
		db, err := Open(context.Background(), path)
		if err != nil {
			t.Fatalf("reopen %d: %v", i, err)
		}
		s := load(t, db)
		if len(s.Devices) != 1 || s.Devices[0].ID != "d1" {
			t.Errorf("reopen %d: devices = %+v, want d1", i, s.Devices)
		}
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if v2 := userVersion(t, path); v2 != v1 {
		t.Errorf("user_version changed on reopen: %d -> %d", v1, v2)
	}
}

func TestPathIsNotADSN(t *testing.T) {
	// A '?' in the path must name a file, not start driver options.
	dir := t.TempDir()
	path := filepath.Join(dir, "odd?_txlock=bogus#name %.db")
	db := openAt(t, path)
	commit(t, db, store.Change{Devices: []store.Device{device("d1", 1)}})
	if _, err := os.Stat(path); err != nil {
		t.Errorf("database not at the given path: %v", err)
	}
}

func TestCommitRoundTrip(t *testing.T) {
	db, _ := openTemp(t)
	ctx := context.Background()

	d1, d2 := device("d1", 200), device("d2", 100)
	d2.Platform = contract.PlatformAndroid
	d2.ImageTag = "google_apis_playstore"
	d2.DriverData = nil
	d2.State = contract.DeviceLeased

	l1 := lease("l1", "d2", 500)
	l2 := lease("l2", "d1", 400)

	queued := request("r-queued", contract.RequestQueued, 300)
	queued.IdempotencyKey = "k1"
	starting := request("r-starting", contract.RequestStarting, 200)
	failed := request("r-failed", contract.RequestFailed, 150)
	failed.Error = contract.Errorf(contract.CodeQueueTimeout, "no device in %dms", 30000).With("requestId", "r-failed")
	granted := request("r-granted", contract.RequestGranted, 100)
	granted.LeaseID = "l1"
	granted.Grant = &contract.LeaseGrant{
		Device: contract.GrantDevice{
			ID: "d2", DriverDeviceID: "emulator-5554",
			Spec:    contract.DeviceSpec{Platform: contract.PlatformAndroid, Model: "Pixel 9", OSVersion: "15"},
			Address: "127.0.0.1:5554", Mode: "headless",
		},
		Lease:       l1.LeaseRecord,
		Timing:      contract.Timing{EstimatedProvisionMs: 1, EstimatedBootMs: 2, EstimatedReclaimMs: 3, EstimatedReadyMs: 4},
		Environment: map[string]string{"ANDROID_SERIAL": "emulator-5554"},
		RequestID:   "r-granted",
		Source:      contract.SourceWarm,
	}

	evs := []store.NewEvent{event("e1", 1000), event("e2", 1001), {ID: "e3", Timestamp: 1002, Event: "device.ready"}}
	got := commit(t, db, store.Change{
		Devices:  []store.Device{d1, d2},
		Leases:   []store.Lease{l1, l2},
		Requests: []contract.LeaseRequestRecord{queued, starting, granted, failed},
		Events:   evs,
	})

	if len(got) != len(evs) {
		t.Fatalf("Commit returned %d events, want %d", len(got), len(evs))
	}
	for i, e := range got {
		want := contract.Event{ID: evs[i].ID, Seq: int64(i + 1), Timestamp: evs[i].Timestamp, Event: evs[i].Event, Payload: evs[i].Payload}
		if !reflect.DeepEqual(e, want) {
			t.Errorf("event %d = %+v, want %+v", i, e, want)
		}
	}

	s := load(t, db)
	if want := []store.Device{d2, d1}; !reflect.DeepEqual(s.Devices, want) { // by created_at
		t.Errorf("devices:\n got %+v\nwant %+v", s.Devices, want)
	}
	if want := []store.Lease{l2, l1}; !reflect.DeepEqual(s.Leases, want) { // by granted_at
		t.Errorf("leases:\n got %+v\nwant %+v", s.Leases, want)
	}
	if want := []contract.LeaseRequestRecord{starting, queued}; !reflect.DeepEqual(s.Requests, want) { // by created_at, open only
		t.Errorf("requests:\n got %+v\nwant %+v", s.Requests, want)
	}

	// The settled request is not in the snapshot but is kept whole.
	r, ok, err := db.Request(ctx, "r-granted")
	if err != nil || !ok {
		t.Fatalf("Request(r-granted) = ok %v, err %v", ok, err)
	}
	if !reflect.DeepEqual(r, granted) {
		t.Errorf("granted request:\n got %+v\nwant %+v", r, granted)
	}
	if r.Grant == nil || r.Grant.Environment["ANDROID_SERIAL"] != "emulator-5554" {
		t.Errorf("grant lost: %+v", r.Grant)
	}
	r, ok, err = db.Request(ctx, "r-failed")
	if err != nil || !ok || !reflect.DeepEqual(r, failed) {
		t.Errorf("Request(r-failed) = %+v, %v, %v; want %+v", r, ok, err, failed)
	}
	if r.Error == nil || r.Error.Code != contract.CodeQueueTimeout || r.Error.Details["requestId"] != "r-failed" {
		t.Errorf("error lost: %+v", r.Error)
	}
	if _, ok, err := db.Request(ctx, "nope"); ok || err != nil {
		t.Errorf("Request(nope) = ok %v, err %v; want not found", ok, err)
	}

	stored, err := db.Events(ctx, store.EventQuery{})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(stored, got) {
		t.Errorf("stored events:\n got %+v\nwant %+v", stored, got)
	}
}

func TestCommitUpdates(t *testing.T) {
	db, _ := openTemp(t)
	d := device("d1", 100)
	l := lease("l1", "d1", 100)
	r := request("r1", contract.RequestQueued, 100)
	commit(t, db, store.Change{Devices: []store.Device{d}, Leases: []store.Lease{l}, Requests: []contract.LeaseRequestRecord{r}})

	d.State = contract.DeviceLeased
	d.DriverData = json.RawMessage(`[1,2,3]`)
	l.LastRenewedAt, l.TTLDeadline = 900, 60_900
	r.State, r.Stage, r.QueuePosition = contract.RequestStarting, contract.StageProvisioning, 0
	commit(t, db, store.Change{Devices: []store.Device{d}, Leases: []store.Lease{l}, Requests: []contract.LeaseRequestRecord{r}})

	s := load(t, db)
	if !reflect.DeepEqual(s.Devices, []store.Device{d}) {
		t.Errorf("devices = %+v, want %+v", s.Devices, d)
	}
	if !reflect.DeepEqual(s.Leases, []store.Lease{l}) {
		t.Errorf("leases = %+v, want %+v", s.Leases, l)
	}
	if !reflect.DeepEqual(s.Requests, []contract.LeaseRequestRecord{r}) {
		t.Errorf("requests = %+v, want %+v", s.Requests, r)
	}
}

// totalChanges is how many rows the writer connection has inserted, updated
// or deleted since it opened.
func totalChanges(t testing.TB, db *DB) int {
	t.Helper()
	var n int
	if err := db.w.QueryRow("SELECT total_changes()").Scan(&n); err != nil {
		t.Fatalf("total_changes: %v", err)
	}
	return n
}

func TestCommitWritesEachRowOnce(t *testing.T) {
	db, _ := openTemp(t)
	// The engine writes a device twice in one decision: once when it picks
	// it, again when it moves it on. Only the last version may be stored,
	// and written once.
	first := device("d1", 100)
	other := device("d2", 50)
	last := first
	last.State, last.StateSince, last.LastUsedAt = contract.DeviceLeased, 900, 900
	last.DriverData = json.RawMessage(`{"second":true}`)
	l := lease("l1", "d1", 900)
	lastLease := l
	lastLease.TTLDeadline = 99_000
	r := request("r1", contract.RequestStarting, 100)
	lastReq := r
	lastReq.State, lastReq.Stage, lastReq.LeaseID = contract.RequestGranted, "", "l1"
	lastReq.SettledAt = 900

	before := totalChanges(t, db)
	evs := commit(t, db, store.Change{
		Devices:  []store.Device{first, other, last},
		Leases:   []store.Lease{l, lastLease},
		Requests: []contract.LeaseRequestRecord{r, lastReq},
		Events:   []store.NewEvent{event("e1", 1), event("e2", 2), event("e3", 3)},
	})
	// Two devices, one lease, one request and three events.
	if got := totalChanges(t, db) - before; got != 2+1+1+3 {
		t.Errorf("the commit changed %d rows, want 7 (each row once)", got)
	}
	if len(evs) != 3 || evs[0].ID != "e1" || evs[1].ID != "e2" || evs[2].ID != "e3" {
		t.Errorf("events = %+v, want e1, e2, e3 in order", evs)
	}

	s := load(t, db)
	if want := []store.Device{other, last}; !reflect.DeepEqual(s.Devices, want) { // by created_at
		t.Errorf("devices:\n got %+v\nwant %+v", s.Devices, want)
	}
	if want := []store.Lease{lastLease}; !reflect.DeepEqual(s.Leases, want) {
		t.Errorf("leases:\n got %+v\nwant %+v", s.Leases, want)
	}
	if got, ok, err := db.Request(context.Background(), "r1"); err != nil || !ok || !reflect.DeepEqual(got, lastReq) {
		t.Errorf("request = %+v, %v, %v; want the last version %+v", got, ok, err, lastReq)
	}
	if len(s.Requests) != 0 {
		t.Errorf("open requests = %+v, want none (the last version is granted)", s.Requests)
	}
}

func TestLastOfEach(t *testing.T) {
	type row struct{ id, v string }
	key := func(r row) string { return r.id }
	in := []row{{"a", "1"}, {"b", "1"}, {"a", "2"}, {"c", "1"}, {"b", "2"}, {"a", "3"}}
	kept := slices.Clone(in)
	got := lastOfEach(in, key)
	if want := []row{{"a", "3"}, {"b", "2"}, {"c", "1"}}; !reflect.DeepEqual(got, want) {
		t.Errorf("lastOfEach = %v, want %v", got, want)
	}
	if !reflect.DeepEqual(in, kept) {
		t.Errorf("lastOfEach changed its input to %v", in)
	}
	for _, xs := range [][]row{nil, {{"a", "1"}}} {
		if got := lastOfEach(xs, key); !reflect.DeepEqual(got, xs) {
			t.Errorf("lastOfEach(%v) = %v", xs, got)
		}
	}
}

func TestEndedAndSettledAreNotLoaded(t *testing.T) {
	db, _ := openTemp(t)
	active := lease("active", "d1", 100)
	ended := lease("ended", "d1", 50)
	ended.EndedAt, ended.EndReason = 150, "released"
	deleted := device("gone", 10)
	deleted.State = contract.DeviceDeleted
	var reqs []contract.LeaseRequestRecord
	for i, st := range []contract.RequestState{contract.RequestQueued, contract.RequestStarting,
		contract.RequestGranted, contract.RequestFailed, contract.RequestCancelled} {
		reqs = append(reqs, request(string(st), st, int64(i)))
	}
	commit(t, db, store.Change{
		Devices:  []store.Device{device("d1", 1), deleted},
		Leases:   []store.Lease{active, ended},
		Requests: reqs,
	})

	s := load(t, db)
	if len(s.Devices) != 1 || s.Devices[0].ID != "d1" {
		t.Errorf("devices = %+v, want only d1", s.Devices)
	}
	if len(s.Leases) != 1 || s.Leases[0].ID != "active" {
		t.Errorf("leases = %+v, want only active", s.Leases)
	}
	var ids []string
	for _, r := range s.Requests {
		ids = append(ids, r.ID)
	}
	if want := []string{"queued", "starting"}; !reflect.DeepEqual(ids, want) {
		t.Errorf("requests = %v, want %v", ids, want)
	}

	// Ending an active lease in a later commit drops it from the snapshot.
	active.EndedAt, active.EndReason = 300, "expired"
	commit(t, db, store.Change{Leases: []store.Lease{active}})
	if s := load(t, db); len(s.Leases) != 0 {
		t.Errorf("leases after ending = %+v, want none", s.Leases)
	}
}

func TestTerminalStatesMatchContract(t *testing.T) {
	all := []contract.RequestState{contract.RequestQueued, contract.RequestStarting,
		contract.RequestGranted, contract.RequestFailed, contract.RequestCancelled}
	for _, s := range all {
		in := strings.Contains(terminalStates, "'"+string(s)+"'")
		if in != s.Terminal() {
			t.Errorf("state %q: in terminalStates = %v, Terminal() = %v", s, in, s.Terminal())
		}
	}
}

func TestFailedCommitLeavesNothing(t *testing.T) {
	db, _ := openTemp(t)
	ctx := context.Background()
	commit(t, db, store.Change{Devices: []store.Device{device("before", 1)}})

	// Two requests of one requester under one idempotency key: the second
	// row breaks the unique index, after the devices, the lease and the
	// first request were written.
	r := request("r1", contract.RequestQueued, 1)
	r.IdempotencyKey = "k"
	r2 := request("r2", contract.RequestQueued, 1)
	r2.IdempotencyKey = "k"
	_, err := db.Commit(ctx, store.Change{
		Devices:  []store.Device{device("d1", 2)},
		Leases:   []store.Lease{lease("l1", "d1", 2)},
		Requests: []contract.LeaseRequestRecord{r, r2},
		Events:   []store.NewEvent{event("one", 2), event("other", 2)},
	})
	if err == nil {
		t.Fatal("Commit of two requests under one idempotency key succeeded")
	}
	if !strings.HasPrefix(err.Error(), "store: commit: ") {
		t.Errorf("error %q lacks the store: commit: prefix", err)
	}

	s := load(t, db)
	if len(s.Devices) != 1 || s.Devices[0].ID != "before" {
		t.Errorf("devices = %+v, want only the earlier one", s.Devices)
	}
	if len(s.Leases) != 0 || len(s.Requests) != 0 {
		t.Errorf("leases %+v, requests %+v survived a failed commit", s.Leases, s.Requests)
	}
	if _, ok, _ := db.RequestByKey(ctx, "agent-1", "k"); ok {
		t.Error("request survived a failed commit")
	}
	if evs, _ := db.Events(ctx, store.EventQuery{}); len(evs) != 0 {
		t.Errorf("events survived a failed commit: %+v", evs)
	}
	if seq, _ := db.LastSeq(ctx); seq != 0 {
		t.Errorf("LastSeq = %d after a failed commit, want 0", seq)
	}

	// The writer is usable afterwards, and the rolled-back seqs are reused.
	got := commit(t, db, store.Change{Events: []store.NewEvent{event("dup", 4)}})
	if len(got) != 1 || got[0].Seq != 1 {
		t.Errorf("commit after failure = %+v, want seq 1", got)
	}
}

func TestCommitRejectsBadInput(t *testing.T) {
	db, _ := openTemp(t)
	bad := device("d1", 1)
	bad.DriverData = json.RawMessage(`{not json`)
	for name, c := range map[string]store.Change{
		"device data":   {Devices: []store.Device{bad}},
		"event payload": {Events: []store.NewEvent{{ID: "e", Payload: json.RawMessage(`{`)}}},
		"empty id":      {Events: []store.NewEvent{{ID: ""}}},
		"unknown device": {Leases: []store.Lease{lease("l1", "no-such-device", 1)},
			Events: []store.NewEvent{event("e1", 1)}},
	} {
		if _, err := db.Commit(context.Background(), c); err == nil {
			t.Errorf("%s: Commit succeeded", name)
		}
	}
	if n := count(t, db, "events") + count(t, db, "devices") + count(t, db, "leases"); n != 0 {
		t.Errorf("%d rows written by rejected commits", n)
	}
}

func TestEmptyCommit(t *testing.T) {
	db, _ := openTemp(t)
	evs, err := db.Commit(context.Background(), store.Change{})
	if evs != nil || err != nil {
		t.Errorf("empty Commit = %v, %v; want nil, nil", evs, err)
	}
}

func TestEventSeqsIncrease(t *testing.T) {
	db, _ := openTemp(t)
	ctx := context.Background()
	var last int64
	for i := 0; i < 5; i++ {
		got := commit(t, db, store.Change{Events: []store.NewEvent{
			event(fmt.Sprintf("a%d", i), int64(i)), event(fmt.Sprintf("b%d", i), int64(i)),
		}})
		for _, e := range got {
			if e.Seq <= last {
				t.Fatalf("seq %d after %d", e.Seq, last)
			}
			last = e.Seq
		}
		seq, err := db.LastSeq(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if seq != last {
			t.Errorf("LastSeq = %d, want %d", seq, last)
		}
	}
}

func TestEventsQuery(t *testing.T) {
	db, _ := openTemp(t)
	ctx := context.Background()
	if seq, err := db.LastSeq(ctx); seq != 0 || err != nil {
		t.Errorf("LastSeq on empty = %d, %v; want 0", seq, err)
	}
	// Ten events, timestamps deliberately not in seq order for two of them,
	// to tell a timestamp filter from a seq filter.
	ts := []int64{100, 200, 300, 400, 500, 450, 700, 800, 900, 1000}
	var in []store.NewEvent
	for i, t := range ts {
		in = append(in, event(fmt.Sprintf("e%d", i+1), t))
	}
	all := commit(t, db, store.Change{Events: in})

	seqs := func(es []contract.Event) []int64 {
		var s []int64
		for _, e := range es {
			s = append(s, e.Seq)
		}
		return s
	}
	for _, tc := range []struct {
		name string
		q    store.EventQuery
		want []int64
	}{
		{"all", store.EventQuery{}, []int64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}},
		{"newest limit", store.EventQuery{Limit: 3}, []int64{8, 9, 10}},
		{"since", store.EventQuery{SinceTs: 450}, []int64{5, 6, 7, 8, 9, 10}},
		{"since limit takes oldest", store.EventQuery{SinceTs: 450, Limit: 2}, []int64{5, 6}},
		{"after seq", store.EventQuery{AfterSeq: 7}, []int64{8, 9, 10}},
		{"after seq limit takes oldest", store.EventQuery{AfterSeq: 2, Limit: 3}, []int64{3, 4, 5}},
		{"since and after", store.EventQuery{SinceTs: 460, AfterSeq: 5}, []int64{7, 8, 9, 10}},
		{"after last", store.EventQuery{AfterSeq: 10}, nil},
	} {
		got, err := db.Events(ctx, tc.q)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if !reflect.DeepEqual(seqs(got), tc.want) {
			t.Errorf("%s: seqs = %v, want %v", tc.name, seqs(got), tc.want)
		}
		for _, e := range got {
			if !reflect.DeepEqual(e, all[e.Seq-1]) {
				t.Errorf("%s: event %+v, want %+v", tc.name, e, all[e.Seq-1])
			}
		}
	}
}

func TestEventsDefaultLimit(t *testing.T) {
	db, _ := openTemp(t)
	const n = defaultLimit + 5
	in := make([]store.NewEvent, n)
	for i := range in {
		in[i] = event(fmt.Sprintf("e%d", i), int64(i+1))
	}
	commit(t, db, store.Change{Events: in})
	for _, q := range []store.EventQuery{{}, {AfterSeq: 1}} {
		got, err := db.Events(context.Background(), q)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 1000 {
			t.Fatalf("%+v: %d events, want 1000", q, len(got))
		}
		first := int64(n - 1000 + 1) // newest 1000
		if q.AfterSeq > 0 {
			first = 2 // oldest 1000 after seq 1
		}
		if got[0].Seq != first || got[999].Seq != first+999 {
			t.Errorf("%+v: seqs %d..%d, want %d..%d", q, got[0].Seq, got[999].Seq, first, first+999)
		}
	}
}

func TestIdempotencyKey(t *testing.T) {
	db, _ := openTemp(t)
	ctx := context.Background()
	a := request("a", contract.RequestQueued, 1)
	a.IdempotencyKey = "k"
	otherRequester := request("b", contract.RequestQueued, 2)
	otherRequester.RequesterID, otherRequester.IdempotencyKey = "agent-2", "k"
	noKey1, noKey2 := request("n1", contract.RequestQueued, 3), request("n2", contract.RequestQueued, 4)
	commit(t, db, store.Change{Requests: []contract.LeaseRequestRecord{a, otherRequester, noKey1, noKey2}})

	got, ok, err := db.RequestByKey(ctx, "agent-1", "k")
	if err != nil || !ok || !reflect.DeepEqual(got, a) {
		t.Errorf("RequestByKey(agent-1, k) = %+v, %v, %v; want a", got, ok, err)
	}
	got, ok, err = db.RequestByKey(ctx, "agent-2", "k")
	if err != nil || !ok || got.ID != "b" {
		t.Errorf("RequestByKey(agent-2, k) = %+v, %v, %v; want b", got, ok, err)
	}
	for _, q := range [][2]string{{"agent-1", "other"}, {"agent-3", "k"}, {"agent-1", ""}} {
		if _, ok, err := db.RequestByKey(ctx, q[0], q[1]); ok || err != nil {
			t.Errorf("RequestByKey(%q, %q) = ok %v, err %v; want not found", q[0], q[1], ok, err)
		}
	}

	// Re-committing the same request with its key is an update, not a clash.
	a.State = contract.RequestStarting
	commit(t, db, store.Change{Requests: []contract.LeaseRequestRecord{a}})

	dup := request("c", contract.RequestQueued, 5)
	dup.IdempotencyKey = "k"
	if _, err := db.Commit(ctx, store.Change{Requests: []contract.LeaseRequestRecord{dup}}); err == nil {
		t.Error("second request with the same requester and key was accepted")
	}
	if _, ok, _ := db.Request(ctx, "c"); ok {
		t.Error("the clashing request was stored")
	}
	got, _, _ = db.RequestByKey(ctx, "agent-1", "k")
	if got.ID != "a" || got.State != contract.RequestStarting {
		t.Errorf("key now maps to %+v, want a (starting)", got)
	}
}

func TestRequestsNewestFirst(t *testing.T) {
	db, _ := openTemp(t)
	commit(t, db, store.Change{Requests: []contract.LeaseRequestRecord{
		request("mid", contract.RequestGranted, 200),
		request("new", contract.RequestQueued, 300),
		request("old", contract.RequestFailed, 100),
	}})
	for _, tc := range []struct {
		limit int
		want  []string
	}{{0, []string{"new", "mid", "old"}}, {2, []string{"new", "mid"}}} {
		rs, err := db.Requests(context.Background(), tc.limit)
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, r := range rs {
			ids = append(ids, r.ID)
		}
		if !reflect.DeepEqual(ids, tc.want) {
			t.Errorf("Requests(%d) = %v, want %v", tc.limit, ids, tc.want)
		}
	}
}

func TestPruneRequests(t *testing.T) {
	db, _ := openTemp(t)
	ctx := context.Background()
	// settled_at = created_at + 10 for terminal requests.
	commit(t, db, store.Change{Requests: []contract.LeaseRequestRecord{
		request("open-old", contract.RequestQueued, 1),
		request("open-older", contract.RequestStarting, 0),
		request("t100", contract.RequestGranted, 90),
		request("t200", contract.RequestFailed, 190),
		request("t300", contract.RequestCancelled, 290),
		request("t400", contract.RequestGranted, 390),
		request("t500", contract.RequestGranted, 490),
	}})
	ids := func() []string {
		rs, err := db.Requests(ctx, 0)
		if err != nil {
			t.Fatal(err)
		}
		var s []string
		for _, r := range rs {
			s = append(s, r.ID)
		}
		return s
	}

	// By age only: settled before 250 goes, open ones stay however old.
	n, err := db.PruneRequests(ctx, 250, 0)
	if err != nil || n != 2 {
		t.Fatalf("PruneRequests(250, 0) = %d, %v; want 2", n, err)
	}
	if want := []string{"t500", "t400", "t300", "open-old", "open-older"}; !reflect.DeepEqual(ids(), want) {
		t.Errorf("after age prune: %v, want %v", ids(), want)
	}

	// By count: 5 records, keep 4 → the longest-settled terminal one goes.
	n, err = db.PruneRequests(ctx, 0, 4)
	if err != nil || n != 1 {
		t.Fatalf("PruneRequests(0, 4) = %d, %v; want 1", n, err)
	}
	if want := []string{"t500", "t400", "open-old", "open-older"}; !reflect.DeepEqual(ids(), want) {
		t.Errorf("after count prune: %v, want %v", ids(), want)
	}

	// A cap below the number of open requests removes every settled one and
	// no open one.
	n, err = db.PruneRequests(ctx, 0, 1)
	if err != nil || n != 2 {
		t.Fatalf("PruneRequests(0, 1) = %d, %v; want 2", n, err)
	}
	if want := []string{"open-old", "open-older"}; !reflect.DeepEqual(ids(), want) {
		t.Errorf("after tight prune: %v, want %v", ids(), want)
	}
	if s := load(t, db); len(s.Requests) != 2 {
		t.Errorf("open requests after prune = %d, want 2", len(s.Requests))
	}
}

func TestPruneRequestsBothRules(t *testing.T) {
	db, _ := openTemp(t)
	var rs []contract.LeaseRequestRecord
	for i := 0; i < 6; i++ { // settled at 10, 110, ..., 510
		rs = append(rs, request(fmt.Sprintf("t%d", i), contract.RequestGranted, int64(i*100)))
	}
	commit(t, db, store.Change{Requests: rs})
	// Age removes t0, t1; count then trims 4 → 3 by removing t2.
	n, err := db.PruneRequests(context.Background(), 200, 3)
	if err != nil || n != 3 {
		t.Fatalf("PruneRequests(200, 3) = %d, %v; want 3", n, err)
	}
	for id, want := range map[string]bool{"t2": false, "t3": true, "t5": true} {
		if _, ok, _ := db.Request(context.Background(), id); ok != want {
			t.Errorf("%s present = %v, want %v", id, ok, want)
		}
	}
}

func TestPruneEventsKeepsTheNewestByAgeThenCountAndTheSpanCountsThem(t *testing.T) {
	db, _ := openTemp(t)
	ctx := context.Background()
	if s, err := db.EventLogSpan(ctx); err != nil || s != (EventLogSpan{}) {
		t.Fatalf("span of an empty log = %+v, %v; want zero", s, err)
	}
	var in []store.NewEvent
	for i := 0; i < 10; i++ {
		in = append(in, event(fmt.Sprintf("e%d", i), int64(i*100)))
	}
	// e4 was written under a clock that stepped back: older than the
	// cutoff, though newer events than it are not.
	in[4].Timestamp = 50
	commit(t, db, store.Change{Events: in})
	if s, _ := db.EventLogSpan(ctx); s != (EventLogSpan{OldestSeq: 1, OldestTs: 0, LastSeq: 10, Events: 10}) {
		t.Errorf("span of 10 events = %+v", s)
	}

	if n, err := db.PruneEvents(ctx, 0, 0); n != 0 || err != nil {
		t.Errorf("PruneEvents(0, 0) = %d, %v; want a no-op", n, err)
	}
	// Older than 200: e0, e1 and e4 by timestamp; the kept log stays a run
	// of seqs, so e2 and e3 go with them.
	n, err := db.PruneEvents(ctx, 200, 0)
	if err != nil || n != 5 {
		t.Fatalf("PruneEvents(200, 0) = %d, %v; want 5", n, err)
	}
	if s, _ := db.EventLogSpan(ctx); s != (EventLogSpan{OldestSeq: 6, OldestTs: 500, LastSeq: 10, Events: 5}) {
		t.Errorf("span after the age prune = %+v, want seqs 6..10", s)
	}
	n, err = db.PruneEvents(ctx, 550, 3)
	if err != nil || n != 2 {
		t.Fatalf("PruneEvents(550, 3) = %d, %v; want 2 (e5 by age, e6 by count)", n, err)
	}
	got, err := db.Events(ctx, store.EventQuery{})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 || got[0].Seq != 8 || got[2].Seq != 10 {
		t.Errorf("kept %+v, want seqs 8..10", got)
	}
	if n, err := db.PruneEvents(ctx, 550, 3); n != 0 || err != nil {
		t.Errorf("second PruneEvents = %d, %v; want 0", n, err)
	}

	// Emptying the table must not let seqs go back.
	if _, err := db.w.Exec("DELETE FROM events"); err != nil {
		t.Fatal(err)
	}
	if seq, _ := db.LastSeq(ctx); seq != 10 {
		t.Errorf("LastSeq after emptying = %d, want 10", seq)
	}
	if s, _ := db.EventLogSpan(ctx); s != (EventLogSpan{LastSeq: 10}) {
		t.Errorf("span of an emptied log = %+v, want only LastSeq 10", s)
	}
	if got := commit(t, db, store.Change{Events: []store.NewEvent{event("next", 11)}}); got[0].Seq != 11 {
		t.Errorf("next seq = %d, want 11", got[0].Seq)
	}
}

func TestPruneLeases(t *testing.T) {
	db, _ := openTemp(t)
	ctx := context.Background()
	active := lease("active", "d1", 1)
	early := lease("early", "d1", 1)
	early.EndedAt = 100
	late := lease("late", "d1", 1)
	late.EndedAt = 300
	commit(t, db, store.Change{Devices: []store.Device{device("d1", 0)}, Leases: []store.Lease{active, early, late}})

	n, err := db.PruneLeases(ctx, 200)
	if err != nil || n != 1 {
		t.Fatalf("PruneLeases(200) = %d, %v; want 1", n, err)
	}
	if c := count(t, db, "leases"); c != 2 {
		t.Errorf("%d leases left, want 2", c)
	}
	n, err = db.PruneLeases(ctx, 1<<62)
	if err != nil || n != 1 {
		t.Fatalf("PruneLeases(max) = %d, %v; want 1 (late)", n, err)
	}
	if s := load(t, db); len(s.Leases) != 1 || s.Leases[0].ID != "active" {
		t.Errorf("leases = %+v, want active kept", s.Leases)
	}
}

func TestNewerDatabaseRefused(t *testing.T) {
	path := filepath.Join(t.TempDir(), "simlock.db")
	db, err := Open(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	known := userVersion(t, path)

	raw, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := raw.Exec("PRAGMA user_version = 999"); err != nil {
		t.Fatal(err)
	}
	raw.Close()

	db, err = Open(context.Background(), path)
	if err == nil {
		db.Close()
		t.Fatal("Open accepted a database from a newer schema version")
	}
	msg := err.Error()
	if !strings.Contains(msg, "version 999") || !strings.Contains(msg, fmt.Sprintf("version %d", known)) {
		t.Errorf("error %q does not name both versions (999 and %d)", msg, known)
	}
	if v := userVersion(t, path); v != 999 {
		t.Errorf("refused database's user_version changed to %d", v)
	}
}

func TestDurableAcrossClose(t *testing.T) {
	path := filepath.Join(t.TempDir(), "simlock.db")
	db, err := Open(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	c := crashChange()
	commit(t, db, c)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	checkCrashChange(t, openAt(t, path), c)
}

// TestDurableAcrossKill commits in a child process, kills it with SIGKILL
// without letting it close anything, and checks the commit is there.
func TestDurableAcrossKill(t *testing.T) {
	const envPath = "SIMLOCK_STORE_CRASH_CHILD"
	if path := os.Getenv(envPath); path != "" {
		db, err := Open(context.Background(), path)
		if err != nil {
			fmt.Println("open:", err)
			os.Exit(1)
		}
		if _, err := db.Commit(context.Background(), crashChange()); err != nil {
			fmt.Println("commit:", err)
			os.Exit(1)
		}
		fmt.Println("committed")
		// Hold the database open until killed.
		bufio.NewReader(os.Stdin).ReadString('\n')
		os.Exit(1)
	}
	if testing.Short() {
		t.Skip("spawns a process")
	}

	path := filepath.Join(t.TempDir(), "simlock.db")
	cmd := exec.Command(os.Args[0], "-test.run=^TestDurableAcrossKill$")
	cmd.Env = append(os.Environ(), envPath+"="+path)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	defer stdin.Close()
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, _ := bufio.NewReader(stdout).ReadString('\n')
	if strings.TrimSpace(line) != "committed" {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("child said %q", line)
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	// The WAL was never checkpointed: the commit lives only there.
	if _, err := os.Stat(path + "-wal"); err != nil {
		t.Errorf("no WAL left behind by the killed process: %v", err)
	}
	checkCrashChange(t, openAt(t, path), crashChange())
}

func crashChange() store.Change {
	r := request("r1", contract.RequestQueued, 5)
	r.IdempotencyKey = "k1"
	return store.Change{
		Devices:  []store.Device{device("d1", 1)},
		Leases:   []store.Lease{lease("l1", "d1", 2)},
		Requests: []contract.LeaseRequestRecord{r},
		Events:   []store.NewEvent{event("e1", 3), event("e2", 4)},
	}
}

func checkCrashChange(t *testing.T, db *DB, c store.Change) {
	t.Helper()
	s := load(t, db)
	if !reflect.DeepEqual(s.Devices, c.Devices) || !reflect.DeepEqual(s.Leases, c.Leases) ||
		!reflect.DeepEqual(s.Requests, c.Requests) {
		t.Errorf("after reopen:\n got %+v\nwant %+v", s, c)
	}
	evs, err := db.Events(context.Background(), store.EventQuery{})
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != len(c.Events) {
		t.Errorf("after reopen: %d events, want %d", len(evs), len(c.Events))
	}
}

func TestConcurrentUse(t *testing.T) {
	db, _ := openTemp(t)
	ctx := context.Background()
	commit(t, db, store.Change{Devices: []store.Device{device("d1", 0)}})
	const writers, perWriter = 4, 25
	var wg sync.WaitGroup
	errs := make(chan error, writers*perWriter*2)
	seqs := make(chan int64, writers*perWriter)
	for w := 0; w < writers; w++ {
		wg.Add(2)
		go func() {
			defer wg.Done()
			for i := 0; i < perWriter; i++ {
				l := lease(fmt.Sprintf("l%d", w), "d1", int64(i))
				evs, err := db.Commit(ctx, store.Change{Leases: []store.Lease{l}, Events: []store.NewEvent{event(fmt.Sprintf("w%d-%d", w, i), int64(i))}})
				if err != nil {
					errs <- err
					return
				}
				seqs <- evs[0].Seq
			}
		}()
		go func() {
			defer wg.Done()
			for i := 0; i < perWriter; i++ {
				if _, err := db.Load(ctx); err != nil {
					errs <- err
					return
				}
				if _, err := db.Events(ctx, store.EventQuery{Limit: 10}); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	close(seqs)
	for err := range errs {
		t.Error(err)
	}
	seen := map[int64]bool{}
	for s := range seqs {
		if seen[s] {
			t.Errorf("seq %d handed out twice", s)
		}
		seen[s] = true
	}
	if len(seen) != writers*perWriter {
		t.Errorf("%d distinct seqs, want %d", len(seen), writers*perWriter)
	}
	if last, _ := db.LastSeq(ctx); last != writers*perWriter {
		t.Errorf("LastSeq = %d, want %d", last, writers*perWriter)
	}
}

func TestCommitFloor(t *testing.T) {
	db, _ := openTemp(t)
	ctx := context.Background()
	before := load(t, db)
	for i := 0; i < 3; i++ {
		if err := db.CommitFloor(ctx); err != nil {
			t.Fatalf("CommitFloor %d: %v", i, err)
		}
	}
	// The scratch rows are there, but a starting daemon does not see them.
	if n := count(t, db, "leases"); n != 1 {
		t.Errorf("%d lease rows, want the one scratch lease", n)
	}
	if s := load(t, db); !reflect.DeepEqual(s, before) {
		t.Errorf("Load after CommitFloor = %+v, want %+v", s, before)
	}
	evs, err := db.Events(ctx, store.EventQuery{})
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 3 || evs[2].Seq != 3 {
		t.Fatalf("events = %+v, want three with seqs 1..3", evs)
	}
	for _, e := range evs {
		if e.Event != FloorEvent {
			t.Errorf("event %+v, want %s", e, FloorEvent)
		}
	}

	// Pruning may take the ended scratch lease; the next call puts it back.
	if n, err := db.PruneLeases(ctx, 1<<62); err != nil || n != 1 {
		t.Fatalf("PruneLeases = %d, %v; want the scratch lease", n, err)
	}
	if err := db.CommitFloor(ctx); err != nil {
		t.Fatalf("CommitFloor after prune: %v", err)
	}
	if n := count(t, db, "leases"); n != 1 {
		t.Errorf("%d lease rows after prune and CommitFloor, want 1", n)
	}
}

// BenchmarkCommitRenew is the floor of a decision: one lease row updated and
// one event appended, in one transaction on a file database. It times
// CommitFloor, so a benchmark that calls CommitFloor in its own run measures
// the same thing.
func BenchmarkCommitRenew(b *testing.B) {
	db, _ := openTemp(b)
	ctx := context.Background()
	if err := db.CommitFloor(ctx); err != nil { // writes the scratch rows
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if err := db.CommitFloor(ctx); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "tx/s")
}

// BenchmarkCommitGrant measures the commit of a warm grant: the device
// leased, the lease, the request settled with its grant, and three events
// (lease.requested, lease.granted, capacity.changed).
func BenchmarkCommitGrant(b *testing.B) {
	db, _ := openTemp(b)
	ctx := context.Background()
	dev := store.Device{ID: "dev_1", Platform: contract.PlatformIOS, Model: "iPhone 17", OSVersion: "26.1", Driver: "demo", DriverDeviceID: "x", State: contract.DeviceReady, CreatedAt: 1}
	if _, err := db.Commit(ctx, store.Change{Devices: []store.Device{dev}}); err != nil {
		b.Fatal(err)
	}
	payload := json.RawMessage(`{"leaseId":"lse_0123456789abcdef","deviceId":"dev_0123456789abcdef","requester":"agent-1","requestId":"req_0123456789abcdef","source":"warm"}`)
	i := 0
	for b.Loop() {
		i++
		id := fmt.Sprintf("%d", i)
		dev.State = contract.DeviceLeased
		l := store.Lease{LeaseRecord: contract.LeaseRecord{ID: "lse_" + id, DeviceID: dev.ID, RequesterID: "r" + id, OwnerID: "r" + id, GrantedAt: 1, TTLMs: 1, TTLDeadline: 2}}
		g := contract.LeaseGrant{Lease: l.LeaseRecord, Environment: map[string]string{"SIMLOCK_DEMO": "1"}}
		r := contract.LeaseRequestRecord{ID: "req_" + id, RequesterID: "r" + id, OwnerID: "r" + id, State: contract.RequestGranted, Grant: &g, LeaseID: l.ID}
		evs := []store.NewEvent{
			{ID: "evt_a" + id, Timestamp: 1, Event: "lease.requested", Payload: payload},
			{ID: "evt_b" + id, Timestamp: 1, Event: "lease.granted", Payload: payload},
			{ID: "evt_c" + id, Timestamp: 1, Event: "capacity.changed", Payload: payload},
		}
		if _, err := db.Commit(ctx, store.Change{Devices: []store.Device{dev}, Leases: []store.Lease{l}, Requests: []contract.LeaseRequestRecord{r}, Events: evs}); err != nil {
			b.Fatal(err)
		}
	}
}

func TestABeforeWritesOnlyTheColumnsThatChanged(t *testing.T) {
	db, _ := openTemp(t)
	ctx := context.Background()
	d := store.Device{ID: "d1", Platform: contract.PlatformIOS, Model: "iPhone 17", OSVersion: "26.1", Driver: "demo",
		DriverDeviceID: "x", Address: "stored", State: contract.DeviceReady, CreatedAt: 5, StateSince: 5}
	if _, err := db.Commit(ctx, store.Change{Devices: []store.Device{d}}); err != nil {
		t.Fatal(err)
	}
	// The caller's Before says the address is "claimed"; the new version
	// keeps "claimed" and moves the state. Only the state differs, so only
	// the state is written: the stored address stays.
	was := d
	was.Address = "claimed"
	now := was
	now.State, now.StateSince = contract.DeviceLeased, 9
	if _, err := db.Commit(ctx, store.Change{Devices: []store.Device{now}, Before: store.Before{Devices: map[string]store.Device{d.ID: was}}}); err != nil {
		t.Fatal(err)
	}
	got := load(t, db).Devices[0]
	if got.State != contract.DeviceLeased || got.StateSince != 9 || got.Address != "stored" {
		t.Fatalf("stored %+v: want state and stateSince written, the address untouched", got)
	}
	// A Before naming a row that is not stored fails the commit whole.
	ghost := store.Device{ID: "ghost", Platform: contract.PlatformIOS, State: contract.DeviceReady}
	moved := ghost
	moved.State = contract.DeviceShutdown
	_, err := db.Commit(ctx, store.Change{
		Devices: []store.Device{moved}, Before: store.Before{Devices: map[string]store.Device{"ghost": ghost}},
		Events: []store.NewEvent{{ID: "evt_x", Timestamp: 1, Event: "x"}},
	})
	if err == nil {
		t.Fatal("a Before naming an unstored row committed")
	}
	if evs, _ := db.Events(ctx, store.EventQuery{}); len(evs) != 0 {
		t.Fatalf("the failed commit wrote %d events", len(evs))
	}
}

func TestManyEventsInOneCommitGetConsecutiveSeqsInOrder(t *testing.T) {
	db, _ := openTemp(t)
	ctx := context.Background()
	var es []store.NewEvent
	for i := range 37 { // more than one multi-row insert
		es = append(es, store.NewEvent{ID: fmt.Sprintf("evt_%02d", i), Timestamp: int64(i), Event: "x"})
	}
	if _, err := db.Commit(ctx, store.Change{Events: es[:2]}); err != nil {
		t.Fatal(err)
	}
	out, err := db.Commit(ctx, store.Change{Events: es[2:]})
	if err != nil {
		t.Fatal(err)
	}
	stored, _ := db.Events(ctx, store.EventQuery{AfterSeq: 2})
	if len(out) != 35 || len(stored) != 35 {
		t.Fatalf("%d returned, %d stored, want 35", len(out), len(stored))
	}
	for i := range out {
		if out[i].Seq != int64(i+3) || out[i].ID != es[i+2].ID || stored[i].Seq != out[i].Seq || stored[i].ID != out[i].ID {
			t.Fatalf("event %d: returned %s seq %d, stored %s seq %d; want %s seq %d", i, out[i].ID, out[i].Seq, stored[i].ID, stored[i].Seq, es[i+2].ID, i+3)
		}
	}
}

func TestALeasesBindingIsStoredAndLoadedAndAnUnbindingToo(t *testing.T) {
	db, _ := openTemp(t)
	l := lease("l1", "d1", 1)
	l.BoundPID, l.BoundPIDStartedAt = 4242, 1_700_000_000_123
	commit(t, db, store.Change{Devices: []store.Device{device("d1", 1)}, Leases: []store.Lease{l}})
	got := load(t, db).Leases
	if len(got) != 1 || got[0].BoundPID != 4242 || got[0].BoundPIDStartedAt != 1_700_000_000_123 {
		t.Fatalf("loaded %+v, want the lease bound to pid 4242 started at 1700000000123", got)
	}
	// Written as an update of what changed, as the engine writes a renewal.
	was := l
	l.BoundPID, l.BoundPIDStartedAt = 0, 0
	commit(t, db, store.Change{Leases: []store.Lease{l}, Before: store.Before{Leases: map[string]store.Lease{"l1": was}}})
	if got := load(t, db).Leases; len(got) != 1 || got[0].BoundPID != 0 || got[0].BoundPIDStartedAt != 0 {
		t.Errorf("after unbinding, loaded %+v, want no binding", got)
	}
}

// A chosen id is unique only within its owner: two owners' leases of one
// chosen id are stored under their own keys and loaded each with its id
// and key; a lease stored before keys (its chosen id its key) loads as it
// was; and an ended lease's row is never overwritten by a later lease of
// the same chosen id.
func TestLeasesOfOneChosenIDAreStoredUnderTheirKeys(t *testing.T) {
	db, _ := openTemp(t)
	a, b := lease("lse_aaaa", "d1", 1), lease("lse_bbbb", "d2", 2)
	for _, l := range []*store.Lease{&a, &b} {
		l.Key, l.ID, l.IDChosenByRequester = l.ID, "build-42", true
	}
	a.OwnerID, b.OwnerID = "alice", "bob"
	commit(t, db, store.Change{Devices: []store.Device{device("d1", 1), device("d2", 2), device("d3", 3)}, Leases: []store.Lease{a, b}})
	got := load(t, db).Leases
	if len(got) != 2 || got[0] != a || got[1] != b {
		t.Fatalf("loaded %+v, want %+v and %+v", got, a, b)
	}
	// Alice's ends; her next lease of the same chosen id is a new row.
	was := a
	a.EndedAt, a.EndReason = 10, "explicit"
	c := lease("lse_cccc", "d3", 11)
	c.Key, c.ID, c.IDChosenByRequester, c.OwnerID = c.ID, "build-42", true, "alice"
	commit(t, db, store.Change{Leases: []store.Lease{a, c}, Before: store.Before{Leases: map[string]store.Lease{was.Key: was}}})
	if n := count(t, db, "leases"); n != 3 {
		t.Fatalf("%d lease rows, want 3: a chosen id's next lease overwrote the ended one", n)
	}
	if got := load(t, db).Leases; len(got) != 2 || got[0] != b || got[1] != c {
		t.Fatalf("active leases %+v, want bob's and alice's new one", got)
	}
}

// A lease whose chosen id was its primary key before migration 0016 keeps
// it as both its id and its key.
func TestALeaseStoredBeforeKeysKeepsItsChosenID(t *testing.T) {
	path := filepath.Join(t.TempDir(), "simlock.db")
	raw := rawAtSchema(t, path, 15)
	for _, q := range []string{
		`INSERT INTO devices (id, platform, model, os_version, driver, driver_device_id, state, created_at, state_since) VALUES ('d1', 'ios', 'iPhone 17', '26.1', 'demo', 'u1', 'leased', 1, 1)`,
		`INSERT INTO leases (id, device_id, requester_id, owner_id, granted_at, ttl_ms, last_renewed_at, ttl_deadline, id_chosen) VALUES ('old-7', 'd1', 'carol', 'carol', 12, 1000, 12, 1012, 1)`,
		`PRAGMA user_version = 15`,
	} {
		if _, err := raw.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	raw.Close()
	db := openAt(t, path)
	got := load(t, db).Leases
	if len(got) != 1 || got[0].ID != "old-7" || got[0].Key != "" || !got[0].IDChosenByRequester || got[0].UniqueKey() != "old-7" {
		t.Fatalf("a lease stored before keys loads as %+v, want id old-7, chosen, its own key", got)
	}
}

func TestALeaseWhoseIDItsRequesterChoseIsLoadedSayingSo(t *testing.T) {
	db, _ := openTemp(t)
	chosen, made := lease("ui-tests-42", "d1", 1), lease("l2", "d2", 2)
	chosen.IDChosenByRequester = true
	commit(t, db, store.Change{Devices: []store.Device{device("d1", 1), device("d2", 2)}, Leases: []store.Lease{chosen, made}})
	got := map[string]bool{}
	for _, l := range load(t, db).Leases {
		got[l.ID] = l.IDChosenByRequester
	}
	if len(got) != 2 || !got["ui-tests-42"] || got["l2"] {
		t.Fatalf("loaded chosen-id flags %v, want ui-tests-42 chosen and l2 not", got)
	}
}
