// Package postgres is the PostgreSQL backend of the store, for a gateway
// whose state must outlive its machine: the records of package store
// (devices, leases, lease requests, the event log, tokens, workers, grant
// records, jobs, the clock reading and the usage rollups of the event log)
// in a PostgreSQL database, through github.com/jackc/pgx/v5. It gives the
// answers the SQLite backend gives (the conformance suite, storetest, holds
// both to them).
//
// Every Change is written in one transaction. Writers, in this process and
// in any other on the same database, are serialized by a transaction-level
// advisory lock taken first in each write transaction, so commits are
// applied one at a time and the order of seqs is the order of decisions;
// [DB.Reserve] takes that lock ahead of a decision. Seqs come from a
// one-row counter moved in the appending transaction, so a failed commit
// takes none and none is ever handed out twice.
//
// A gateway replica's store is fenced (Options.Group): every write
// transaction calls leader.Fence with the term the store was given by
// [DB.Lead], last before COMMIT, so a replica that has lost leadership
// cannot commit even before it notices; until Lead, every write is
// refused. Its sessions end a transaction left open past half the leader
// timeout, which would otherwise hold back the next leader's takeover.
//
// Schema changes are numbered SQL files (a PostgreSQL dialect of the
// SQLite schema) embedded in the binary and applied by [Open] under an
// advisory lock, so two processes opening one database do not both apply
// one; a database written by a newer build is refused.
//
// A postgres:// URL may carry a password. No error of this package prints
// it: the URL is named with its password redacted.
package postgres

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/simlock/simlock/internal/config"
	"github.com/simlock/simlock/internal/leader"
	"github.com/simlock/simlock/internal/store"
	"github.com/simlock/simlock/internal/usage"
)

// DB is an open simlock database on a PostgreSQL server. It is safe for
// concurrent use by multiple goroutines.
type DB struct {
	pool *pgxpool.Pool
	// busyTimeout bounds the wait for another writer's lock.
	busyTimeout time.Duration
	// onCommit is Options.OnCommit, nil when unset.
	onCommit func(time.Duration)
	// group is Options.Group: "" for a store that is not fenced.
	group string
	// term is the term every write is fenced with (Lead); 0 refuses them.
	term atomic.Int64
	// onDeposed is Options.OnDeposed, nil when unset.
	onDeposed func(term int64)
	// parts are the rows of the recent usage cells the next appends go
	// to (usage.go).
	parts usage.Parts
}

// Options tune Open; the zero value is the defaults.
type Options struct {
	// BusyTimeout is how long a write waits for another writer's lock
	// before it fails with store.ErrBusy; 5 s when 0.
	BusyTimeout time.Duration
	// OnCommit, when set, is told how long each committed Change held the
	// write lock: its SQL and its COMMIT. It runs on the committing
	// goroutine, so it must be quick.
	OnCommit func(time.Duration)
	// Group, when set, fences every write with the term of that
	// election group (package leader) given to Lead: a write whose term
	// no longer leads, or made before Lead, fails with an error wrapping
	// leader.ErrDeposed and changes nothing.
	Group string
	// LeaderTimeout, with Group, is the group's leader timeout: the
	// store's sessions end a transaction idle for half of it, so one
	// left open by a paused replica cannot delay a takeover past it.
	LeaderTimeout time.Duration
	// OnDeposed, with Group, is told the term of a write the fence
	// refused after Lead: the store's replica no longer leads. It runs on
	// the writing goroutine and must not write.
	OnDeposed func(term int64)
}

// DefaultBusyTimeout is Options.BusyTimeout's default.
const DefaultBusyTimeout = 5 * time.Second

var _ store.Reserver = (*DB)(nil)

