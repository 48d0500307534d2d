package gateway

import (
	"context"
	"errors"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/simlock/simlock/internal/client"
	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/queue"
)

func (r leasingReservation) Release() { r.res.Release() }

// Resolve names the gateway lease the caller calls name by its key, which
// names it alone: the name sessions hold it by.
func (l *Leasing) Resolve(c queue.Caller, name string) (string, error) {
	e, err := l.owned(c, name)
	if err != nil {
		return "", err
	}
	return e.key, nil
}

// owned finds a gateway lease the caller may act on, as the index resolves
// the id the caller named (leaseIndex.resolve): a chosen id within the
// caller's own leases.
func (l *Leasing) owned(c queue.Caller, id string) (*indexed, error) {
	var e *indexed
	var err error
	l.q.View(func() { e, err = l.idx.resolve(c, id) })
	return e, err
}

// forward runs call on the lease's worker: a transport failure is
// WORKER_UNREACHABLE, the worker's UNKNOWN_LEASE forgets the lease (the
// gateway's record is provably wrong), and the worker's other refusals
// are forwarded with the worker's own names in them scrubbed (scrub).
func (l *Leasing) forward(e *indexed, call func(ctx context.Context, c *client.Client) error) error {
	return l.forwardWithin(context.Background(), callTimeout, e, call)
}

// forwardWithin is forward bounded by timeout, and ended by parent.
func (l *Leasing) forwardWithin(parent context.Context, timeout time.Duration, e *indexed, call func(ctx context.Context, c *client.Client) error) error {
	c := l.f.clientOf(e.workerID)
	if c == nil {
		return contract.Errorf(contract.CodeWorkerUnreachable, "worker %s is not connected; lease %s is kept until its TTL passes on the worker", e.workerID, e.id).
			With("workerId", e.workerID).With("leaseId", e.id)
	}
	ctx, cancel := context.WithTimeout(parent, timeout)
	defer cancel()
	err := call(ctx, c)
	if err == nil {
		return nil
	}
	ce, refused := forwardError(ctx, e.workerID, "the call", err)
	switch {
	case !refused:
		return ce.With("leaseId", e.id)
	case ce.Code == contract.CodeUnknownLease:
		_ = l.q.Do(func(tx *queue.Txn) error {
			l.idx.remove(e)
			tx.Kick()
			return nil
		})
		return contract.Errorf(contract.CodeUnknownLease, "no active lease %s", e.id).With("leaseId", e.id)
	}
	return l.scrub(e.workerID, ce)
}

// errBadAnswer marks a worker's answer the gateway could not take.
var errBadAnswer = errors.New("the worker's answer is not valid")

// forwardError classifies err, the failure of a call forwarded to workerID
// under ctx: the worker's own refusal (refused: the caller scrubs the
// worker's ids from it before an agent hears it); the
// uplink lost, or no answer within ctx's bound, WORKER_UNREACHABLE; and
// anything else (an answer that is not what the operation returns, an
// input the gateway could not encode) INTERNAL, which is not the worker
// being unreachable. One rule for every forwarded operation.
func forwardError(ctx context.Context, workerID, what string, err error) (ce *contract.Error, refused bool) {
	switch {
	case errors.As(err, &ce) && ce.Code != contract.CodeDaemonConnectionLost:
		return ce, true
	case ce != nil || ctx.Err() != nil:
		return contract.Errorf(contract.CodeWorkerUnreachable, "worker %s did not answer %s: %v", workerID, what, err).
			With("workerId", workerID), false
	}
	return contract.Errorf(contract.CodeInternal, "worker %s: %s: %v", workerID, what, err).With("workerId", workerID), false
}

