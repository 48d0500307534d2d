package contract_test

import (
	"slices"
	"testing"

	"github.com/simlock/simlock/internal/contract"
)

// names is a daemon's active leases for the table below, by key.
type names map[string]contract.LeaseName

func (n names) ByKey(key string) (contract.LeaseName, bool) {
	l, ok := n[key]
	return l, ok
}

func (n names) ChosenBy(id string) map[string]contract.LeaseName {
	out := map[string]contract.LeaseName{}
	for _, l := range n {
		if l.Chosen && l.Key == "k-"+l.Owner+"-"+id {
			out[l.Owner] = l
		}
	}
	return out
}

func (names) Name(l contract.LeaseName) contract.LeaseName { return l }

func TestResolveLeaseName(t *testing.T) {
	// alice and bob each chose build-42; carol's lease has only its key;
	// dave chose lse_carol, another lease's key.
	ls := names{
		"k-alice-build-42": {Key: "k-alice-build-42", Owner: "alice", Chosen: true},
		"k-bob-build-42":   {Key: "k-bob-build-42", Owner: "bob", Chosen: true},
		"lse_carol":        {Key: "lse_carol", Owner: "carol"},
		"k-dave-lse_carol": {Key: "k-dave-lse_carol", Owner: "dave", Chosen: true},
		"k-erin-solo":      {Key: "k-erin-solo", Owner: "erin", Chosen: true},
	}
	for _, c := range []struct {
		who   string
		admin bool
		name  string
		want  string // the key found, or the code
		keys  []string
	}{
		{who: "alice", name: "build-42", want: "k-alice-build-42"},
		{who: "bob", name: "build-42", want: "k-bob-build-42"},
		{who: "carol", name: "build-42", want: "UNKNOWN_LEASE"},
		{who: "carol", name: "lse_carol", want: "lse_carol"},
		{who: "alice", name: "lse_carol", want: "FORBIDDEN"},
		{who: "carol", name: "k-alice-build-42", want: "UNKNOWN_LEASE"},
		{who: "alice", name: "k-alice-build-42", want: "k-alice-build-42"},
		{who: "dave", name: "lse_carol", want: "k-dave-lse_carol"},
		{who: "carol", name: "nothing", want: "UNKNOWN_LEASE"},
		{who: "", name: "build-42", want: "UNKNOWN_LEASE"},
		{who: "ops", admin: true, name: "build-42", want: "BAD_REQUEST", keys: []string{"k-alice-build-42", "k-bob-build-42"}},
		{who: "ops", admin: true, name: "solo", want: "k-erin-solo"},
		{who: "ops", admin: true, name: "lse_carol", want: "lse_carol"},
		{who: "ops", admin: true, name: "k-bob-build-42", want: "k-bob-build-42"},
		{who: "ops", admin: true, name: "nothing", want: "UNKNOWN_LEASE"},
	} {
		l, err := contract.ResolveLeaseName[contract.LeaseName](c.who, c.admin, c.name, ls)
		got := l.Key
		if err != nil {
			got = string(err.Code)
			if keys := err.Details["keys"]; c.keys != nil && !slices.Equal(keys.([]string), c.keys) {
				t.Errorf("%s (admin %v) naming %s: keys %v, want %v", c.who, c.admin, c.name, keys, c.keys)
			}
		}
		if got != c.want {
			t.Errorf("%s (admin %v) naming %s: %s, want %s", c.who, c.admin, c.name, got, c.want)
		}
	}
}
