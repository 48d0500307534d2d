package gateway

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/queue"
	"github.com/simlock/simlock/internal/store"
)

// resolveRequest is the fleet's resolution of a request: what routing
// reads of it, and its class of need. Nothing is asked of a worker yet.
func (l *Leasing) resolveRequest(_ context.Context, in contract.LeaseRequestInput) queue.Resolution {
	ttl, _ := l.desk.TTL(in.TTLMs, "ttlMs") // checked by the desk already
	a, err := askOf(in.Spec(), ttl.Milliseconds(), in.AllowDownload)
	if err != nil {
		// The input was validated with its osVersion; nothing reaches here.
		return queue.Resolution{Err: contract.AsError(err), Reason: contract.RejectUnresolvable}
	}
	return queue.Resolution{Need: &fleetNeed{ask: a, key: needKey(a)}}
}

// Acquire asks for a lease and waits for it, as lease.request does (see
// queue.Desk.Acquire).
func (l *Leasing) Acquire(ctx context.Context, c queue.Caller, in contract.LeaseRequestInput, progress func(contract.LeaseProgress)) (contract.LeaseGrant, error) {
	return l.desk.Acquire(ctx, c, in, progress)
}

// Submit makes a lease request that waits on its own (lease-request.create;
// see queue.Desk.Submit).
func (l *Leasing) Submit(ctx context.Context, c queue.Caller, in contract.LeaseRequestInput) (contract.LeaseRequestStatus, error) {
	return l.desk.Submit(ctx, c, in)
}

// RetryRequest makes a failed request of the fleet queue again, as it was
// stored, as a new request for the same requester.
func (l *Leasing) RetryRequest(ctx context.Context, c queue.Caller, id string) (contract.LeaseRequestStatus, error) {
	return l.desk.RetryRequest(ctx, c, id)
}

// RequestStatus reads a lease request (lease-request.get).
func (l *Leasing) RequestStatus(ctx context.Context, c queue.Caller, in contract.LeaseRequestGetInput) (contract.LeaseRequestStatus, error) {
	return l.desk.RequestStatus(ctx, c, in)
}

// Cancel withdraws a waiting request (lease.cancel).
func (l *Leasing) Cancel(ctx context.Context, c queue.Caller, in contract.LeaseCancelInput) (contract.LeaseCancelResult, error) {
	return l.desk.Cancel(ctx, c, in)
}

// Admit is the fast-fail table, run as a request joins the line.
func (l *Leasing) Admit(w *queue.Waiter) (*contract.Error, contract.RejectReason) {
	if cerr := l.f.assess(w.Need().(*fleetNeed).ask); cerr != nil && !l.rejoining() {
		return cerr, rejectedReason(cerr)
	}
	return nil, ""
}

// Place routes a waiter over the routing index, skipping the workers
// already dispatched to in this pass, those stale for its class of need
// (a request of it bounced off them: stale.go), and those a double grant
// of its own makes it skip; the holds of dispatches in flight apply to
// the workers the decision examines. A waiter no worker can serve now is
// passed over (queue.ScopeNeed): it holds only the later waiters of its
// class of need, and the others go to the workers that can serve them.
func (l *Leasing) Place(tx *queue.Txn, w *queue.Waiter) (queue.Start, queue.Block) {
	if tx != l.pass {
		l.pass, l.busy = tx, map[string]bool{}
	}
	n := w.Need().(*fleetNeed)
	r, ok, cerr := l.decide(w, n)
	if cerr != nil {
		if l.rejoining() {
			return queue.Start{}, queue.BlockNeed
		}
		tx.Settle(w, cerr, rejectedReason(cerr))
		return queue.Start{}, queue.NoBlock
	}
	if !ok {
		return queue.Start{}, queue.BlockNeed
	}
	l.busy[r.WorkerID] = true
	h := &dispatchHold{hold: hold{platform: n.ask.Platform, device: r.DeviceID}, requester: w.Requester()}
	l.held[r.WorkerID] = append(l.held[r.WorkerID], h)
	// A request by class goes as a class, so the worker picks by its own
	// preferences; a warm hit names the device's model, or the worker
	// might start another.
	model, class := r.Model, contract.DeviceClass("")
	if n.ask.Model == "" && r.Reason != ReasonWarmHit {
		model, class = "", n.ask.Class
	}
	req := contract.LeaseRequestInput{Platform: n.ask.Platform, Model: model, Class: class, OSVersion: w.Spec().OSVersion, ImageTag: w.Spec().ImageTag,
		Mode: w.Spec().Mode, TTLMs: w.TTLMs(), NoWait: true, AllowDownload: r.Reason == ReasonDownload,
		// The chosen id stays the gateway's: the worker names the lease its
		// own way (lse_…), which no other owner's choice can collide with,
		// and the index keeps the chosen id within its owner.
		RequesterID: l.idx.prefix + w.Requester(), Owner: w.Owner()}
	return queue.Start{
		// Queued still, to a reader of the request, until the worker says
		// more; the requester hears nothing from the gateway meanwhile, so
		// its steps are the worker's own, as on the worker directly.
		Progress: contract.LeaseProgress{Stage: contract.StageQueued},
		Quiet:    true,
		// The forward leaves while the decision that placed it commits:
		// it tells the worker only, and nothing is told of it but by the
		// grant's own decision, which commits after this one. A worker's
		// lease whose request was never saved (the commit failed, the
		// gateway died meanwhile) is one the gateway never recorded, found
		// in the worker's snapshot and given back, as one granted when the
		// grant's own commit fails.
		Early: true,
		// A request placed as it was made is recorded by the grant's
		// decision (or whichever decision comes first), in one commit
		// with it: a caller hears nothing before that commit, and a
		// gateway that stops before it never recorded the request, as
		// above.
		Carry: true,
		Run:   func() { l.dispatch(w, r, req, h) },
	}, queue.NoBlock
}