// project names a worker's lease record as the gateway granted it: its id,
// device, requester, owner and worker from the grant record, never the
// worker's; the worker by id and label (ws, the fleet's names of its
// workers).
func project(e *indexed, r contract.LeaseRecord, ws workerNames) contract.LeaseRecord {
	r.ID, r.DeviceID, r.RequesterID, r.OwnerID, r.WorkerID = e.id, e.deviceID, e.requester, e.owner, e.workerID
	r.IDChosenByRequester, r.Key = e.chosen != "", e.keyIfChosen()
	r.Worker, r.Unreachable = ws.ref(e.workerID), false
	return r
}

// Renew forwards lease.renew.
func (l *Leasing) Renew(c queue.Caller, in contract.LeaseRenewInput) (contract.LeaseRecord, error) {
	e, err := l.owned(c, in.LeaseID)
	if err != nil {
		return contract.LeaseRecord{}, err
	}
	var out contract.LeaseRecord
	err = l.forward(e, func(ctx context.Context, cl *client.Client) error {
		r, err := cl.Renew(ctx, e.workerLeaseID, in.TTLMs)
		out = project(e, r, l.f.names())
		return err
	})
	return out, err
}

// Release forwards lease.release; the lease leaves the index once the
// worker ended it.
func (l *Leasing) Release(c queue.Caller, in contract.LeaseIDInput) (contract.ReleaseResult, error) {
	e, err := l.owned(c, in.LeaseID)
	if err != nil {
		return contract.ReleaseResult{}, l.refuseWorkerOwn(c, in.LeaseID, err)
	}
	var out contract.ReleaseResult
	err = l.ending(e, contract.EndReleased, func(ctx context.Context, cl *client.Client) error {
		r, err := cl.Release(ctx, e.workerLeaseID)
		out = r
		return err
	})
	if err != nil {
		return contract.ReleaseResult{}, err
	}
	out.LeaseID = e.id
	return out, nil
}

// ending releases e on its worker for reason: marked as ending first, so
// the worker's relayed end (which may arrive before the answer) is told to
// its holders with the gateway's reason; then, once the worker answered,
// forgotten and told, if the relay has not done both already; either way
// its holders have been told when the answer comes (a transfer of the
// lease, say, is gone by then). A release that fails leaves the lease as
// it was.
func (l *Leasing) ending(e *indexed, reason contract.EndReason, release func(ctx context.Context, cl *client.Client) error) error {
	mark := func(r string) {
		_ = l.q.Do(func(*queue.Txn) error {
			e.ending = r
			return nil
		})
	}
	mark(string(reason))
	err := l.forward(e, release)
	if err != nil {
		mark("")
		return err
	}
	// The end is acknowledged only once it is saved: a gateway that lost
	// the database (a replica deposed under the release) answers so, and
	// the client asks again of the next, where the worker's view ends the
	// lease.
	if _, _, err := l.endedSaved(e.workerID, e.workerLeaseID); err != nil {
		return err
	}
	l.tellEnded(e, string(reason))
	return nil
}

// ReleaseAll cancels every request in the fleet queue and releases every
// lease the gateway issued (never a worker's own: those are listed as
// skipped, with why), on every worker. A
// worker that cannot be reached leaves its leases as they are: the answer
// is then WORKER_UNREACHABLE naming those workers, with the leases that
// were released.
func (l *Leasing) ReleaseAll() (contract.ReleaseAllResult, error) {
	res := contract.ReleaseAllResult{Released: []string{}, Cancelled: []string{}}
	var entries []*indexed
	err := l.q.Do(func(tx *queue.Txn) error {
		res.Cancelled = tx.CancelAll(contract.Errorf(contract.CodeCancelled, "an operator released everything"), contract.RejectKilled, false)
		for _, e := range l.idx.byKey {
			entries = append(entries, e)
		}
		return nil
	})
	if err != nil {
		return res, err
	}
	sort.Slice(entries, func(i, j int) bool { return entries[i].key < entries[j].key })
	var unreachable []string
	for _, e := range entries {
		err := l.ending(e, contract.EndKilled, func(ctx context.Context, cl *client.Client) error {
			_, err := cl.Release(ctx, e.workerLeaseID)
			return err
		})
		var ce *contract.Error
		switch {
		case err == nil:
			res.Released = append(res.Released, e.id)
		case errors.As(err, &ce) && ce.Code == contract.CodeUnknownLease:
			// Gone already on its worker: forward forgot it.
			res.Released = append(res.Released, e.id)
		default:
			if !slices.Contains(unreachable, e.workerID) {
				unreachable = append(unreachable, e.workerID)
			}
		}
	}
	res.Skipped = l.skippedWorkerOwn()
	if len(unreachable) > 0 {
		return res, contract.Errorf(contract.CodeWorkerUnreachable, "released %d leases; workers %s did not answer, and their leases are kept until released or expired",
			len(res.Released), strings.Join(unreachable, ", ")).With("releasedLeaseIds", res.Released).With("unreachableWorkers", unreachable)
	}
	return res, nil
}

