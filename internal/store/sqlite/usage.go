package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/usage"
)

// The usage rollups (migration 0014): every transaction that appends
// events folds them in (rollUp), with the rule of package usage; pruning
// keeps them in step with the log (pruneUsage); a query reads the rows of
// its window (UsageRows). The fold's cells are usage_minutes rows; the
// pruning pass gathers the minutes of each closed hour into a usage_hours
// row, so the rows a query reads grow with its hours, not its minutes.
const (
	// Appending to a cell concatenates its records to the cell's current
	// row (part, see usage.Parts): a commit writes the few bytes its events
	// add to a row kept small, never reads the cell back.
	usageAppendMinute = `INSERT INTO usage_minutes (minute, worker, platform, part, records) VALUES (?, ?, ?, ?, ?)
ON CONFLICT (minute, worker, platform, part) DO UPDATE SET records = CAST(records || excluded.records AS BLOB)`
	usageAppendHour = `INSERT INTO usage_hours (hour, worker, platform, chunks) VALUES (?, ?, ?, ?)
ON CONFLICT (hour, worker, platform) DO UPDATE SET chunks = CAST(chunks || excluded.chunks AS BLOB)`
	usageOpenGet = `SELECT at, requested, platform, dispatched, dispatched_to FROM usage_open WHERE worker = ? AND kind = ? AND id = ?`
	usageOpenPut = `INSERT INTO usage_open (worker, kind, id, at, requested, platform, dispatched, dispatched_to) VALUES (?, ?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (worker, kind, id) DO UPDATE SET at = excluded.at, requested = excluded.requested,
	platform = excluded.platform, dispatched = excluded.dispatched, dispatched_to = excluded.dispatched_to`
	usageOpenDelete = `DELETE FROM usage_open WHERE worker = ? AND kind = ? AND id = ?`

	usageMinutesIn = `SELECT minute, worker, platform, records FROM usage_minutes WHERE minute >= ? AND minute < ?`
	usageHoursIn   = `SELECT hour, worker, platform, chunks FROM usage_hours WHERE hour >= ? AND hour < ?`

	// The pruning pass's statements run a few times an hour: prepared
	// per call.
	usageLogEnds       = `SELECT (SELECT timestamp FROM events ORDER BY seq LIMIT 1), (SELECT max(timestamp) FROM events)`
	usageMinutesBefore = `SELECT minute, worker, platform, records FROM usage_minutes WHERE minute < ?
ORDER BY worker, platform, minute, part`
	usageBackfillState = `SELECT folded_seq, last_seq FROM usage_backfill`
)

// usageStmts are the rollup's statements prepared at Open (prepare).
type usageStmts struct {
	// Writer.
	appendMinute, openGet, openPut, openDelete *sql.Stmt
	// Read pool.
	minutes, hours *sql.Stmt
}

// rollUp folds evs, appended by tx in this order, into the rollups: the
// one path from committed events to usage figures, for the daemon's own
// commits, a gateway's relayed batches and the backfill alike. It reads the
// open requests and leases the events end, and writes what usage.Fold
// says.
func (db *DB) rollUp(ctx context.Context, tx *sql.Tx, evs []contract.Event) error {
	b := usage.NewBatch(evs)
	if b.Empty() {
		return nil
	}
	var known map[usage.OpenKey]usage.Open
	if needs := b.Needs(); len(needs) > 0 {
		known = make(map[usage.OpenKey]usage.Open, len(needs))
		get := tx.StmtContext(ctx, db.us.openGet)
		for _, k := range needs {
			var o usage.Open
			switch err := get.QueryRowContext(ctx, k.Worker, k.Kind, k.ID).Scan(&o.At, &o.Requested, &o.Platform, &o.Dispatched, &o.DispatchedTo); {
			case errors.Is(err, sql.ErrNoRows):
			case err != nil:
				return fmt.Errorf("usage: open %s %s: %w", k.Kind, k.ID, err)
			default:
				known[k] = o
			}
		}
	}
	ch := b.Fold(known)
	if len(ch.Appends) > 0 {
		st := tx.StmtContext(ctx, db.us.appendMinute)
		for _, a := range ch.Appends {
			part := db.parts.Place(a.Cell, len(a.Records), evs[0].Seq)
			if _, err := st.ExecContext(ctx, a.Cell.Minute, a.Cell.Worker, a.Cell.Platform, part, a.Records); err != nil {
				return fmt.Errorf("usage: append to minute %d: %w", a.Cell.Minute, err)
			}
		}
	}
	for _, w := range ch.Opens {
		var err error
		if w.Closed {
			_, err = tx.StmtContext(ctx, db.us.openDelete).ExecContext(ctx, w.Key.Worker, w.Key.Kind, w.Key.ID)
		} else {
			_, err = tx.StmtContext(ctx, db.us.openPut).ExecContext(ctx, w.Key.Worker, w.Key.Kind, w.Key.ID,
				w.Open.At, w.Open.Requested, w.Open.Platform, w.Open.Dispatched, w.Open.DispatchedTo)
		}
		if err != nil {
			return fmt.Errorf("usage: open %s %s: %w", w.Key.Kind, w.Key.ID, err)
		}
	}
	return nil
}

// UsageSink takes rollup rows (usage.Sink, which every backend's UsageRows
// takes); *usage.Query is one.
type UsageSink = usage.Sink