// decide is Place's decision for w, of need n: the fast-fail table again,
// on the views as they are now (a drain or a disconnect may have left no
// worker that could ever serve it), then the route, over the workers not
// busy in the pass nor passed over, their holds applied. The decision lock
// must be held.
func (l *Leasing) decide(w *queue.Waiter, n *fleetNeed) (r Route, ok bool, cerr *contract.Error) {
	if cerr = l.f.assess(n.ask); cerr != nil {
		return Route{}, false, cerr
	}
	passed := l.passedOver(w, n.key, time.Now())
	o := overlay{
		skip:  func(id string) bool { return l.busy[id] || passed[id] },
		holds: func(id string) []hold { return l.holdsOn(id, l.f.generationLocked(id)) },
	}
	l.f.decide(func(ix *routeIndex) { r, ok = ix.route(n.ask, o) })
	return r, ok, nil
}

// passedOver are the workers a decision for w, of need key, passes over
// besides those busy in the pass: those stale for the need, and those a
// double grant of w's own makes it skip. Read before the decision, which
// holds the fleet's lock: there are few of them (bounces and double
// grants), not every worker. A worker whose view changed too soon after a
// bounce of the need is reserved for the pass (busy), whether or not the
// decision would reach it. The decision lock must be held.
func (l *Leasing) passedOver(w *queue.Waiter, key string, now time.Time) map[string]bool {
	var out map[string]bool
	pass := func(id string) {
		if out == nil {
			out = map[string]bool{}
		}
		out[id] = true
	}
	for k := range l.stale {
		if k.need != key || l.busy[k.worker] {
			continue
		}
		print := func() uint64 { p, _ := l.f.printOf(k.worker); return p }
		if skip, reserve := l.staleFor(k.worker, print, key, now); skip {
			if reserve {
				l.busy[k.worker] = true
			}
			pass(k.worker)
		}
	}
	for id, s := range l.skip[w] {
		if l.skipping(s, id) {
			pass(id)
		}
	}
	return out
}

