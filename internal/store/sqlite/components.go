package sqlite

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/store"
)

// PutComponent records a component simlock installed, replacing an older
// record of the same version.
func (db *DB) PutComponent(ctx context.Context, r store.ComponentRecord) error {
	err := db.write(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO components (platform, version, name, receipt, installed_at) VALUES (?, ?, ?, ?, ?)
ON CONFLICT (platform, version) DO UPDATE SET name = excluded.name, receipt = excluded.receipt, installed_at = excluded.installed_at`,
			string(r.Platform), r.Version, r.Name, r.Receipt, r.InstalledAt)
		return err
	})
	if err != nil {
		return fmt.Errorf("store: put component %s %s: %w", r.Platform, r.Version, err)
	}
	return nil
}

// Components returns every component record.
func (db *DB) Components(ctx context.Context) ([]store.ComponentRecord, error) {
	rows, err := db.r.QueryContext(ctx, `SELECT platform, version, name, receipt, installed_at FROM components ORDER BY platform, version`)
	if err != nil {
		return nil, fmt.Errorf("store: components: %w", err)
	}
	defer rows.Close()
	var out []store.ComponentRecord
	for rows.Next() {
		var r store.ComponentRecord
		var p string
		if err := rows.Scan(&p, &r.Version, &r.Name, &r.Receipt, &r.InstalledAt); err != nil {
			return nil, fmt.Errorf("store: components: %w", err)
		}
		r.Platform = contract.Platform(p)
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: components: %w", err)
	}
	return out, nil
}

// DeleteComponent removes a component's record.
func (db *DB) DeleteComponent(ctx context.Context, p contract.Platform, version string) error {
	err := db.write(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `DELETE FROM components WHERE platform = ? AND version = ?`, string(p), version)
		return err
	})
	if err != nil {
		return fmt.Errorf("store: delete component %s %s: %w", p, version, err)
	}
	return nil
}
