package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/store"
)

const (
	pruneSettled  = `DELETE FROM lease_requests WHERE state IN ` + terminalStates + ` AND settled_at < $1`
	countRequests = `SELECT count(*) FROM lease_requests`
	// ord breaks ties as SQLite's rowid does.
	pruneOldest = `DELETE FROM lease_requests WHERE id IN (
	SELECT id FROM lease_requests WHERE state IN ` + terminalStates + `
	ORDER BY settled_at, created_at, ord LIMIT $1)`
	// Both event prunes delete a prefix of seqs, so what is kept is always
	// a run of consecutive seqs; by age, up to the newest event older than
	// the cutoff (one written under a clock that stepped back goes with
	// its neighbours).
	pruneEvents = `DELETE FROM events WHERE seq <= (
	SELECT seq FROM events ORDER BY seq DESC LIMIT 1 OFFSET $1)`
	pruneAgedEvents = `DELETE FROM events WHERE seq <= (
	SELECT max(seq) FROM events WHERE timestamp < $1)`
	pruneLeases   = `DELETE FROM leases WHERE ended_at <> 0 AND ended_at < $1`
	oldestEvent   = `SELECT seq, timestamp FROM events ORDER BY seq LIMIT 1`
	workerCursors = `SELECT id, last_seq FROM workers WHERE id = ANY($1)`
	moveCursor    = `UPDATE workers SET last_seq = $1, last_seen_at = $2 WHERE id = $3`
)

// write runs fn in a write transaction (under the write lock, as a Commit)
// and commits it, fenced, if fn succeeds. Every write but a Commit's goes
// through it: none writes through the pool directly.
func (db *DB) write(ctx context.Context, fn func(pgx.Tx) error) error {
	tx, err := db.begin(ctx)
	if err != nil {
		return err
	}
	if err := fn(tx); err != nil {
		return errors.Join(err, rollback(tx))
	}
	if err := db.commit(ctx, tx); err != nil {
		return errors.Join(err, rollback(tx))
	}
	return nil
}

// exec runs one statement in a write transaction.
func (db *DB) exec(ctx context.Context, sql string, args ...any) error {
	return db.write(ctx, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, sql, args...)
		return err
	})
}

// PruneRequests deletes settled requests: first those settled before
// settledBefore (when > 0), then, while more than keepMax requests remain
// (when keepMax > 0), the longest-settled ones. An open request is never
// deleted, even if that leaves more than keepMax. It returns how many were
// deleted.
func (db *DB) PruneRequests(ctx context.Context, settledBefore int64, keepMax int) (int64, error) {
	var n int64
	err := db.write(ctx, func(tx pgx.Tx) error {
		n = 0
		if settledBefore > 0 {
			tag, err := tx.Exec(ctx, pruneSettled, settledBefore)
			if err != nil {
				return err
			}
			n += tag.RowsAffected()
		}
		if keepMax > 0 {
			var total int64
			if err := tx.QueryRow(ctx, countRequests).Scan(&total); err != nil {
				return err
			}
			if excess := total - int64(keepMax); excess > 0 {
				tag, err := tx.Exec(ctx, pruneOldest, excess)
				if err != nil {
					return err
				}
				n += tag.RowsAffected()
			}
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("store: prune requests: %w", err)
	}
	return n, nil
}

// PruneEvents deletes the oldest events: first those up to the newest one
// older than olderThan (when > 0), then all but the newest keepMax (when >
// 0). It returns how many it deleted. Seqs of deleted events are not
// reused: they come from event_seq, which pruning does not move.
func (db *DB) PruneEvents(ctx context.Context, olderThan int64, keepMax int) (int64, error) {
	var n int64
	err := db.write(ctx, func(tx pgx.Tx) error {
		n = 0
		for _, step := range []struct {
			on  bool
			sql string
			arg int64
		}{
			{olderThan > 0, pruneAgedEvents, olderThan},
			{keepMax > 0, pruneEvents, int64(keepMax)},
		} {
			if !step.on {
				continue
			}
			tag, err := tx.Exec(ctx, step.sql, step.arg)
			if err != nil {
				return err
			}
			n += tag.RowsAffected()
		}
		return pruneUsage(ctx, tx)
	})
	if err != nil {
		return 0, fmt.Errorf("store: prune events: %w", err)
	}
	return n, nil
}

// PruneLeases deletes leases that ended before endedBefore and returns how
// many it deleted. Active leases are never deleted.
func (db *DB) PruneLeases(ctx context.Context, endedBefore int64) (int64, error) {
	var n int64
	err := db.write(ctx, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, pruneLeases, endedBefore)
		n = tag.RowsAffected()
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("store: prune leases: %w", err)
	}
	return n, nil
}

// EventLogSpan reads the event log's extent in one snapshot.
func (db *DB) EventLogSpan(ctx context.Context) (store.EventLogSpan, error) {
	var s store.EventLogSpan
	err := pgx.BeginTxFunc(ctx, db.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		if err := tx.QueryRow(ctx, `SELECT last FROM event_seq WHERE id = 1`).Scan(&s.LastSeq); err != nil {
			return err
		}
		switch err := tx.QueryRow(ctx, oldestEvent).Scan(&s.OldestSeq, &s.OldestTs); {
		case errors.Is(err, pgx.ErrNoRows):
			return nil
		case err != nil:
			return err
		}
		s.Events = s.LastSeq - s.OldestSeq + 1
		return nil
	})
	if err != nil {
		return store.EventLogSpan{}, fmt.Errorf("store: event log span: %w", err)
	}
	return s, nil
}