// dispatch forwards one placed request to its worker and ends it: granted,
// back in line (a stale view, or a worker that cannot serve it after
// all), or failed.
func (l *Leasing) dispatch(w *queue.Waiter, r Route, req contract.LeaseRequestInput, h *dispatchHold) {
	c, link := l.f.session(r.WorkerID)
	if c == nil {
		l.bounce(w, r.WorkerID, h)
		return
	}
	// Bounded by the worker's silence: a download of many minutes is
	// waited for as long as its progress comes (withSilence).
	ctx, heard, stop := withSilence(context.Background(), l.opts.RequestTimeout)
	defer stop()
	progressed := false
	announced := new(bool) // guarded by the decision lock
	g, err := c.RequestLease(ctx, req, func(p contract.LeaseProgress) {
		heard()
		if !progressed {
			// The worker took it on: dispatched, from now, not at the
			// grant a download may put many minutes away. Off the uplink's
			// read loop, which the commit must not hold up.
			go func() {
				_ = l.dec.do(func(tx *queue.Txn) {
					if !tx.Abandoned(w) {
						l.announce(tx, w, r, announced)
					}
					return
				})
			}()
		}
		progressed = true
		l.q.Progress(w, p)
	})
	if err == nil {
		if cerr := checkGrant(g); cerr != nil {
			err = fmt.Errorf("%w: %v", errBadAnswer, cerr)
		} else {
			l.awaitEvents(r.WorkerID, link, g.EventSeq)
			l.grant(w, r, g, link, announced, h)
			return
		}
	}
	ce, refused := forwardError(ctx, r.WorkerID, "the lease request", err)
	if !refused && silent(ctx) {
		ce = contract.Errorf(contract.CodeWorkerUnreachable, "worker %s sent nothing of the lease request for gateway.leaseRequestTimeoutMs (%d)",
			r.WorkerID, l.opts.RequestTimeout.Milliseconds()).With("workerId", r.WorkerID)
	}
	if refused && ce.Code == contract.CodeDaemonStopping {
		if !progressed {
			// The worker is stopping, not the gateway: another worker
			// serves it, and this one once it is back.
			l.bounce(w, r.WorkerID, h)
			return
		}
		ce, refused = workerStopping(r.WorkerID), false
	}
	if !refused {
		reason := contract.RejectWorkerUnreachable
		switch {
		case ce.Code == contract.CodeInternal:
			reason = contract.RejectWorkerAnswerInvalid
		case ce.Details["reason"] == string(contract.RejectWorkerStopping):
			reason = contract.RejectWorkerStopping
		}
		_ = l.dec.do(func(tx *queue.Txn) {
			// The worker may still grant it (or did, in an answer the
			// gateway could not take): a lease nobody holds, to be given
			// back when its snapshot shows it.
			l.idx.withdraw(r.WorkerID, w.Requester(), time.Now())
			l.unhold(r.WorkerID, h)
			tx.Settle(w, ce, reason)
			// Every settled attempt serves the line again.
			delete(l.skip, w)
			tx.Kick()
			return
		})
		return
	}
	if ce.Code == contract.CodeRequesterAlreadyLeased && !progressed {
		// The worker holds a lease for the requester that the gateway did
		// not grant (it would have refused the request itself): one a
		// previous run was granted and never recorded, being given back
		// once a snapshot shows it. That is this requester's matter, not
		// the worker's room: the request goes back in line and skips this
		// worker until what routing reads of its view has changed (the
		// status read asked for here shows the lease given back), and
		// nobody else's request is held back from it. A worker that says
		// so falsely is not asked again for this request while its view
		// stays as it was.
		print, _ := l.f.printOf(r.WorkerID)
		_ = l.dec.do(func(tx *queue.Txn) {
			l.unhold(r.WorkerID, h)
			l.skipFor(w, r.WorkerID, skipped{print: max(print, 1)})
			tx.Requeue(w)
			tx.Kick()
			return
		})
		l.f.refresh(r.WorkerID)
		return
	}
	switch ce.Code {
	case contract.CodeNoCapacity, contract.CodeUnknownModel, contract.CodeRuntimeMissing, contract.CodeNoDriver:
		if !progressed {
			// The view was stale, or the worker's catalog changed: try
			// another worker, and this one again once its view changes
			// or its backoff ends (stale.go). The mark is of the view it
			// bounced off, before the refresh that may change it.
			l.bounce(w, r.WorkerID, h)
			if ce.Code == contract.CodeNoCapacity {
				l.f.refresh(r.WorkerID)
			} else {
				// What it lacks is in its catalog, which a status
				// read does not bring.
				l.f.refreshCatalog(r.WorkerID)
			}
			return
		}
	}
	ce = l.scrub(r.WorkerID, ce)
	_ = l.dec.do(func(tx *queue.Txn) {
		l.unhold(r.WorkerID, h)
		tx.Settle(w, ce, contract.RejectWorkerRefused)
		delete(l.skip, w)
		tx.Kick()
		return
	})
}

