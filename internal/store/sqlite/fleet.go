package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/store"
)

// A gateway's worker records. Few rows, read at start and written on a
// connect, a drain or a relayed batch: the statements are prepared per
// call.
const (
	selectWorkers = `SELECT id, label, drained, last_seq, last_seen_at, token_id FROM workers ORDER BY id`
	upsertWorker  = `INSERT INTO workers (id, label, drained, last_seq, last_seen_at, token_id) VALUES (?, ?, ?, ?, ?, ?)
ON CONFLICT (id) DO UPDATE SET label = excluded.label, drained = excluded.drained,
	last_seq = excluded.last_seq, last_seen_at = excluded.last_seen_at, token_id = excluded.token_id`
	deleteWorker = `DELETE FROM workers WHERE id = ?`
	// A worker's relay cursor: the last of its seqs relayed into this log.
	workerCursor = `SELECT last_seq FROM workers WHERE id = ?`
	moveCursor   = `UPDATE workers SET last_seq = ?, last_seen_at = ? WHERE id = ?`
	// A relayed event keeps the worker's event id.
	relayEvent = `INSERT INTO events (id, timestamp, event, payload) VALUES (?, ?, ?, ?)`

	// A gateway's grant records (migration 0015): as many rows as leases
	// it holds, written with the decisions that grant and end them.
	selectGrants = `SELECT key, worker_id, worker_lease_id, device_id, owner_id, requester_id, chosen_id, request_id, granted_at, platform
FROM gateway_grants ORDER BY granted_at, key`
	upsertGrant = `INSERT INTO gateway_grants (key, worker_id, worker_lease_id, device_id, owner_id, requester_id, chosen_id, request_id, granted_at, platform)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (key) DO UPDATE SET worker_id = excluded.worker_id, worker_lease_id = excluded.worker_lease_id,
	device_id = excluded.device_id, owner_id = excluded.owner_id, requester_id = excluded.requester_id,
	chosen_id = excluded.chosen_id, request_id = excluded.request_id, granted_at = excluded.granted_at, platform = excluded.platform`
	deleteGrant = `DELETE FROM gateway_grants WHERE key = ?`
)

// Workers lists the gateway's worker records, by id.
func (db *DB) Workers(ctx context.Context) ([]store.Worker, error) {
	rows, err := db.r.QueryContext(ctx, selectWorkers)
	if err != nil {
		return nil, fmt.Errorf("store: workers: %w", err)
	}
	defer rows.Close()
	var out []store.Worker
	for rows.Next() {
		var r store.Worker
		if err := rows.Scan(&r.ID, &r.Label, &r.Drained, &r.LastSeq, &r.LastSeenAt, &r.TokenID); err != nil {
			return nil, fmt.Errorf("store: workers: %w", err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: workers: %w", err)
	}
	return out, nil
}

// PutWorker writes a worker record.
func (db *DB) PutWorker(ctx context.Context, r store.Worker) error {
	err := db.write(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, upsertWorker, r.ID, r.Label, r.Drained, r.LastSeq, r.LastSeenAt, r.TokenID)
		return err
	})
	if err != nil {
		return fmt.Errorf("store: put worker %s: %w", r.ID, err)
	}
	return nil
}

