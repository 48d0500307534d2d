package postgres

import (
	"context"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/store"
)

// writeLock is the advisory lock every write transaction takes first: it
// serializes writers across processes, so commits apply one at a time.
const writeLock = 0x73696d6c6f636b02 // "simlock" and 2

// terminalStates is the SQL list of the request states for which
// contract.RequestState.Terminal is true.
const terminalStates = "('granted', 'failed', 'cancelled')"

const (
	upsertDevice = `INSERT INTO devices (id, platform, model, os_version, driver, driver_device_id,
	address, driver_data, state, created_at, state_since, last_used_at,
	deferred_reclaim, quarantine_attempts, quarantine_next_retry, image_tag, mode, slimmed)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18)
ON CONFLICT (id) DO UPDATE SET
	platform = excluded.platform, model = excluded.model, os_version = excluded.os_version,
	driver = excluded.driver, driver_device_id = excluded.driver_device_id,
	address = excluded.address, driver_data = excluded.driver_data, state = excluded.state,
	created_at = excluded.created_at, state_since = excluded.state_since,
	last_used_at = excluded.last_used_at, deferred_reclaim = excluded.deferred_reclaim,
	quarantine_attempts = excluded.quarantine_attempts, quarantine_next_retry = excluded.quarantine_next_retry,
	image_tag = excluded.image_tag, mode = excluded.mode, slimmed = excluded.slimmed`
	updateDevice = `UPDATE devices SET platform = $2, model = $3, os_version = $4, driver = $5,
	driver_device_id = $6, address = $7, driver_data = $8, state = $9, created_at = $10,
	state_since = $11, last_used_at = $12, deferred_reclaim = $13, quarantine_attempts = $14,
	quarantine_next_retry = $15, image_tag = $16, mode = $17, slimmed = $18 WHERE id = $1`
	upsertLease = `INSERT INTO leases (id, device_id, request_id, requester_id, owner_id, granted_at,
	ttl_ms, last_renewed_at, ttl_deadline, ended_at, end_reason, bound_pid, bound_pid_started_at, id_chosen, chosen_id)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15)
ON CONFLICT (id) DO UPDATE SET
	device_id = excluded.device_id, request_id = excluded.request_id, requester_id = excluded.requester_id,
	owner_id = excluded.owner_id, granted_at = excluded.granted_at, ttl_ms = excluded.ttl_ms,
	last_renewed_at = excluded.last_renewed_at, ttl_deadline = excluded.ttl_deadline,
	ended_at = excluded.ended_at, end_reason = excluded.end_reason, bound_pid = excluded.bound_pid,
	bound_pid_started_at = excluded.bound_pid_started_at, id_chosen = excluded.id_chosen, chosen_id = excluded.chosen_id`
	updateLease = `UPDATE leases SET device_id = $2, request_id = $3, requester_id = $4, owner_id = $5,
	granted_at = $6, ttl_ms = $7, last_renewed_at = $8, ttl_deadline = $9, ended_at = $10,
	end_reason = $11, bound_pid = $12, bound_pid_started_at = $13, id_chosen = $14, chosen_id = $15 WHERE id = $1`
	upsertRequest = `INSERT INTO lease_requests (id, requester_id, idempotency_key, state, created_at, settled_at, record)
VALUES ($1, $2, $3, $4, $5, $6, $7)
ON CONFLICT (id) DO UPDATE SET requester_id = excluded.requester_id,
	idempotency_key = excluded.idempotency_key, state = excluded.state,
	created_at = excluded.created_at, settled_at = excluded.settled_at, record = excluded.record`
	upsertGrant = `INSERT INTO gateway_grants (key, worker_id, worker_lease_id, device_id, owner_id, requester_id, chosen_id, request_id, granted_at, platform)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)
ON CONFLICT (key) DO UPDATE SET worker_id = excluded.worker_id, worker_lease_id = excluded.worker_lease_id,
	device_id = excluded.device_id, owner_id = excluded.owner_id, requester_id = excluded.requester_id,
	chosen_id = excluded.chosen_id, request_id = excluded.request_id, granted_at = excluded.granted_at, term = excluded.term,
	platform = excluded.platform`
	upsertClock = `INSERT INTO clock (id, wall_ms, boot_ns, boot_id) VALUES (1, $1, $2, $3)
ON CONFLICT (id) DO UPDATE SET wall_ms = excluded.wall_ms, boot_ns = excluded.boot_ns, boot_id = excluded.boot_id`
	takeSeqs     = `UPDATE event_seq SET last = last + $1 WHERE id = 1 RETURNING last`
	insertEvents = `INSERT INTO events (seq, id, timestamp, event, payload)
SELECT * FROM unnest($1::bigint[], $2::text[], $3::bigint[], $4::text[], $5::text[])`
)