// awaitEvents waits, at most relayWait, until the events the worker
// committed before its grant's own lease.granted have been relayed and
// told to the leasing: a lease that ended there just before, on the
// device it grants again, is then no longer the gateway's, and the grant
// is not taken for a second one of the device (Fleet.awaitRelayed).
//
// seq is the grant's eventSeq, the last event of the worker's decision
// that granted it, so its lease.granted is at seq or below, and so is
// every event before it: an end of a lease on the device comes before
// the grant of the device again, in a decision of its own or earlier in
// the same one. Waiting for seq-1 sees all of those, and not the grant's
// own event, which tells the gateway nothing its answer does not: when
// it is the decision's last event (a warm grant on a worker that records
// one event for it) the grant is judged without waiting for one more
// uplink message and the relay's commit of it.
func (l *Leasing) awaitEvents(workerID string, link int, seq int64) {
	if seq <= 1 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), relayWait)
	defer cancel()
	l.f.awaitRelayed(ctx, workerID, link, seq-1)
}

// bounce puts w back in line, with workerID stale for its class of need
// (markStale); the dispatch's hold goes (it took nothing).
func (l *Leasing) bounce(w *queue.Waiter, workerID string, h *dispatchHold) {
	print, _ := l.f.printOf(workerID)
	_ = l.dec.do(func(tx *queue.Txn) {
		l.unhold(workerID, h)
		l.markStale(workerID, w.Need().(*fleetNeed).key, print, time.Now())
		tx.Requeue(w)
		tx.Kick()
		return
	})
}

// announce records request.dispatched for w, routed by r, once: at the
// worker's first progress push or at the grant, whichever commits first.
func (l *Leasing) announce(tx *queue.Txn, w *queue.Waiter, r Route, announced *bool) {
	if *announced {
		return
	}
	*announced = true
	tx.Event(contract.EvRequestDispatched, map[string]any{"requestId": w.ID(), "workerId": r.WorkerID, "requesterId": w.Requester(),
		"platform": w.Platform(), "model": r.Model, "reason": r.Reason, "queuedMs": max(time.Now().UnixMilli()-w.CreatedAt(), 0)})
}

// grant records the worker's lease, in the index and as a grant record
// committed with the grant, and grants w with the gateway's names for it.
// A grant the index refuses (a double grant, or a requester or chosen id
// held meanwhile) is given back to the worker, unless that would end the
// lease the gateway holds under the same id; after a double grant w goes
// back in line and the worker is skipped until its view moves.
func (l *Leasing) grant(w *queue.Waiter, r Route, g contract.LeaseGrant, link int, announced *bool, h *dispatchHold) {
	var refresh bool
	_ = l.dec.do(func(tx *queue.Txn) {
		delete(l.skip, w)
		// The worker served the need: its view is not stale for it.
		l.forgetStale(r.WorkerID, w.Need().(*fleetNeed).key, time.Now())
		tx.Kick()
		// Held until a view read after this grant shows it.
		h.until = l.f.generation(r.WorkerID)
		if l.early.take(r.WorkerID, g.Lease.ID) {
			// The worker ended the lease (its expiry, an operator there)
			// before the gateway judged its grant: nobody heard of it and
			// there is nothing to give back. The request waits again, or,
			// when its requester went away, ends cancelled (Requeue).
			l.unhold(r.WorkerID, h)
			tx.Requeue(w)
			return
		}
		if tx.Abandoned(w) {
			// Nobody wants it any more: give it back, and end the request
			// (cancelled, as Requeue ends one whose requester went away),
			// which its caller still waits on.
			go l.releaseOnWorker(r.WorkerID, g.Lease.ID)
			tx.Requeue(w)
			return
		}
		now := time.Now()
		rec := store.Grant{Key: gatewayLeaseID(r.WorkerID, g.Lease.ID), WorkerID: r.WorkerID, WorkerLeaseID: g.Lease.ID,
			DeviceID: g.Lease.DeviceID, OwnerID: w.Owner(), RequesterID: w.Requester(), ChosenID: w.ChosenLeaseID(),
			RequestID: w.ID(), GrantedAt: now.UnixMilli(), Platform: w.Platform()}
		e, err := l.idx.add(rec)
		if e != nil {
			// Snapshots read up to now may predate the worker's grant;
			// those whose seq reaches the grant's, or read over a later
			// link, do not.
			e.grantGen, e.grantSeq, e.grantLink = h.until, g.EventSeq, link
			e.granted = g.Lease
		}
		switch {
		case errors.Is(err, errDoubleLease), errors.Is(err, errDoubleDevice):
			if errors.Is(err, errDoubleDevice) {
				// The id is new: giving it back ends only this grant.
				go l.releaseOnWorker(r.WorkerID, g.Lease.ID)
			}
			l.f.found(r.WorkerID, findingDoubleGrant, 1, fmt.Sprintf("lease %s on device %s for request %s: %v", g.Lease.ID, g.Lease.DeviceID, w.ID(), err))
			l.unhold(r.WorkerID, h)
			l.skipFor(w, r.WorkerID, skipped{gen: l.f.generation(r.WorkerID), conflict: l.idx.contradicted(rec)})
			tx.Requeue(w)
			refresh = true
			return
		case err != nil:
			go l.releaseOnWorker(r.WorkerID, g.Lease.ID)
			l.unhold(r.WorkerID, h)
			code := contract.CodeRequesterAlreadyLeased
			if errors.Is(err, errChosenTaken) {
				code = contract.CodeLeaseIDTaken
			}
			tx.Settle(w, contract.Errorf(code, "%v", err), contract.RejectWorkerRefused)
			return
		}
		if l.f.viewLists(r.WorkerID, rec.WorkerLeaseID) {
			// The view took the grant already (its lease.granted folded
			// while the grant waited to be judged): it counts the lease,
			// and no later change of the view need come to end the hold.
			l.unhold(r.WorkerID, h)
		}
		workerRequest, workerGranted := g.RequestID, g.Lease.GrantedAt
		g.Lease.ID, g.Lease.RequesterID, g.Lease.OwnerID, g.Lease.WorkerID = e.id, w.Requester(), w.Owner(), r.WorkerID
		g.Lease.IDChosenByRequester, g.Lease.Key = e.chosen != "", e.keyIfChosen()
		g.Lease.Worker = l.f.names().ref(r.WorkerID)
		g.RequestID = w.ID() // the gateway's request, not the worker's
		g.Device.WorkerID = r.WorkerID
		l.announce(tx, w, r, announced)
		tx.Event(contract.EvGrantRecorded, map[string]any{"requestId": w.ID(), "leaseId": e.id, "leaseKey": e.key, "workerId": r.WorkerID,
			"workerLeaseId": e.workerLeaseID, "workerRequestId": workerRequest, "deviceId": e.deviceID, "requesterId": e.requester,
			"ownerId": e.owner, "source": g.Source, "platform": w.Platform(), "waitMs": max(now.UnixMilli()-w.CreatedAt(), 0),
			"grantedAt": workerTime(workerGranted, now)})
		tx.Grant(w, g)
		tx.Kick()
		return
	})
	if refresh {
		l.f.refresh(r.WorkerID)
	}
}

