package sqlite

import (
	"context"
	"database/sql"
	"fmt"
)

// FleetID is the fleet's identity: proposed, stored, the first time it is
// asked for, and what was stored ever after.
func (db *DB) FleetID(ctx context.Context, proposed string) (string, error) {
	var id string
	err := db.write(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `INSERT OR IGNORE INTO fleet_identity (one, id) VALUES (1, ?)`, proposed); err != nil {
			return err
		}
		return tx.QueryRowContext(ctx, `SELECT id FROM fleet_identity WHERE one = 1`).Scan(&id)
	})
	if err != nil {
		return "", fmt.Errorf("store: fleet id: %w", err)
	}
	return id, nil
}
