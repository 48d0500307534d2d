package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/simlock/simlock/internal/store/pgtest"
)

// checkTermsOfRows reads the terms of the rows the leaders wrote
// (pgtest.ReadTerms) and checks that the leader of term old committed
// nothing once term new began. It fails t, too, when either term wrote no
// event: the order of their rows would then prove nothing.
func checkTermsOfRows(t *testing.T, db string, old, new int64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	terms, err := pgtest.ReadTerms(ctx, db, "gateway")
	if err != nil {
		t.Fatal(err)
	}
	if terms.Current != new {
		t.Errorf("the leaders row says term %d, want %d", terms.Current, new)
	}
	for _, v := range terms.Violations {
		t.Errorf("committed after deposed: %s", v)
	}
	t.Logf("events by term: %v", terms.Events)
	if terms.Events[old] == 0 || terms.Events[new] == 0 {
		t.Errorf("terms %d and %d wrote %d and %d events; want both some, or the order of their rows proves nothing", old, new, terms.Events[old], terms.Events[new])
	}
}