// holdsOn are the holds on workerID's view, at generation gen, that
// routing counts now: the dispatches in flight, and the grants its view
// does not show yet. The decision lock must be held.
func (l *Leasing) holdsOn(workerID string, gen uint64) []hold {
	var out []hold
	kept := l.held[workerID][:0]
	for _, h := range l.held[workerID] {
		if h.until != 0 && gen > h.until {
			continue
		}
		kept = append(kept, h)
		out = append(out, h.hold)
	}
	if len(kept) == 0 {
		delete(l.held, workerID)
	} else {
		l.held[workerID] = kept
	}
	return out
}

// dispatching reports whether a request of requester is forwarded to
// workerID and its answer not judged yet (the index's dispatching). Under
// the decision lock, as every change of the holds.
func (l *Leasing) dispatching(workerID, requester string) bool {
	return slices.ContainsFunc(l.held[workerID], func(h *dispatchHold) bool { return h.until == 0 && h.requester == requester })
}

// unhold drops h, a dispatch's hold on workerID. The decision lock must be
// held.
func (l *Leasing) unhold(workerID string, h *dispatchHold) {
	hs := slices.DeleteFunc(l.held[workerID], func(x *dispatchHold) bool { return x == h })
	if len(hs) == 0 {
		delete(l.held, workerID)
	} else {
		l.held[workerID] = hs
	}
}

func (l *Leasing) releaseOnWorker(workerID, leaseID string) {
	c := l.f.clientOf(workerID)
	if c == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	if _, err := c.Release(ctx, leaseID); err != nil {
		l.log.Warn("could not give back a lease nobody waited for", "workerId", workerID, "leaseId", leaseID, "err", err)
	}
}

// Waiting lists the fleet queue's open requests the caller may see, and
// how many wait in line.
func (l *Leasing) Waiting(c queue.Caller) ([]contract.WaitingRequest, int) {
	var depth int
	l.q.View(func() { _, depth = l.q.CountsLocked() })
	return l.q.Waiting(c), depth
}
