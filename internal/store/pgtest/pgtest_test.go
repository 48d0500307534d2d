package pgtest

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/jackc/pgx/v5"
)

// A cluster serves a fresh database per test on loopback, and leaves
// nothing behind: its server stopped and its directory gone.
func TestAClusterServesDatabasesAndLeavesNothingBehind(t *testing.T) {
	var dir string
	var port int
	var postgres string
	t.Run("cluster", func(t *testing.T) {
		c := Start(t)
		dir, port, postgres = c.dir, c.Port(), c.URL("postgres")
		a, b := c.Database(t), c.Database(t)
		if a == b {
			t.Fatalf("two databases share the URL %s", a)
		}
		ctx := context.Background()
		conn, err := pgx.Connect(ctx, a)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(ctx)
		var n int
		if err := conn.QueryRow(ctx, "SELECT count(*) FROM pg_tables WHERE schemaname = 'public'").Scan(&n); err != nil || n != 0 {
			t.Errorf("a new database has %d tables (%v), want none", n, err)
		}
	})
	if _, err := os.Stat(filepath.Join(dir, "data")); !os.IsNotExist(err) {
		t.Errorf("the cluster's directory %s is still there (%v)", dir, err)
	}
	if conn, err := pgx.Connect(context.Background(), postgres); err == nil {
		conn.Close(context.Background())
		t.Errorf("the server on port %d still accepts connections after its test ended", port)
	}
}

// A stopped cluster refuses connections and, restarted, serves the same
// data on the same port again.
func TestAStoppedClusterComesBackWithItsData(t *testing.T) {
	c := Start(t)
	db := c.Database(t)
	ctx := context.Background()
	exec := func(sql string) error {
		conn, err := pgx.Connect(ctx, db)
		if err != nil {
			return err
		}
		defer conn.Close(ctx)
		_, err = conn.Exec(ctx, sql)
		return err
	}
	if err := exec("CREATE TABLE kept (n int); INSERT INTO kept VALUES (7)"); err != nil {
		t.Fatal(err)
	}
	c.Stop(t)
	if err := exec("SELECT 1"); err == nil {
		t.Fatalf("a stopped cluster still accepts connections on port %d", c.Port())
	}
	c.Restart(t)
	conn, err := pgx.Connect(ctx, db)
	if err != nil {
		t.Fatalf("connect after the restart: %v", err)
	}
	defer conn.Close(ctx)
	var n int
	if err := conn.QueryRow(ctx, "SELECT n FROM kept").Scan(&n); err != nil || n != 7 {
		t.Fatalf("after the restart the table reads %d (%v), want 7", n, err)
	}
}
