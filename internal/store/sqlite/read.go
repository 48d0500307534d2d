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

// defaultLimit bounds a read whose caller gave no limit, so that an API call
// cannot pull the whole history into memory.
const defaultLimit = 1000

// The reads, prepared at Open on the read pool.
const (
	loadDevices = `SELECT id, platform, model, os_version, driver,
	driver_device_id, address, driver_data, state, created_at, state_since, last_used_at,
	deferred_reclaim, quarantine_attempts, quarantine_next_retry, image_tag, mode, slimmed
FROM devices WHERE state <> ? ORDER BY created_at, id`
	loadLeases = `SELECT id, device_id, request_id, requester_id, owner_id,
	granted_at, ttl_ms, last_renewed_at, ttl_deadline, ended_at, end_reason,
	bound_pid, bound_pid_started_at, id_chosen, chosen_id
FROM leases WHERE ended_at = 0 ORDER BY granted_at, id`
	loadRequests = `SELECT record FROM lease_requests
WHERE state NOT IN ` + terminalStates + ` ORDER BY created_at, rowid`

	selectRequest      = `SELECT record FROM lease_requests WHERE id = ?`
	selectRequestByKey = `SELECT record FROM lease_requests WHERE requester_id = ? AND idempotency_key = ?`
	selectRequests     = `SELECT record FROM lease_requests ORDER BY created_at DESC, rowid DESC LIMIT ?`

	// One statement per shape of EventQuery, so each keeps the plan that
	// suits it: a filter by seq walks the rowid, a filter by time the
	// timestamp index.
	eventCols        = `SELECT seq, id, timestamp, event, payload FROM events`
	eventsSince      = eventCols + ` WHERE timestamp >= ? ORDER BY seq LIMIT ?`
	eventsAfter      = eventCols + ` WHERE seq > ? ORDER BY seq LIMIT ?`
	eventsSinceAfter = eventCols + ` WHERE timestamp >= ? AND seq > ? ORDER BY seq LIMIT ?`
	eventsNewest     = `SELECT * FROM (` + eventCols + ` ORDER BY seq DESC LIMIT ?) ORDER BY seq`

	// lastSeq reads SQLite's AUTOINCREMENT counter rather than the events
	// table, so that pruning can never move it backwards.
	lastSeq     = `SELECT coalesce((SELECT seq FROM sqlite_sequence WHERE name = 'events'), 0)`
	oldestEvent = `SELECT seq, timestamp FROM events ORDER BY seq LIMIT 1`
)

// Load returns what a starting daemon needs to resume: the live devices, the
// active leases and the open requests, as of one committed state.
func (db *DB) Load(ctx context.Context) (store.Snapshot, error) {
	var s store.Snapshot
	// One read transaction, so the three lists agree with each other even if
	// a commit lands between the queries.
	tx, err := db.r.BeginTx(ctx, nil)
	if err != nil {
		return store.Snapshot{}, fmt.Errorf("store: load: %w", err)
	}
	defer tx.Rollback()

	if s.Devices, err = db.loadDevices(ctx, tx); err != nil {
		return store.Snapshot{}, fmt.Errorf("store: load: devices: %w", err)
	}
	if s.Leases, err = db.loadLeases(ctx, tx); err != nil {
		return store.Snapshot{}, fmt.Errorf("store: load: leases: %w", err)
	}
	rows, err := tx.StmtContext(ctx, db.st.loadRequests).QueryContext(ctx)
	if err != nil {
		return store.Snapshot{}, fmt.Errorf("store: load: requests: %w", err)
	}
	if s.Requests, err = scanRecords(rows); err != nil {
		return store.Snapshot{}, fmt.Errorf("store: load: requests: %w", err)
	}
	return s, nil
}