// Watch checks that the caller may watch a gateway lease and returns it;
// the caller's session then hears lease-lost when it ends.
func (l *Leasing) Watch(c queue.Caller, id string) (contract.LeaseWatchResult, error) {
	r, err := l.Get(c, contract.LeaseIDInput{LeaseID: id})
	if err != nil {
		return contract.LeaseWatchResult{}, err
	}
	return contract.LeaseWatchResult{Lease: r.Lease}, nil
}

// Get forwards lease.get.
func (l *Leasing) Get(c queue.Caller, in contract.LeaseIDInput) (contract.LeaseGetResult, error) {
	e, err := l.owned(c, in.LeaseID)
	if err != nil {
		return contract.LeaseGetResult{}, err
	}
	var out contract.LeaseGetResult
	err = l.forward(e, func(ctx context.Context, cl *client.Client) error {
		return cl.Call(ctx, contract.OpLeaseGet, contract.LeaseIDInput{LeaseID: e.workerLeaseID}, &out)
	})
	if err != nil {
		return contract.LeaseGetResult{}, err
	}
	out.Lease = project(e, out.Lease, l.f.names())
	out.RequestID = e.requestID
	out.Device.WorkerID = e.workerID
	// The device is the grant record's, under the gateway's names for its
	// lease: never the worker's own lease id.
	out.Device.ID, out.Device.LeaseID, out.Device.LeaseKey = e.deviceID, e.id, e.keyIfChosen()
	return out, nil
}

// Leases lists the leases of the connected workers (as they last reported
// them) that the caller may see: an admin every one, the gateway's own
// under their gateway ids and a worker's local ones as the worker names
// them (a lease the gateway did not grant is never the gateway's, whatever
// its requester or owner says); anyone else the gateway leases they own,
// by the grant records. The gateway's leases that no report shows follow,
// from their grant records: those granted since their worker last
// reported (as the grant answered them), and those on a worker that is
// not connected, marked unreachable: the gateway keeps them, and so does
// the worker until their TTL passes. So a lease is listed from the moment
// its grant is answered.
func (l *Leasing) Leases(c queue.Caller, fleet []contract.LeaseRecord) []contract.LeaseRecord {
	out := []contract.LeaseRecord{}
	ws := l.f.names()
	l.q.View(func() {
		reported := map[*indexed]bool{}
		for _, r := range fleet {
			e, ok := l.idx.ofWorker(r.WorkerID, r.ID)
			if ok {
				reported[e] = true
			}
			switch {
			case ok && c.SeesLease(e.owner, true):
				out = append(out, project(e, r, ws))
			case !ok && c.SeesLease(r.OwnerID, false):
				r.Worker, r.Unreachable = ws.ref(r.WorkerID), false
				out = append(out, r)
			}
		}
		var unseen []contract.LeaseRecord
		for _, e := range l.idx.byKey {
			if reported[e] || !c.SeesLease(e.owner, true) {
				continue
			}
			connected := ws[e.workerID].connected
			var r contract.LeaseRecord
			if connected && e.granted.ID != "" {
				r = project(e, e.granted, ws)
			} else {
				r = e.record()
				r.GrantedAt, r.IDChosenByRequester = e.grantedAt, e.chosen != ""
				r.Worker = ws.ref(e.workerID)
			}
			r.Unreachable = !connected
			unseen = append(unseen, r)
		}
		sort.Slice(unseen, func(i, j int) bool { return unseen[i].UniqueKey() < unseen[j].UniqueKey() })
		out = append(out, unseen...)
	})
	return out
}

