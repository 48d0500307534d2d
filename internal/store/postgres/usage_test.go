package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/store"
	"github.com/simlock/simlock/internal/store/pgtest"
	"github.com/simlock/simlock/internal/usage"
)

// A database migrated to the rollups with events already in its log (more
// than a backfill page) folds them at Open: its figures are those of the
// same events folded as they committed.
func TestMigrationTwoFoldsTheEventsAlreadyStored(t *testing.T) {
	ctx := context.Background()
	url := pgtest.Start(t).Database(t)
	db := openUsage(t, url)
	var evs []store.NewEvent
	for i := range backfillPage/2 + 100 { // two events a lease: more than a page
		at := usageT0 + int64(i)*1000
		evs = append(evs,
			usageEvent(fmt.Sprint("q", i), at, contract.EvLeaseRequested, map[string]any{"requestId": fmt.Sprint("r", i), "requestSpec": map[string]any{"platform": "ios"}}),
			usageEvent(fmt.Sprint("g", i), at+500, contract.EvLeaseGranted, map[string]any{"requestId": fmt.Sprint("r", i), "leaseId": fmt.Sprint("l", i), "source": "warm"}))
	}
	if _, err := db.Commit(ctx, store.Change{Events: evs}); err != nil {
		t.Fatal(err)
	}
	figures := func(db *DB) contract.UsageResult { return figuresOf(t, db, usageWindow(2)) }
	want := figures(db)
	if want.Totals.Requests != len(evs)/2 || want.Percentiles.Wait.Count != len(evs)/2 {
		t.Fatalf("the figures as committed: %+v, want %d requests and waits", want.Totals, len(evs)/2)
	}
	// Back to schema 1, as a database written before the rollups.
	again := downgradeAndOpen(t, db, url, `DROP TABLE usage_minutes, usage_hours, usage_open, usage_backfill, fleet_identity; ALTER TABLE events DROP COLUMN term; ALTER TABLE gateway_grants DROP COLUMN term; ALTER TABLE gateway_grants DROP COLUMN platform; UPDATE schema_version SET version = 1`)
	if got := figures(again); !reflect.DeepEqual(got, want) {
		t.Errorf("the figures after the backfill:\n%+v\nwant those of the events folded as they committed:\n%+v", got, want)
	}
	var left int
	if err := again.pool.QueryRow(ctx, `SELECT count(*) FROM usage_backfill`).Scan(&left); err != nil || left != 0 {
		t.Errorf("usage_backfill holds %d rows (%v) after the backfill, want none", left, err)
	}
}

