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
	selectGrants = `SELECT key, worker_id, worker_lease_id, device_id, owner_id, requester_id, chosen_id, request_id, granted_at
FROM gateway_grants ORDER BY granted_at, key`
	upsertGrant = `INSERT INTO gateway_grants (key, worker_id, worker_lease_id, device_id, owner_id, requester_id, chosen_id, request_id, granted_at)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (key) DO UPDATE SET worker_id = excluded.worker_id, worker_lease_id = excluded.worker_lease_id,
	device_id = excluded.device_id, owner_id = excluded.owner_id, requester_id = excluded.requester_id,
	chosen_id = excluded.chosen_id, request_id = excluded.request_id, granted_at = excluded.granted_at`
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
// lastSeq, in one transaction (the gateway's relay). An event at or before
// the cursor was relayed already (a batch sent again after a reconnect) and
// is skipped, so each of the worker's seqs is appended once. The cursor is
// set, not only advanced: a worker whose log starts over (its database was
// replaced) is followed from where it now is. The appended events are
// folded into the usage rollups as a commit's are, as the worker's (the
// gateway put its workerId in each payload).
func (db *DB) RelayEvents(ctx context.Context, workerID string, evs []contract.Event, lastSeq int64) ([]contract.Event, error) {
	var out []contract.Event
	err := db.write(ctx, func(tx *sql.Tx) error {
		out = out[:0]
		var cursor int64
		err := tx.QueryRowContext(ctx, workerCursor, workerID).Scan(&cursor)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("read cursor: %w", err)
		}
		for _, ev := range evs {
			if ev.Seq <= cursor {
				continue
			}
			res, err := tx.ExecContext(ctx, relayEvent, ev.ID, ev.Timestamp, ev.Event, nullJSON(ev.Payload))
			if err != nil {
				return fmt.Errorf("event %s: %w", ev.ID, err)
			}
			seq, err := res.LastInsertId()
			if err != nil {
				return err
			}
			ev.Seq = seq
			out = append(out, ev)
		}
		if err := db.rollUp(ctx, tx, out); err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, moveCursor, lastSeq, time.Now().UnixMilli(), workerID)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("store: relay events of %s: %w", workerID, err)
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
			&g.RequestID, &g.GrantedAt); err != nil {
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
			g.ChosenID, g.RequestID, g.GrantedAt); err != nil {
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
