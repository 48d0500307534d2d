package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/simlock/simlock/internal/contract"
)

// terminalStates is the SQL list of the request states for which
// contract.RequestState.Terminal is true. A test keeps the two in step.
const terminalStates = "('granted', 'failed', 'cancelled')"

// Upserts update every column: the caller's record is the truth, and a
// partial update would let the indexed columns drift from what was decided.
// ON CONFLICT DO UPDATE rather than INSERT OR REPLACE, because REPLACE deletes
// the old row first, which would trip the lease → device foreign key.
const (
	upsertDevice = `INSERT INTO devices (id, platform, model, os_version, driver, driver_device_id,
	address, driver_data, state, created_at, state_since, last_used_at,
	deferred_reclaim, quarantine_attempts, quarantine_next_retry)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (id) DO UPDATE SET
	platform = excluded.platform, model = excluded.model, os_version = excluded.os_version,
	driver = excluded.driver, driver_device_id = excluded.driver_device_id,
	address = excluded.address, driver_data = excluded.driver_data, state = excluded.state,
	created_at = excluded.created_at, state_since = excluded.state_since,
	last_used_at = excluded.last_used_at, deferred_reclaim = excluded.deferred_reclaim,
	quarantine_attempts = excluded.quarantine_attempts, quarantine_next_retry = excluded.quarantine_next_retry`

	upsertLease = `INSERT INTO leases (id, device_id, request_id, requester_id, owner_id, granted_at,
	ttl_ms, last_renewed_at, ttl_deadline, ended_at, end_reason)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (id) DO UPDATE SET
	device_id = excluded.device_id, request_id = excluded.request_id,
	requester_id = excluded.requester_id, owner_id = excluded.owner_id,
	granted_at = excluded.granted_at, ttl_ms = excluded.ttl_ms,
	last_renewed_at = excluded.last_renewed_at, ttl_deadline = excluded.ttl_deadline,
	ended_at = excluded.ended_at, end_reason = excluded.end_reason`

	upsertRequest = `INSERT INTO lease_requests (id, requester_id, idempotency_key, state,
	created_at, settled_at, record)
VALUES (?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (id) DO UPDATE SET
	requester_id = excluded.requester_id, idempotency_key = excluded.idempotency_key,
	state = excluded.state, created_at = excluded.created_at,
	settled_at = excluded.settled_at, record = excluded.record`

	insertEvent = `INSERT INTO events (id, timestamp, event, payload) VALUES (?, ?, ?, ?)`
)