// errNotStored is a Change.Before naming a row the database does not hold.
var errNotStored = errors.New("not stored, though the change says it is")

// Commit writes c in one transaction and returns its events with their
// seqs. An empty Change writes nothing.
func (db *DB) Commit(ctx context.Context, c store.Change) ([]contract.Event, error) {
	if c.Empty() {
		return nil, nil
	}
	c, records, err := prepare(c)
	if err != nil {
		return nil, fmt.Errorf("store: commit: %w", err)
	}
	tx, err := db.begin(ctx)
	if err != nil {
		return nil, fmt.Errorf("store: commit: %w", err)
	}
	began := time.Now()
	out, err := db.apply(ctx, tx, c, records)
	if err == nil {
		if err = db.commit(ctx, tx); err == nil {
			db.committed(began)
			return out, nil
		}
	}
	return nil, fmt.Errorf("store: commit: %w", errors.Join(err, rollback(tx)))
}

// Reserve begins a write transaction and takes the write lock, waiting for
// another writer at most the busy timeout or until ctx ends.
func (db *DB) Reserve(ctx context.Context) (store.Reservation, error) {
	tx, err := db.begin(ctx)
	if err != nil {
		return nil, fmt.Errorf("store: reserve the write lock: %w", err)
	}
	return &reservation{db: db, tx: tx}, nil
}

// committed tells OnCommit how long a commit that began at began held the
// write lock.
func (db *DB) committed(began time.Time) {
	if db.onCommit != nil {
		db.onCommit(time.Since(began))
	}
}

// begin begins a write transaction holding the write lock. A wait for the
// lock past the busy timeout is store.ErrBusy. A connection the server
// ended while it sat in the pool (idle too long in an earlier
// transaction, the server restarted) fails the first statement sent on
// it; nothing was written then, so the transaction is begun once more on
// another connection.
func (db *DB) begin(ctx context.Context) (pgx.Tx, error) {
	tx, err := db.beginOnce(ctx)
	if err != nil && ctx.Err() == nil && connectionEnded(err) {
		tx, err = db.beginOnce(ctx)
	}
	return tx, err
}

// connectionEnded reports whether err is the end of the connection it was
// sent on, rather than an answer to the statement: a FATAL error or a
// broken connection, which another connection may not meet.
func connectionEnded(err error) bool {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Severity == "FATAL" || strings.HasPrefix(pe.Code, "08")
	}
	return pgconn.SafeToRetry(err) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)
}

func (db *DB) beginOnce(ctx context.Context) (pgx.Tx, error) {
	tx, err := db.pool.Begin(ctx)
	if err != nil {
		return nil, err
	}
	// lock_timeout bounds the wait for the advisory lock; simlock.term
	// is the term the rows of a fenced store's transaction carry (the
	// term columns' default; the fence checks the same term at COMMIT).
	// SET LOCAL ends with the transaction, and the values are numbers we
	// produced.
	if _, err := tx.Exec(ctx, fmt.Sprintf("SET LOCAL lock_timeout = %d; SET LOCAL simlock.term = %d", db.busyTimeout.Milliseconds(), db.term.Load())); err != nil {
		return nil, errors.Join(err, rollback(tx))
	}
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, int64(writeLock)); err != nil {
		rb := rollback(tx)
		var pe *pgconn.PgError
		if errors.As(err, &pe) && pe.Code == "55P03" { // lock_not_available
			return nil, errors.Join(fmt.Errorf("%w (%w)", store.ErrBusy, err), rb)
		}
		return nil, errors.Join(err, rb)
	}
	return tx, nil
}

