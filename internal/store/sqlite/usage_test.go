package sqlite

import (
	"container/heap"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/store"
	"github.com/simlock/simlock/internal/usage"
)

// u0 is a whole hour.
const u0 = 1_800_000_000_000

type obj = map[string]any

func ev(id string, ts int64, name string, p obj) store.NewEvent {
	b, _ := json.Marshal(p)
	return store.NewEvent{ID: id, Timestamp: ts, Event: name, Payload: b}
}

func relayedEv(worker string, seq, ts int64, name string, p obj) contract.Event {
	p["workerId"] = worker
	e := ev(fmt.Sprintf("evt_%s_%d", worker, seq), ts, name, p)
	return contract.Event{Seq: seq, ID: e.ID, Timestamp: ts, Event: name, Payload: e.Payload}
}

func requestedP(id, platform string) obj {
	return obj{"requestId": id, "requester": "agent", "requestSpec": obj{"platform": platform}}
}
func grantedP(req, lease, source string) obj {
	return obj{"requestId": req, "leaseId": lease, "deviceId": "dev_" + lease, "source": source}
}
func rejectedP(req, platform, reason string) obj {
	return obj{"requestId": req, "requestSpec": obj{"platform": platform}, "reason": reason}
}
func endedP(lease string) obj { return obj{"leaseId": lease, "deviceId": "dev_" + lease} }

// usageOf reads the rollups of w as the daemon's usage.get does.
func usageOf(t testing.TB, db *DB, w usage.Window) contract.UsageResult {
	t.Helper()
	q := usage.NewQuery(w)
	if err := db.UsageRows(context.Background(), max(w.From, w.CoversFrom), w.To, q); err != nil {
		t.Fatalf("UsageRows: %v", err)
	}
	return q.Result()
}

func hourWindow(from int64, hours int, gateway bool) usage.Window {
	return usage.Window{From: from, To: from + int64(hours)*usage.HourMs, Bucket: "1h", Step: time.Hour, Gateway: gateway}
}

func forwardedP(id, platform string) obj {
	p := requestedP(id, platform)
	p["requester"] = contract.GatewayRequesterPrefix + "ins_gw:agent"
	return p
}

// recordedP is a gateway's grant.recorded of its request gwReq, granted
// with worker's lease, waitMs after the request, the lease granted on the
// worker at grantedAt.
func recordedP(gwReq, worker, lease, source, platform string, waitMs, grantedAt int64) obj {
	return obj{"requestId": gwReq, "leaseId": worker + "." + lease, "workerId": worker, "workerLeaseId": lease, "source": source,
		"platform": platform, "waitMs": waitMs, "grantedAt": grantedAt}
}

