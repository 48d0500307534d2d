package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"sync"

	"github.com/simlock/simlock/internal/store"
)

// A decision writes only what it changed: a row the caller says is stored
// (Change.Before) is written as an UPDATE of the columns that differ, so a
// renewal rewrites three columns of one lease and no index page, where an
// upsert of every column would rewrite the row and each of its indexes.
// Events of one decision go in as one multi-row INSERT.

// deviceColumns are the devices table's columns after id, in the order
// deviceValues gives them.
var deviceColumns = []string{"platform", "model", "os_version", "driver", "driver_device_id", "address",
	"driver_data", "state", "created_at", "state_since", "last_used_at", "deferred_reclaim",
	"quarantine_attempts", "quarantine_next_retry", "image_tag", "mode", "slimmed"}

func deviceValues(d store.Device) []any {
	return []any{string(d.Platform), d.Model, d.OSVersion, d.Driver, d.DriverDeviceID, d.Address,
		nullJSON(d.DriverData), string(d.State), d.CreatedAt, d.StateSince, d.LastUsedAt, d.DeferredReclaim,
		d.QuarantineAttempts, d.QuarantineNextRetry, d.ImageTag, string(d.Mode), d.Slimmed}
}

// leaseColumns are the leases table's columns after id.
// The row's id is the lease's unique key (LeaseRecord.UniqueKey);
// chosen_id is its id when its request chose it.
var leaseColumns = []string{"device_id", "request_id", "requester_id", "owner_id", "granted_at",
	"ttl_ms", "last_renewed_at", "ttl_deadline", "ended_at", "end_reason", "bound_pid", "bound_pid_started_at", "id_chosen", "chosen_id"}

func leaseValues(l store.Lease) []any {
	chosen := ""
	if l.IDChosenByRequester {
		chosen = l.ID
	}
	return []any{l.DeviceID, l.RequestID, l.RequesterID, l.OwnerID, l.GrantedAt,
		l.TTLMs, l.LastRenewedAt, l.TTLDeadline, l.EndedAt, l.EndReason, l.BoundPID, l.BoundPIDStartedAt, l.IDChosenByRequester, chosen}
}

// changedMask has bit i set when column i differs between was and now.
func changedMask(was, now []any) uint32 {
	var m uint32
	for i := range now {
		if was[i] != now[i] {
			m |= 1 << i
		}
	}
	return m
}

// masked is the values of the columns in mask, in column order.
func masked(mask uint32, values []any) []any {
	out := make([]any, 0, len(values)+1)
	for i, v := range values {
		if mask&(1<<i) != 0 {
			out = append(out, v)
		}
	}
	return out
}

// narrowStmts prepares, once per column set, the UPDATE of those columns
// of one table's row by id. Statements are prepared on the writer outside
// any transaction (Commit prepares before it begins), then bound in it; a
// reserved commit, which holds the writer already, runs one not prepared
// yet as SQL and has it prepared once the writer is free (DB.warm).
type narrowStmts struct {
	table   string
	columns []string
	mu      sync.Mutex
	byMask  map[uint32]*sql.Stmt
}

// query is the UPDATE of the columns in mask.
func (n *narrowStmts) query(mask uint32) string {
	var set []string
	for i, c := range n.columns {
		if mask&(1<<i) != 0 {
			set = append(set, c+" = ?")
		}
	}
	return "UPDATE " + n.table + " SET " + strings.Join(set, ", ") + " WHERE id = ?"
}

// peek is the statement for mask if it was prepared already.
func (n *narrowStmts) peek(mask uint32) *sql.Stmt {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.byMask[mask]
}

// get is the statement for mask, prepared on w the first time. The lock
// is not held while it prepares: preparing waits for the writer
// connection, which a reserved decision may hold while it peeks.
func (n *narrowStmts) get(ctx context.Context, w *sql.DB, mask uint32) (*sql.Stmt, error) {
	if st := n.peek(mask); st != nil {
		return st, nil
	}
	st, err := w.PrepareContext(ctx, n.query(mask))
	if err != nil {
		return nil, fmt.Errorf("prepare update of %s: %w", n.table, err)
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if had := n.byMask[mask]; had != nil {
		st.Close()
		return had, nil
	}
	if n.byMask == nil {
		n.byMask = map[uint32]*sql.Stmt{}
	}
	n.byMask[mask] = st
	return st, nil
}

func (n *narrowStmts) close() {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, st := range n.byMask {
		st.Close()
	}
	n.byMask = nil
}

// maxEventRows is the most events one INSERT appends; more go in several.
const maxEventRows = 16

// eventStmts prepares the INSERT of n events, for each n used.
type eventStmts struct {
	mu    sync.Mutex
	byLen [maxEventRows + 1]*sql.Stmt
}

// query is the INSERT of n events.
func (e *eventStmts) query(n int) string {
	return "INSERT INTO events (id, timestamp, event, payload) VALUES " + strings.TrimSuffix(strings.Repeat("(?, ?, ?, ?), ", n), ", ")
}

// peek is the INSERT of n events if it was prepared already.
func (e *eventStmts) peek(n int) *sql.Stmt {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.byLen[n]
}

// get is the INSERT of n events, prepared on w the first time; as for
// narrowStmts.get, the lock is not held while it prepares.
func (e *eventStmts) get(ctx context.Context, w *sql.DB, n int) (*sql.Stmt, error) {
	if st := e.peek(n); st != nil {
		return st, nil
	}
	st, err := w.PrepareContext(ctx, e.query(n))
	if err != nil {
		return nil, fmt.Errorf("prepare insert of %d events: %w", n, err)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if had := e.byLen[n]; had != nil {
		st.Close()
		return had, nil
	}
	e.byLen[n] = st
	return st, nil
}

func (e *eventStmts) close() {
	e.mu.Lock()
	defer e.mu.Unlock()
	for i, st := range e.byLen {
		if st != nil {
			st.Close()
			e.byLen[i] = nil
		}
	}
}
