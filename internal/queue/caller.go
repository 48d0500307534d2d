package queue

import "github.com/simlock/simlock/internal/contract"

// What a caller may see of others' leases, and act on, is decided here for
// both modes: the worker's engine and a gateway list leases, name them on
// devices and authorize commands and file transfers by these rules, on
// their own records (the engine's leases, the gateway's grant records).

// SeesLease reports whether c may see a lease (list it, and find it named
// on the device it holds): an admin every lease; an agent only a lease it
// owns. known is whether the lease is one the deciding side holds a record
// of, with owner its owner: a lease no record bears out (a device names a
// lease the engine does not have, a worker reports one the gateway did not
// grant) is an admin's to see alone. A device whose lease c may not see is
// still shown, leased, with the lease not named.
func (c Caller) SeesLease(owner string, known bool) bool {
	return c.Admin || (known && owner == c.Principal)
}

// ActsOn checks that c may run a command on a lease, or move files into
// and out of it, whose requester and owner are leaseRequester and
// leaseOwner: named is the lease as c named it, requesterID the requester
// c named ("" for none). An agent acts on its own leases (finding the
// lease at all is the owner's check, done before); anyone naming a
// requester must name the lease's; and an admin acting on someone else's
// lease must name its requester (as a gateway's uplink does for the owner
// it acts for), so it never acts on one by accident.
func (c Caller) ActsOn(named, requesterID, leaseRequester, leaseOwner string) error {
	if requesterID != "" && requesterID != leaseRequester {
		return contract.Errorf(contract.CodeForbidden, "lease %s was not made for %s", named, requesterID).With("leaseId", named)
	}
	if c.Admin && leaseOwner != c.Principal && requesterID == "" {
		return contract.Errorf(contract.CodeForbidden,
			"to act on someone else's lease, name its requester (requesterId)").With("leaseId", named)
	}
	return nil
}