func TestTheRollupsAreFoldedAsEventsCommitAndAsAGatewayRelaysThem(t *testing.T) {
	db, _ := openTemp(t)
	ctx := context.Background()
	// The gateway's own fleet queue: g1 refused before any worker took
	// it; g2 and g3 dispatched to w1 and w2.
	commit(t, db, store.Change{Events: []store.NewEvent{
		ev("e1", u0, "lease.requested", requestedP("g1", "ios")),
		ev("e2", u0, "capacity.changed", obj{}),
		ev("e3", u0, "lease.requested", requestedP("g2", "ios")),
		ev("e4", u0, "lease.requested", requestedP("g3", "android")),
	}})
	commit(t, db, store.Change{Events: []store.NewEvent{ev("e5", u0+10, "lease.rejected", rejectedP("g1", "ios", "no-wait")),
		ev("e6", u0+50, "request.dispatched", obj{"requestId": "g2", "workerId": "w1"}),
		ev("e7", u0+60, "request.dispatched", obj{"requestId": "g3", "workerId": "w2"})}})
	for _, id := range []string{"w1", "w2"} {
		if err := db.PutWorker(ctx, store.Worker{ID: id, Label: id}); err != nil {
			t.Fatal(err)
		}
	}
	relay := func(worker string, evs []contract.Event, last int64) {
		t.Helper()
		if _, err := db.RelayEvents(ctx, worker, evs, last); err != nil {
			t.Fatalf("RelayEvents: %v", err)
		}
	}
	// w1's lease, relayed in two batches, the first sent again; the
	// gateway's grant record of it committed between. w2's grant, and a
	// grant w2 relays that the gateway never made.
	relay("w1", []contract.Event{
		relayedEv("w1", 1, u0+100, "lease.requested", forwardedP("r1", "ios")),
		relayedEv("w1", 2, u0+2100, "lease.granted", grantedP("r1", "l1", "booted")),
	}, 2)
	commit(t, db, store.Change{Events: []store.NewEvent{ev("e8", u0+2110, "grant.recorded", recordedP("g2", "w1", "l1", "booted", "ios", 2000, u0+2100))},
		Grants: []store.Grant{{Key: "w1.l1", WorkerID: "w1", WorkerLeaseID: "l1", DeviceID: "dev_l1", OwnerID: "o", RequesterID: "agent", RequestID: "g2"}}})
	relay("w2", []contract.Event{relayedEv("w2", 1, u0+200, "lease.requested", forwardedP("r1", "android"))}, 1)
	relay("w1", []contract.Event{
		relayedEv("w1", 1, u0+100, "lease.requested", forwardedP("r1", "ios")),
		relayedEv("w1", 2, u0+2100, "lease.granted", grantedP("r1", "l1", "booted")),
		relayedEv("w1", 3, u0+5100, "lease.released", endedP("l1")),
	}, 3)
	relay("w2", []contract.Event{relayedEv("w2", 2, u0+700, "lease.granted", grantedP("r1", "l1", "warm"))}, 2)
	commit(t, db, store.Change{Events: []store.NewEvent{ev("e9", u0+710, "grant.recorded", recordedP("g3", "w2", "l1", "warm", "android", 500, u0+700))}})
	relay("w2", []contract.Event{relayedEv("w2", 3, u0+800, "lease.granted", grantedP("r1", "l_fake", "warm"))}, 3)

	w := usage.Window{From: u0, To: u0 + 60000, Bucket: "1m", Step: time.Minute, CoversFrom: u0, Gateway: true}
	got := usageOf(t, db, w)
	wantTotals := contract.UsageTotals{Requests: 3, Granted: map[string]int{"booted": 1, "warm": 1}, Rejected: map[string]int{"no-wait": 1}}
	if !reflect.DeepEqual(got.Totals, wantTotals) {
		t.Errorf("totals = %+v, want %+v (w1's batch sent again folded once, w2's unrecorded grant not at all)", got.Totals, wantTotals)
	}
	pc := func(p50, p90 int64, n int) contract.Percentiles {
		return contract.Percentiles{P50: p50, P90: p90, P99: p90, Count: n}
	}
	if want := (contract.UsagePercentiles{Wait: pc(500, 2000, 2), TimeToDevice: pc(2000, 2000, 1), Hold: pc(3000, 3000, 1), Turnaround: pc(5000, 5000, 1)}); got.Percentiles != want {
		t.Errorf("percentiles = %+v, want %+v", got.Percentiles, want)
	}
	if w1, w2 := got.ByWorker["w1"], got.ByWorker["w2"]; w1.Totals.Requests != 1 || w1.Percentiles.Hold.Count != 1 ||
		w2.Totals.Requests != 1 || w2.Percentiles.Wait != pc(500, 500, 1) || len(got.ByWorker) != 2 {
		t.Errorf("byWorker = %+v, want w1's lease with its hold and w2's with its wait of 500", got.ByWorker)
	}
	if ios := got.ByPlatform["ios"].Totals; ios.Requests != 2 || ios.Rejected["no-wait"] != 1 {
		t.Errorf("byPlatform.ios.totals = %+v, want g1 and w1's r1, g1 refused", ios)
	}
	if n := count(t, db, "usage_open"); n != 1 {
		t.Errorf("%d open entries, want 1: w2's lease", n)
	}
}