// rollback rolls tx back with a context of its own, so that one ended by
// the caller's context is still given back.
func rollback(tx pgx.Tx) error {
	err := tx.Rollback(context.Background())
	if errors.Is(err, pgx.ErrTxClosed) {
		return nil
	}
	return err
}

// reservation is a write transaction begun, and the lock taken, ahead of
// its decision.
type reservation struct {
	db   *DB
	tx   pgx.Tx
	done bool
}

func (r *reservation) Commit(ctx context.Context, c store.Change) ([]contract.Event, error) {
	if r.done {
		return nil, errors.New("store: commit: the reservation has ended")
	}
	r.done = true
	if c.Empty() {
		return nil, rollback(r.tx)
	}
	c, records, err := prepare(c)
	if err == nil {
		var out []contract.Event
		began := time.Now()
		if out, err = r.db.apply(ctx, r.tx, c, records); err == nil {
			if err = r.db.commit(ctx, r.tx); err == nil {
				r.db.committed(began)
				return out, nil
			}
		}
	}
	return nil, fmt.Errorf("store: commit: %w", errors.Join(err, rollback(r.tx)))
}

func (r *reservation) Release() {
	if r.done {
		return
	}
	r.done = true
	_ = rollback(r.tx)
}

// prepare keeps the last version of each row and checks c, returning the
// request records encoded.
func prepare(c store.Change) (store.Change, [][]byte, error) {
	c.Devices = lastOfEach(c.Devices, func(d store.Device) string { return d.ID })
	c.Leases = lastOfEach(c.Leases, func(l store.Lease) string { return l.UniqueKey() })
	c.Requests = lastOfEach(c.Requests, func(r contract.LeaseRequestRecord) string { return r.ID })
	records, err := c.Check()
	return c, records, err
}

// apply writes c in tx: devices, then leases (a lease may name a device of
// the same Change), requests, grants, the clock, and the events, whose
// seqs it returns.
func (db *DB) apply(ctx context.Context, tx pgx.Tx, c store.Change, records [][]byte) ([]contract.Event, error) {
	for _, d := range c.Devices {
		was, known := c.Before.Devices[d.ID]
		if known && reflect.DeepEqual(was, d) {
			continue
		}
		if err := writeRow(ctx, tx, known, upsertDevice, updateDevice, append([]any{d.ID}, deviceValues(d)...)); err != nil {
			return nil, fmt.Errorf("device %s: %w", d.ID, err)
		}
	}
	for _, l := range c.Leases {
		key := l.UniqueKey()
		was, known := c.Before.Leases[key]
		if known && was == l {
			continue
		}
		if err := writeRow(ctx, tx, known, upsertLease, updateLease, append([]any{key}, leaseValues(l)...)); err != nil {
			return nil, fmt.Errorf("lease %s: %w", key, err)
		}
	}
	for i, r := range c.Requests {
		var key any // NULL keeps keyless requests out of the unique index
		if r.IdempotencyKey != "" {
			key = r.IdempotencyKey
		}
		if _, err := tx.Exec(ctx, upsertRequest, r.ID, r.RequesterID, key, string(r.State), r.CreatedAt, r.SettledAt,
			string(records[i])); err != nil {
			return nil, fmt.Errorf("request %s: %w", r.ID, err)
		}
	}
	for _, g := range c.Grants {
		if _, err := tx.Exec(ctx, upsertGrant, g.Key, g.WorkerID, g.WorkerLeaseID, g.DeviceID, g.OwnerID, g.RequesterID,
			g.ChosenID, g.RequestID, g.GrantedAt, string(g.Platform)); err != nil {
			return nil, fmt.Errorf("grant %s: %w", g.Key, err)
		}
	}
	if len(c.EndedGrants) > 0 {
		if _, err := tx.Exec(ctx, `DELETE FROM gateway_grants WHERE key = ANY($1)`, c.EndedGrants); err != nil {
			return nil, fmt.Errorf("end grants: %w", err)
		}
	}
	if c.Clock != nil {
		if _, err := tx.Exec(ctx, upsertClock, c.Clock.WallMs, c.Clock.BootNs, c.Clock.BootID); err != nil {
			return nil, fmt.Errorf("clock: %w", err)
		}
	}
	out, err := appendEvents(ctx, tx, c.Events)
	if err != nil {
		return nil, err
	}
	return out, db.rollUp(ctx, tx, out)
}

