// Package sqlite is the SQLite backend of the store: it keeps the records of
// package store (devices, leases, lease requests, the event log, tokens and
// component records) in one database file, through modernc.org/sqlite, which
// needs no cgo, and the usage rollups package usage derives from the event
// log, folded in by every transaction that appends events (usage.go).
//
// A DB holds the daemon's durable state. It does not decide anything. The
// caller (the lease engine) owns every state transition and hands the DB the
// outcome of each decision as one store.Change, which [DB.Commit] writes in a
// single transaction: either all of it is durable or none of it is. On start
// the daemon reads back what it needs to resume with [DB.Load]; the other
// read methods serve the API. The guarantees a Commit gives are those package
// store lists for every backend.
//
// Records are stored as given. The DB validates only what would corrupt it
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
// The statements a DB runs often are prepared once, at Open, so SQLite does
// not parse their SQL again on every commit or read.
//
// A DB is safe for concurrent use by multiple goroutines. Writes are
// serialized on a single connection; reads use a separate pool and see the
// last committed state without waiting for a write in progress.
package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"path/filepath"
	"sync"
	"time"

	"github.com/simlock/simlock/internal/store"
	"github.com/simlock/simlock/internal/usage"

	_ "modernc.org/sqlite" // registers the "sqlite" driver
)

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

	// st holds the prepared statements; all lists them, for Close.
	st  stmts
	all []*sql.Stmt
	// The statements prepared on first use: narrow updates per column
	// set, event inserts per row count.
	narrowDevice, narrowLease narrowStmts
	events                    eventStmts
	// us are the usage rollup's statements (usage.go).
	us usageStmts
	// parts are the rows of the recent usage cells the next appends go
	// to (usage.go).
	parts usage.Parts

	// bg tracks the statement preparations a reserved commit left for
	// later (warm); Close waits for them.
	bg sync.WaitGroup

	// floorMu guards floorSeeded, which records that CommitFloor's scratch
	// rows exist, and floorLast, the scratch lease as last written.
	floorMu     sync.Mutex
	floorSeeded bool
	floorLast   store.Lease

	// wait is Options.BusyTimeout as set: how long begin waits for a
	// write lock another process holds.
	wait time.Duration

	// onCommit is Options.OnCommit, nil when unset.
	onCommit func(time.Duration)
}

// stmts are the statements prepared once, at Open.
//
// Those on the writer run inside transactions through tx.StmtContext. The
// writer is a single connection, so that is the statement SQLite parsed at
// Open, bound afresh; database/sql prepares it again by itself only if it
// ever has to replace the connection.
//
// Those on the read pool are prepared on one pooled connection at Open and
// by database/sql on each other connection the first time it runs them,
// then kept for as long as the connection lives.
type stmts struct {
	// Writer.
	upsertDevice, upsertLease, upsertRequest                           *sql.Stmt
	pruneSettled, countRequests, pruneOldest, pruneEvents, pruneLeases *sql.Stmt
	pruneAgedEvents, oldestEvent                                       *sql.Stmt
	// Read pool.
	loadDevices, loadLeases, loadRequests      *sql.Stmt
	request, requestByKey, requests            *sql.Stmt
	eventsSince, eventsAfter, eventsSinceAfter *sql.Stmt
	eventsNewest, lastSeq                      *sql.Stmt
}

// readConns bounds the read pool. Reads are short; a few connections cover
// the API's concurrency without holding many file handles.
const readConns = 4

// Options tune Open; the zero value is the defaults.
type Options struct {
	// BusyTimeout is how long a connection waits for a lock another
	// process holds on the database before it gives up with SQLITE_BUSY
	// (busy_timeout; for a write transaction, begin's wait); 5 s when 0.
	BusyTimeout time.Duration
	// OnCommit, when set, is told how long each committed Change held the
	// writer: its SQL and its COMMIT, not the planning before the lock.
	// It runs on the committing goroutine, so it must be quick.
	OnCommit func(time.Duration)
}

// DefaultBusyTimeout is Options.BusyTimeout's default.
const DefaultBusyTimeout = 5 * time.Second

var _ store.Reserver = (*DB)(nil)

// Open opens the database at path, creating it if needed, and brings its
// schema up to date. It fails if the database was written by a newer build.
func Open(ctx context.Context, path string) (*DB, error) {
	return OpenWith(ctx, path, Options{})
}