func TestACommitThatFailsFoldsNothing(t *testing.T) {
	db, _ := openTemp(t)
	ghost := store.Device{ID: "ghost", Platform: contract.PlatformIOS, State: contract.DeviceReady}
	moved := ghost
	moved.State = contract.DeviceLeased
	_, err := db.Commit(context.Background(), store.Change{
		Devices: []store.Device{moved}, Before: store.Before{Devices: map[string]store.Device{"ghost": ghost}},
		Events: []store.NewEvent{ev("e1", u0, "lease.requested", requestedP("r1", "ios"))},
	})
	if err == nil {
		t.Fatal("a Before naming an unstored row committed")
	}
	for _, table := range []string{"usage_minutes", "usage_open"} {
		if n := count(t, db, table); n != 0 {
			t.Errorf("the failed commit left %d rows in %s", n, table)
		}
	}
}

// aDayOfLeases commits, every ten minutes of hours hours from u0, an iOS
// lease: asked for, granted 1 s later (warm), released 5 min after that.
// One lease granted at u0+1s is released only by the caller.
func aDayOfLeases(t *testing.T, db *DB, hours int) {
	t.Helper()
	commit(t, db, store.Change{Events: []store.NewEvent{
		ev("x1", u0, "lease.requested", requestedP("rx", "ios")),
		ev("x2", u0+1000, "lease.granted", grantedP("rx", "lx", "warm")),
	}})
	for i := range hours * 6 {
		at := u0 + int64(i)*600_000 + 30_000
		id := fmt.Sprint(i)
		commit(t, db, store.Change{Events: []store.NewEvent{
			ev("a"+id, at, "lease.requested", requestedP("r"+id, "ios")),
			ev("b"+id, at+1000, "lease.granted", grantedP("r"+id, "l"+id, "warm")),
		}})
		commit(t, db, store.Change{Events: []store.NewEvent{ev("c"+id, at+301_000, "lease.released", endedP("l"+id))}})
	}
}