// ProjectDevices names, on fleet device records, the gateway's leases by
// their gateway ids, for c: an admin sees a worker's own leases as the
// worker names them; anyone else sees only the leases it owns named, by
// the grant records, and every other device's lease blank.
func (l *Leasing) ProjectDevices(c queue.Caller, ds []contract.Device) []contract.Device {
	out := make([]contract.Device, len(ds))
	l.q.View(func() {
		for i, d := range ds {
			if d.LeaseID != "" {
				e, ok := l.idx.ofWorker(d.WorkerID, d.LeaseID)
				switch {
				case ok && e.deviceID != d.ID:
					// The worker puts a lease of the gateway's on
					// another device than it granted: not this one's.
					d.LeaseID = ""
				case ok && c.SeesLease(e.owner, true):
					d.LeaseID = e.id
				case !c.SeesLease("", false):
					// Another's, or one the grant records do not bear
					// out: the device shows leased, the lease unnamed.
					d.LeaseID = ""
				}
			}
			out[i] = d
		}
	})
	return out
}

// ended forgets a lease its worker says ended (a relayed lease.expired or
// lease.released).
func (l *Leasing) ended(workerID, workerLeaseID string) (*indexed, bool) {
	e, ok, _ := l.endedSaved(workerID, workerLeaseID)
	return e, ok
}

// endedRelayed is ended for an end the worker relayed: one of a lease the
// gateway does not hold is remembered (earlyEnds), for a grant of it
// still to be judged, under the decision lock alone: no decision, and so
// no write lock of the store, for a lease that is not the gateway's.
func (l *Leasing) endedRelayed(workerID, workerLeaseID string) (*indexed, bool) {
	var held bool
	var untold *indexed
	l.q.View(func() {
		if _, held = l.idx.ofWorker(workerID, workerLeaseID); held {
			return
		}
		// A snapshot read after the end may have ended it first: its
		// end is saved, its holders not told yet.
		if untold, _ = l.idx.takeUntold(workerID, workerLeaseID); untold == nil {
			l.early.note(workerID, workerLeaseID)
		}
	})
	if untold != nil {
		return untold, true
	}
	if !held {
		return nil, false
	}
	if l.endingRelayed != nil {
		l.endingRelayed(workerLeaseID)
	}
	var e *indexed
	var ok bool
	_ = l.dec.do(func(tx *queue.Txn) {
		if e, ok = l.endLocked(tx, workerID, workerLeaseID); !ok {
			// A snapshot read after the end ended it between the look
			// above and this decision: its holders are told now, of
			// this end.
			e, ok = l.idx.takeUntold(workerID, workerLeaseID)
		}
	})
	return e, ok
}

// endedSaved is ended, with the error of the decision that saved the end
// (its grant record deleted): nil once it is in the store.
func (l *Leasing) endedSaved(workerID, workerLeaseID string) (*indexed, bool, error) {
	var e *indexed
	var ok bool
	err := l.dec.do(func(tx *queue.Txn) { e, ok = l.endLocked(tx, workerID, workerLeaseID) })
	return e, ok, err
}

// endLocked takes workerID's workerLeaseID out of the index in decision
// tx, if the index holds it, and has the line served again (its device
// may serve the next request).
func (l *Leasing) endLocked(tx *queue.Txn, workerID, workerLeaseID string) (*indexed, bool) {
	e, ok := l.idx.ofWorker(workerID, workerLeaseID)
	if ok {
		l.idx.remove(e)
		tx.Kick()
	}
	return e, ok
}
