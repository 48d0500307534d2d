package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	msqlite "modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

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
	deferred_reclaim, quarantine_attempts, quarantine_next_retry, image_tag, mode, slimmed)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (id) DO UPDATE SET
	platform = excluded.platform, model = excluded.model, os_version = excluded.os_version,
	driver = excluded.driver, driver_device_id = excluded.driver_device_id,
	address = excluded.address, driver_data = excluded.driver_data, state = excluded.state,
	created_at = excluded.created_at, state_since = excluded.state_since,
	last_used_at = excluded.last_used_at, deferred_reclaim = excluded.deferred_reclaim,
	quarantine_attempts = excluded.quarantine_attempts, quarantine_next_retry = excluded.quarantine_next_retry,
	image_tag = excluded.image_tag, mode = excluded.mode, slimmed = excluded.slimmed`

	upsertLease = `INSERT INTO leases (id, device_id, request_id, requester_id, owner_id, granted_at,
	ttl_ms, last_renewed_at, ttl_deadline, ended_at, end_reason, bound_pid, bound_pid_started_at, id_chosen, chosen_id)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (id) DO UPDATE SET
	device_id = excluded.device_id, request_id = excluded.request_id,
	requester_id = excluded.requester_id, owner_id = excluded.owner_id,
	granted_at = excluded.granted_at, ttl_ms = excluded.ttl_ms,
	last_renewed_at = excluded.last_renewed_at, ttl_deadline = excluded.ttl_deadline,
	ended_at = excluded.ended_at, end_reason = excluded.end_reason,
	bound_pid = excluded.bound_pid, bound_pid_started_at = excluded.bound_pid_started_at,
	id_chosen = excluded.id_chosen, chosen_id = excluded.chosen_id`

	upsertRequest = `INSERT INTO lease_requests (id, requester_id, idempotency_key, state,
	created_at, settled_at, record)
