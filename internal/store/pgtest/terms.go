package pgtest

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Terms is what a gateway database's rows say of the leaders that wrote
// them: each event and grant record carries the term of the leader whose
// fenced transaction committed it.
type Terms struct {
	// Current is the group's term in the leaders table, and Since when
	// it began.
	Current int64
	Since   time.Time
	// Events counts the events by the term that wrote them.
	Events map[int64]int
	// Violations name each row committed by a leader after a newer term
	// began: an event whose term is below one of a lower seq, a grant
	// record of an older term dated after the current term began, and
	// any row without a term (at most 20 are named).
	Violations []string
}

// ReadTerms reads the terms of the rows in the gateway database at db,
// for the election group.
func ReadTerms(ctx context.Context, db, group string) (Terms, error) {
	conn, err := pgx.Connect(ctx, db)
	if err != nil {
		return Terms{}, err
	}
	defer conn.Close(ctx)
	out := Terms{Events: map[int64]int{}}
	if err := conn.QueryRow(ctx, `SELECT term, since FROM leaders WHERE name = $1`, group).Scan(&out.Current, &out.Since); err != nil {
		return Terms{}, fmt.Errorf("read the leaders row: %w", err)
	}
	bad := func(format string, args ...any) {
		if len(out.Violations) < 20 {
			out.Violations = append(out.Violations, fmt.Sprintf(format, args...))
		}
	}
	rows, err := conn.Query(ctx, `SELECT seq, term, event FROM events ORDER BY seq`)
	if err != nil {
		return Terms{}, fmt.Errorf("read the events' terms: %w", err)
	}
	var top, topSeq int64
	for rows.Next() {
		var seq, term int64
		var name string
		if err := rows.Scan(&seq, &term, &name); err != nil {
			rows.Close()
			return Terms{}, err
		}
		out.Events[term]++
		switch {
		case term == 0:
			bad("event %d (%s) carries no term", seq, name)
		case term < top:
			bad("event %d (%s) of term %d was committed after event %d of term %d", seq, name, term, topSeq, top)
		case term > top:
			top, topSeq = term, seq
		}
	}
	if err := rows.Err(); err != nil {
		return Terms{}, err
	}
	grants, err := conn.Query(ctx, `SELECT key, term, granted_at FROM gateway_grants WHERE term = 0 OR (term < $1 AND granted_at >= $2) ORDER BY granted_at`,
		out.Current, out.Since.UnixMilli())
	if err != nil {
		return Terms{}, fmt.Errorf("read the grant records' terms: %w", err)
	}
	for grants.Next() {
		var key string
		var term, at int64
		if err := grants.Scan(&key, &term, &at); err != nil {
			grants.Close()
			return Terms{}, err
		}
		if term == 0 {
			bad("grant record %s carries no term", key)
		} else {
			bad("grant record %s of term %d is dated %s, after term %d began at %s", key, term,
				time.UnixMilli(at).UTC().Format(time.RFC3339Nano), out.Current, out.Since.UTC().Format(time.RFC3339Nano))
		}
	}
	return out, grants.Err()
}
