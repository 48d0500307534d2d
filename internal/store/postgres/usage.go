package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/usage"
)

// The usage rollups (migration 0002), kept as the SQLite backend keeps
// them: every transaction that appends events folds them in (rollUp), by
// the rule of package usage; pruning keeps them in step with the log
// (pruneUsage) and gathers each closed hour's minutes into one row; a
// query reads the rows of its window (UsageRows).
const (
	// Appending to a cell concatenates its records: a commit writes the
	// few bytes its events add, never reads the cell back.
	// A commit appends its records to the cell's current row (part, see
	// usage.Parts), kept small: never the minute's whole records again.
	usageAppendMinute = `INSERT INTO usage_minutes (minute, worker, platform, part, records) VALUES ($1, $2, $3, $4, $5)
ON CONFLICT (minute, worker, platform, part) DO UPDATE SET records = usage_minutes.records || excluded.records`
	usageAppendHour = `INSERT INTO usage_hours (hour, worker, platform, chunks) VALUES ($1, $2, $3, $4)
ON CONFLICT (hour, worker, platform) DO UPDATE SET chunks = usage_hours.chunks || excluded.chunks`
	usageOpenGet = `SELECT at, requested, platform, dispatched, dispatched_to FROM usage_open WHERE worker = $1 AND kind = $2 AND id = $3`
	usageOpenPut = `INSERT INTO usage_open (worker, kind, id, at, requested, platform, dispatched, dispatched_to) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
ON CONFLICT (worker, kind, id) DO UPDATE SET at = excluded.at, requested = excluded.requested,
	platform = excluded.platform, dispatched = excluded.dispatched, dispatched_to = excluded.dispatched_to`
	usageOpenDelete = `DELETE FROM usage_open WHERE worker = $1 AND kind = $2 AND id = $3`

	usageMinutesIn = `SELECT minute, worker, platform, records FROM usage_minutes WHERE minute >= $1 AND minute < $2`
	usageHoursIn   = `SELECT hour, worker, platform, chunks FROM usage_hours WHERE hour >= $1 AND hour < $2`

	usageLogEnds       = `SELECT (SELECT timestamp FROM events ORDER BY seq LIMIT 1), (SELECT max(timestamp) FROM events)`
	usageMinutesBefore = `SELECT minute, worker, platform, records FROM usage_minutes WHERE minute < $1
ORDER BY worker, platform, minute, part`
	usageBackfillState = `SELECT folded_seq, last_seq FROM usage_backfill`
	usageBackfillPage  = eventCols + ` WHERE seq > $1 AND seq <= $2 AND event = ANY($3) ORDER BY seq LIMIT $4`
)

// rollUp folds evs, appended by tx in this order, into the rollups: the
// one path from committed events to usage figures, for commits, a
// gateway's relayed batches and the backfill alike. It reads the open
// requests and leases the events end, and writes what usage.Fold says.
func (db *DB) rollUp(ctx context.Context, tx pgx.Tx, evs []contract.Event) error {
	b := usage.NewBatch(evs)
	if b.Empty() {
		return nil
	}
	var known map[usage.OpenKey]usage.Open
	if needs := b.Needs(); len(needs) > 0 {
		known = make(map[usage.OpenKey]usage.Open, len(needs))
		for _, k := range needs {
			var o usage.Open
			switch err := tx.QueryRow(ctx, usageOpenGet, k.Worker, k.Kind, k.ID).Scan(&o.At, &o.Requested, &o.Platform, &o.Dispatched, &o.DispatchedTo); {
			case errors.Is(err, pgx.ErrNoRows):
			case err != nil:
				return fmt.Errorf("usage: open %s %s: %w", k.Kind, k.ID, err)
			default:
				known[k] = o
			}
		}
	}
	ch := b.Fold(known)
	// One round trip for the batch's writes: a commit's events touch a
	// few cells and open entries.
	var batch pgx.Batch
	for _, a := range ch.Appends {
		part := db.parts.Place(a.Cell, len(a.Records), evs[0].Seq)
		batch.Queue(usageAppendMinute, a.Cell.Minute, a.Cell.Worker, a.Cell.Platform, part, a.Records)
	}
	for _, w := range ch.Opens {
		if w.Closed {
			batch.Queue(usageOpenDelete, w.Key.Worker, w.Key.Kind, w.Key.ID)
		} else {
			batch.Queue(usageOpenPut, w.Key.Worker, w.Key.Kind, w.Key.ID,
				w.Open.At, w.Open.Requested, w.Open.Platform, w.Open.Dispatched, w.Open.DispatchedTo)
		}
	}
	if batch.Len() == 0 {
		return nil
	}
	if err := tx.SendBatch(ctx, &batch).Close(); err != nil {
		return fmt.Errorf("usage: write the fold: %w", err)
	}
	return nil
}

