package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/simlock/simlock/internal/contract"
)

// PutJob writes a job's record whole, made or replaced.
func (db *DB) PutJob(ctx context.Context, j contract.Job) error {
	b, err := json.Marshal(j)
	if err != nil {
		return fmt.Errorf("store: put job %s: %w", j.ID, err)
	}
	err = db.write(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO jobs (id, created_at, ended_at, state, record) VALUES (?, ?, ?, ?, ?)
ON CONFLICT (id) DO UPDATE SET ended_at = excluded.ended_at, state = excluded.state, record = excluded.record`,
			j.ID, j.CreatedAt, j.EndedAt, j.State, string(b))
		return err
	})
	if err != nil {
		return fmt.Errorf("store: put job %s: %w", j.ID, err)
	}
	return nil
}

// Job reads one job's record; found is false for an id never written or
// swept.
func (db *DB) Job(ctx context.Context, id string) (j contract.Job, found bool, err error) {
	var rec string
	err = db.r.QueryRowContext(ctx, `SELECT record FROM jobs WHERE id = ?`, id).Scan(&rec)
	if errors.Is(err, sql.ErrNoRows) {
		return contract.Job{}, false, nil
	}
	if err != nil {
		return contract.Job{}, false, fmt.Errorf("store: job %s: %w", id, err)
	}
	if err := json.Unmarshal([]byte(rec), &j); err != nil {
		return contract.Job{}, false, fmt.Errorf("store: job %s: %w", id, err)
	}
	return j, true, nil
}

// Jobs reads the newest limit jobs, newest first; state "" is any.
func (db *DB) Jobs(ctx context.Context, state string, limit int) ([]contract.Job, error) {
	rows, err := db.r.QueryContext(ctx, `SELECT record FROM jobs WHERE ? = '' OR state = ? ORDER BY created_at DESC, id DESC LIMIT ?`, state, state, limit)
	if err != nil {
		return nil, fmt.Errorf("store: jobs: %w", err)
	}
	defer rows.Close()
	out := []contract.Job{}
	for rows.Next() {
		var rec string
		if err := rows.Scan(&rec); err != nil {
			return nil, fmt.Errorf("store: jobs: %w", err)
		}
		var j contract.Job
		if err := json.Unmarshal([]byte(rec), &j); err != nil {
			return nil, fmt.Errorf("store: jobs: %w", err)
		}
		out = append(out, j)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: jobs: %w", err)
	}
	return out, nil
}

// DeleteJobsBefore deletes the jobs that ended before ts (unix ms) and
// reports how many.
func (db *DB) DeleteJobsBefore(ctx context.Context, ts int64) (int, error) {
	var n int64
	err := db.write(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM jobs WHERE ended_at > 0 AND ended_at < ?`, ts)
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("store: delete jobs: %w", err)
	}
	return int(n), nil
}
