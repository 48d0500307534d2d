package postgres

import (
	"context"
	"fmt"
)

// FleetID is the fleet's identity: proposed, stored, the first time any
// replica asks for it, and what was stored ever after (replicas that ask
// at once agree: the insert that loses the race does nothing).
func (db *DB) FleetID(ctx context.Context, proposed string) (string, error) {
	if _, err := db.pool.Exec(ctx, `INSERT INTO fleet_identity (one, id) VALUES (1, $1) ON CONFLICT (one) DO NOTHING`, proposed); err != nil {
		return "", fmt.Errorf("store: fleet id: %w", err)
	}
	var id string
	if err := db.pool.QueryRow(ctx, `SELECT id FROM fleet_identity WHERE one = 1`).Scan(&id); err != nil {
		return "", fmt.Errorf("store: fleet id: %w", err)
	}
	return id, nil
}