func minutesBefore(t *testing.T, db *DB, before int64) int {
	t.Helper()
	var n int
	if err := db.r.QueryRow(`SELECT count(*) FROM usage_minutes WHERE minute < ?`, before).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func TestPruningGathersHoursAndKeepsTheRollupsToTheKeptHistory(t *testing.T) {
	db, _ := openTemp(t)
	ctx := context.Background()
	aDayOfLeases(t, db, 3)
	all := hourWindow(u0, 3, false)
	want := usageOf(t, db, all)
	if want.Totals.Requests != 19 || want.Percentiles.Hold.Count != 18 {
		t.Fatalf("before pruning: totals %+v holds %d, want 19 requests and 18 holds", want.Totals, want.Percentiles.Hold.Count)
	}

	// Nothing to prune: the first two hours (before the newest event's)
	// are gathered, and read the same.
	if _, err := db.PruneEvents(ctx, 0, 0); err != nil {
		t.Fatal(err)
	}
	minutes, hours := minutesBefore(t, db, u0+2*usage.HourMs), count(t, db, "usage_hours")
	if minutes != 0 || hours != 2 {
		t.Errorf("after the pass: %d minute rows before the last hour, %d hour rows; want 0 and 2", minutes, hours)
	}
	if got := usageOf(t, db, all); !reflect.DeepEqual(got, want) {
		t.Errorf("gathered: %+v\nwant as before: %+v", got, want)
	}

	// Prune the first hour and a half: the history starts at the minute
	// of the oldest event kept, and nothing of the rollups is older.
	if _, err := db.PruneEvents(ctx, u0+90*60_000, 0); err != nil {
		t.Fatal(err)
	}
	span, err := db.EventLogSpan(ctx)
	if err != nil {
		t.Fatal(err)
	}
	covers := contract.UsageMinute(span.OldestTs)
	for _, c := range []struct{ what, q string }{
		{"minute rows", `SELECT count(*) FROM usage_minutes WHERE minute < ?`},
		{"hour rows", fmt.Sprintf(`SELECT count(*) FROM usage_hours WHERE hour + %d <= ?`, usage.HourMs)},
		{"open entries", `SELECT count(*) FROM usage_open WHERE at < ?`},
	} {
		var n int
		if err := db.r.QueryRow(c.q, covers).Scan(&n); err != nil || n != 0 {
			t.Errorf("%d %s before the history's start (%v)", n, c.what, err)
		}
	}
	kept := all
	kept.CoversFrom = covers
	after := usageOf(t, db, kept)
	if !after.Partial || after.CoversFrom != covers || after.Totals.Requests != 9 {
		t.Errorf("after pruning: partial %v coversFrom %d requests %d; want true, %d, 9 (from 01:30:30)", after.Partial, after.CoversFrom, after.Totals.Requests, covers)
	}
	// lx was granted before the history: its end has no hold.
	commit(t, db, store.Change{Events: []store.NewEvent{ev("x3", u0+3*usage.HourMs-1000, "lease.released", endedP("lx"))}})
	if got := usageOf(t, db, kept); got.Percentiles.Hold.Count != after.Percentiles.Hold.Count {
		t.Errorf("lx's end counted a hold (%d, want %d): its grant was pruned", got.Percentiles.Hold.Count, after.Percentiles.Hold.Count)
	}

	// A request that reaches the rollup late, into a gathered hour (a
	// worker's relayed after a reconnect), is counted, and gathered onto
	// the hour's row.
	commit(t, db, store.Change{Events: []store.NewEvent{ev("late", u0+100*60_000, "lease.requested", requestedP("rl", "ios"))}})
	late := usageOf(t, db, kept)
	if late.Totals.Requests != after.Totals.Requests+1 {
		t.Errorf("with the late request: %d requests, want %d", late.Totals.Requests, after.Totals.Requests+1)
	}
	if _, err := db.PruneEvents(ctx, 0, 0); err != nil {
		t.Fatal(err)
	}
	if n := count(t, db, "usage_minutes"); n == 0 || minutesBefore(t, db, u0+2*usage.HourMs) != 0 {
		t.Errorf("the late minute was not gathered onto its hour")
	}
	if got := usageOf(t, db, kept); !reflect.DeepEqual(got, late) {
		t.Errorf("the late request gathered: %+v\nwant as before: %+v", got, late)
	}

	// An empty log keeps no rollups.
	if _, err := db.PruneEvents(ctx, 1<<62, 0); err != nil {
		t.Fatal(err)
	}
	for _, table := range []string{"usage_minutes", "usage_hours", "usage_open"} {
		if n := count(t, db, table); n != 0 {
			t.Errorf("an empty log left %d rows in %s", n, table)
		}
	}
}

// TestMigrationFourteenFoldsTheEventsAlreadyStored builds a database at
// schema 13 holding more than a backfill page of events, and opens it: the
// rollups it builds are those of the same events committed since the
// start.
func TestMigrationFourteenFoldsTheEventsAlreadyStored(t *testing.T) {
	path := filepath.Join(t.TempDir(), "simlock.db")
	raw := rawAtSchema(t, path, 13)
	var evs []store.NewEvent
	g := newLeaseLog(7, u0, 2*time.Second)
	for len(evs) < 2*backfillPage+1000 {
		evs = append(evs, g.next())
	}
	tx, err := raw.Begin()
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range evs {
		if _, err := tx.Exec(`INSERT INTO events (id, timestamp, event, payload) VALUES (?, ?, ?, ?)`, e.ID, e.Timestamp, e.Event, string(e.Payload)); err != nil {
			t.Fatal(err)
		}
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if _, err := raw.Exec(`PRAGMA user_version = 13`); err != nil {
		t.Fatal(err)
	}
	raw.Close()

	migrated := openAt(t, path)
	fresh, _ := openTemp(t)
	for i := 0; i < len(evs); i += 100 {
		commit(t, fresh, store.Change{Events: evs[i:min(i+100, len(evs))]})
	}
	w := hourWindow(u0, 12, false)
	got, want := usageOf(t, migrated, w), usageOf(t, fresh, w)
	if !reflect.DeepEqual(got, want) {
		t.Errorf("the migrated database's figures: totals %+v, percentiles %+v\nwant those of the events committed: %+v, %+v", got.Totals, got.Percentiles, want.Totals, want.Percentiles)
	}
	if want.Totals.Requests < 1000 || want.Percentiles.Turnaround.Count < 1000 {
		t.Errorf("the log folded %+v, want thousands of leases", want.Totals)
	}
	openRows := func(db *DB) []string {
		rows, err := db.r.Query(`SELECT worker, kind, id, at, requested, platform, dispatched FROM usage_open ORDER BY worker, kind, id`)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		var out []string
		for rows.Next() {
			var w, k, id, p string
			var at, req int64
			var d bool
			rows.Scan(&w, &k, &id, &at, &req, &p, &d)
			out = append(out, fmt.Sprint(w, k, id, at, req, p, d))
		}
		return out
	}
	if a, b := openRows(migrated), openRows(fresh); !reflect.DeepEqual(a, b) {
		t.Errorf("%d open entries after the backfill, want %d, those of the events committed", len(a), len(b))
	}
	if n := count(t, migrated, "usage_backfill"); n != 0 {
		t.Errorf("usage_backfill holds %d rows after the backfill, want none", n)
	}
}

// leaseLog makes the events of a busy daemon's log, in time order: every
// every, a request on one of two platforms that is refused (one in ten:
// no-wait, or one in a hundred timed out), or granted after a wait of up to
// a minute from a source that rotates, and released or expired after a
// hold of up to half an hour; each lease's device is then reclaimed (an
// event the figures do not read).
type leaseLog struct {
	rng     *rand.Rand
	at      int64
	every   int64
	n       int
	pending eventHeap
}

func newLeaseLog(seed uint64, from int64, every time.Duration) *leaseLog {
	return &leaseLog{rng: rand.New(rand.NewPCG(seed, seed)), at: from, every: every.Milliseconds()}
}

type eventHeap []store.NewEvent

func (h eventHeap) Len() int           { return len(h) }
func (h eventHeap) Less(i, j int) bool { return h[i].Timestamp < h[j].Timestamp }
func (h eventHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *eventHeap) Push(x any)        { *h = append(*h, x.(store.NewEvent)) }
func (h *eventHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// next is the log's next event.
func (g *leaseLog) next() store.NewEvent {
	for len(g.pending) == 0 || g.pending[0].Timestamp >= g.at {
		g.cycle()
	}
	return heap.Pop(&g.pending).(store.NewEvent)
}

func (g *leaseLog) cycle() {
	g.n++
	id := fmt.Sprintf("%016x", g.n)
	platform := []string{"ios", "android"}[g.rng.IntN(2)]
	t := g.at
	g.at += g.every
	// Payloads as the daemon writes them, spelled out: encoding a
	// million maps would be most of the build.
	push := func(suffix string, at int64, name, payload string) {
		heap.Push(&g.pending, store.NewEvent{ID: "evt_" + suffix + id, Timestamp: at, Event: name, Payload: json.RawMessage(payload)})
	}
	spec := `"requestId":"req_` + id + `","requester":"agent-` + id[12:] + `","requestSpec":{"platform":"` + platform + `"}`
	push("a", t, "lease.requested", `{`+spec+`,"waitPolicy":{"noWait":false,"ttlMs":900000}}`)
	switch r := g.rng.IntN(100); {
	case r < 9:
		push("b", t, "lease.rejected", `{`+spec+`,"reason":"no-wait","code":"NO_CAPACITY"}`)
		return
	case r < 10:
		push("b", t+60_000, "lease.rejected", `{`+spec+`,"reason":"timeout","code":"QUEUE_TIMEOUT"}`)
		return
	}
	granted := t + g.rng.Int64N(60_000)
	ended := granted + 1 + g.rng.Int64N(1_800_000)
	lease := `"leaseId":"lse_` + id + `","deviceId":"dev_` + id + `"`
	push("b", granted, "lease.granted", `{`+lease+`,"requester":"agent","requestId":"req_`+id+`","source":"`+[]string{"warm", "booted", "provisioned"}[g.n%3]+`"}`)
	end := "lease.released"
	if g.n%7 == 0 {
		end = "lease.expired"
	}
	push("c", ended, end, `{`+lease+`,"ownerId":"agent","reason":"explicit"}`)
	push("d", ended+1000, "device.reclaimed", `{"deviceId":"dev_`+id+`","strategy":"erase","duration":1000}`)
}

// BenchmarkUsage30Days times a usage query over 30 days of a log of
// 1,000,000 events (about 270,000 leases on two platforms), as the daemon's
// usage.get reads it: the log's span, then the rollup rows into a
// usage.Query, and its result. The log is committed through Commit, 5,000
// events at a time, and the pruning pass gathers its hours, before the
// timing starts (tens of seconds).
func BenchmarkUsage30Days(b *testing.B) {
	if testing.Short() {
		b.Skip("builds a log of a million events")
	}
	const events, perCommit = 1_000_000, 5000
	const days = 30
	db, _ := openTemp(b)
	ctx := context.Background()
	start := int64(u0 - days*24*usage.HourMs)
	// About 3.8 events a request: 30 days hold a million.
	g := newLeaseLog(1, start, days*24*time.Hour*38/(events*10))
	batch := make([]store.NewEvent, 0, perCommit)
	for i := 0; i < events; i += perCommit {
		batch = batch[:0]
		for range perCommit {
			batch = append(batch, g.next())
		}
		if _, err := db.Commit(ctx, store.Change{Events: batch}); err != nil {
			b.Fatal(err)
		}
	}
	if _, err := db.PruneEvents(ctx, 0, 0); err != nil {
		b.Fatal(err)
	}
	end := contract.UsageMinute(batch[len(batch)-1].Timestamp) + contract.UsageMinuteMs
	in := contract.UsageGetInput{From: end - days*24*usage.HourMs, To: end}
	var res contract.UsageResult
	for b.Loop() {
		from, to, bucket, err := in.Window(end)
		if err != nil {
			b.Fatal(err)
		}
		step, _ := contract.UsageBucketDuration(bucket)
		span, err := db.EventLogSpan(ctx)
		if err != nil {
			b.Fatal(err)
		}
		covers := contract.UsageMinute(span.OldestTs)
		q := usage.NewQuery(usage.Window{From: from, To: to, Bucket: bucket, Step: step, CoversFrom: covers})
		if err := db.UsageRows(ctx, max(from, covers), to, q); err != nil {
			b.Fatal(err)
		}
		res = q.Result()
	}
	if span, _ := db.EventLogSpan(ctx); span.Events != events {
		b.Fatalf("the log holds %d events, want %d", span.Events, events)
	}
	b.ReportMetric(float64(res.Totals.Requests), "requests")
	b.ReportMetric(float64(res.Percentiles.Turnaround.Count), "leases")
}

// A busy minute's cell is rows of at most usage.PartBytes, however many
// commits append to it (one growing row was rewritten whole by each, onto
// overflow pages past about a kilobyte), and reads as the one cell it is:
// in the minutes, after a restart that forgot the rows, and gathered into
// its hour.
func TestABusyMinutesCellStaysInSmallRowsAndReadsWhole(t *testing.T) {
	db, path := openTemp(t)
	ctx := context.Background()
	const leases = 300
	busyMinute := func(db *DB, from int) {
		for i := from; i < from+leases; i++ {
			at := u0 + int64(i)*10 // all within the minute at u0
			id := fmt.Sprint(i)
			commit(t, db, store.Change{Events: []store.NewEvent{
				ev("a"+id, at, "lease.requested", requestedP("r"+id, "ios")),
				ev("b"+id, at+1, "lease.granted", grantedP("r"+id, "l"+id, "warm")),
			}})
			commit(t, db, store.Change{Events: []store.NewEvent{ev("c"+id, at+2, "lease.released", endedP("l"+id))}})
		}
	}
	cell := func(db *DB) (rows, largest, total int) {
		t.Helper()
		if err := db.r.QueryRow(`SELECT count(*), max(length(records)), sum(length(records)) FROM usage_minutes WHERE minute = ?`, u0).Scan(&rows, &largest, &total); err != nil {
			t.Fatal(err)
		}
		return rows, largest, total
	}
	window := hourWindow(u0, 1, false)

	busyMinute(db, 0)
	rows, largest, total := cell(db)
	if largest > usage.PartBytes || rows < total/usage.PartBytes {
		t.Errorf("the cell is %d rows, the largest %d bytes, %d in all; want rows of at most %d bytes", rows, largest, total, usage.PartBytes)
	}
	if u := usageOf(t, db, window); u.Totals.Requests != leases || u.Percentiles.Hold.Count != leases {
		t.Fatalf("read from the cell's rows: %d requests, %d holds; want %d each", u.Totals.Requests, u.Percentiles.Hold.Count, leases)
	}

	db.Close()
	db = openAt(t, path)
	busyMinute(db, leases)
	if _, largest, _ := cell(db); largest > usage.PartBytes {
		t.Errorf("after a restart the largest row of the cell is %d bytes, want at most %d", largest, usage.PartBytes)
	}
	want := usageOf(t, db, window)
	if want.Totals.Requests != 2*leases || want.Percentiles.Hold.Count != 2*leases {
		t.Fatalf("after a restart: %d requests, %d holds; want %d each", want.Totals.Requests, want.Percentiles.Hold.Count, 2*leases)
	}

	// An event two hours on closes the hour: the pass gathers the cell's
	// rows into its hour row, which reads the same.
	commit(t, db, store.Change{Events: []store.NewEvent{ev("late", u0+2*usage.HourMs, "lease.requested", requestedP("rl", "ios"))}})
	if _, err := db.PruneEvents(ctx, 0, 0); err != nil {
		t.Fatal(err)
	}
	if n := minutesBefore(t, db, u0+usage.HourMs); n != 0 {
		t.Errorf("%d minute rows left in the gathered hour", n)
	}
	if got := usageOf(t, db, window); !reflect.DeepEqual(got, want) {
		t.Errorf("gathered: %+v\nwant as before: %+v", got, want)
	}
}

// Migration 18 keeps a database's minute cells: each becomes its cell's
// row of part 0, read as before, and the commits after it append to rows
// of their own.
func TestMigrationEighteenKeepsTheMinuteCells(t *testing.T) {
	fresh, freshPath := openTemp(t)
	aDayOfLeases(t, fresh, 2)
	fresh.Close()

	path := filepath.Join(t.TempDir(), "simlock.db")
	raw := rawAtSchema(t, path, 17)
	raw.SetMaxOpenConns(1) // ATTACH is the connection's
	for _, q := range []string{
		`ATTACH DATABASE '` + freshPath + `' AS f`,
		`INSERT INTO events SELECT * FROM f.events`,
		`INSERT INTO usage_minutes (minute, worker, platform, records) SELECT minute, worker, platform, records FROM f.usage_minutes`,
		`INSERT INTO usage_open SELECT * FROM f.usage_open`,
		`PRAGMA user_version = 17`,
	} {
		if _, err := raw.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	var cells int
	if err := raw.QueryRow(`SELECT count(*) FROM usage_minutes`).Scan(&cells); err != nil || cells < 10 {
		t.Fatalf("%d minute cells at schema 17 (%v), want the day's", cells, err)
	}
	raw.Close()

	fresh = openAt(t, freshPath)
	migrated := openAt(t, path)
	w := hourWindow(u0, 2, false)
	if got, want := usageOf(t, migrated, w), usageOf(t, fresh, w); !reflect.DeepEqual(got, want) {
		t.Errorf("after the migration: %+v\nwant as before it: %+v", got, want)
	}
	var parts, zero int
	if err := migrated.r.QueryRow(`SELECT count(*), count(*) FILTER (WHERE part = 0) FROM usage_minutes`).Scan(&parts, &zero); err != nil || parts != cells || zero != cells {
		t.Errorf("after the migration: %d rows, %d of part 0 (%v); want %d, all of part 0", parts, zero, err, cells)
	}
	commit(t, migrated, store.Change{Events: []store.NewEvent{ev("late", u0+1000, "lease.requested", requestedP("late", "ios"))}})
	if u := usageOf(t, migrated, w); u.Totals.Requests != usageOf(t, fresh, w).Totals.Requests+1 {
		t.Errorf("a commit after the migration: %d requests, want one more than the %d before", u.Totals.Requests, usageOf(t, fresh, w).Totals.Requests)
	}
}