// Commit writes c in one transaction and returns its events as appended, with
// their seqs, in order. If it returns an error, nothing of c was written.
// An empty Change is a no-op returning nil, nil.
func (db *DB) Commit(ctx context.Context, c Change) ([]contract.Event, error) {
	if len(c.Devices) == 0 && len(c.Leases) == 0 && len(c.Requests) == 0 && len(c.Events) == 0 {
		return nil, nil
	}
	// Everything that can be checked or encoded is done before the write
	// lock is taken, so the lock is held only for the SQL.
	records, err := prepare(c)
	if err != nil {
		return nil, fmt.Errorf("store: commit: %w", err)
	}

	out := make([]contract.Event, 0, len(c.Events))
	err = db.write(ctx, func(tx *sql.Tx) error {
		// Devices before leases, so a lease may name a device created by the
		// same Change.
		for _, d := range c.Devices {
			if _, err := tx.ExecContext(ctx, upsertDevice,
				d.ID, string(d.Platform), d.Model, d.OSVersion, d.Driver, d.DriverDeviceID,
				d.Address, nullJSON(d.DriverData), string(d.State), d.CreatedAt, d.StateSince,
				d.LastUsedAt, d.DeferredReclaim, d.QuarantineAttempts, d.QuarantineNextRetry); err != nil {
				return fmt.Errorf("device %s: %w", d.ID, err)
			}
		}
		for _, l := range c.Leases {
			if _, err := tx.ExecContext(ctx, upsertLease,
				l.ID, l.DeviceID, l.RequestID, l.RequesterID, l.OwnerID, l.GrantedAt,
				l.TTLMs, l.LastRenewedAt, l.TTLDeadline, l.EndedAt, l.EndReason); err != nil {
				return fmt.Errorf("lease %s: %w", l.ID, err)
			}
		}
		for i, r := range c.Requests {
			var key any // NULL keeps keyless requests out of the unique index
			if r.IdempotencyKey != "" {
				key = r.IdempotencyKey
			}
			if _, err := tx.ExecContext(ctx, upsertRequest,
				r.ID, r.RequesterID, key, string(r.State), r.CreatedAt, r.SettledAt,
				records[i]); err != nil {
				return fmt.Errorf("request %s: %w", r.ID, err)
			}
		}
		for _, e := range c.Events {
			res, err := tx.ExecContext(ctx, insertEvent, e.ID, e.Timestamp, e.Event, nullJSON(e.Payload))
			if err != nil {
				return fmt.Errorf("event %s: %w", e.ID, err)
			}
			seq, err := res.LastInsertId()
			if err != nil {
				return fmt.Errorf("event %s: %w", e.ID, err)
			}
			out = append(out, contract.Event{
				ID:        e.ID,
				Seq:       seq,
				Timestamp: e.Timestamp,
				Event:     e.Event,
				Payload:   e.Payload,
			})
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("store: commit: %w", err)
	}
	return out, nil
}

// prepare checks c and encodes its request records. Malformed JSON is refused
// here because SQLite would store it happily and every later read that hands
// it to encoding/json would fail.
func prepare(c Change) (records []string, err error) {
	for _, d := range c.Devices {
		if d.ID == "" {
			return nil, errors.New("device with empty id")
		}
		if len(d.DriverData) > 0 && !json.Valid(d.DriverData) {
			return nil, fmt.Errorf("device %s: driver data is not valid JSON", d.ID)
		}
	}
	for _, l := range c.Leases {
		if l.ID == "" {
			return nil, errors.New("lease with empty id")
		}
	}
	records = make([]string, len(c.Requests))
	for i, r := range c.Requests {
		if r.ID == "" {
			return nil, errors.New("request with empty id")
		}
		b, err := json.Marshal(r)
		if err != nil {
			return nil, fmt.Errorf("request %s: %w", r.ID, err)
		}
		records[i] = string(b)
	}
	for _, e := range c.Events {
		if e.ID == "" {
			return nil, errors.New("event with empty id")
		}
		if len(e.Payload) > 0 && !json.Valid(e.Payload) {
			return nil, fmt.Errorf("event %s: payload is not valid JSON", e.ID)
		}
	}
	return records, nil
}

// nullJSON stores an absent document as NULL so that it reads back as nil,
// not as an empty, invalid, document.
func nullJSON(b json.RawMessage) any {
	if len(b) == 0 {
		return nil
	}
	return string(b)
}

// PruneRequests deletes settled requests: first those settled before
// settledBefore (when > 0), then, while more than keepMax requests remain
// (when keepMax > 0), the longest-settled ones. An open request is never
// deleted, even if that leaves more than keepMax. It returns how many were
// deleted.
func (db *DB) PruneRequests(ctx context.Context, settledBefore int64, keepMax int) (int64, error) {
	var n int64
	err := db.write(ctx, func(tx *sql.Tx) error {
		if settledBefore > 0 {
			res, err := tx.ExecContext(ctx,
				`DELETE FROM lease_requests WHERE state IN `+terminalStates+` AND settled_at < ?`,
				settledBefore)
			if err != nil {
				return err
			}
			k, err := res.RowsAffected()
			if err != nil {
				return err
			}
			n += k
		}
		if keepMax > 0 {
			var total int64
			if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM lease_requests`).Scan(&total); err != nil {
				return err
			}
			if excess := total - int64(keepMax); excess > 0 {
				res, err := tx.ExecContext(ctx, `DELETE FROM lease_requests WHERE rowid IN (
	SELECT rowid FROM lease_requests WHERE state IN `+terminalStates+`
	ORDER BY settled_at, created_at, rowid LIMIT ?)`, excess)
				if err != nil {
					return err
				}
				k, err := res.RowsAffected()
				if err != nil {
					return err
				}
				n += k
			}
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("store: prune requests: %w", err)
	}
	return n, nil
}

// PruneEvents deletes all but the newest keepMax events and returns how many
// it deleted. keepMax <= 0 deletes nothing: an unset limit must not empty the
// log. Seqs of deleted events are not reused.
func (db *DB) PruneEvents(ctx context.Context, keepMax int) (int64, error) {
	if keepMax <= 0 {
		return 0, nil
	}
	var n int64
	err := db.write(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM events WHERE seq <= (
	SELECT seq FROM events ORDER BY seq DESC LIMIT 1 OFFSET ?)`, keepMax)
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
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
	err := db.write(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx,
			`DELETE FROM leases WHERE ended_at <> 0 AND ended_at < ?`, endedBefore)
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("store: prune leases: %w", err)
	}
	return n, nil
}

// write runs fn in a transaction on the writer connection and commits it if
// fn succeeds.
func (db *DB) write(ctx context.Context, fn func(*sql.Tx) error) error {
	tx, err := db.w.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	if err := fn(tx); err != nil {
		return errors.Join(err, ignoreDone(tx.Rollback()))
	}
	return tx.Commit()
}

// ignoreDone drops the error Rollback reports when database/sql has already
// rolled the transaction back because its context ended; the context's error
// is what the caller needs to see.
func ignoreDone(err error) error {
	if errors.Is(err, sql.ErrTxDone) {
		return nil
	}
	return err
}