// A busy minute's cell is rows of at most usage.PartBytes, however many
// commits append to it (one growing row got a new version of all of it in
// each), and reads as the one cell it is: in the minutes, from a second
// store that does not know the rows, and gathered into its hour.
func TestABusyMinutesCellStaysInSmallRowsAndReadsWhole(t *testing.T) {
	ctx := context.Background()
	url := pgtest.Start(t).Database(t)
	db := openUsage(t, url)
	const u0, leases = usageT0, 200
	event := usageEvent
	busyMinute := func(db *DB, from int) {
		t.Helper()
		for i := from; i < from+leases; i++ {
			at := u0 + int64(i)*10 // all within the minute at u0
			id := fmt.Sprint(i)
			for _, evs := range [][]store.NewEvent{{
				event("a"+id, at, contract.EvLeaseRequested, map[string]any{"requestId": "r" + id, "requester": "agent", "requestSpec": map[string]any{"platform": "ios"}}),
				event("b"+id, at+1, contract.EvLeaseGranted, map[string]any{"requestId": "r" + id, "leaseId": "l" + id, "deviceId": "d" + id, "source": "warm"}),
			}, {
				event("c"+id, at+2, contract.EvLeaseReleased, map[string]any{"leaseId": "l" + id, "deviceId": "d" + id}),
			}} {
				if _, err := db.Commit(ctx, store.Change{Events: evs}); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	cell := func() (rows, largest, total int) {
		t.Helper()
		if err := db.pool.QueryRow(ctx, `SELECT count(*), max(length(records)), sum(length(records)) FROM usage_minutes WHERE minute = $1`, u0).Scan(&rows, &largest, &total); err != nil {
			t.Fatal(err)
		}
		return rows, largest, total
	}
	figures := func(db *DB) contract.UsageResult { return figuresOf(t, db, usageWindow(1)) }

	busyMinute(db, 0)
	rows, largest, total := cell()
	if largest > usage.PartBytes || rows < total/usage.PartBytes {
		t.Errorf("the cell is %d rows, the largest %d bytes, %d in all; want rows of at most %d bytes", rows, largest, total, usage.PartBytes)
	}
	if u := figures(db); u.Totals.Requests != leases || u.Percentiles.Hold.Count != leases {
		t.Fatalf("read from the cell's rows: %d requests, %d holds; want %d each", u.Totals.Requests, u.Percentiles.Hold.Count, leases)
	}

	// A second store on the database (a replica that leads next) knows
	// none of the rows: it starts its own, and the cell reads whole.
	other := openUsage(t, url)
	busyMinute(other, leases)
	if _, largest, _ := cell(); largest > usage.PartBytes {
		t.Errorf("after a second store's commits the largest row of the cell is %d bytes, want at most %d", largest, usage.PartBytes)
	}
	want := figures(other)
	if want.Totals.Requests != 2*leases || want.Percentiles.Hold.Count != 2*leases {
		t.Fatalf("after a second store's commits: %d requests, %d holds; want %d each", want.Totals.Requests, want.Percentiles.Hold.Count, 2*leases)
	}

	// An event two hours on closes the hour: the pass gathers the cell's
	// rows into its hour row, which reads the same.
	if _, err := db.Commit(ctx, store.Change{Events: []store.NewEvent{event("late", u0+2*usage.HourMs, contract.EvLeaseRequested,
		map[string]any{"requestId": "rl", "requester": "agent", "requestSpec": map[string]any{"platform": "ios"}})}}); err != nil {
		t.Fatal(err)
	}
	if _, err := db.PruneEvents(ctx, 0, 0); err != nil {
		t.Fatal(err)
	}
	var left int
	if err := db.pool.QueryRow(ctx, `SELECT count(*) FROM usage_minutes WHERE minute < $1`, u0+usage.HourMs).Scan(&left); err != nil || left != 0 {
		t.Errorf("%d minute rows left in the gathered hour (%v)", left, err)
	}
	if got := figures(db); !reflect.DeepEqual(got, want) {
		t.Errorf("gathered: %+v\nwant as before: %+v", got, want)
	}
}

// Migration 5 keeps the cells there were, as part 0 of each.
func TestMigrationFiveKeepsTheMinuteCells(t *testing.T) {
	ctx := context.Background()
	url := pgtest.Start(t).Database(t)
	db := openUsage(t, url)
	if _, err := db.Commit(ctx, store.Change{Events: []store.NewEvent{
		usageEvent("q1", usageT0, contract.EvLeaseRequested, map[string]any{"requestId": "r1", "requester": "agent", "requestSpec": map[string]any{"platform": "android"}}),
		usageEvent("g1", usageT0+500, contract.EvLeaseGranted, map[string]any{"requestId": "r1", "leaseId": "l1", "deviceId": "d1", "source": "warm"})}}); err != nil {
		t.Fatal(err)
	}
	figures := func(db *DB) contract.UsageResult { return figuresOf(t, db, usageWindow(1)) }
	want := figures(db)
	// Back to schema 4: one row per cell, keyed without a part.
	again := downgradeAndOpen(t, db, url, `ALTER TABLE usage_minutes DROP CONSTRAINT usage_minutes_pkey;
ALTER TABLE usage_minutes DROP COLUMN part; ALTER TABLE usage_minutes ADD PRIMARY KEY (minute, worker, platform);
ALTER TABLE gateway_grants DROP COLUMN platform; UPDATE schema_version SET version = 4`)
	var parts []int64
	rows, _ := again.pool.Query(ctx, `SELECT part FROM usage_minutes`)
	for rows.Next() {
		var p int64
		if err := rows.Scan(&p); err != nil {
			t.Fatal(err)
		}
		parts = append(parts, p)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if len(parts) == 0 || slices.ContainsFunc(parts, func(p int64) bool { return p != 0 }) {
		t.Errorf("the cells after migration 5 have parts %v, want each kept as part 0", parts)
	}
	if got := figures(again); !reflect.DeepEqual(got, want) {
		t.Errorf("the figures after migration 5:\n%+v\nwant as before:\n%+v", got, want)
	}
}

// usageT0 is the minute the usage tests' events start at.
const usageT0 int64 = 1_800_000_000_000

func usageEvent(id string, at int64, name string, p map[string]any) store.NewEvent {
	b, _ := json.Marshal(p)
	return store.NewEvent{ID: id, Timestamp: at, Event: name, Payload: b}
}

// usageWindow is hours hours of usage from usageT0, by the hour.
func usageWindow(hours int) usage.Window {
	return usage.Window{From: usageT0, To: usageT0 + int64(hours)*usage.HourMs, Bucket: "1h", Step: time.Hour, CoversFrom: usageT0}
}

// figuresOf reads db's usage figures of w as usage.get does.
func figuresOf(t *testing.T, db *DB, w usage.Window) contract.UsageResult {
	t.Helper()
	q := usage.NewQuery(w)
	if err := db.UsageRows(context.Background(), w.From, w.To, q); err != nil {
		t.Fatal(err)
	}
	return q.Result()
}

// openUsage opens the database at url, closed with the test.
func openUsage(t *testing.T, url string) *DB {
	t.Helper()
	db, err := Open(context.Background(), url, Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// downgradeAndOpen takes db's database back to an earlier schema with
// sql, closes db and opens the database again, as this build opens one an
// earlier build wrote: migrating it.
func downgradeAndOpen(t *testing.T, db *DB, url, sql string) *DB {
	t.Helper()
	if _, err := db.pool.Exec(context.Background(), sql); err != nil {
		t.Fatal(err)
	}
	db.Close()
	return openUsage(t, url)
}