// Open connects to the database at rawURL (a postgres:// or postgresql://
// URL, or a key=value connection string; the password may also come from
// PGPASSWORD or a password file, as libpq's rules say) and brings its schema
// up to date.
func Open(ctx context.Context, rawURL string, opts Options) (*DB, error) {
	name := Redact(rawURL)
	cfg, err := pgxpool.ParseConfig(rawURL)
	if err != nil {
		// pgx's own message names the URL; ours names it redacted, and
		// says no more than that it could not be read.
		return nil, fmt.Errorf("store: open %s: the connection URL cannot be parsed", name)
	}
	if opts.Group != "" {
		timeout := opts.LeaderTimeout
		if timeout <= 0 {
			timeout = leader.DefaultTimeout
		}
		cfg.ConnConfig.RuntimeParams["idle_in_transaction_session_timeout"] = strconv.FormatInt((timeout / 2).Milliseconds(), 10)
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("store: open %s: %w", name, scrub(err, rawURL))
	}
	db := &DB{pool: pool, busyTimeout: opts.BusyTimeout, onCommit: opts.OnCommit, group: opts.Group, onDeposed: opts.OnDeposed}
	if db.busyTimeout <= 0 {
		db.busyTimeout = DefaultBusyTimeout
	}
	if err := migrate(ctx, pool); err != nil {
		pool.Close()
		return nil, fmt.Errorf("store: open %s: %w", name, scrub(err, rawURL))
	}
	if db.group != "" {
		// A fenced store writes nothing before it leads: Lead folds.
		return db, nil
	}
	// Folds the events a database migrated to the usage rollups held.
	if err := db.backfillUsage(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("store: open %s: %w", name, scrub(err, rawURL))
	}
	return db, nil
}

// Lead fences every later write of a fenced store (Options.Group) with
// term, which this process's elector has just won, and then folds the
// events a migrated database held into the usage rollups (which a fenced
// store does not do at Open). Its error is the fold's; the term is set
// whatever it is.
func (db *DB) Lead(ctx context.Context, term int64) error {
	db.term.Store(term)
	if err := db.backfillUsage(ctx); err != nil {
		return fmt.Errorf("store: %w", err)
	}
	return nil
}

// errNoTerm refuses a fenced store's write before Lead.
var errNoTerm = fmt.Errorf("store: this replica holds no term: %w", leader.ErrDeposed)

// fence is the last statement of every write transaction: on a fenced
// store, leader.Fence with the store's term.
func (db *DB) fence(ctx context.Context, tx pgx.Tx) error {
	if db.group == "" {
		return nil
	}
	term := db.term.Load()
	if term == 0 {
		return errNoTerm
	}
	err := leader.Fence(ctx, tx, db.group, term)
	if errors.Is(err, leader.ErrDeposed) && db.onDeposed != nil {
		db.onDeposed(term)
	}
	return err
}

// commit fences tx and commits it: every write transaction ends here.
func (db *DB) commit(ctx context.Context, tx pgx.Tx) error {
	if err := db.fence(ctx, tx); err != nil {
		return err
	}
	return tx.Commit(ctx)
}

// Close closes the connections. Everything committed is already durable.
func (db *DB) Close() error {
	db.pool.Close()
	return nil
}

// Redact is rawURL with the password of a postgres:// URL replaced, for a
// message or a log (config.RedactStoreURL, which config get also shows). A
// string that is not such a URL is named only by its scheme-less shape,
// since it may hold a password=… pair.
func Redact(rawURL string) string { return config.RedactStoreURL(rawURL) }

// scrub is err with its message stripped of rawURL's password, should the
// driver have put it there.
func scrub(err error, rawURL string) error {
	pw := password(rawURL)
	if err == nil || pw == "" || !strings.Contains(err.Error(), pw) {
		return err
	}
	return errors.New(strings.ReplaceAll(err.Error(), pw, "xxxxx"))
}

// password is the password rawURL carries, "" for none.
func password(rawURL string) string {
	u, err := url.Parse(rawURL)
	if err != nil {
		return ""
	}
	if p, ok := u.User.Password(); ok {
		return p
	}
	return u.Query().Get("password")
}