// DeleteWorker forgets a worker record.
func (db *DB) DeleteWorker(ctx context.Context, id string) error {
	err := db.write(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, deleteWorker, id)
		return err
	})
	if err != nil {
		return fmt.Errorf("store: delete worker %s: %w", id, err)
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
// relay cursor to its LastSeq, all in one transaction, batch after batch
// in the order given: the gateway's relays that arrive together share one
// commit. An event at or before its worker's cursor was relayed already (a
// batch sent again after a reconnect) and is skipped, so each of a
// worker's seqs is appended once; the cursor is read per batch, so two
// batches of one worker in one call are taken in turn. The cursor is set,
// not only advanced: a worker whose log starts over (its database was
// replaced) is followed from where it now is. The appended events are
// folded into the usage rollups as a commit's are, once over all of them
// in seq order, as the worker's (the gateway put its workerId in each
// payload). It returns each batch's appended events, with the gateway's
// seqs, at the batch's index; on an error nothing is written.
func (db *DB) RelayBatches(ctx context.Context, bs []store.RelayBatch) ([][]contract.Event, error) {
	var out [][]contract.Event
	err := db.write(ctx, func(tx *sql.Tx) error {
		out = make([][]contract.Event, len(bs))
		// Each statement is prepared once for the commit's batches, not
		// once a batch: many workers' batches share a commit.
		var get, ins, move *sql.Stmt
		for q, st := range map[string]**sql.Stmt{workerCursor: &get, relayEvent: &ins, moveCursor: &move} {
			var err error
			if *st, err = tx.PrepareContext(ctx, q); err != nil {
				return err
			}
			defer (*st).Close()
		}
		var all []contract.Event
		now := time.Now().UnixMilli()
		for i, b := range bs {
			if err := b.Check(); err != nil {
				return err
			}
			var cursor int64
			err := get.QueryRowContext(ctx, b.WorkerID).Scan(&cursor)
			if err != nil && !errors.Is(err, sql.ErrNoRows) {
				return fmt.Errorf("%s: read cursor: %w", b.WorkerID, err)
			}
			appended := []contract.Event{}
			for _, ev := range b.Events {
				if ev.Seq <= cursor {
					continue
				}
				res, err := ins.ExecContext(ctx, ev.ID, ev.Timestamp, ev.Event, nullJSON(ev.Payload))
				if err != nil {
					return fmt.Errorf("%s: event %s: %w", b.WorkerID, ev.ID, err)
				}
				seq, err := res.LastInsertId()
				if err != nil {
					return err
				}
				ev.Seq = seq
				appended = append(appended, ev)
			}
			if _, err := move.ExecContext(ctx, b.LastSeq, now, b.WorkerID); err != nil {
				return fmt.Errorf("%s: move cursor: %w", b.WorkerID, err)
			}
			out[i] = appended
			all = append(all, appended...)
		}
		return db.rollUp(ctx, tx, all)
	})
	if err != nil {
		return nil, fmt.Errorf("store: relay events: %w", err)
	}
	return out, nil
}

// Grants lists a gateway's grant records, oldest first.
func (db *DB) Grants(ctx context.Context) ([]store.Grant, error) {
	rows, err := db.r.QueryContext(ctx, selectGrants)
	if err != nil {
		return nil, fmt.Errorf("store: grants: %w", err)
	}
	defer rows.Close()
	var out []store.Grant
	for rows.Next() {
		var g store.Grant
		if err := rows.Scan(&g.Key, &g.WorkerID, &g.WorkerLeaseID, &g.DeviceID, &g.OwnerID, &g.RequesterID, &g.ChosenID,
			&g.RequestID, &g.GrantedAt, &g.Platform); err != nil {
			return nil, fmt.Errorf("store: grants: %w", err)
		}
		out = append(out, g)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: grants: %w", err)
	}
	return out, nil
}

// putGrants writes a Change's grant records, then deletes its ended ones,
// in tx.
func putGrants(ctx context.Context, tx *sql.Tx, put []store.Grant, ended []string) error {
	for _, g := range put {
		if _, err := tx.ExecContext(ctx, upsertGrant, g.Key, g.WorkerID, g.WorkerLeaseID, g.DeviceID, g.OwnerID, g.RequesterID,
			g.ChosenID, g.RequestID, g.GrantedAt, string(g.Platform)); err != nil {
			return fmt.Errorf("grant %s: %w", g.Key, err)
		}
	}
	for _, key := range ended {
		if _, err := tx.ExecContext(ctx, deleteGrant, key); err != nil {
			return fmt.Errorf("end grant %s: %w", key, err)
		}
	}
	return nil
}