func (db *DB) loadDevices(ctx context.Context, tx *sql.Tx) ([]store.Device, error) {
	rows, err := tx.StmtContext(ctx, db.st.loadDevices).QueryContext(ctx, string(contract.DeviceDeleted))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var ds []store.Device
	for rows.Next() {
		var d store.Device
		var data sql.NullString
		if err := rows.Scan(&d.ID, &d.Platform, &d.Model, &d.OSVersion, &d.Driver,
			&d.DriverDeviceID, &d.Address, &data, &d.State, &d.CreatedAt, &d.StateSince,
			&d.LastUsedAt, &d.DeferredReclaim, &d.QuarantineAttempts, &d.QuarantineNextRetry, &d.ImageTag, &d.Mode, &d.Slimmed); err != nil {
			return nil, err
		}
		if data.Valid {
			d.DriverData = json.RawMessage(data.String)
		}
		ds = append(ds, d)
	}
	return ds, rows.Err()
}

func (db *DB) loadLeases(ctx context.Context, tx *sql.Tx) ([]store.Lease, error) {
	rows, err := tx.StmtContext(ctx, db.st.loadLeases).QueryContext(ctx)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var ls []store.Lease
	for rows.Next() {
		var l store.Lease
		var key, chosen string
		if err := rows.Scan(&key, &l.DeviceID, &l.RequestID, &l.RequesterID, &l.OwnerID,
			&l.GrantedAt, &l.TTLMs, &l.LastRenewedAt, &l.TTLDeadline, &l.EndedAt,
			&l.EndReason, &l.BoundPID, &l.BoundPIDStartedAt, &l.IDChosenByRequester, &chosen); err != nil {
			return nil, err
		}
		l.ID = key
		if l.IDChosenByRequester && chosen != "" && chosen != key {
			l.ID, l.Key = chosen, key
		}
		ls = append(ls, l)
	}
	return ls, rows.Err()
}

// Request returns the request with the given id, and whether there is one.
func (db *DB) Request(ctx context.Context, id string) (contract.LeaseRequestRecord, bool, error) {
	r, ok, err := oneRecord(db.st.request.QueryRowContext(ctx, id))
	if err != nil {
		return contract.LeaseRequestRecord{}, false, fmt.Errorf("store: request %s: %w", id, err)
	}
	return r, ok, nil
}

// RequestByKey returns the request requesterID made with idempotency key key,
// and whether there is one. An empty key matches nothing: requests without a
// key are never the same request.
func (db *DB) RequestByKey(ctx context.Context, requesterID, key string) (contract.LeaseRequestRecord, bool, error) {
	if key == "" {
		return contract.LeaseRequestRecord{}, false, nil
	}
	r, ok, err := oneRecord(db.st.requestByKey.QueryRowContext(ctx, requesterID, key))
	if err != nil {
		return contract.LeaseRequestRecord{}, false, fmt.Errorf("store: request by key: %w", err)
	}
	return r, ok, nil
}

// oneRecord decodes the record column of a single-row query, reporting
// whether there was a row.
func oneRecord(row *sql.Row) (contract.LeaseRequestRecord, bool, error) {
	var rec string
	err := row.Scan(&rec)
	if errors.Is(err, sql.ErrNoRows) {
		return contract.LeaseRequestRecord{}, false, nil
	}
	if err != nil {
		return contract.LeaseRequestRecord{}, false, err
	}
	var r contract.LeaseRequestRecord
	if err := json.Unmarshal([]byte(rec), &r); err != nil {
		return contract.LeaseRequestRecord{}, false, err
	}
	return r, true, nil
}

// Requests returns up to limit requests, open or settled, newest first.
// limit <= 0 means 1000.
func (db *DB) Requests(ctx context.Context, limit int) ([]contract.LeaseRequestRecord, error) {
	if limit <= 0 {
		limit = defaultLimit
	}
	rows, err := db.st.requests.QueryContext(ctx, limit)
	if err != nil {
		return nil, fmt.Errorf("store: requests: %w", err)
	}
	rs, err := scanRecords(rows)
	if err != nil {
		return nil, fmt.Errorf("store: requests: %w", err)
	}
	return rs, nil
}