// UsageRows hands sink every rollup row holding minutes of [from, to),
// from one read transaction: the gathered hours, then the minutes not yet
// gathered. A row may also hold minutes outside the window; the sink
// drops them.
func (db *DB) UsageRows(ctx context.Context, from, to int64, sink UsageSink) error {
	tx, err := db.r.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return fmt.Errorf("store: usage rows: %w", err)
	}
	defer tx.Rollback()
	for _, r := range []struct {
		st       *sql.Stmt
		from     int64
		add      func(int64, string, string, []byte) error
		describe string
	}{
		{db.us.hours, usage.Hour(from), sink.AddHour, "hours"},
		{db.us.minutes, from, sink.AddMinute, "minutes"},
	} {
		if err := scanUsage(ctx, tx.StmtContext(ctx, r.st), r.from, to, r.add); err != nil {
			return fmt.Errorf("store: usage %s: %w", r.describe, err)
		}
	}
	return nil
}

func scanUsage(ctx context.Context, st *sql.Stmt, from, to int64, add func(int64, string, string, []byte) error) error {
	rows, err := st.QueryContext(ctx, from, to)
	if err != nil {
		return err
	}
	defer rows.Close()
	var (
		at               int64
		worker, platform string
		data             sql.RawBytes
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

// pruneUsage keeps the rollups in step with the log, in the transaction
// of PruneEvents, after its deletes. The history starts at the minute of
// the oldest event kept: cells before it go (a gathered hour once all its
// minutes are before it), and so do the open entries opened before it, so
// the rollups never grow past the log. An empty log leaves no rollups.
// Then the minutes of every hour before that of the latest event (by
// time: a late relayed one may be older) are gathered into hour rows.
func (db *DB) pruneUsage(ctx context.Context, tx *sql.Tx) error {
	var oldest, newest sql.NullInt64
	if err := tx.QueryRowContext(ctx, usageLogEnds).Scan(&oldest, &newest); err != nil {
		return fmt.Errorf("usage: read the log's ends: %w", err)
	}
	if !oldest.Valid {
		for _, q := range []string{`DELETE FROM usage_minutes`, `DELETE FROM usage_hours`, `DELETE FROM usage_open`} {
			if _, err := tx.ExecContext(ctx, q); err != nil {
				return fmt.Errorf("usage: %s: %w", q, err)
			}
		}
		return nil
	}
	covers := contract.UsageMinute(oldest.Int64)
	for _, d := range []struct {
		q   string
		arg int64
	}{
		{`DELETE FROM usage_minutes WHERE minute < ?`, covers},
		{`DELETE FROM usage_hours WHERE hour <= ?`, covers - usage.HourMs},
		{`DELETE FROM usage_open WHERE at < ?`, covers},
	} {
		if _, err := tx.ExecContext(ctx, d.q, d.arg); err != nil {
			return fmt.Errorf("usage: prune: %w", err)
		}
	}
	return gatherHours(ctx, tx, usage.Hour(newest.Int64))
}

// gatherHours moves the minute rows before before (a whole hour) into
// their hours' rows, appending to a row already gathered (minutes that
// reached the rollup late: a worker's events relayed after a reconnect).
func gatherHours(ctx context.Context, tx *sql.Tx, before int64) error {
	var g usage.Gather
	rows, err := tx.QueryContext(ctx, usageMinutesBefore, before)
	if err != nil {
		return fmt.Errorf("usage: gather: %w", err)
	}
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
	st, err := tx.PrepareContext(ctx, usageAppendHour)
	if err != nil {
		return fmt.Errorf("usage: gather: %w", err)
	}
	defer st.Close()
	for _, r := range hours {
		if _, err := st.ExecContext(ctx, r.Hour, r.Worker, r.Platform, r.Chunks); err != nil {
			return fmt.Errorf("usage: gather hour %d: %w", r.Hour, err)
		}
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM usage_minutes WHERE minute < ?`, before); err != nil {
		return fmt.Errorf("usage: gather: %w", err)
	}
	return nil
}

// backfillPage is how many events the backfill folds per transaction.
const backfillPage = 5000

// backfillUsage folds the events a database held when it was migrated to
// the rollups, in seq order, a page per transaction, recording how far it
// got, so a backfill cut short goes on at the next Open. Events appended
// since are folded by their own commits; none can be until Open returns.
func (db *DB) backfillUsage(ctx context.Context) error {
	names := usage.EventNames()
	query := `SELECT seq, id, timestamp, event, payload FROM events WHERE seq > ? AND seq <= ? AND event IN (?` +
		strings.Repeat(", ?", len(names)-1) + `) ORDER BY seq LIMIT ?`
	for done := false; !done; {
		err := db.write(ctx, func(tx *sql.Tx) error {
			var folded, last int64
			switch err := tx.QueryRowContext(ctx, usageBackfillState).Scan(&folded, &last); {
			case errors.Is(err, sql.ErrNoRows):
				done = true
				return nil
			case err != nil:
				return err
			}
			args := []any{folded, last}
			for _, n := range names {
				args = append(args, n)
			}
			rows, err := tx.QueryContext(ctx, query, append(args, backfillPage)...)
			if err != nil {
				return err
			}
			evs, err := scanEvents(rows)
			if err != nil {
				return err
			}
			if err := db.rollUp(ctx, tx, evs); err != nil {
				return err
			}
			if len(evs) < backfillPage {
				done = true
				_, err = tx.ExecContext(ctx, `DELETE FROM usage_backfill`)
				return err
			}
			_, err = tx.ExecContext(ctx, `UPDATE usage_backfill SET folded_seq = ?`, evs[len(evs)-1].Seq)
			return err
		})
		if err != nil {
			return fmt.Errorf("usage: fold the events stored before the rollups: %w", err)
		}
	}
	return nil
}
