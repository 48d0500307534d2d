package sqlite

import (
	"context"
	"testing"

	"github.com/simlock/simlock/internal/store"
)

// The clock reading is written with a decision (in the same commit) or on
// its own, and read back; a database that never had one has none.
func TestTheClockReadingIsStoredWithADecisionOrAlone(t *testing.T) {
	db, _ := openTemp(t)
	ctx := context.Background()
	if _, found, err := db.Clock(ctx); found || err != nil {
		t.Fatalf("a fresh database's clock: found %v, %v", found, err)
	}
	a := store.Clock{WallMs: 1_800_000_000_000, BootNs: 5e9, BootID: "boot-a"}
	commit(t, db, store.Change{Events: []store.NewEvent{event("evt_1", 1)}, Clock: &a})
	if got, found, err := db.Clock(ctx); !found || err != nil || got != a {
		t.Fatalf("clock after a commit carrying it = %+v, %v, %v; want %+v", got, found, err, a)
	}
	r, err := db.Reserve(ctx)
	if err != nil {
		t.Fatal(err)
	}
	b := store.Clock{WallMs: a.WallMs + 3_600_000, BootNs: 6e9, BootID: "boot-a"}
	if _, err := r.Commit(ctx, store.Change{Clock: &b}); err != nil {
		t.Fatal(err)
	}
	if got, _, _ := db.Clock(ctx); got != b {
		t.Fatalf("clock after a reserved commit carrying it = %+v, want %+v", got, b)
	}
	c := store.Clock{WallMs: b.WallMs + 60_000, BootNs: 66e9, BootID: "boot-a"}
	if err := db.PutClock(ctx, c); err != nil {
		t.Fatal(err)
	}
	if got, _, _ := db.Clock(ctx); got != c {
		t.Fatalf("clock after PutClock = %+v, want %+v", got, c)
	}
}