// UsageRows hands sink every rollup row holding minutes of [from, to),
// from one snapshot: the gathered hours, then the minutes not yet
// gathered. A row may also hold minutes outside the window; the sink drops
// them.
func (db *DB) UsageRows(ctx context.Context, from, to int64, sink usage.Sink) error {
	err := pgx.BeginTxFunc(ctx, db.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		for _, r := range []struct {
			q        string
			from     int64
			add      func(int64, string, string, []byte) error
			describe string
		}{
			{usageHoursIn, usage.Hour(from), sink.AddHour, "hours"},
			{usageMinutesIn, from, sink.AddMinute, "minutes"},
		} {
			if err := scanUsage(ctx, tx, r.q, r.from, to, r.add); err != nil {
				return fmt.Errorf("usage %s: %w", r.describe, err)
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("store: %w", err)
	}
	return nil
}

func scanUsage(ctx context.Context, tx pgx.Tx, q string, from, to int64, add func(int64, string, string, []byte) error) error {
	rows, _ := tx.Query(ctx, q, from, to)
	defer rows.Close()
	var (
		at               int64
		worker, platform string
		data             []byte
	)
	for rows.Next() {
		if err := rows.Scan(&at, &worker, &platform, &data); err != nil {
			return err
		}
		if err := add(at, worker, platform, data); err != nil {
			return err
		}
	}
	return rows.Err()
}

// pruneUsage keeps the rollups in step with the log, in the transaction of
// PruneEvents, after its deletes. The history starts at the minute of the
// oldest event kept: cells before it go (a gathered hour once all its
// minutes are before it), and so do the open entries opened before it, so
// the rollups never grow past the log. An empty log leaves no rollups.
// Then the minutes of every hour before that of the latest event (by time:
// a late relayed one may be older) are gathered into hour rows.
func pruneUsage(ctx context.Context, tx pgx.Tx) error {
	var oldest, newest *int64
	if err := tx.QueryRow(ctx, usageLogEnds).Scan(&oldest, &newest); err != nil {
		return fmt.Errorf("usage: read the log's ends: %w", err)
	}
	if oldest == nil {
		if _, err := tx.Exec(ctx, `TRUNCATE usage_minutes, usage_hours, usage_open`); err != nil {
			return fmt.Errorf("usage: empty the rollups: %w", err)
		}
		return nil
	}
	covers := contract.UsageMinute(*oldest)
	for _, d := range []struct {
		q   string
		arg int64
	}{
		{`DELETE FROM usage_minutes WHERE minute < $1`, covers},
		{`DELETE FROM usage_hours WHERE hour <= $1`, covers - usage.HourMs},
		{`DELETE FROM usage_open WHERE at < $1`, covers},
	} {
		if _, err := tx.Exec(ctx, d.q, d.arg); err != nil {
			return fmt.Errorf("usage: prune: %w", err)
		}
	}
	return gatherHours(ctx, tx, usage.Hour(*newest))
}

// gatherHours moves the minute rows before before (a whole hour) into
// their hours' rows, appending to a row already gathered (minutes that
// reached the rollup late: a worker's events relayed after a reconnect).
func gatherHours(ctx context.Context, tx pgx.Tx, before int64) error {
	var g usage.Gather
	rows, _ := tx.Query(ctx, usageMinutesBefore, before)
	for rows.Next() {
		var minute int64
		var worker, platform string
		var records []byte
		if err := rows.Scan(&minute, &worker, &platform, &records); err != nil {
			rows.Close()
			return fmt.Errorf("usage: gather: %w", err)
		}
		g.Add(minute, worker, platform, records)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("usage: gather: %w", err)
	}
	hours := g.Rows()
	if len(hours) == 0 {
		return nil
	}
	var batch pgx.Batch
	for _, r := range hours {
		batch.Queue(usageAppendHour, r.Hour, r.Worker, r.Platform, r.Chunks)
	}
	batch.Queue(`DELETE FROM usage_minutes WHERE minute < $1`, before)
	if err := tx.SendBatch(ctx, &batch).Close(); err != nil {
		return fmt.Errorf("usage: gather: %w", err)
	}
	return nil
}

// backfillPage is how many events the backfill folds per transaction.
const backfillPage = 5000

// backfillUsage folds the events a database held when it was migrated to
// the rollups, in seq order, a page per transaction under the write lock,
// recording how far it got, so a backfill cut short goes on at the next
// Open, and a second store opening the database at once waits for the
// page in hand and then goes on from after it.
func (db *DB) backfillUsage(ctx context.Context) error {
	names := usage.EventNames()
	for done := false; !done; {
		err := db.write(ctx, func(tx pgx.Tx) error {
			var folded, last int64
			switch err := tx.QueryRow(ctx, usageBackfillState).Scan(&folded, &last); {
			case errors.Is(err, pgx.ErrNoRows):
				done = true
				return nil
			case err != nil:
				return err
			}
			rows, _ := tx.Query(ctx, usageBackfillPage, folded, last, names, backfillPage)
			evs, err := scanEvents(rows)
			if err != nil {
				return err
			}
			if err := db.rollUp(ctx, tx, evs); err != nil {
				return err
			}
			if len(evs) < backfillPage {
				done = true
				_, err = tx.Exec(ctx, `DELETE FROM usage_backfill`)
				return err
			}
			_, err = tx.Exec(ctx, `UPDATE usage_backfill SET folded_seq = $1`, evs[len(evs)-1].Seq)
			return err
		})
		if err != nil {
			return fmt.Errorf("usage: fold the events stored before the rollups: %w", err)
		}
	}
	return nil
}
