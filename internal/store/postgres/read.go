package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/store"
)

// defaultLimit bounds a read whose caller gave no limit.
const defaultLimit = 1000

const (
	loadDevices = `SELECT id, platform, model, os_version, driver,
	driver_device_id, address, driver_data, state, created_at, state_since, last_used_at,
	deferred_reclaim, quarantine_attempts, quarantine_next_retry, image_tag, mode, slimmed
FROM devices WHERE state <> $1 ORDER BY created_at, id`
	loadLeases = `SELECT id, device_id, request_id, requester_id, owner_id,
	granted_at, ttl_ms, last_renewed_at, ttl_deadline, ended_at, end_reason,
	bound_pid, bound_pid_started_at, id_chosen, chosen_id
FROM leases WHERE ended_at = 0 ORDER BY granted_at, id`
	loadRequests = `SELECT record FROM lease_requests
WHERE state NOT IN ` + terminalStates + ` ORDER BY created_at, ord`
	selectRequest      = `SELECT record FROM lease_requests WHERE id = $1`
	selectRequestByKey = `SELECT record FROM lease_requests WHERE requester_id = $1 AND idempotency_key = $2`
	selectRequests     = `SELECT record FROM lease_requests ORDER BY created_at DESC, ord DESC LIMIT $1`

	eventCols = `SELECT seq, id, timestamp, event, payload FROM events`
	// Zero filters match everything, as an EventQuery's zero fields do.
	eventsFrom   = eventCols + ` WHERE timestamp >= $1 AND seq > $2 ORDER BY seq LIMIT $3`
	eventsNewest = `SELECT * FROM (` + eventCols + ` ORDER BY seq DESC LIMIT $1) AS newest ORDER BY seq`
)

// Load returns the live devices, the active leases and the open requests,
// as of one committed state.
func (db *DB) Load(ctx context.Context) (store.Snapshot, error) {
	var s store.Snapshot
	err := pgx.BeginTxFunc(ctx, db.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		var err error
		if s.Devices, err = scanDevices(ctx, tx); err != nil {
			return fmt.Errorf("devices: %w", err)
		}
		if s.Leases, err = scanLeases(ctx, tx); err != nil {
			return fmt.Errorf("leases: %w", err)
		}
		rows, _ := tx.Query(ctx, loadRequests)
		if s.Requests, err = scanRecords(rows); err != nil {
			return fmt.Errorf("requests: %w", err)
		}
		return nil
	})
	if err != nil {
		return store.Snapshot{}, fmt.Errorf("store: load: %w", err)
	}
	return s, nil
}

func scanDevices(ctx context.Context, tx pgx.Tx) ([]store.Device, error) {
	rows, _ := tx.Query(ctx, loadDevices, string(contract.DeviceDeleted))
	defer rows.Close()
	var ds []store.Device
	for rows.Next() {
		var d store.Device
		var data *string
		var attempts int64
		if err := rows.Scan(&d.ID, &d.Platform, &d.Model, &d.OSVersion, &d.Driver,
			&d.DriverDeviceID, &d.Address, &data, &d.State, &d.CreatedAt, &d.StateSince,
			&d.LastUsedAt, &d.DeferredReclaim, &attempts, &d.QuarantineNextRetry, &d.ImageTag, &d.Mode, &d.Slimmed); err != nil {
			return nil, err
		}
		d.QuarantineAttempts = int(attempts)
		if data != nil {
			d.DriverData = json.RawMessage(*data)
		}
		ds = append(ds, d)
	}
	return ds, rows.Err()
}

func scanLeases(ctx context.Context, tx pgx.Tx) ([]store.Lease, error) {
	rows, _ := tx.Query(ctx, loadLeases)
	defer rows.Close()
	var ls []store.Lease
	for rows.Next() {
		var l store.Lease
		var key, chosen string
		var pid int64
		if err := rows.Scan(&key, &l.DeviceID, &l.RequestID, &l.RequesterID, &l.OwnerID,
			&l.GrantedAt, &l.TTLMs, &l.LastRenewedAt, &l.TTLDeadline, &l.EndedAt,
			&l.EndReason, &pid, &l.BoundPIDStartedAt, &l.IDChosenByRequester, &chosen); err != nil {
			return nil, err
		}
		l.BoundPID = int(pid)
		// The row's id is the unique key; a chosen id is the lease's id,
		// and the key then its Key (as the SQLite backend reads it).
		l.ID = key
		if l.IDChosenByRequester && chosen != "" && chosen != key {
			l.ID, l.Key = chosen, key
		}
		ls = append(ls, l)
	}
	return ls, rows.Err()
}

