package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/store"
)

// Workers returns the gateway's workers, by id.
func (db *DB) Workers(ctx context.Context) ([]store.Worker, error) {
	rows, _ := db.pool.Query(ctx, `SELECT id, label, drained, last_seq, last_seen_at, token_id FROM workers ORDER BY id`)
	defer rows.Close()
	var out []store.Worker
	for rows.Next() {
		var w store.Worker
		if err := rows.Scan(&w.ID, &w.Label, &w.Drained, &w.LastSeq, &w.LastSeenAt, &w.TokenID); err != nil {
			return nil, fmt.Errorf("store: workers: %w", err)
		}
		out = append(out, w)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: workers: %w", err)
	}
	return out, nil
}

// PutWorker writes w, replacing the record of its id.
func (db *DB) PutWorker(ctx context.Context, w store.Worker) error {
	if w.ID == "" {
		return errors.New("store: put worker: empty id")
	}
	err := db.exec(ctx, `INSERT INTO workers (id, label, drained, last_seq, last_seen_at, token_id) VALUES ($1, $2, $3, $4, $5, $6)
ON CONFLICT (id) DO UPDATE SET label = excluded.label, drained = excluded.drained,
	last_seq = excluded.last_seq, last_seen_at = excluded.last_seen_at, token_id = excluded.token_id`,
		w.ID, w.Label, w.Drained, w.LastSeq, w.LastSeenAt, w.TokenID)
	if err != nil {
		return fmt.Errorf("store: put worker %s: %w", w.ID, err)
	}
	return nil
}

// DeleteWorker forgets worker id; an unknown id is no error.
func (db *DB) DeleteWorker(ctx context.Context, id string) error {
	if err := db.exec(ctx, `DELETE FROM workers WHERE id = $1`, id); err != nil {
		return fmt.Errorf("store: delete worker %s: %w", id, err)
	}
	return nil
}

// Grants returns the gateway's grant records, oldest first, then by key.
func (db *DB) Grants(ctx context.Context) ([]store.Grant, error) {
	rows, _ := db.pool.Query(ctx, `SELECT key, worker_id, worker_lease_id, device_id, owner_id, requester_id, chosen_id, request_id, granted_at, platform
FROM gateway_grants ORDER BY granted_at, key`)
	defer rows.Close()
	var out []store.Grant
	for rows.Next() {
		var g store.Grant
		if err := rows.Scan(&g.Key, &g.WorkerID, &g.WorkerLeaseID, &g.DeviceID, &g.OwnerID, &g.RequesterID, &g.ChosenID,
			&g.RequestID, &g.GrantedAt, &g.Platform); err != nil {
			return nil, fmt.Errorf("store: grants: %w", err)
		}
		out = append(out, g)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: grants: %w", err)
	}
	return out, nil
}

// PutJob writes j, replacing the record of its id.
func (db *DB) PutJob(ctx context.Context, j contract.Job) error {
	b, err := json.Marshal(j)
	if err != nil {
		return fmt.Errorf("store: put job %s: %w", j.ID, err)
	}
	if err := db.exec(ctx, `INSERT INTO jobs (id, created_at, ended_at, state, record) VALUES ($1, $2, $3, $4, $5)
ON CONFLICT (id) DO UPDATE SET ended_at = excluded.ended_at, state = excluded.state, record = excluded.record`,
		j.ID, j.CreatedAt, j.EndedAt, j.State, string(b)); err != nil {
		return fmt.Errorf("store: put job %s: %w", j.ID, err)
	}
	return nil
}

// Job returns the job with id.
func (db *DB) Job(ctx context.Context, id string) (j contract.Job, found bool, err error) {
	var rec string
	err = db.pool.QueryRow(ctx, `SELECT record FROM jobs WHERE id = $1`, id).Scan(&rec)
	if errors.Is(err, pgx.ErrNoRows) {
		return contract.Job{}, false, nil
	}
	if err == nil {
		err = json.Unmarshal([]byte(rec), &j)
	}
	if err != nil {
		return contract.Job{}, false, fmt.Errorf("store: job %s: %w", id, err)
	}
	return j, true, nil
}

// Jobs returns up to limit jobs in state (any state for ""), newest first.
func (db *DB) Jobs(ctx context.Context, state string, limit int) ([]contract.Job, error) {
	if limit <= 0 {
		limit = defaultLimit
	}
	rows, _ := db.pool.Query(ctx, `SELECT record FROM jobs WHERE $1 = '' OR state = $1 ORDER BY created_at DESC, id DESC LIMIT $2`, state, limit)
	defer rows.Close()
	out := []contract.Job{}
	for rows.Next() {
		var rec string
		var j contract.Job
		if err := rows.Scan(&rec); err != nil {
			return nil, fmt.Errorf("store: jobs: %w", err)
		}
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

// DeleteJobsBefore deletes the jobs that ended before ts and returns how
// many; a running job is never deleted.
func (db *DB) DeleteJobsBefore(ctx context.Context, ts int64) (int, error) {
	var n int64
	err := db.write(ctx, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `DELETE FROM jobs WHERE ended_at > 0 AND ended_at < $1`, ts)
		n = tag.RowsAffected()
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("store: delete jobs: %w", err)
	}
	return int(n), nil
}

// PutToken stores a new token.
func (db *DB) PutToken(ctx context.Context, t store.Token) error {
	if err := db.exec(ctx, `INSERT INTO tokens (id, role, label, hash, created_at) VALUES ($1, $2, $3, $4, $5)`,
		t.ID, string(t.Role), t.Label, t.Hash, t.CreatedAt); err != nil {
		return fmt.Errorf("store: put token %s: %w", t.ID, err)
	}
	return nil
}

// DeleteToken deletes the token with id and reports whether there was one.
func (db *DB) DeleteToken(ctx context.Context, id string) (bool, error) {
	var n int64
	err := db.write(ctx, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `DELETE FROM tokens WHERE id = $1`, id)
		n = tag.RowsAffected()
		return err
	})
	if err != nil {
		return false, fmt.Errorf("store: delete token %s: %w", id, err)
	}
	return n > 0, nil
}

// Tokens returns every token, oldest first.
func (db *DB) Tokens(ctx context.Context) ([]store.Token, error) {
	rows, _ := db.pool.Query(ctx, `SELECT id, role, label, hash, created_at FROM tokens ORDER BY created_at, id`)
	defer rows.Close()
	var out []store.Token
	for rows.Next() {
		var t store.Token
		if err := rows.Scan(&t.ID, &t.Role, &t.Label, &t.Hash, &t.CreatedAt); err != nil {
			return nil, fmt.Errorf("store: tokens: %w", err)
		}
		out = append(out, t)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: tokens: %w", err)
	}
	return out, nil
}
