package contract

import (
	"sort"
	"strings"
)

// LeaseNames is what a daemon knows of its active leases to resolve the
// name a caller gives one: a worker's engine and a gateway's lease index
// each implement it over their own records (L).
type LeaseNames[L any] interface {
	// ByKey is the lease whose unique key is key.
	ByKey(key string) (L, bool)
	// ChosenBy is the leases whose id their owner chose as id, by owner.
	ChosenBy(id string) map[string]L
	// Name says whose a lease is, its key, and whether its id was chosen.
	Name(l L) LeaseName
}

// LeaseName is a lease as ResolveLeaseName sees it.
type LeaseName struct {
	Key, Owner string
	Chosen     bool
}

// ResolveLeaseName is the one rule by which every operation of a worker
// and of a gateway finds the lease a caller names, and checks the caller
// may act on it. A name is, in this order: an id the caller itself chose
// for one of its leases (a chosen id is unique only within its owner); a
// lease's unique key; for an admin, an id another owner chose, when only
// one active lease has it (two or more are BAD_REQUEST listing their
// keys, so the admin names one by its key). An agent naming another
// owner's lease by its key is FORBIDDEN, unless that lease's id was
// chosen: a chosen id is never told to another owner, so its lease is
// UNKNOWN_LEASE, as is any name that resolves to nothing.
func ResolveLeaseName[L any](principal string, admin bool, name string, ls LeaseNames[L]) (L, *Error) {
	var none L
	unknown := Errorf(CodeUnknownLease, "no active lease %s", name).With("leaseId", name)
	chosen := ls.ChosenBy(name)
	if l, ok := chosen[principal]; ok && principal != "" {
		return l, nil
	}
	if l, ok := ls.ByKey(name); ok {
		n := ls.Name(l)
		switch {
		case admin || n.Owner == principal:
			return l, nil
		case n.Chosen:
			return none, unknown
		}
		return none, Errorf(CodeForbidden, "lease %s belongs to another owner", name).With("leaseId", name)
	}
	if !admin || len(chosen) == 0 {
		return none, unknown
	}
	if len(chosen) == 1 {
		for _, l := range chosen {
			return l, nil
		}
	}
	keys := make([]string, 0, len(chosen))
	for _, l := range chosen {
		keys = append(keys, ls.Name(l).Key)
	}
	sort.Strings(keys)
	return none, BadRequest("leaseId", "%d active leases of different owners have the id %s: name one by its key (%s)",
		len(keys), name, strings.Join(keys, ", ")).With("leaseId", name).With("keys", keys)
}
