package postgres

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/store"
	"github.com/simlock/simlock/internal/store/pgtest"
)

// A write on a connection the server ended while it sat in the pool (an
// idle-in-transaction timeout, an administrator, a restart) is begun again
// on another connection: the caller sees it committed, not the server's
// FATAL for a connection it never chose.
func TestAWriteOnAConnectionTheServerEndedIsBegunAgain(t *testing.T) {
	c := pgtest.Start(t)
	url := c.Database(t)
	db, err := Open(context.Background(), url, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()
	commit := func(id string) error {
		_, err := db.Commit(ctx, store.Change{Events: []store.NewEvent{{ID: id, Timestamp: 1, Event: contract.EvDaemonStarted}}})
		return err
	}
	if err := commit("evt_1"); err != nil {
		t.Fatal(err)
	}
	admin, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	var ended int
	if err := admin.QueryRow(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
		WHERE datname = current_database() AND pid <> pg_backend_pid() AND backend_type = 'client backend'`).Scan(&ended); err != nil {
		t.Fatal(err)
	}
	if ended == 0 {
		t.Fatal("no pooled connection to end")
	}
	if err := commit("evt_2"); err != nil {
		t.Fatalf("a commit after the server ended the pool's connections: %v, want it committed on another", err)
	}
}