// Request returns the request with id, whatever its state.
func (db *DB) Request(ctx context.Context, id string) (contract.LeaseRequestRecord, bool, error) {
	r, ok, err := oneRecord(db.pool.QueryRow(ctx, selectRequest, id))
	if err != nil {
		return r, false, fmt.Errorf("store: request %s: %w", id, err)
	}
	return r, ok, nil
}

// RequestByKey returns requesterID's request with idempotency key key; a
// request without a key is never found by one.
func (db *DB) RequestByKey(ctx context.Context, requesterID, key string) (contract.LeaseRequestRecord, bool, error) {
	if key == "" {
		return contract.LeaseRequestRecord{}, false, nil
	}
	r, ok, err := oneRecord(db.pool.QueryRow(ctx, selectRequestByKey, requesterID, key))
	if err != nil {
		return r, false, fmt.Errorf("store: request by key: %w", err)
	}
	return r, ok, nil
}

func oneRecord(row pgx.Row) (contract.LeaseRequestRecord, bool, error) {
	var rec string
	if err := row.Scan(&rec); err != nil {
		if errors.Is(err, pgx.ErrNoRows) {
			return contract.LeaseRequestRecord{}, false, nil
		}
		return contract.LeaseRequestRecord{}, false, err
	}
	var r contract.LeaseRequestRecord
	if err := json.Unmarshal([]byte(rec), &r); err != nil {
		return contract.LeaseRequestRecord{}, false, err
	}
	return r, true, nil
}

// Requests returns up to limit requests, newest first; limit <= 0 means
// 1000.
func (db *DB) Requests(ctx context.Context, limit int) ([]contract.LeaseRequestRecord, error) {
	if limit <= 0 {
		limit = defaultLimit
	}
	rows, _ := db.pool.Query(ctx, selectRequests, limit)
	rs, err := scanRecords(rows)
	if err != nil {
		return nil, fmt.Errorf("store: requests: %w", err)
	}
	return rs, nil
}

func scanRecords(rows pgx.Rows) ([]contract.LeaseRequestRecord, error) {
	defer rows.Close()
	var out []contract.LeaseRequestRecord
	for rows.Next() {
		var rec string
		if err := rows.Scan(&rec); err != nil {
			return nil, err
		}
		var r contract.LeaseRequestRecord
		if err := json.Unmarshal([]byte(rec), &r); err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// Events returns events as q selects them (see store.EventQuery), oldest
// first.
func (db *DB) Events(ctx context.Context, q store.EventQuery) ([]contract.Event, error) {
	limit := q.Limit
	if limit <= 0 {
		limit = defaultLimit
	}
	var rows pgx.Rows
	if q.SinceTs > 0 || q.AfterSeq > 0 {
		rows, _ = db.pool.Query(ctx, eventsFrom, max(q.SinceTs, 0), max(q.AfterSeq, 0), limit)
	} else {
		rows, _ = db.pool.Query(ctx, eventsNewest, limit)
	}
	out, err := scanEvents(rows)
	if err != nil {
		return nil, fmt.Errorf("store: events: %w", err)
	}
	return out, nil
}

// scanEvents reads rows of eventCols to their end and closes them.
func scanEvents(rows pgx.Rows) ([]contract.Event, error) {
	defer rows.Close()
	var out []contract.Event
	for rows.Next() {
		var e contract.Event
		var payload *string
		if err := rows.Scan(&e.Seq, &e.ID, &e.Timestamp, &e.Event, &payload); err != nil {
			return nil, err
		}
		if payload != nil {
			e.Payload = json.RawMessage(*payload)
		}
		out = append(out, e)
	}
	return out, rows.Err()
}

// LastSeq is the last seq handed out (0 for none), which pruning never
// moves back.
func (db *DB) LastSeq(ctx context.Context) (int64, error) {
	var seq int64
	if err := db.pool.QueryRow(ctx, `SELECT last FROM event_seq WHERE id = 1`).Scan(&seq); err != nil {
		return 0, fmt.Errorf("store: last seq: %w", err)
	}
	return seq, nil
}

// Clock returns the stored clock reading; found is false before the first.
func (db *DB) Clock(ctx context.Context) (c store.Clock, found bool, err error) {
	err = db.pool.QueryRow(ctx, `SELECT wall_ms, boot_ns, boot_id FROM clock WHERE id = 1`).Scan(&c.WallMs, &c.BootNs, &c.BootID)
	if errors.Is(err, pgx.ErrNoRows) {
		return store.Clock{}, false, nil
	}
	if err != nil {
		return store.Clock{}, false, fmt.Errorf("store: clock: %w", err)
	}
	return c, true, nil
}