// writeRow upserts a row, or, when the Change says it is stored, updates
// it and fails unless exactly that row changed.
func writeRow(ctx context.Context, tx pgx.Tx, stored bool, upsert, update string, args []any) error {
	if !stored {
		_, err := tx.Exec(ctx, upsert, args...)
		return err
	}
	tag, err := tx.Exec(ctx, update, args...)
	if err != nil {
		return err
	}
	if tag.RowsAffected() != 1 {
		return errNotStored
	}
	return nil
}

// appendEvents appends es in order, with the next len(es) seqs.
func appendEvents(ctx context.Context, tx pgx.Tx, es []store.NewEvent) ([]contract.Event, error) {
	if len(es) == 0 {
		return []contract.Event{}, nil
	}
	var last int64
	if err := tx.QueryRow(ctx, takeSeqs, len(es)).Scan(&last); err != nil {
		return nil, fmt.Errorf("events: take seqs: %w", err)
	}
	first := last - int64(len(es)) + 1
	seqs, ids, tss, names, payloads := make([]int64, len(es)), make([]string, len(es)), make([]int64, len(es)),
		make([]string, len(es)), make([]*string, len(es))
	out := make([]contract.Event, len(es))
	for i, e := range es {
		seqs[i], ids[i], tss[i], names[i] = first+int64(i), e.ID, e.Timestamp, e.Event
		if len(e.Payload) > 0 {
			p := string(e.Payload)
			payloads[i] = &p
		}
		out[i] = contract.Event{ID: e.ID, Seq: seqs[i], Timestamp: e.Timestamp, Event: e.Event, Payload: e.Payload}
	}
	if _, err := tx.Exec(ctx, insertEvents, seqs, ids, tss, names, payloads); err != nil {
		return nil, fmt.Errorf("events %s…: %w", es[0].ID, err)
	}
	return out, nil
}

func deviceValues(d store.Device) []any {
	var data *string // NULL reads back as nil, not as an empty document
	if len(d.DriverData) > 0 {
		s := string(d.DriverData)
		data = &s
	}
	return []any{string(d.Platform), d.Model, d.OSVersion, d.Driver, d.DriverDeviceID, d.Address,
		data, string(d.State), d.CreatedAt, d.StateSince, d.LastUsedAt, d.DeferredReclaim,
		int64(d.QuarantineAttempts), d.QuarantineNextRetry, d.ImageTag, string(d.Mode), d.Slimmed}
}

func leaseValues(l store.Lease) []any {
	chosen := ""
	if l.IDChosenByRequester {
		chosen = l.ID
	}
	return []any{l.DeviceID, l.RequestID, l.RequesterID, l.OwnerID, l.GrantedAt,
		l.TTLMs, l.LastRenewedAt, l.TTLDeadline, l.EndedAt, l.EndReason, int64(l.BoundPID), l.BoundPIDStartedAt, l.IDChosenByRequester, chosen}
}

// lastOfEach returns xs with one element per key: the last one given for the
// key, at the position of the first.
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
