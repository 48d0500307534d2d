package bench

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/simlock/simlock/internal/config"
	"github.com/simlock/simlock/internal/pgserver"
)

// benchPostgres is the PostgreSQL the fleet bench measures on: a database
// of its own (simlock_bench_ and random hex), created on the --postgres
// server or on a throwaway cluster, dropped at the end, so the bench never
// reads or writes anyone else's tables. url is empty when PostgreSQL is
// skipped (info.Skipped says why).
type benchPostgres struct {
	info fleetPostgres
	url  string
	// admin is the server's URL the database was created through (its
	// own database), to drop it.
	admin string
	db    string
	// srv and dir are the throwaway cluster's, when the bench started one.
	srv  *pgserver.Server
	dir  string
	keep bool
	env  Env
}

// benchPGBound bounds PostgreSQL's setup and teardown: a server that does
// not answer skips the rows, it does not hang the run.
const benchPGBound = 60 * time.Second

// openBenchPostgres finds the server (plan.Postgres, else a throwaway
// cluster when the binaries are installed) and creates the bench's
// database on it. Whatever goes wrong there is the returned value's
// info.Skipped, not an error; only a cancelled ctx is an error.
func openBenchPostgres(ctx context.Context, env Env, plan FleetPlan) (*benchPostgres, error) {
	p := &benchPostgres{keep: plan.Keep, env: env}
	skip := func(format string, args ...any) (*benchPostgres, error) {
		if err := ctx.Err(); err != nil {
			return p, err
		}
		p.info = fleetPostgres{Skipped: fmt.Sprintf(format, args...)}
		p.url = ""
		return p, nil
	}
	server := plan.Postgres
	if server != "" {
		p.info.Server = "url"
	} else {
		bin, err := pgserver.Find()
		if err != nil {
			return skip("no --postgres URL and %v", err)
		}
		if p.dir, err = os.MkdirTemp("", "slpg"); err != nil {
			return skip("a directory for a throwaway cluster: %v", err)
		}
		if p.srv, err = pgserver.Start(pgserver.Options{Bin: bin, Dir: p.dir}); err != nil {
			return skip("a throwaway cluster did not start: %v", err)
		}
		p.info.Server = "throwaway"
		server = p.srv.URL("postgres")
	}
	u, err := url.Parse(server)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		// The URL is never echoed: it may hold a password.
		return skip("--postgres is not a postgres:// URL")
	}
	p.admin = server
	var b [6]byte
	_, _ = rand.Read(b[:])
	db := "simlock_bench_" + hex.EncodeToString(b[:])

	cctx, cancel := context.WithTimeout(ctx, benchPGBound)
	defer cancel()
	conn, err := pgx.Connect(cctx, server)
	if err != nil {
		return skip("connect to PostgreSQL (%s): %v", config.RedactStoreURL(server), err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if err := conn.QueryRow(cctx, "SHOW server_version").Scan(&p.info.Version); err != nil {
		return skip("read PostgreSQL's version: %v", err)
	}
	if _, err := conn.Exec(cctx, "CREATE DATABASE "+db); err != nil {
		return skip("create the bench's database: %v", err)
	}
	p.db = db // from here on, close drops it
	u.Path = "/" + db
	p.url = u.String()
	return p, nil
}

// measureCommit times samples commits of one small INSERT each (BEGIN,
// INSERT, COMMIT: what a store's transaction costs at least) on the
// bench's database, back to back.
func (p *benchPostgres) measureCommit(ctx context.Context, samples int) (benchStat, error) {
	conn, err := bounded(ctx, "connect to PostgreSQL", func(ctx context.Context) (*pgx.Conn, error) { return pgx.Connect(ctx, p.url) })
	if err != nil {
		return benchStat{}, err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := bounded(ctx, "PostgreSQL table", func(ctx context.Context) (struct{}, error) {
		_, err := conn.Exec(ctx, "CREATE TABLE bench_commit (id bigserial PRIMARY KEY, at bigint NOT NULL, note text NOT NULL)")
		return struct{}{}, err
	}); err != nil {
		return benchStat{}, err
	}
	return timed(ctx, samples, func(ctx context.Context, i int) (time.Duration, error) {
		var dt time.Duration
		_, err := bounded(ctx, "PostgreSQL commit", func(ctx context.Context) (struct{}, error) {
			t0 := time.Now()
			tx, err := conn.Begin(ctx)
			if err != nil {
				return struct{}{}, err
			}
			if _, err := tx.Exec(ctx, "INSERT INTO bench_commit (at, note) VALUES ($1, $2)", time.Now().UnixMilli(), "lease.renewed"); err != nil {
				_ = tx.Rollback(ctx)
				return struct{}{}, err
			}
			err = tx.Commit(ctx)
			dt = time.Since(t0)
			return struct{}{}, err
		})
		return dt, err
	})
}

// close drops the bench's database and stops the throwaway cluster. It
// runs on every exit path, so it does not use ctx's cancellation.
func (p *benchPostgres) close(ctx context.Context) error {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), benchPGBound)
	defer cancel()
	var firstErr error
	if p.db != "" {
		conn, err := pgx.Connect(cctx, p.admin)
		if err == nil {
			_, err = conn.Exec(cctx, "DROP DATABASE IF EXISTS "+p.db+" WITH (FORCE)")
			conn.Close(cctx)
		}
		if err != nil {
			firstErr = fmt.Errorf("bench: drop the database %s: %w", p.db, err)
		}
	}
	if p.srv != nil {
		if err := p.srv.Stop(); err != nil && firstErr == nil {
			firstErr = fmt.Errorf("bench: %w", err)
		}
	}
	if p.dir != "" {
		if p.keep {
			fmt.Fprintf(p.env.Stderr, "bench: kept %s\n", p.dir)
		} else if err := os.RemoveAll(p.dir); err != nil && firstErr == nil {
			firstErr = fmt.Errorf("bench: remove the throwaway cluster: %w", err)
		}
	}
	return firstErr
}
