package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/store"
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
//
// A device, lease or request named more than once in c is written once, with
// its last version, at the place of its first.
func (db *DB) Commit(ctx context.Context, c store.Change) ([]contract.Event, error) {
	if c.Empty() {
		return nil, nil
	}
	c.Devices = lastOfEach(c.Devices, func(d store.Device) string { return d.ID })
	c.Leases = lastOfEach(c.Leases, func(l store.Lease) string { return l.ID })
	c.Requests = lastOfEach(c.Requests, func(r contract.LeaseRequestRecord) string { return r.ID })
	// Everything that can be checked or encoded is done before the write
	// lock is taken, so the lock is held only for the SQL.
	records, err := check(c)
	if err != nil {
		return nil, fmt.Errorf("store: commit: %w", err)
	}

	var out []contract.Event
	err = db.write(ctx, func(tx *sql.Tx) error {
		// Devices before leases, so a lease may name a device created by the
		// same Change.
		if err := db.putDevices(ctx, tx, c.Devices); err != nil {
			return err
		}
		if err := db.putLeases(ctx, tx, c.Leases); err != nil {
			return err
		}
		if err := db.putRequests(ctx, tx, c.Requests, records); err != nil {
			return err
		}
		out, err = db.appendEvents(ctx, tx, c.Events)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("store: commit: %w", err)
	}
	return out, nil
}

// The put and append methods run inside Commit's transaction. Each takes its
// prepared statement only if it has rows to write: tx.StmtContext costs an
// allocation or two, and most decisions touch one or two of the tables.

func (db *DB) putDevices(ctx context.Context, tx *sql.Tx, ds []store.Device) error {
	if len(ds) == 0 {
		return nil
	}
	st := tx.StmtContext(ctx, db.st.upsertDevice)
	for _, d := range ds {
		if _, err := st.ExecContext(ctx,
			d.ID, string(d.Platform), d.Model, d.OSVersion, d.Driver, d.DriverDeviceID,
			d.Address, nullJSON(d.DriverData), string(d.State), d.CreatedAt, d.StateSince,
			d.LastUsedAt, d.DeferredReclaim, d.QuarantineAttempts, d.QuarantineNextRetry); err != nil {
			return fmt.Errorf("device %s: %w", d.ID, err)
		}
	}
	return nil
}

func (db *DB) putLeases(ctx context.Context, tx *sql.Tx, ls []store.Lease) error {
	if len(ls) == 0 {
		return nil
	}
	st := tx.StmtContext(ctx, db.st.upsertLease)
	for _, l := range ls {
		if _, err := st.ExecContext(ctx,
			l.ID, l.DeviceID, l.RequestID, l.RequesterID, l.OwnerID, l.GrantedAt,
			l.TTLMs, l.LastRenewedAt, l.TTLDeadline, l.EndedAt, l.EndReason); err != nil {
			return fmt.Errorf("lease %s: %w", l.ID, err)
		}
	}
	return nil
}

// putRequests writes rs; records[i] is the JSON of rs[i].
func (db *DB) putRequests(ctx context.Context, tx *sql.Tx, rs []contract.LeaseRequestRecord, records []string) error {
	if len(rs) == 0 {
		return nil
	}
	st := tx.StmtContext(ctx, db.st.upsertRequest)
	for i, r := range rs {
		var key any // NULL keeps keyless requests out of the unique index
		if r.IdempotencyKey != "" {
			key = r.IdempotencyKey
		}
		if _, err := st.ExecContext(ctx,
			r.ID, r.RequesterID, key, string(r.State), r.CreatedAt, r.SettledAt,
			records[i]); err != nil {
			return fmt.Errorf("request %s: %w", r.ID, err)
		}
	}
	return nil
}

// appendEvents appends es in order and returns them with their seqs.
func (db *DB) appendEvents(ctx context.Context, tx *sql.Tx, es []store.NewEvent) ([]contract.Event, error) {
	out := make([]contract.Event, 0, len(es))
	if len(es) == 0 {
		return out, nil
	}
	st := tx.StmtContext(ctx, db.st.insertEvent)
	for _, e := range es {
		res, err := st.ExecContext(ctx, e.ID, e.Timestamp, e.Event, nullJSON(e.Payload))
		if err != nil {
			return nil, fmt.Errorf("event %s: %w", e.ID, err)
		}
		seq, err := res.LastInsertId()
		if err != nil {
			return nil, fmt.Errorf("event %s: %w", e.ID, err)
		}
		out = append(out, contract.Event{
			ID:        e.ID,
			Seq:       seq,
			Timestamp: e.Timestamp,
			Event:     e.Event,
			Payload:   e.Payload,
		})
	}
	return out, nil
}

// lastOfEach returns xs with one element per key: the last one given for the
// key, at the position of the first. xs itself is left as it is.
func lastOfEach[T any](xs []T, key func(T) string) []T {
	if len(xs) < 2 {
		return xs
	}
	at := make(map[string]int, len(xs))
	out := make([]T, 0, len(xs))
	for _, x := range xs {
		k := key(x)
		if i, ok := at[k]; ok {
			out[i] = x
			continue
		}
		at[k] = len(out)
		out = append(out, x)
	}
	return out
}

// check checks c and encodes its request records. Malformed JSON is refused
// here because SQLite would store it happily and every later read that hands
// it to encoding/json would fail.
func check(c store.Change) (records []string, err error) {
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

// The pruning statements. Only settled requests and ended leases are ever
// deleted; events go oldest first.
const (
	pruneSettled  = `DELETE FROM lease_requests WHERE state IN ` + terminalStates + ` AND settled_at < ?`
	countRequests = `SELECT count(*) FROM lease_requests`
	pruneOldest   = `DELETE FROM lease_requests WHERE rowid IN (
	SELECT rowid FROM lease_requests WHERE state IN ` + terminalStates + `
	ORDER BY settled_at, created_at, rowid LIMIT ?)`
	pruneEvents = `DELETE FROM events WHERE seq <= (
	SELECT seq FROM events ORDER BY seq DESC LIMIT 1 OFFSET ?)`
	pruneLeases = `DELETE FROM leases WHERE ended_at <> 0 AND ended_at < ?`
)

// PruneRequests deletes settled requests: first those settled before
// settledBefore (when > 0), then, while more than keepMax requests remain
// (when keepMax > 0), the longest-settled ones. An open request is never
// deleted, even if that leaves more than keepMax. It returns how many were
// deleted.
func (db *DB) PruneRequests(ctx context.Context, settledBefore int64, keepMax int) (int64, error) {
	var n int64
	err := db.write(ctx, func(tx *sql.Tx) error {
		if settledBefore > 0 {
			res, err := tx.StmtContext(ctx, db.st.pruneSettled).ExecContext(ctx, settledBefore)
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
			if err := tx.StmtContext(ctx, db.st.countRequests).QueryRowContext(ctx).Scan(&total); err != nil {
				return err
			}
			if excess := total - int64(keepMax); excess > 0 {
				res, err := tx.StmtContext(ctx, db.st.pruneOldest).ExecContext(ctx, excess)
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
		res, err := tx.StmtContext(ctx, db.st.pruneEvents).ExecContext(ctx, keepMax)
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
		res, err := tx.StmtContext(ctx, db.st.pruneLeases).ExecContext(ctx, endedBefore)
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
