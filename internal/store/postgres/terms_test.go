package postgres

import (
	"context"
	"testing"

	"github.com/simlock/simlock/internal/store"
	"github.com/simlock/simlock/internal/store/pgtest"
)

// A fenced store's rows carry the term of the leader that wrote them,
// its events and its grant records, a grant rewritten in a later term
// that term; an unfenced store's carry 0.
func TestTheRowsALeaderWritesCarryItsTerm(t *testing.T) {
	c := pgtest.Start(t)
	ctx := context.Background()
	url := c.Database(t)
	term, stop := elected(t, url)
	db := openFenced(t, url)
	if err := db.Lead(ctx, term); err != nil {
		t.Fatal(err)
	}
	grant := store.Grant{Key: "ins_w.lse_1", WorkerID: "ins_w", WorkerLeaseID: "lse_1", DeviceID: "dev_1", OwnerID: "a",
		RequesterID: "a", RequestID: "req_1", GrantedAt: 1}
	if _, err := db.Commit(ctx, store.Change{Events: []store.NewEvent{{ID: "e1", Timestamp: 1, Event: "lease.granted"}}, Grants: []store.Grant{grant}}); err != nil {
		t.Fatal(err)
	}
	terms := func() (events, grants []int64) {
		t.Helper()
		for _, q := range []struct {
			sql string
			out *[]int64
		}{{`SELECT term FROM events ORDER BY seq`, &events}, {`SELECT term FROM gateway_grants ORDER BY key`, &grants}} {
			rows, err := db.pool.Query(ctx, q.sql)
			if err != nil {
				t.Fatal(err)
			}
			for rows.Next() {
				var n int64
				if err := rows.Scan(&n); err != nil {
					t.Fatal(err)
				}
				*q.out = append(*q.out, n)
			}
			if err := rows.Err(); err != nil {
				t.Fatal(err)
			}
		}
		return events, grants
	}
	if ev, gr := terms(); len(ev) != 1 || ev[0] != term || len(gr) != 1 || gr[0] != term {
		t.Fatalf("the leader of term %d wrote events of terms %v and grant records of terms %v; want %d each", term, ev, gr, term)
	}

	// The next leader rewrites the grant: it carries the new term.
	stop()
	next, _ := elected(t, url)
	fresh := openFenced(t, url)
	if err := fresh.Lead(ctx, next); err != nil {
		t.Fatal(err)
	}
	grant.GrantedAt = 2
	if _, err := fresh.Commit(ctx, store.Change{Events: []store.NewEvent{{ID: "e2", Timestamp: 2, Event: "lease.renewed"}}, Grants: []store.Grant{grant}}); err != nil {
		t.Fatal(err)
	}
	if ev, gr := terms(); len(ev) != 2 || ev[0] != term || ev[1] != next || len(gr) != 1 || gr[0] != next {
		t.Fatalf("after term %d wrote, the events carry terms %v and the grant record %v; want [%d %d] and [%d]", next, ev, gr, term, next, next)
	}

	// An unfenced store (no election) writes term 0.
	plain, err := Open(ctx, c.Database(t), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	if _, err := plain.Commit(ctx, store.Change{Events: []store.NewEvent{{ID: "e3", Timestamp: 3, Event: "lease.granted"}}}); err != nil {
		t.Fatal(err)
	}
	var n int64
	if err := plain.pool.QueryRow(ctx, `SELECT term FROM events`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("an unfenced store's event carries term %d (%v), want 0", n, err)
	}
}
