// Package store is the SQLite persistence of the simlock daemon.
//
// A DB holds the daemon's durable state: devices, leases, lease requests and
// the event log. The store does not decide anything. The caller (the daemon's
// core) owns every state transition and hands the store the outcome of each
// decision as one Change, which [DB.Commit] writes in a single transaction:
// either all of it is durable or none of it is. On start the daemon reads back
// what it needs to resume with [DB.Load]; the other read methods serve the API.
//
// Records are stored as given. The store validates only what would corrupt it
// or make a later read fail (empty IDs, malformed JSON); it does not check
// state transitions.
//
// The database runs in WAL mode with synchronous=NORMAL: a committed
// transaction survives the daemon being killed at any moment. It may not
// survive the machine losing power, which is an accepted trade for commit
// latency.
//
// Schema changes are numbered SQL files embedded in the binary and applied by
// [Open]; a database written by a newer build is refused rather than guessed
// at.
//
// A DB is safe for concurrent use by multiple goroutines. Writes are
// serialized on a single connection; reads use a separate pool and see the
// last committed state without waiting for a write in progress.
package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"path/filepath"

	"github.com/simlock/simlock/internal/contract"

	_ "modernc.org/sqlite" // registers the "sqlite" driver
)

// Device is a stored device record.
type Device struct {
	ID             string
	Platform       contract.Platform
	Model          string
	OSVersion      string
	Driver         string
	DriverDeviceID string
	Address        string
	DriverData     json.RawMessage
	State          contract.DeviceState
	CreatedAt      int64
	StateSince     int64
	LastUsedAt     int64
	// DeferredReclaim marks a device whose next clean must be a full wipe:
	// set when its lease ended and its clean was put off (lease-end
	// participants running, its platform unreadable at startup), cleared
	// when the device leaves reclaiming.
	DeferredReclaim bool
	// QuarantineAttempts counts the retries made to recover a quarantined
	// device; QuarantineNextRetry is when the next one is due (epoch ms, 0
	// for none).
	QuarantineAttempts  int
	QuarantineNextRetry int64
}

// Lease is a stored lease; EndedAt 0 means active.
type Lease struct {
	contract.LeaseRecord
	RequestID string
	EndedAt   int64
	EndReason string
}

// NewEvent is an event to append; the store assigns its seq.
type NewEvent struct {
	ID        string
	Timestamp int64
	Event     string
	Payload   json.RawMessage
}

// Change is one decision: everything in it commits in one transaction or not
// at all.
type Change struct {
	Devices  []Device                      // upserted by ID
	Leases   []Lease                       // upserted by ID
	Requests []contract.LeaseRequestRecord // upserted by ID (record JSON + indexed columns)
	Events   []NewEvent                    // appended in order
}

// Snapshot is what a starting daemon loads.
type Snapshot struct {
	Devices  []Device                      // every device whose state is not "deleted", ordered by created_at
	Leases   []Lease                       // active leases only (ended_at = 0), ordered by granted_at
	Requests []contract.LeaseRequestRecord // requests whose state is not terminal (queued/starting), ordered by created_at
}

// EventQuery selects events for [DB.Events].
type EventQuery struct {
	SinceTs  int64 // when > 0, only events with timestamp >= SinceTs
	AfterSeq int64 // when > 0, only events with seq > AfterSeq
	Limit    int   // at most this many; <= 0 means 1000
}

// DB is an open simlock database. See the package documentation.
type DB struct {
	// w is the only connection that writes. SQLite admits one writer at a
	// time anyway; holding a single connection makes writers queue in Go
	// instead of spinning on SQLITE_BUSY, and makes the ordering of commits
	// the ordering of Commit calls.
	w *sql.DB
	// r serves reads. In WAL mode readers neither block nor are blocked by
	// the writer, so an API read never waits for a commit.
	r *sql.DB
}

// readConns bounds the read pool. Reads are short; a few connections cover
// the API's concurrency without holding many file handles.
const readConns = 4

// Open opens the database at path, creating it if needed, and brings its
// schema up to date. It fails if the database was written by a newer build.
func Open(ctx context.Context, path string) (*DB, error) {
	if path == "" {
		return nil, errors.New("store: open: empty path")
	}
	// The driver takes its options from the query string, so the path must
	// not be able to supply one: pass it as a URI whose path is escaped.
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("store: open: %w", err)
	}
	uri := url.URL{Scheme: "file", Path: filepath.ToSlash(abs)}

	// Pragmas go in the DSN rather than being executed once, because
	// database/sql may replace a connection at any time and the replacement
	// must be configured the same way.
	wq := url.Values{}
	wq.Add("_pragma", "busy_timeout(5000)")
	wq.Add("_pragma", "journal_mode(WAL)")
	wq.Add("_pragma", "synchronous(NORMAL)")
	wq.Add("_pragma", "foreign_keys(on)")
	// BEGIN IMMEDIATE takes the write lock up front. A deferred transaction
	// that reads and then writes can fail with SQLITE_BUSY on the upgrade
	// without busy_timeout ever being consulted.
	wq.Set("_txlock", "immediate")
	uri.RawQuery = wq.Encode()
	w, err := sql.Open("sqlite", uri.String())
	if err != nil {
		return nil, fmt.Errorf("store: open: %w", err)
	}
	w.SetMaxOpenConns(1)
	w.SetMaxIdleConns(1)
	if err := migrate(ctx, w); err != nil {
		w.Close()
		return nil, fmt.Errorf("store: open: %w", err)
	}

	rq := url.Values{}
	rq.Add("_pragma", "busy_timeout(5000)")
	// Readers must never write; query_only makes a mistake fail loudly.
	rq.Set("_query_only", "1")
	uri.RawQuery = rq.Encode()
	r, err := sql.Open("sqlite", uri.String())
	if err != nil {
		w.Close()
		return nil, fmt.Errorf("store: open: %w", err)
	}
	r.SetMaxOpenConns(readConns)
	r.SetMaxIdleConns(readConns)
	if err := r.PingContext(ctx); err != nil {
		r.Close()
		w.Close()
		return nil, fmt.Errorf("store: open: %w", err)
	}
	return &DB{w: w, r: r}, nil
}

// Close closes the database. Everything committed is already durable; Close
// does not need to run for it to stay so.
func (db *DB) Close() error {
	err := errors.Join(db.r.Close(), db.w.Close())
	if err != nil {
		return fmt.Errorf("store: close: %w", err)
	}
	return nil
}
