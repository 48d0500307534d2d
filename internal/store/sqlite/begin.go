package sqlite

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"time"

	msqlite "modernc.org/sqlite"

	"github.com/simlock/simlock/internal/store"
)

// begin starts a write transaction on w (BEGIN IMMEDIATE: the writer's
// DSN sets _txlock), waiting at most wait, or until ctx ends, for a write
// lock another process holds; such a lock still held then is
// store.ErrBusy.
//
// The transaction begins on a context that never ends, and the wait is
// this loop's, not SQLite's busy handler: the writer connection runs with
// busy_timeout 0 (see OpenWith). The driver watches a context that can
// end with a goroutine of its own for every statement run on it, BEGIN
// and COMMIT included, and a new goroutine on a process with an idle
// thread may wake that thread: two such goroutines a commit, on every
// decision, to guard a lock that is free all but always. Here the free lock costs one BEGIN, and
// only a lock held elsewhere costs the pauses below.
//
// The caller ends the transaction with Commit or Rollback; since its
// context never ends, database/sql never rolls it back by itself, so a
// caller that must not commit once ctx ended checks ctx before COMMIT.
func begin(ctx context.Context, w *sql.DB, wait time.Duration) (*sql.Tx, error) {
	deadline := time.Now().Add(wait)
	pause := time.Millisecond
	for {
		tx, err := w.BeginTx(context.Background(), nil)
		if err == nil {
			if err := ctx.Err(); err != nil {
				_ = tx.Rollback()
				return nil, err
			}
			return tx, nil
		}
		if !busy(err) {
			return nil, err
		}
		left := time.Until(deadline)
		if left <= 0 {
			return nil, fmt.Errorf("%w (%w)", store.ErrBusy, err)
		}
		t := time.NewTimer(min(pause, left))
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		case <-t.C:
		}
		// SQLite's own busy handler backs off alike, to 100 ms.
		pause = min(2*pause, 100*time.Millisecond)
	}
}

// writerConnector opens the writer's connections: the driver's, set up by
// the DSN's pragmas (busy_timeout first, so that setting up waits for a
// lock as any connection does), then with busy_timeout 0, for begin.
// database/sql may replace a connection at any time; every one it opens
// comes through here.
type writerConnector struct{ dsn string }

func (c writerConnector) Connect(ctx context.Context) (driver.Conn, error) {
	conn, err := c.Driver().Open(c.dsn)
	if err != nil {
		return nil, err
	}
	ex, ok := conn.(driver.ExecerContext)
	if !ok {
		conn.Close()
		return nil, errors.New("the sqlite driver's connection runs no statements")
	}
	if _, err := ex.ExecContext(context.Background(), "PRAGMA busy_timeout = 0", nil); err != nil {
		conn.Close()
		return nil, err
	}
	return conn, nil
}

func (writerConnector) Driver() driver.Driver { return &msqlite.Driver{} }
