package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// FleetID is the fleet's identity: proposed, stored, the first time any
// replica asks for it, and what was stored ever after (replicas that ask
// at once agree: the insert that loses the race does nothing). The insert
// is a write like any other, fenced on a replica's store.
func (db *DB) FleetID(ctx context.Context, proposed string) (string, error) {
	var id string
	err := db.write(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `INSERT INTO fleet_identity (one, id) VALUES (1, $1) ON CONFLICT (one) DO NOTHING`, proposed); err != nil {
			return err
		}
		return tx.QueryRow(ctx, `SELECT id FROM fleet_identity WHERE one = 1`).Scan(&id)
	})
	if err != nil {
		return "", fmt.Errorf("store: fleet id: %w", err)
	}
	return id, nil
}