// OpenWith is Open with opts.
func OpenWith(ctx context.Context, path string, opts Options) (*DB, error) {
	wait := opts.BusyTimeout
	if wait <= 0 {
		wait = DefaultBusyTimeout
	}
	busyPragma := fmt.Sprintf("busy_timeout(%d)", wait.Milliseconds())
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
	wq.Add("_pragma", busyPragma)
	wq.Add("_pragma", "journal_mode(WAL)")
	wq.Add("_pragma", "synchronous(NORMAL)")
	wq.Add("_pragma", "foreign_keys(on)")
	// BEGIN IMMEDIATE takes the write lock up front. A deferred transaction
	// that reads and then writes can fail with SQLITE_BUSY on the upgrade
	// without busy_timeout ever being consulted.
	wq.Set("_txlock", "immediate")
	uri.RawQuery = wq.Encode()
	// Once set up, the writer waits for no lock in SQLite: begin does
	// the waiting, without a goroutine per BEGIN and COMMIT.
	w := sql.OpenDB(writerConnector{dsn: uri.String()})
	w.SetMaxOpenConns(1)
	w.SetMaxIdleConns(1)
	if err := migrate(ctx, w, wait); err != nil {
		w.Close()
		return nil, fmt.Errorf("store: open: %w", err)
	}

	rq := url.Values{}
	rq.Add("_pragma", busyPragma)
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
	db := &DB{w: w, r: r, wait: wait, onCommit: opts.OnCommit,
		narrowDevice: narrowStmts{table: "devices", columns: deviceColumns},
		narrowLease:  narrowStmts{table: "leases", columns: leaseColumns}}
	if err := db.prepare(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("store: open: %w", err)
	}
	// Folds the events a database migrated to the usage rollups held.
	if err := db.backfillUsage(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("store: open: %w", err)
	}
	return db, nil
}

// prepare prepares every statement in db.st and db.us. Preparing on the
// read pool also checks that a reader can open the file.
func (db *DB) prepare(ctx context.Context) error {
	for _, p := range []struct {
		name  string
		on    *sql.DB
		query string
		to    **sql.Stmt
	}{
		{"upsert device", db.w, upsertDevice, &db.st.upsertDevice},
		{"upsert lease", db.w, upsertLease, &db.st.upsertLease},
		{"upsert request", db.w, upsertRequest, &db.st.upsertRequest},
		{"prune settled requests", db.w, pruneSettled, &db.st.pruneSettled},
		{"count requests", db.w, countRequests, &db.st.countRequests},
		{"prune oldest requests", db.w, pruneOldest, &db.st.pruneOldest},
		{"prune events", db.w, pruneEvents, &db.st.pruneEvents},
		{"prune aged events", db.w, pruneAgedEvents, &db.st.pruneAgedEvents},
		{"prune leases", db.w, pruneLeases, &db.st.pruneLeases},
		{"load devices", db.r, loadDevices, &db.st.loadDevices},
		{"load leases", db.r, loadLeases, &db.st.loadLeases},
		{"load requests", db.r, loadRequests, &db.st.loadRequests},
		{"request", db.r, selectRequest, &db.st.request},
		{"request by key", db.r, selectRequestByKey, &db.st.requestByKey},
		{"requests", db.r, selectRequests, &db.st.requests},
		{"events since", db.r, eventsSince, &db.st.eventsSince},
		{"events after", db.r, eventsAfter, &db.st.eventsAfter},
		{"events since after", db.r, eventsSinceAfter, &db.st.eventsSinceAfter},
		{"newest events", db.r, eventsNewest, &db.st.eventsNewest},
		{"last seq", db.r, lastSeq, &db.st.lastSeq},
		{"oldest event", db.r, oldestEvent, &db.st.oldestEvent},
		{"usage append", db.w, usageAppendMinute, &db.us.appendMinute},
		{"usage open get", db.w, usageOpenGet, &db.us.openGet},
		{"usage open put", db.w, usageOpenPut, &db.us.openPut},
		{"usage open delete", db.w, usageOpenDelete, &db.us.openDelete},
		{"usage minutes", db.r, usageMinutesIn, &db.us.minutes},
		{"usage hours", db.r, usageHoursIn, &db.us.hours},
	} {
		s, err := p.on.PrepareContext(ctx, p.query)
		if err != nil {
			return fmt.Errorf("prepare %s: %w", p.name, err)
		}
		*p.to = s
		db.all = append(db.all, s)
	}
	return nil
}

// Close closes the database. Everything committed is already durable; Close
// does not need to run for it to stay so.
func (db *DB) Close() error {
	db.bg.Wait()
	var errs []error
	for _, s := range db.all {
		errs = append(errs, s.Close())
	}
	db.narrowDevice.close()
	db.narrowLease.close()
	db.events.close()
	err := errors.Join(append(errs, db.r.Close(), db.w.Close())...)
	if err != nil {
		return fmt.Errorf("store: close: %w", err)
	}
	return nil
}