// PutClock replaces the stored clock reading, outside any decision: a
// later reading of a clock that has not jumped.
func (db *DB) PutClock(ctx context.Context, c store.Clock) error {
	err := db.write(ctx, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, upsertClock, c.WallMs, c.BootNs, c.BootID)
		return err
	})
	if err != nil {
		return fmt.Errorf("store: write the clock: %w", err)
	}
	return nil
}

// RelayEvents appends a worker's events and sets its relay cursor to
// lastSeq, in one transaction (the gateway's relay): RelayBatches of one
// batch.
func (db *DB) RelayEvents(ctx context.Context, workerID string, evs []contract.Event, lastSeq int64) ([]contract.Event, error) {
	out, err := db.RelayBatches(ctx, []store.RelayBatch{{WorkerID: workerID, Events: evs, LastSeq: lastSeq}})
	if err != nil {
		return nil, err
	}
	return out[0], nil
}

// RelayBatches appends the batches' events and sets each batch's worker's
// relay cursor to its LastSeq, all in one fenced transaction, batch after
// batch in the order given: the gateway's relays that arrive together
// share one commit. An event at or before its worker's cursor was relayed
// already (a batch sent again after a reconnect) and is skipped, so each
// of a worker's seqs is appended once; a batch is judged against the
// cursor the batches before it in the call left, so two batches of one
// worker in one call are taken in turn. The cursor is set, not only
// advanced: a worker whose log starts over (its database was replaced) is
// followed from where it now is. The appended events get the gateway's
// seqs, in batch order, keep the worker's ids, and are folded into the
// usage rollups once, in seq order. It returns each batch's appended
// events at the batch's index; on an error nothing is written. The
// cursors are read in one query and moved in one round trip, and the
// events appended in one: a commit holds many workers' batches.
func (db *DB) RelayBatches(ctx context.Context, bs []store.RelayBatch) ([][]contract.Event, error) {
	ids := make([]string, 0, len(bs))
	for _, b := range bs {
		if err := b.Check(); err != nil {
			return nil, fmt.Errorf("store: relay events: %w", err)
		}
		ids = append(ids, b.WorkerID)
	}
	var out [][]contract.Event
	err := db.write(ctx, func(tx pgx.Tx) error {
		cursors, err := relayCursors(ctx, tx, ids)
		if err != nil {
			return err
		}
		var fresh []store.NewEvent
		counts := make([]int, len(bs))
		now := time.Now().UnixMilli()
		var moves pgx.Batch
		for i, b := range bs {
			cursor := cursors[b.WorkerID]
			for _, ev := range b.Events {
				if ev.Seq > cursor {
					fresh = append(fresh, store.NewEvent{ID: ev.ID, Timestamp: ev.Timestamp, Event: ev.Event, Payload: ev.Payload})
					counts[i]++
				}
			}
			if _, known := cursors[b.WorkerID]; known {
				cursors[b.WorkerID] = b.LastSeq // as moveCursor leaves it for the next batch
			}
			moves.Queue(moveCursor, b.LastSeq, now, b.WorkerID)
		}
		all, err := appendEvents(ctx, tx, fresh)
		if err != nil {
			return err
		}
		if err := tx.SendBatch(ctx, &moves).Close(); err != nil {
			return fmt.Errorf("move cursors: %w", err)
		}
		out = make([][]contract.Event, len(bs))
		rest := all
		for i, n := range counts {
			out[i], rest = rest[:n:n], rest[n:]
		}
		return db.rollUp(ctx, tx, all)
	})
	if err != nil {
		return nil, fmt.Errorf("store: relay events: %w", err)
	}
	return out, nil
}

// relayCursors reads the relay cursors of the workers named, in tx: a
// worker with no record has none in the map (its batches are judged
// against 0, and its cursor is nowhere to move).
func relayCursors(ctx context.Context, tx pgx.Tx, ids []string) (map[string]int64, error) {
	rows, err := tx.Query(ctx, workerCursors, ids)
	if err != nil {
		return nil, fmt.Errorf("read cursors: %w", err)
	}
	defer rows.Close()
	cursors := make(map[string]int64, len(ids))
	for rows.Next() {
		var id string
		var seq int64
		if err := rows.Scan(&id, &seq); err != nil {
			return nil, fmt.Errorf("read cursors: %w", err)
		}
		cursors[id] = seq
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read cursors: %w", err)
	}
	return cursors, nil
}
