package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
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
	c := pgtest.Start(t)
	url := c.Database(t)
	db, err := Open(ctx, url, Options{})
	if err != nil {
		t.Fatal(err)
	}
	const u0 int64 = 1_800_000_000_000
	var evs []store.NewEvent
	for i := range backfillPage/2 + 100 { // two events a lease: more than a page
		at := u0 + int64(i)*1000
		req, _ := json.Marshal(map[string]any{"requestId": fmt.Sprint("r", i), "requestSpec": map[string]any{"platform": "ios"}})
		grant, _ := json.Marshal(map[string]any{"requestId": fmt.Sprint("r", i), "leaseId": fmt.Sprint("l", i), "source": "warm"})
		evs = append(evs, store.NewEvent{ID: fmt.Sprint("q", i), Timestamp: at, Event: contract.EvLeaseRequested, Payload: req},
			store.NewEvent{ID: fmt.Sprint("g", i), Timestamp: at + 500, Event: contract.EvLeaseGranted, Payload: grant})
	}
	if _, err := db.Commit(ctx, store.Change{Events: evs}); err != nil {
		t.Fatal(err)
	}
	w := usage.Window{From: u0, To: u0 + 2*usage.HourMs, Bucket: "1h", Step: time.Hour, CoversFrom: u0}
	figures := func(db *DB) contract.UsageResult {
		t.Helper()
		q := usage.NewQuery(w)
		if err := db.UsageRows(ctx, w.From, w.To, q); err != nil {
			t.Fatal(err)
		}
		return q.Result()
	}
	want := figures(db)
	if want.Totals.Requests != len(evs)/2 || want.Percentiles.Wait.Count != len(evs)/2 {
		t.Fatalf("the figures as committed: %+v, want %d requests and waits", want.Totals, len(evs)/2)
	}
	// Back to schema 1, as a database written before the rollups.
	if _, err := db.pool.Exec(ctx, `DROP TABLE usage_minutes, usage_hours, usage_open, usage_backfill, fleet_identity; ALTER TABLE events DROP COLUMN term; ALTER TABLE gateway_grants DROP COLUMN term; UPDATE schema_version SET version = 1`); err != nil {
		t.Fatal(err)
	}
	db.Close()
	again, err := Open(ctx, url, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close()
	if got := figures(again); !reflect.DeepEqual(got, want) {
		t.Errorf("the figures after the backfill:\n%+v\nwant those of the events folded as they committed:\n%+v", got, want)
	}
	var left int
	if err := again.pool.QueryRow(ctx, `SELECT count(*) FROM usage_backfill`).Scan(&left); err != nil || left != 0 {
		t.Errorf("usage_backfill holds %d rows (%v) after the backfill, want none", left, err)
	}
}
