package sqlite

import (
	"context"
	"database/sql"
	"embed"
	"fmt"
	"io/fs"
	"path"
	"strconv"
	"strings"
	"time"
)

// migrationFiles holds the schema history. A file is never edited once
// released: a database that already ran it would not run it again. Changes
// go in a new file with the next number.
//
//go:embed migrations/*.sql
var migrationFiles embed.FS

type migration struct {
	version int
	name    string
	sql     string
}

// migrations returns the embedded migrations in order. Their numbers must run
// 1, 2, 3... without gaps, because the schema version is simply how many of
// them a database has run.
func migrations() ([]migration, error) {
	entries, err := fs.ReadDir(migrationFiles, "migrations")
	if err != nil {
		return nil, err
	}
	var ms []migration
	for _, e := range entries { // ReadDir sorts by name
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

// migrate brings the schema to the newest version this build knows, one
// migration per transaction, recording progress in PRAGMA user_version.
// user_version lives in the database header and is written inside the same
// transaction as the migration, so a crash leaves either both or neither.
func migrate(ctx context.Context, w *sql.DB, wait time.Duration) error {
	ms, err := migrations()
	if err != nil {
		return err
	}
	for {
		done, err := migrateOne(ctx, w, wait, ms)
		if err != nil || done {
			return err
		}
	}
}

// migrateOne applies the next pending migration, if any. It reads the version
// inside its own write transaction so that two processes opening the same
// file at once cannot both apply the same migration.
func migrateOne(ctx context.Context, w *sql.DB, wait time.Duration, ms []migration) (done bool, err error) {
	tx, err := begin(ctx, w, wait)
	if err != nil {
		return false, fmt.Errorf("migrate: %w", err)
	}
	defer tx.Rollback()

	var v int
	if err := tx.QueryRowContext(ctx, "PRAGMA user_version").Scan(&v); err != nil {
		return false, fmt.Errorf("migrate: read version: %w", err)
	}
	switch {
	case v > len(ms):
		return false, fmt.Errorf("database schema version %d is newer than this build's schema version %d", v, len(ms))
	case v == len(ms):
		return true, nil
	case v < 0:
		return false, fmt.Errorf("database schema version %d is invalid", v)
	}
	m := ms[v]
	if _, err := tx.ExecContext(ctx, m.sql); err != nil {
		return false, fmt.Errorf("migrate %s: %w", m.name, err)
	}
	// PRAGMA takes no bound parameters; the value is an int we produced.
	if _, err := tx.ExecContext(ctx, fmt.Sprintf("PRAGMA user_version = %d", m.version)); err != nil {
		return false, fmt.Errorf("migrate %s: set version: %w", m.name, err)
	}
	if err := tx.Commit(); err != nil {
		return false, fmt.Errorf("migrate %s: commit: %w", m.name, err)
	}
	return false, nil
}
