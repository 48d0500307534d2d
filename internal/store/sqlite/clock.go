package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/simlock/simlock/internal/store"
)

// The clock row's statements run once at start, at a clock jump, and a
// few times an hour: not prepared.
const (
	selectClock = `SELECT wall_ms, boot_ns, boot_id FROM clock WHERE id = 1`
	upsertClock = `INSERT INTO clock (id, wall_ms, boot_ns, boot_id) VALUES (1, ?, ?, ?)
ON CONFLICT (id) DO UPDATE SET wall_ms = excluded.wall_ms, boot_ns = excluded.boot_ns, boot_id = excluded.boot_id`
)

// Clock reads the stored clock reading; found is false when none was
// stored yet.
func (db *DB) Clock(ctx context.Context) (c store.Clock, found bool, err error) {
	err = db.r.QueryRowContext(ctx, selectClock).Scan(&c.WallMs, &c.BootNs, &c.BootID)
	if errors.Is(err, sql.ErrNoRows) {
		return store.Clock{}, false, nil
	}
	if err != nil {
		return store.Clock{}, false, fmt.Errorf("store: read the clock: %w", err)
	}
	return c, true, nil
}

// PutClock replaces the stored clock reading, outside any decision: a
// later reading of a clock that has not jumped.
func (db *DB) PutClock(ctx context.Context, c store.Clock) error {
	if err := db.write(ctx, func(tx *sql.Tx) error { return putClock(ctx, tx, c) }); err != nil {
		return fmt.Errorf("store: write the clock: %w", err)
	}
	return nil
}

func putClock(ctx context.Context, tx *sql.Tx, c store.Clock) error {
	if _, err := tx.ExecContext(ctx, upsertClock, c.WallMs, c.BootNs, c.BootID); err != nil {
		return fmt.Errorf("clock: %w", err)
	}
	return nil
}
