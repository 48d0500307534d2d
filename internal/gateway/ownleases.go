package gateway

import (
	"sort"

	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/queue"
)

// A worker's own leases (made on the worker, not through the gateway) are
// listed to a gateway's admins, who see the whole fleet, but the gateway
// releases only the leases it granted: it holds no grant record for the
// others, their holders are the worker's own local callers, and the trust
// model gives the gateway's uplink session the admin role on a worker for
// the gateway's own grants and requests only. So a release of one through
// the gateway is refused saying whose lease it is and where it can be
// released, and release-all reports those it skipped.

// workerOwnLeases are the leases connected workers report that the gateway
// did not grant, sorted by worker and id: what an admin's list shows and
// the gateway does not release.
func (l *Leasing) workerOwnLeases() []contract.LeaseRecord {
	fleet := l.f.Snapshot().Leases
	var out []contract.LeaseRecord
	l.q.View(func() {
		for _, r := range fleet {
			if _, ok := l.idx.ofWorker(r.WorkerID, r.ID); !ok {
				out = append(out, r)
			}
		}
	})
	sort.Slice(out, func(i, j int) bool {
		if out[i].WorkerID != out[j].WorkerID {
			return out[i].WorkerID < out[j].WorkerID
		}
		return out[i].ID < out[j].ID
	})
	return out
}

// workerOwnRefusal is the refusal of a release through the gateway of a
// worker's own lease r.
func (l *Leasing) workerOwnRefusal(r contract.LeaseRecord) *contract.Error {
	worker := r.WorkerID
	if label := l.f.names()[r.WorkerID].label; label != "" {
		worker = label + " (" + r.WorkerID + ")"
	}
	return contract.Errorf(contract.CodeForbidden,
		"lease %s is worker %s's own: it was made on that worker, not through this gateway, which releases only the leases it granted; release it on that worker (simlock release %s there, or DELETE /v1/leases/%s on its HTTP API)",
		r.ID, worker, r.ID, r.ID).
		With("leaseId", r.ID).With("workerId", r.WorkerID).With("reason", contract.ReasonWorkerOwnLease)
}

// refuseWorkerOwn turns an UNKNOWN_LEASE for an admin into the refusal
// that says whose lease it is, when id names a worker's own lease the
// admin's list shows; any other error is returned as it is. Anyone else
// is not shown a worker's own leases, and keeps UNKNOWN_LEASE.
func (l *Leasing) refuseWorkerOwn(c queue.Caller, id string, err error) error {
	if !c.Admin || contract.AsError(err).Code != contract.CodeUnknownLease {
		return err
	}
	for _, r := range l.workerOwnLeases() {
		if r.ID == id {
			return l.workerOwnRefusal(r)
		}
	}
	return err
}

// skippedWorkerOwn lists, for release-all, the worker's own leases it
// leaves as they are.
func (l *Leasing) skippedWorkerOwn() []contract.SkippedLease {
	var out []contract.SkippedLease
	for _, r := range l.workerOwnLeases() {
		out = append(out, contract.SkippedLease{LeaseID: r.ID, WorkerID: r.WorkerID, Reason: contract.ReasonWorkerOwnLease,
			Message: l.workerOwnRefusal(r).Message})
	}
	return out
}
