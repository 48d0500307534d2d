package sqlite

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/store"
)

func TestTokensSurviveReopenAndRevoke(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "s.db")
	db, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	a := store.Token{TokenRecord: contract.TokenRecord{ID: "tok_a", Role: contract.TokenAgent, Label: "ci", CreatedAt: 1}, Hash: "aa"}
	b := store.Token{TokenRecord: contract.TokenRecord{ID: "tok_b", Role: contract.TokenOperator, CreatedAt: 2}, Hash: "bb"}
	for _, tok := range []store.Token{b, a} {
		if err := db.PutToken(ctx, tok); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.PutToken(ctx, store.Token{TokenRecord: contract.TokenRecord{ID: "tok_c", Role: contract.TokenAgent}, Hash: "aa"}); err == nil {
		t.Fatal("a second token with the same hash was stored")
	}
	db.Close()

	db, err = Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	got, err := db.Tokens(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0] != a || got[1] != b {
		t.Fatalf("tokens after reopen = %+v, want [%+v %+v]", got, a, b)
	}
	if ok, err := db.DeleteToken(ctx, "tok_a"); err != nil || !ok {
		t.Fatalf("delete tok_a = %v, %v", ok, err)
	}
	if ok, err := db.DeleteToken(ctx, "tok_a"); err != nil || ok {
		t.Fatalf("second delete of tok_a = %v, %v; want false", ok, err)
	}
	got, _ = db.Tokens(ctx)
	if len(got) != 1 || got[0].ID != "tok_b" {
		t.Fatalf("tokens after revoke = %+v", got)
	}
}

func TestComponentRecordsReplaceAndDelete(t *testing.T) {
	ctx := context.Background()
	db, err := Open(ctx, filepath.Join(t.TempDir(), "s.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	r := store.ComponentRecord{Platform: contract.PlatformIOS, Version: "26.4", Name: "iOS 26.4", Receipt: "a@1", InstalledAt: 5}
	if err := db.PutComponent(ctx, r); err != nil {
		t.Fatal(err)
	}
	r.Receipt = "a@2"
	if err := db.PutComponent(ctx, r); err != nil {
		t.Fatal(err)
	}
	got, err := db.Components(ctx)
	if err != nil || len(got) != 1 || got[0] != r {
		t.Fatalf("records = %+v, %v; want the reinstall's receipt only", got, err)
	}
	if err := db.DeleteComponent(ctx, contract.PlatformIOS, "26.4"); err != nil {
		t.Fatal(err)
	}
	if got, _ := db.Components(ctx); len(got) != 0 {
		t.Fatalf("records after delete = %+v", got)
	}
}
