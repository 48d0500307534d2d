package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// checkTermsOfRows reads the rows the leaders wrote, each stamped with the
// term of the leader that wrote it, and checks that the leader of term old
// committed nothing once term new began: in seq order the events' terms
// never go down (every event of term old has a lower seq than every event
// of term new), no row is unstamped, and no grant record of term old is
// dated after term new's takeover. It fails t, too, when term old wrote
// no event at all: the check would then prove nothing.
func checkTermsOfRows(t *testing.T, db string, old, new int64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var term int64
	var since time.Time
	if err := conn.QueryRow(ctx, `SELECT term, since FROM leaders WHERE name = 'gateway'`).Scan(&term, &since); err != nil {
		t.Fatalf("read the leaders row: %v", err)
	}
	if term != new {
		t.Fatalf("the leaders row says term %d, want %d", term, new)
	}

	rows, err := conn.Query(ctx, `SELECT seq, term, event FROM events ORDER BY seq`)
	if err != nil {
		t.Fatalf("read the events' terms: %v", err)
	}
	var (
		top, topSeq int64
		byTerm      = map[int64]int{}
		bad         int
	)
	for rows.Next() {
		var seq, term int64
		var name string
		if err := rows.Scan(&seq, &term, &name); err != nil {
			t.Fatal(err)
		}
		byTerm[term]++
		switch {
		case term == 0:
			bad++
			if bad <= 5 {
				t.Errorf("event %d (%s) carries no term: every write of a replica is its leader's", seq, name)
			}
		case term < top:
			bad++
			if bad <= 5 {
				t.Errorf("committed after deposed: event %d (%s) of term %d comes after event %d of term %d", seq, name, term, topSeq, top)
			}
		case term > top:
			top, topSeq = term, seq
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	t.Logf("events by term: %v", byTerm)
	if byTerm[old] == 0 || byTerm[new] == 0 {
		t.Errorf("terms %d and %d wrote %d and %d events; want both some, or the order of their rows proves nothing", old, new, byTerm[old], byTerm[new])
	}
	var late int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM gateway_grants WHERE term = $1 AND granted_at >= $2`, old, since.UnixMilli()).Scan(&late); err != nil {
		t.Fatalf("read the grant records' terms: %v", err)
	}
	if late > 0 {
		t.Errorf("committed after deposed: %d grant records of term %d are dated at or after term %d began (%s)", late, old, new, since.UTC().Format(time.RFC3339Nano))
	}
	var unstamped int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM gateway_grants WHERE term = 0`).Scan(&unstamped); err != nil {
		t.Fatal(err)
	}
	if unstamped > 0 {
		t.Errorf("%d grant records carry no term", unstamped)
	}
}