// scanRecords decodes a result set of record columns and closes it.
func scanRecords(rows *sql.Rows) ([]contract.LeaseRequestRecord, error) {
	defer rows.Close()
	var rs []contract.LeaseRequestRecord
	for rows.Next() {
		var rec string
		if err := rows.Scan(&rec); err != nil {
			return nil, err
		}
		var r contract.LeaseRequestRecord
		if err := json.Unmarshal([]byte(rec), &r); err != nil {
			return nil, err
		}
		rs = append(rs, r)
	}
	return rs, rows.Err()
}

// Events returns events oldest first. With SinceTs or AfterSeq set it returns
// the oldest Limit events that match, so a reader can page forward by seq.
// With neither set it returns the newest Limit events, which is what a reader
// without a cursor wants to see.
func (db *DB) Events(ctx context.Context, q store.EventQuery) ([]contract.Event, error) {
	limit := q.Limit
	if limit <= 0 {
		limit = defaultLimit
	}
	var (
		rows *sql.Rows
		err  error
	)
	switch {
	case q.SinceTs > 0 && q.AfterSeq > 0:
		rows, err = db.st.eventsSinceAfter.QueryContext(ctx, q.SinceTs, q.AfterSeq, limit)
	case q.SinceTs > 0:
		rows, err = db.st.eventsSince.QueryContext(ctx, q.SinceTs, limit)
	case q.AfterSeq > 0:
		rows, err = db.st.eventsAfter.QueryContext(ctx, q.AfterSeq, limit)
	default:
		rows, err = db.st.eventsNewest.QueryContext(ctx, limit)
	}
	if err != nil {
		return nil, fmt.Errorf("store: events: %w", err)
	}
	es, err := scanEvents(rows)
	if err != nil {
		return nil, fmt.Errorf("store: events: %w", err)
	}
	return es, nil
}

// scanEvents decodes a result set of (seq, id, timestamp, event, payload)
// and closes it.
func scanEvents(rows *sql.Rows) ([]contract.Event, error) {
	defer rows.Close()
	var es []contract.Event
	for rows.Next() {
		var e contract.Event
		var payload sql.NullString
		if err := rows.Scan(&e.Seq, &e.ID, &e.Timestamp, &e.Event, &payload); err != nil {
			return nil, err
		}
		if payload.Valid {
			e.Payload = json.RawMessage(payload.String)
		}
		es = append(es, e)
	}
	return es, rows.Err()
}

// LastSeq returns the highest seq ever assigned, or 0 if no event was ever
// appended. Pruning never moves it backwards.
func (db *DB) LastSeq(ctx context.Context) (int64, error) {
	return db.lastSeqOn(ctx, db.st.lastSeq)
}

// EventLogSpan is store.EventLogSpan. Appends and PruneEvents keep the log
// a run of consecutive seqs, so the count is read off the span in two
// index lookups rather than a scan.
type EventLogSpan = store.EventLogSpan

// EventLogSpan reads the event log's extent, in one read transaction.
func (db *DB) EventLogSpan(ctx context.Context) (EventLogSpan, error) {
	var s EventLogSpan
	tx, err := db.r.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return s, fmt.Errorf("store: event log span: %w", err)
	}
	defer tx.Rollback()
	if s.LastSeq, err = db.lastSeqOn(ctx, tx.StmtContext(ctx, db.st.lastSeq)); err != nil {
		return s, err
	}
	switch err := tx.StmtContext(ctx, db.st.oldestEvent).QueryRowContext(ctx).Scan(&s.OldestSeq, &s.OldestTs); {
	case errors.Is(err, sql.ErrNoRows):
		return s, nil
	case err != nil:
		return s, fmt.Errorf("store: event log span: %w", err)
	}
	s.Events = s.LastSeq - s.OldestSeq + 1
	return s, nil
}

func (db *DB) lastSeqOn(ctx context.Context, st *sql.Stmt) (int64, error) {
	var seq int64
	if err := st.QueryRowContext(ctx).Scan(&seq); err != nil {
		return 0, fmt.Errorf("store: last seq: %w", err)
	}
	return seq, nil
}
