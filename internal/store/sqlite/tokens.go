package sqlite

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/store"
)

// Tokens and component records are written rarely (a token made or revoked,
// a component installed) and read at startup, so their statements are not
// prepared: parsing them costs nothing next to how seldom they run.

// PutToken stores a new token.
func (db *DB) PutToken(ctx context.Context, t store.Token) error {
	err := db.write(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO tokens (id, role, label, hash, created_at) VALUES (?, ?, ?, ?, ?)`,
			t.ID, string(t.Role), t.Label, t.Hash, t.CreatedAt)
		return err
	})
	if err != nil {
		return fmt.Errorf("store: put token %s: %w", t.ID, err)
	}
	return nil
}

// DeleteToken removes a token and reports whether there was one.
func (db *DB) DeleteToken(ctx context.Context, id string) (bool, error) {
	var n int64
	err := db.write(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM tokens WHERE id = ?`, id)
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	if err != nil {
		return false, fmt.Errorf("store: delete token %s: %w", id, err)
	}
	return n > 0, nil
}

// Tokens returns every token, oldest first.
func (db *DB) Tokens(ctx context.Context) ([]store.Token, error) {
	rows, err := db.r.QueryContext(ctx, `SELECT id, role, label, hash, created_at FROM tokens ORDER BY created_at, id`)
	if err != nil {
		return nil, fmt.Errorf("store: tokens: %w", err)
	}
	defer rows.Close()
	var out []store.Token
	for rows.Next() {
		var t store.Token
		var role string
		if err := rows.Scan(&t.ID, &role, &t.Label, &t.Hash, &t.CreatedAt); err != nil {
			return nil, fmt.Errorf("store: tokens: %w", err)
		}
		t.Role = contract.TokenRole(role)
		out = append(out, t)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: tokens: %w", err)
	}
	return out, nil
}