VALUES (?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (id) DO UPDATE SET
	requester_id = excluded.requester_id, idempotency_key = excluded.idempotency_key,
	state = excluded.state, created_at = excluded.created_at,
	settled_at = excluded.settled_at, record = excluded.record`
)

// Commit writes c in one transaction and returns its events as appended, with
// their seqs, in order. If it returns an error, nothing of c was written.
// An empty Change is a no-op returning nil, nil.
//
// A device, lease or request named more than once in c is written once, with
// its last version, at the place of its first. A device or lease c.Before
// names is written as an update of the columns that differ from it (nothing
// when none does); a Before that names a row the database does not hold is
// an error, and nothing is written.
func (db *DB) Commit(ctx context.Context, c store.Change) ([]contract.Event, error) {
	if c.Empty() {
		return nil, nil
	}
	// Everything that can be checked, encoded or prepared is done before
	// the write lock is taken, so the lock is held only for the SQL.
	c, p, err := db.plan(ctx, c, false)
	if err != nil {
		return nil, fmt.Errorf("store: commit: %w", err)
	}
	var out []contract.Event
	began := time.Now()
	err = db.write(ctx, func(tx *sql.Tx) error {
		out, err = db.apply(ctx, tx, c, p)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("store: commit: %w", err)
	}
	db.committed(began)
	return out, nil
}

// committed tells OnCommit how long a commit that began at began held the
// writer.
func (db *DB) committed(began time.Time) {
	if db.onCommit != nil {
		db.onCommit(time.Since(began))
	}
}

// Reserve takes the write lock for one decision: it begins the writer's
// transaction (BEGIN IMMEDIATE), waiting for another process's lock at
// most busy_timeout, or until ctx ends; such a lock still held then is
// store.ErrBusy. Until the Reservation's Commit or Release, every other
// write of this DB waits for it.
func (db *DB) Reserve(ctx context.Context) (store.Reservation, error) {
	tx, err := begin(ctx, db.w, db.wait)
	if err != nil {
		return nil, fmt.Errorf("store: reserve the write lock: %w", err)
	}
	return &reservation{db: db, tx: tx}, nil
}

// busy reports whether err is SQLite's SQLITE_BUSY: another connection's
// lock outlasted busy_timeout.
func busy(err error) bool {
	var se *msqlite.Error
	return errors.As(err, &se) && se.Code()&0xff == sqlite3.SQLITE_BUSY
}

// reservation is a write transaction begun ahead of its decision.
type reservation struct {
	db   *DB
	tx   *sql.Tx
	done bool
}

// Commit writes c under the reservation, as DB.Commit would, and ends it.
// Statements not prepared yet run as SQL, and are prepared for the next
// commit once the writer is free.
func (r *reservation) Commit(ctx context.Context, c store.Change) ([]contract.Event, error) {
	if r.done {
		return nil, errors.New("store: commit: the reservation has ended")
	}
	r.done = true
	if c.Empty() {
		return nil, ignoreDone(r.tx.Rollback())
	}
	c, p, err := r.db.plan(ctx, c, true)
	if err == nil {
		var out []contract.Event
		began := time.Now()
		if out, err = r.db.apply(ctx, r.tx, c, p); err == nil {
			err = ctx.Err() // apply's statements do not watch ctx
		}
		if err == nil {
			if err = r.tx.Commit(); err == nil {
				r.db.committed(began)
				r.db.warm(p.cold)
				return out, nil
			}
		}
	}
	return nil, fmt.Errorf("store: commit: %w", errors.Join(err, ignoreDone(r.tx.Rollback())))
}

// Release gives the write lock back unused.
func (r *reservation) Release() {
	if r.done {
		return
	}
	r.done = true
	_ = r.tx.Rollback()
}

// warm prepares, in the background, the statements a reserved commit ran
// as SQL: the writer is free by then, or soon.
func (db *DB) warm(cold []func(context.Context)) {
	if len(cold) == 0 {
		return
	}
	db.bg.Go(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		for _, f := range cold {
			f(ctx)
		}
	})
}

// commitPlan is what a commit writes, worked out before it writes: the
// request records encoded, the device and lease statements, the event
// inserts, and, for a reserved commit, the statements it runs as SQL for
// want of prepared ones.
type commitPlan struct {
	records [][]byte
	rows    []rowWrite
	events  []stmtOrSQL
	cold    []func(context.Context)
}

// stmtOrSQL is a prepared statement, or, when there was none, its SQL.
type stmtOrSQL struct {
	stmt  *sql.Stmt
	query string
}

// exec runs it in tx.
func (s stmtOrSQL) exec(ctx context.Context, tx *sql.Tx, args ...any) (sql.Result, error) {
	if s.stmt != nil {
		return tx.StmtContext(ctx, s.stmt).ExecContext(ctx, args...)
	}
	return tx.ExecContext(ctx, s.query, args...)
}

// plan checks and encodes c, one row per id (the last version), and finds
// its statements: prepared on the writer when they are not yet, or, when
// reserved (the writer is this commit's already), run as SQL.
func (db *DB) plan(ctx context.Context, c store.Change, reserved bool) (store.Change, commitPlan, error) {
	c.Devices = lastOfEach(c.Devices, func(d store.Device) string { return d.ID })
	c.Leases = lastOfEach(c.Leases, func(l store.Lease) string { return l.UniqueKey() })
	c.Requests = lastOfEach(c.Requests, func(r contract.LeaseRequestRecord) string { return r.ID })
	var p commitPlan
	var err error
	if p.records, err = c.Check(); err != nil {
		return c, p, err
	}
	if p.rows, err = db.planRows(ctx, c, reserved, &p.cold); err != nil {
		return c, p, err
	}
	p.events, err = db.planEvents(ctx, c.Events, reserved, &p.cold)
	return c, p, err
}

// apply writes c in tx by plan p and returns its events with their seqs.
func (db *DB) apply(ctx context.Context, tx *sql.Tx, c store.Change, p commitPlan) ([]contract.Event, error) {
	// The statements run on a context that cannot end: for one that can,
	// the driver starts a goroutine per statement to interrupt it, two to
	// nine goroutines a decision, to guard statements that take
	// microseconds and wait for no lock (the transaction holds the write
	// lock already). The commit still honours ctx: before COMMIT, a ctx
	// that ended rolls the transaction back.
	ctx = context.WithoutCancel(ctx)
	// Devices before leases (rows is in that order), so a lease may name
	// a device created by the same Change.
	for _, r := range p.rows {
		res, err := r.st.exec(ctx, tx, r.args...)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", r.what, err)
		}
		if r.update {
			if n, err := res.RowsAffected(); err != nil || n != 1 {
				return nil, fmt.Errorf("%s: %w", r.what, errNotStored)
			}
		}
	}
	if err := db.putRequests(ctx, tx, c.Requests, p.records); err != nil {
		return nil, err
	}
	if err := putGrants(ctx, tx, c.Grants, c.EndedGrants); err != nil {
		return nil, err
	}
	if c.Clock != nil {
		if err := putClock(ctx, tx, *c.Clock); err != nil {
			return nil, err
		}
	}
	out, err := appendEvents(ctx, tx, c.Events, p.events)
	if err != nil {
		return nil, err
	}
	return out, db.rollUp(ctx, tx, out)
}

// errNotStored is a Change.Before naming a row the database does not hold.
var errNotStored = errors.New("not stored, though the change says it is")

// rowWrite is one device or lease statement of a commit.
type rowWrite struct {
	st     stmtOrSQL
	args   []any
	update bool // an update by id: exactly one row must change
	what   string
}

// narrow is the update of mask's columns by n: prepared, or, reserved and
// not prepared yet, its SQL, with its preparation added to cold.
func (db *DB) narrow(ctx context.Context, n *narrowStmts, mask uint32, reserved bool, cold *[]func(context.Context)) (stmtOrSQL, error) {
	if !reserved {
		st, err := n.get(ctx, db.w, mask)
		return stmtOrSQL{stmt: st}, err
	}
	if st := n.peek(mask); st != nil {
		return stmtOrSQL{stmt: st}, nil
	}
	*cold = append(*cold, func(ctx context.Context) { _, _ = n.get(ctx, db.w, mask) })
	return stmtOrSQL{query: n.query(mask)}, nil
}

// planRows turns c's devices and leases into statements: whole upserts, or
// updates of the changed columns of rows c.Before names.
func (db *DB) planRows(ctx context.Context, c store.Change, reserved bool, cold *[]func(context.Context)) ([]rowWrite, error) {
	out := make([]rowWrite, 0, len(c.Devices)+len(c.Leases))
	for _, d := range c.Devices {
		now := deviceValues(d)
		w := rowWrite{what: "device " + d.ID}
		if was, ok := c.Before.Devices[d.ID]; ok {
			mask := changedMask(deviceValues(was), now)
			if mask == 0 {
				continue
			}
			st, err := db.narrow(ctx, &db.narrowDevice, mask, reserved, cold)
			if err != nil {
				return nil, err
			}
			w.st, w.args, w.update = st, append(masked(mask, now), d.ID), true
		} else {
			w.st, w.args = stmtOrSQL{stmt: db.st.upsertDevice}, append([]any{d.ID}, now...)
		}
		out = append(out, w)
	}
	for _, l := range c.Leases {
		now := leaseValues(l)
		key := l.UniqueKey()
		w := rowWrite{what: "lease " + key}
		if was, ok := c.Before.Leases[key]; ok {
			mask := changedMask(leaseValues(was), now)
			if mask == 0 {
				continue
			}
			st, err := db.narrow(ctx, &db.narrowLease, mask, reserved, cold)
			if err != nil {
				return nil, err
			}
			w.st, w.args, w.update = st, append(masked(mask, now), key), true
		} else {
			w.st, w.args = stmtOrSQL{stmt: db.st.upsertLease}, append([]any{key}, now...)
		}
		out = append(out, w)
	}
	return out, nil
}

// planEvents finds the inserts that append es: one per maxEventRows.
func (db *DB) planEvents(ctx context.Context, es []store.NewEvent, reserved bool, cold *[]func(context.Context)) ([]stmtOrSQL, error) {
	var out []stmtOrSQL
	for len(es) > 0 {
		n := min(len(es), maxEventRows)
		switch st := db.events.peek(n); {
		case st != nil:
			out = append(out, stmtOrSQL{stmt: st})
		case reserved:
			*cold = append(*cold, func(ctx context.Context) { _, _ = db.events.get(ctx, db.w, n) })
			out = append(out, stmtOrSQL{query: db.events.query(n)})
		default:
			st, err := db.events.get(ctx, db.w, n)
			if err != nil {
				return nil, err
			}
			out = append(out, stmtOrSQL{stmt: st})
		}
		es = es[n:]
	}
	return out, nil
}

// putRequests writes rs; records[i] is the JSON of rs[i].
func (db *DB) putRequests(ctx context.Context, tx *sql.Tx, rs []contract.LeaseRequestRecord, records [][]byte) error {
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
			string(records[i])); err != nil {
			return fmt.Errorf("request %s: %w", r.ID, err)
		}
	}
	return nil
}

// appendEvents appends es in order, by the inserts planEvents found, and
// returns them with their seqs. A multi-row insert under the one writer
// gives its rows consecutive seqs, the last of which it reports.
func appendEvents(ctx context.Context, tx *sql.Tx, es []store.NewEvent, stmts []stmtOrSQL) ([]contract.Event, error) {
	out := make([]contract.Event, 0, len(es))
	for _, st := range stmts {
		n := min(len(es), maxEventRows)
		batch := es[:n]
		es = es[n:]
		args := make([]any, 0, 4*n)
		for _, e := range batch {
			args = append(args, e.ID, e.Timestamp, e.Event, nullJSON(e.Payload))
		}
		res, err := st.exec(ctx, tx, args...)
		if err != nil {
			return nil, fmt.Errorf("events %s…: %w", batch[0].ID, err)
		}
		last, err := res.LastInsertId()
		if err != nil {
			return nil, fmt.Errorf("events %s…: %w", batch[0].ID, err)
		}
		for i, e := range batch {
			out = append(out, contract.Event{
				ID: e.ID, Seq: last - int64(n-1-i), Timestamp: e.Timestamp, Event: e.Event, Payload: e.Payload,
			})
		}
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
	// Age deletes a prefix too, up to the newest event older than the
	// cutoff: one written under a clock that stepped back goes with its
	// neighbours, so what is kept is always a run of seqs.
	pruneAgedEvents = `DELETE FROM events WHERE seq <= (
	SELECT max(seq) FROM events WHERE timestamp < ?)`
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

// PruneEvents deletes the oldest events: first those up to the newest one
// older than olderThan (when > 0), then all but the newest keepMax (when >
// 0). It returns how many it deleted. What is kept is always a run of
// consecutive seqs, so the log's size is its seq span (EventLogSpan). Seqs
// of deleted events are not reused. In the same transaction it keeps the
// usage rollups to the minutes of the events kept, and gathers the closed
// hours' minutes (see pruneUsage).
func (db *DB) PruneEvents(ctx context.Context, olderThan int64, keepMax int) (int64, error) {
	var n int64
	err := db.write(ctx, func(tx *sql.Tx) error {
		for _, step := range []struct {
			on  bool
			st  *sql.Stmt
			arg int64
		}{
			{olderThan > 0, db.st.pruneAgedEvents, olderThan},
			{keepMax > 0, db.st.pruneEvents, int64(keepMax)},
		} {
			if !step.on {
				continue
			}
			res, err := tx.StmtContext(ctx, step.st).ExecContext(ctx, step.arg)
			if err != nil {
				return err
			}
			k, err := res.RowsAffected()
			if err != nil {
				return err
			}
			n += k
		}
		return db.pruneUsage(ctx, tx)
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
	tx, err := begin(ctx, db.w, db.wait)
	if err != nil {
		return err
	}
	if err := fn(tx); err != nil {
		return errors.Join(err, ignoreDone(tx.Rollback()))
	}
	// The transaction's own context never ends (begin): a ctx that ended
	// while fn ran rolls it back here.
	if err := ctx.Err(); err != nil {
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
