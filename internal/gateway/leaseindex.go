package gateway

import (
	"strings"
	"time"

	"github.com/simlock/simlock/internal/contract"
)

// Leases through a gateway are named <workerId>.<workerLeaseId>. A worker
// id may hold a '.' (ids are [A-Za-z0-9._:-]) and a worker's lease id
// ("lse_…") holds none, so the id is split at its last '.'.
const leaseIDSep = "."

// gatewayLeaseID names a worker's lease as the gateway hands it out.
func gatewayLeaseID(workerID, workerLeaseID string) string {
	return workerID + leaseIDSep + workerLeaseID
}

// splitLeaseID is gatewayLeaseID undone; false for an id that is not one.
func splitLeaseID(id string) (workerID, workerLeaseID string, ok bool) {
	i := strings.LastIndex(id, leaseIDSep)
	if i <= 0 || i == len(id)-1 {
		return "", "", false
	}
	return id[:i], id[i+1:], true
}

// requesterPrefix marks, in a worker's lease records, the requester ids of
// the leases a gateway asked for: gw:<gatewayInstanceId>:<requester>.
func requesterPrefix(instanceID string) string {
	return contract.GatewayRequesterPrefix + instanceID + ":"
}

// indexed is one lease the gateway issued.
type indexed struct {
	id, workerID, workerLeaseID string
	// requester is the fleet requester id (without the prefix); owner is
	// who the gateway authorized it for.
	requester, owner string
	// requestID is the gateway's request that made it; empty for one
	// rebuilt from a worker's list (its request went with the gateway's
	// previous run).
	requestID string
	// missed counts the consecutive snapshots of its own worker it was
	// not in.
	missed int
	// ending is why the gateway is ending the lease, while its release is
	// in flight: the worker's relayed end then carries the gateway's
	// reason (killed for release --all), not the worker's.
	ending string
}

// leaseIndex is the gateway's record of the leases it issued, in memory,
// rebuilt from each worker's lease list on connect. One lease per fleet
// requester. The fleet's lock guards it.
type leaseIndex struct {
	prefix      string
	byID        map[string]*indexed
	byRequester map[string]*indexed
	// byWorkerLease finds an entry by its worker and the worker's id for
	// it, whatever its gateway id (a chosen id is its own gateway id).
	byWorkerLease map[workerLeaseKey]*indexed
	// withdrawn are the requests the gateway gave up waiting for on a
	// worker (its lease.request timed out or the uplink failed under it),
	// by worker and requester, with when: a lease the worker grants for
	// one later is nobody's, and is given back rather than indexed.
	withdrawn map[withdrawal]time.Time
}

type withdrawal struct{ workerID, requester string }

type workerLeaseKey struct{ workerID, leaseID string }

// withdrawnFor bounds how long a withdrawal is remembered: longer than any
// start (a download included) takes on a worker.
const withdrawnFor = 24 * time.Hour

func newLeaseIndex(instanceID string) *leaseIndex {
	return &leaseIndex{prefix: requesterPrefix(instanceID), byID: map[string]*indexed{}, byRequester: map[string]*indexed{},
		byWorkerLease: map[workerLeaseKey]*indexed{}, withdrawn: map[withdrawal]time.Time{}}
}

// withdraw notes that the gateway gave up waiting for requester's request
// on workerID.
func (x *leaseIndex) withdraw(workerID, requester string, at time.Time) {
	x.withdrawn[withdrawal{workerID, requester}] = at
}

// add records a lease the gateway was just granted for requester, owned by
// owner (as the gateway authorized them: never from the worker's echo), by
// its request requestID, and returns its gateway id: the id the requester
// chose, when chosen is set (the worker's lease has it too), else the
// worker's id and the worker's lease id.
func (x *leaseIndex) add(workerID, workerLeaseID string, chosen bool, requester, owner, requestID string) string {
	id := gatewayLeaseID(workerID, workerLeaseID)
	if chosen {
		id = workerLeaseID
	}
	e := &indexed{id: id, workerID: workerID, workerLeaseID: workerLeaseID,
		requester: requester, owner: owner, requestID: requestID}
	if old, ok := x.byRequester[requester]; ok && old.id != e.id {
		x.remove(old.id)
	}
	x.byID[e.id] = e
	x.byRequester[requester] = e
	x.byWorkerLease[workerLeaseKey{workerID, workerLeaseID}] = e
	// Granted to the gateway's own call: whatever it withdrew from this
	// worker for requester is settled (the worker holds one open request
	// or lease per requester).
	delete(x.withdrawn, withdrawal{workerID, requester})
	return e.id
}

// get finds a lease by its gateway id.
func (x *leaseIndex) get(id string) (*indexed, bool) {
	e, ok := x.byID[id]
	return e, ok
}

// ofWorker finds a lease by its worker and the worker's id for it.
func (x *leaseIndex) ofWorker(workerID, workerLeaseID string) (*indexed, bool) {
	e, ok := x.byWorkerLease[workerLeaseKey{workerID, workerLeaseID}]
	return e, ok
}

// ofRequester finds the lease a fleet requester holds.
func (x *leaseIndex) ofRequester(requester string) (*indexed, bool) {
	e, ok := x.byRequester[requester]
	return e, ok
}

// remove forgets a lease: it ended, or its worker answered UNKNOWN_LEASE,
// which proves the gateway's record wrong.
func (x *leaseIndex) remove(id string) {
	e, ok := x.byID[id]
	if !ok {
		return
	}
	delete(x.byID, id)
	if x.byRequester[e.requester] == e {
		delete(x.byRequester, e.requester)
	}
	if k := (workerLeaseKey{e.workerID, e.workerLeaseID}); x.byWorkerLease[k] == e {
		delete(x.byWorkerLease, k)
	}
}

// reconcile brings the index in line with one snapshot of workerID's active
// leases: the gateway's own (by their requester prefix) are added, with the
// owner the worker recorded for them (what the gateway forwarded); an entry
// of this worker the snapshot lacks is forgotten at its second miss in a
// row. One miss is grace: a grant that lands between the read of a snapshot
// and its answer is not in it. Another worker's entries are never touched.
// A lease granted for a request the gateway withdrew is not added: its
// worker lease id is returned, to be given back.
func (x *leaseIndex) reconcile(workerID string, snapshot []contract.LeaseRecord, now time.Time) (giveBack []string) {
	for k, at := range x.withdrawn {
		if now.Sub(at) > withdrawnFor {
			delete(x.withdrawn, k)
		}
	}
	seen := map[string]bool{}
	for _, l := range snapshot {
		requester, ok := strings.CutPrefix(l.RequesterID, x.prefix)
		if !ok || requester == "" {
			continue
		}
		if e, ok := x.ofWorker(workerID, l.ID); ok {
			seen[e.id] = true
			e.missed = 0
			continue
		}
		if _, gone := x.withdrawn[withdrawal{workerID, requester}]; gone {
			delete(x.withdrawn, withdrawal{workerID, requester})
			giveBack = append(giveBack, l.ID)
			continue
		}
		seen[x.add(workerID, l.ID, l.IDChosenByRequester, requester, l.OwnerID, "")] = true
	}
	for id, e := range x.byID {
		if e.workerID != workerID || seen[id] {
			continue
		}
		if e.missed++; e.missed >= 2 {
			x.remove(id)
		}
	}
	return giveBack
}
