package postgres

import (
	"context"
	"embed"
	"fmt"
	"io/fs"
	"path"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// migrationFiles holds the schema history. A file is never edited once
// released; changes go in a new file with the next number.
//
//go:embed migrations/*.sql
var migrationFiles embed.FS

// migrateLock is the advisory lock that makes one process at a time
// migrate a database (a transaction-level lock, given back at its end).
const migrateLock = 0x73696d6c6f636b01 // "simlock" and 1

type migration struct {
	version int
	name    string
	sql     string
}

// migrations returns the embedded migrations in order, numbered 1, 2, 3...
// without gaps: the schema version is how many a database has run.
func migrations() ([]migration, error) {
	entries, err := fs.ReadDir(migrationFiles, "migrations")
	if err != nil {
		return nil, err
	}
	var ms []migration
	for _, e := range entries {
		name := e.Name()
		num, _, ok := strings.Cut(name, "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil {
			return nil, fmt.Errorf("migration %s: name must start with its number and '_'", name)
		}
		if v != len(ms)+1 {
			return nil, fmt.Errorf("migration %s: expected number %d", name, len(ms)+1)
		}
		b, err := migrationFiles.ReadFile(path.Join("migrations", name))
		if err != nil {
			return nil, err
		}
		ms = append(ms, migration{version: v, name: name, sql: string(b)})
	}
	return ms, nil
}

// migrate brings the schema to the newest version this build knows, in one
// transaction that also records the version, so a failure leaves the
// database as it was.
func migrate(ctx context.Context, pool *pgxpool.Pool) error {
	ms, err := migrations()
	if err != nil {
		return err
	}
	return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, int64(migrateLock)); err != nil {
			return fmt.Errorf("migrate: lock: %w", err)
		}
		if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS schema_version (version integer NOT NULL)`); err != nil {
			return fmt.Errorf("migrate: %w", err)
		}
		var v int
		err := tx.QueryRow(ctx, `SELECT version FROM schema_version`).Scan(&v)
		switch {
		case err == pgx.ErrNoRows:
			if _, err := tx.Exec(ctx, `INSERT INTO schema_version (version) VALUES (0)`); err != nil {
				return fmt.Errorf("migrate: %w", err)
			}
		case err != nil:
			return fmt.Errorf("migrate: read version: %w", err)
		}
		if v > len(ms) {
			return fmt.Errorf("database schema version %d is newer than this build's schema version %d", v, len(ms))
		}
		for _, m := range ms[v:] {
			if _, err := tx.Exec(ctx, m.sql); err != nil {
				return fmt.Errorf("migrate %s: %w", m.name, err)
			}
		}
		if _, err := tx.Exec(ctx, `UPDATE schema_version SET version = $1`, len(ms)); err != nil {
			return fmt.Errorf("migrate: set version: %w", err)
		}
		return nil
	})
}
