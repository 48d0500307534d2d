package queue

import (
	"context"
	"math"
	"strings"
	"time"

	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/ids"
)

// SettledRev is the revision of every settled request: it never changes
// again, and it is above any revision an open request can have.
const SettledRev = math.MaxInt64

// Caller is who calls an operation.
type Caller struct {
	Principal string
	Admin     bool
}

// Sees reports whether the caller may see a request: an admin any, an agent
// the ones it made or that are made for it.
func (c Caller) Sees(rec contract.LeaseRequestRecord) bool {
	return c.Admin || rec.OwnerID == c.Principal || rec.RequesterID == c.Principal
}

// RequesterFor is the requester a call names, checked: the session's
// principal when it names none; an admin may name anyone (a frontend acting
// for its agents); an agent only itself or an id in its own lane,
// "<principal>/<name>", so that no agent can hold a place in line or a
// lease under another's name.
func (c Caller) RequesterFor(named string) (string, error) {
	if named == "" {
		if c.Principal == "" {
			return "", contract.BadRequest("requesterId", "is required when the session has no principal")
		}
		return c.Principal, nil
	}
	if c.Admin || named == c.Principal || (c.Principal != "" && strings.HasPrefix(named, c.Principal+"/")) {
		return named, nil
	}
	return "", contract.Errorf(contract.CodeForbidden, "an agent may request only as itself (%s) or as %s/<name>, not as %s",
		c.Principal, c.Principal, named).With("requesterId", named)
}

// Ask is a lease request as the queue takes it: input already decoded and
// validated, the lease's TTL already checked by the owner.
type Ask struct {
	Caller Caller
	Input  contract.LeaseRequestInput
	TTLMs  int64
	// Progress is told each step of the wait; nil makes a request that
	// waits on its own, as a resource, whoever follows it.
	Progress func(contract.LeaseProgress)
}

// Resolution is what the owner made of a request before it joins the line.
type Resolution struct {
	// Need is what to place.
	Need Need
	// Err settles the request at once, with Reason for lease.rejected.
	Err    *contract.Error
	Reason contract.RejectReason
	// Park keeps the request open outside the line (a runtime to download
	// first); it runs as tracked work after the commit that stored the
	// request, and must end with Txn.Enqueue or Txn.Settle. The request
	// cannot be cancelled meanwhile; its requester leaving ends it.
	Park func(w *Waiter)
}

// Await waits for t's answer, as a lease.request caller does: the grant, or
// the error that settled it. A caller that goes away first abandons the
// request (it is cancelled); one whose request could not be abandoned any
// more (it is being started) is told it still waits.
func (q *Queue) Await(ctx context.Context, t *Ticket) (contract.LeaseGrant, error) {
	select {
	case <-t.Done():
	case <-ctx.Done():
		if !q.Abandon(t) {
			return contract.LeaseGrant{}, contract.Errorf(contract.CodeCancelled, "stopped waiting for request %s, which still waits", t.RequestID())
		}
		<-t.Done()
	}
	g, cerr := t.Result()
	if cerr != nil {
		return contract.LeaseGrant{}, cerr
	}
	return g, nil
}

// TTLFor is a request's or renewal's lease lifetime: ms, or def when 0;
// below min or above max it is BAD_REQUEST naming field, with minTtlMs or
// maxTtlMs in its details (never raised or clamped). It is the one check of
// a TTL: every surface (socket, HTTP, MCP, a gateway's forward) reaches it.
// A min of 0 sets no lower bound.
func TTLFor(ms int64, def, min, max time.Duration, field string) (time.Duration, *contract.Error) {
	if ms == 0 {
		return def, nil
	}
	ttl := time.Duration(ms) * time.Millisecond
	if ttl < min {
		// A lease this short would expire before its holder could
		// renew it, or even read the grant.
		return 0, contract.BadRequest(field, "must be at least lease.minTtlMs (%d), got %d", min.Milliseconds(), ms).
			With("minTtlMs", min.Milliseconds())
	}
	if ttl > max {
		return 0, contract.BadRequest(field, "must be at most lease.maxTtlMs (%d), got %d", max.Milliseconds(), ms).
			With("maxTtlMs", max.Milliseconds())
	}
	return ttl, nil
}

// Submit stores a request and puts it in line, or joins the open request
// made with the same idempotency key, or answers again what a settled one
// answered. resolve runs first, outside the lock (it may ask a driver);
// what it found is decided in one commit with the record: settled, parked,
// granted at once, or queued. Errors found before anything is stored (the
// requester already holds a lease or has a request open, an idempotency
// conflict, the daemon stopping, the gate closed) are returned; the ticket
// carries every later answer.
func (q *Queue) Submit(ctx context.Context, a Ask, resolve func(context.Context) Resolution) (*Ticket, error) {
	requester, err := a.Caller.RequesterFor(a.Input.RequesterID)
	if err != nil {
		return nil, err
	}
	spec := a.Input.Spec()
	key := a.Input.IdempotencyKey

	// What needs no resolving is answered before resolving, and checked
	// again in the decision: it may have changed meanwhile.
	check := func(tx *Txn) (*Ticket, error) {
		if t, err := q.checkLocked(requester, spec, a, tx); t != nil || err != nil {
			return t, err
		}
		if key != "" {
			// A repeat of a settled request answers what it answered,
			// whatever the requester holds now.
			if t, err := q.replay(ctx, requester, key, spec, a.Input.LeaseID); t != nil || err != nil {
				return t, err
			}
		}
		if err := q.busyLocked(a.Caller, requester); err != nil {
			return nil, err
		}
		return nil, q.chosenTakenLocked(ownerOf(a, requester), a.Input.LeaseID)
	}
	q.mu.Lock()
	var t *Ticket
	if q.carried == nil {
		// With a request not yet committed (Start.Carry), what it would
		// answer here is decided in the decision below, which commits it.
		t, err = check(nil)
	}
	q.mu.Unlock()
	if t != nil || err != nil {
		return t, err
	}
	res := resolve(ctx)

	err = q.Try(func(tx *Txn) error {
		var err error
		if t, err = check(tx); t != nil || err != nil {
			return err
		}
		t = q.createLocked(tx, a, requester, spec, res)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return t, nil
}

// checkLocked answers a request that needs no new record: refused, or
// joining the open one with its key. tx is the decision when there is one.
func (q *Queue) checkLocked(requester string, spec contract.RequestSpec, a Ask, tx *Txn) (*Ticket, error) {
	if q.broken != nil {
		return nil, q.brokenError()
	}
	if q.stopping {
		return nil, contract.Errorf(contract.CodeDaemonStopping, "the daemon is stopping")
	}
	if q.opts.Gate != nil {
		if cerr := q.opts.Gate(); cerr != nil {
			return nil, cerr
		}
	}
	if key := a.Input.IdempotencyKey; key != "" {
		if w := q.byKey[reqKey{requester, key}]; w != nil {
			if w.rec.Spec != spec || w.rec.ChosenLeaseID != a.Input.LeaseID {
				return nil, idempotencyConflict(key)
			}
			t := &Ticket{w: w, progress: a.Progress}
			w.interests = append(w.interests, t)
			if a.Progress == nil {
				w.detached = true
			} else if w.last.Stage != "" {
				last := w.last
				if tx != nil {
					tx.After(func() { a.Progress(last) })
				} else {
					a.Progress(last)
				}
			}
			return t, nil
		}
	}
	return nil, nil
}

// busyLocked refuses a requester that holds a lease or has a request open.
// The lease or request is named only to a caller who may see it.
func (q *Queue) busyLocked(c Caller, requester string) error {
	if id, owner, ok := q.opts.LeaseOf(requester); ok {
		if !c.Admin && owner != c.Principal {
			return contract.Errorf(contract.CodeRequesterAlreadyLeased, "%s already holds a lease", requester).
				With("requesterId", requester)
		}
		return contract.Errorf(contract.CodeRequesterAlreadyLeased, "%s already holds lease %s; release it first", requester, id).
			With("requesterId", requester).With("existingLeaseId", id)
	}
	if w := q.byRequester[requester]; w != nil {
		if !c.Sees(w.rec) {
			return contract.Errorf(contract.CodeRequesterAlreadyLeased, "%s already has a request waiting", requester).
				With("requesterId", requester)
		}
		return contract.Errorf(contract.CodeRequesterAlreadyLeased, "%s already has request %s waiting", requester, w.rec.ID).
			With("requesterId", requester).With("existingRequestId", w.rec.ID)
	}
	return nil
}

// chosenTakenLocked refuses a lease id an active lease or an open request
// of the same owner holds already. Another owner's of the same id is no
// matter, and is never told: a chosen id is unique only within its owner.
func (q *Queue) chosenTakenLocked(owner, id string) error {
	if id == "" {
		return nil
	}
	if q.byChosen[chosenKey{owner, id}] != nil || (q.opts.LeaseHeld != nil && q.opts.LeaseHeld(owner, id)) {
		return contract.Errorf(contract.CodeLeaseIDTaken, "lease id %s is taken: an active lease or a waiting request of yours holds it", id).With("leaseId", id)
	}
	return nil
}

// ownerOf is whom a's request is made for, the owner of the lease it is
// granted: the caller's principal (on a worker, the owner a gateway named),
// or the requester when there is none.
func ownerOf(a Ask, requester string) string {
	if a.Caller.Principal != "" {
		return a.Caller.Principal
	}
	return requester
}

// replay answers a repeat of a settled request with what it answered then.
func (q *Queue) replay(ctx context.Context, requester, key string, spec contract.RequestSpec, chosen string) (*Ticket, error) {
	rec, found, err := q.opts.Store.RequestByKey(ctx, requester, key)
	if err != nil {
		return nil, contract.Errorf(contract.CodeInternal, "read request: %v", err)
	}
	if !found {
		return nil, nil
	}
	if rec.Spec != spec || rec.ChosenLeaseID != chosen {
		return nil, idempotencyConflict(key)
	}
	if !rec.State.Terminal() {
		// Open in the database but not here: a record a previous run left,
		// which its start settled; read as such.
		return nil, contract.Errorf(contract.CodeIdempotencyConflict, "idempotency key %q names request %s, which is not settled", key, rec.ID).
			With("idempotencyKey", key)
	}
	w := &Waiter{rec: rec, done: make(chan struct{}), grant: rec.Grant, err: rec.Error, replayed: true, phase: phaseSettled}
	if w.err == nil && w.grant == nil {
		w.err = contract.Errorf(contract.CodeCancelled, "request %s was %s", rec.ID, rec.State)
	}
	close(w.done)
	return &Ticket{w: w}, nil
}

func idempotencyConflict(key string) *contract.Error {
	return contract.Errorf(contract.CodeIdempotencyConflict, "idempotency key %q was used for a different request", key).
		With("idempotencyKey", key)
}

// createLocked stores a new request and acts on its resolution.
func (q *Queue) createLocked(tx *Txn, a Ask, requester string, spec contract.RequestSpec, res Resolution) *Ticket {
	owner := ownerOf(a, requester)
	w := &Waiter{
		rec: contract.LeaseRequestRecord{
			ID: ids.New("req_", ids.Short), RequesterID: requester, OwnerID: owner, IdempotencyKey: a.Input.IdempotencyKey, ChosenLeaseID: a.Input.LeaseID,
			Spec: spec, State: contract.RequestQueued, CreatedAt: time.Now().UnixMilli(),
			Policy: contract.WaitPolicy{NoWait: a.Input.NoWait, TimeoutMs: a.Input.TimeoutMs, TTLMs: a.TTLMs, AllowDownload: a.Input.AllowDownload},
		},
		platform: spec.Platform,
		phase:    phaseOut,
		detached: a.Progress == nil,
		done:     make(chan struct{}),
	}
	t := &Ticket{w: w, progress: a.Progress}
	w.interests = []*Ticket{t}
	tx.created = w
	q.openLocked(w)
	tx.write(w)
	tx.Event(contract.EvLeaseRequested, map[string]any{
		"requestId": w.rec.ID, "requestSpec": spec, "requester": requester, "waitPolicy": w.rec.Policy,
	})
	q.actLocked(tx, w, res, false)
	w.rec.Refused = w.rec.Error != nil // settled in this decision
	return t
}

// openLocked makes w an open request: found by its id, its requester, its
// idempotency key and the lease id it chose. A new request and one a
// previous queue left open (Restore) are opened alike, here.
func (q *Queue) openLocked(w *Waiter) {
	q.open[w.rec.ID] = w
	q.byRequester[w.rec.RequesterID] = w
	if k := w.rec.IdempotencyKey; k != "" {
		q.byKey[reqKey{w.rec.RequesterID, k}] = w
	}
	if id := w.rec.ChosenLeaseID; id != "" {
		q.byChosen[chosenKey{w.rec.OwnerID, id}] = w
	}
	q.insertOpenLocked(w)
}

// actLocked acts on an open request's resolution: settled, parked, or
// admitted and put in line. back is for a request that was in line before
// (its arrival and deadline already set: Restore); it keeps both.
func (q *Queue) actLocked(tx *Txn, w *Waiter, res Resolution, back bool) {
	switch {
	case res.Err != nil:
		tx.Settle(w, res.Err, res.Reason)
	case res.Park != nil:
		w.phase = phaseParked
		tx.After(func() { q.opts.Go(func() { res.Park(w) }) })
	default:
		w.need = res.Need
		if cerr, reason := q.opts.Placer.Admit(w); cerr != nil {
			tx.Settle(w, cerr, reason)
			break
		}
		tx.enqueue(w, back)
	}
}

// insertOpenLocked keeps the open list in (createdAt, id) order.
func (q *Queue) insertOpenLocked(w *Waiter) {
	after := q.all.tail
	for after != nil && (after.rec.CreatedAt > w.rec.CreatedAt ||
		(after.rec.CreatedAt == w.rec.CreatedAt && after.rec.ID > w.rec.ID)) {
		after = after.all.prev
	}
	if after == q.all.tail {
		q.all.pushBack(w)
		return
	}
	// Rare: a tie within one millisecond. Rebuild the links around w.
	lw := &w.all
	lw.prev = after
	if after == nil {
		lw.next = q.all.head
		q.all.head = w
	} else {
		lw.next = after.all.next
		after.all.next = w
	}
	lw.next.all.prev = w
	q.all.n++
}

// Abandon ends one requester's interest: its call stopped waiting. It
// reports whether the request ends with it. A request others still follow,
// or made as a resource, goes on. Otherwise a request in line or parked is
// cancelled now; one being started is abandoned: its Start keeps what it
// readied, grants nothing, and settles it.
func (q *Queue) Abandon(t *Ticket) bool {
	ended := true
	_ = q.Do(func(tx *Txn) error {
		w := t.w
		if !q.isOpen(w) {
			return nil
		}
		for i, it := range w.interests {
			if it == t {
				w.interests = append(w.interests[:i], w.interests[i+1:]...)
				break
			}
		}
		if len(w.interests) > 0 || w.detached {
			ended = false
			return nil
		}
		switch w.phase {
		case phaseStarting:
			w.abandoned = true
		default:
			tx.Settle(w, contract.Errorf(contract.CodeCancelled, "the requester stopped waiting"), contract.RejectCancelled)
		}
		return nil
	})
	return ended
}

// Cancel withdraws a request waiting in line, named by id or by requester.
// One being started or downloading is not cancellable. A request named by
// id that has already settled answers by how it settled: cancelled again
// for a cancelled one, not-cancellable (naming the lease) otherwise.
func (q *Queue) Cancel(ctx context.Context, c Caller, in contract.LeaseCancelInput) (contract.LeaseCancelResult, error) {
	var requester string
	if in.RequestID == "" {
		var err error
		if requester, err = c.RequesterFor(in.RequesterID); err != nil {
			return contract.LeaseCancelResult{}, err
		}
	}
	var res contract.LeaseCancelResult
	askStore := false
	err := q.Try(func(tx *Txn) error {
		var w *Waiter
		if in.RequestID != "" {
			w = q.open[in.RequestID]
		} else {
			w = q.byRequester[requester]
		}
		switch {
		case w == nil:
			askStore = in.RequestID != ""
			res = contract.LeaseCancelResult{Outcome: contract.CancelNotFound}
		case !c.Sees(w.rec):
			res = contract.LeaseCancelResult{Outcome: contract.CancelNotFound}
		case w.phase != phaseInLine:
			res = contract.LeaseCancelResult{Outcome: contract.CancelNotCancellable, RequestID: w.rec.ID}
		default:
			tx.Settle(w, contract.Errorf(contract.CodeCancelled, "the request was cancelled"), contract.RejectCancelled)
			res = contract.LeaseCancelResult{Outcome: contract.CancelCancelled, RequestID: w.rec.ID}
		}
		return nil
	})
	if err != nil || !askStore {
		return res, err
	}
	rec, ok, err := q.opts.Store.Request(ctx, in.RequestID)
	if err != nil {
		return contract.LeaseCancelResult{}, contract.Errorf(contract.CodeInternal, "read request: %v", err)
	}
	if !ok || !c.Sees(rec) {
		return contract.LeaseCancelResult{Outcome: contract.CancelNotFound}, nil
	}
	if rec.State == contract.RequestCancelled {
		return contract.LeaseCancelResult{Outcome: contract.CancelCancelled, RequestID: rec.ID}, nil
	}
	return contract.LeaseCancelResult{Outcome: contract.CancelNotCancellable, RequestID: rec.ID, LeaseID: rec.LeaseID}, nil
}

// Status reads a lease request. With in.WaitMs it first waits, at most that
// long, until the request's revision differs from in.AfterRev; a settled
// request answers at once. An agent sees only its own requests: others'
// are UNKNOWN_LEASE_REQUEST, as if they did not exist.
func (q *Queue) Status(ctx context.Context, c Caller, in contract.LeaseRequestGetInput) (contract.LeaseRequestStatus, error) {
	var expired <-chan time.Time
	if in.WaitMs > 0 {
		t := time.NewTimer(time.Duration(in.WaitMs) * time.Millisecond)
		defer t.Stop()
		expired = t.C
	}
	for {
		q.mu.Lock()
		w, open := q.open[in.RequestID]
		if !open {
			q.mu.Unlock()
			break
		}
		if !c.Sees(w.rec) {
			q.mu.Unlock()
			return contract.LeaseRequestStatus{}, unknownRequest(in.RequestID)
		}
		if w.unsaved {
			// Shown once it is recorded: a decision commits it.
			q.mu.Unlock()
			if err := q.Do(func(*Txn) error { return nil }); err != nil {
				return contract.LeaseRequestStatus{}, err
			}
			continue
		}
		st := w.status()
		if expired == nil || st.Rev != in.AfterRev {
			q.mu.Unlock()
			return st, nil
		}
		changed, done := w.changedLocked(), w.done
		q.mu.Unlock()
		select {
		case <-changed:
		case <-done:
		case <-expired:
			expired = nil // answer with what is there now
		case <-ctx.Done():
			return contract.LeaseRequestStatus{}, contract.Errorf(contract.CodeCancelled, "stopped waiting: %v", ctx.Err())
		}
	}
	rec, ok, err := q.opts.Store.Request(ctx, in.RequestID)
	if err != nil {
		return contract.LeaseRequestStatus{}, contract.Errorf(contract.CodeInternal, "read request: %v", err)
	}
	if !ok || !c.Sees(rec) {
		return contract.LeaseRequestStatus{}, unknownRequest(in.RequestID)
	}
	return contract.LeaseRequestStatus{Request: rec, Rev: SettledRev}, nil
}

// Resource is what lease-request.create answers for t: the request as it
// stands, or, when it was refused before it could wait (no capacity with
// noWait, an unresolvable spec), that error, to the call that made it and
// to every repeat of it by idempotency key alike.
func (q *Queue) Resource(t *Ticket) (contract.LeaseRequestStatus, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	w := t.w
	if q.isOpen(w) {
		return w.status(), nil
	}
	if w.rec.Refused {
		return contract.LeaseRequestStatus{}, w.err
	}
	return contract.LeaseRequestStatus{Request: w.rec, Rev: SettledRev}, nil
}

// RetryInput is how to make failed request id again, as it was stored (not
// with today's defaults), as a new request for the same requester: the
// caller to submit as (its owner, who may name its requester) and the
// input. A request that is not failed is NOT_RETRYABLE; the record itself
// is left as it is, so a retry that fails early leaves it retryable.
func (q *Queue) RetryInput(ctx context.Context, c Caller, id string) (Caller, contract.LeaseRequestInput, error) {
	q.mu.Lock()
	w, open := q.open[id]
	var rec contract.LeaseRequestRecord
	if open {
		rec = w.rec
		if w.unsaved {
			// Read once it is recorded (Start.Carry): a decision commits it.
			q.mu.Unlock()
			if err := q.Do(func(*Txn) error { return nil }); err != nil {
				return Caller{}, contract.LeaseRequestInput{}, err
			}
			return q.RetryInput(ctx, c, id)
		}
	}
	q.mu.Unlock()
	if !open {
		r, ok, err := q.opts.Store.Request(ctx, id)
		if err != nil {
			return Caller{}, contract.LeaseRequestInput{}, contract.Errorf(contract.CodeInternal, "read request %s: %v", id, err)
		}
		if !ok {
			return Caller{}, contract.LeaseRequestInput{}, unknownRequest(id)
		}
		rec = r
	}
	if !c.Sees(rec) {
		return Caller{}, contract.LeaseRequestInput{}, unknownRequest(id)
	}
	if rec.State != contract.RequestFailed {
		return Caller{}, contract.LeaseRequestInput{}, contract.Errorf(contract.CodeNotRetryable,
			"lease request %s is %s; only a failed request can be retried", id, rec.State).With("requestId", id).With("state", rec.State)
	}
	return Caller{Principal: rec.OwnerID, Admin: true}, InputOf(rec), nil
}

// InputOf is the input that makes rec's request again as it was stored
// (not with today's defaults): its spec, chosen id, policy and requester.
// A retry submits it; a restored request is resolved from it.
func InputOf(rec contract.LeaseRequestRecord) contract.LeaseRequestInput {
	return contract.LeaseRequestInput{Platform: rec.Spec.Platform, Model: rec.Spec.Model, Class: rec.Spec.Class, OSVersion: rec.Spec.OSVersion,
		ImageTag: rec.Spec.ImageTag, Mode: rec.Spec.Mode, LeaseID: rec.ChosenLeaseID,
		TTLMs: rec.Policy.TTLMs, TimeoutMs: rec.Policy.TimeoutMs, NoWait: rec.Policy.NoWait, AllowDownload: rec.Policy.AllowDownload,
		RequesterID: rec.RequesterID}
}

func unknownRequest(id string) *contract.Error {
	return contract.Errorf(contract.CodeUnknownLeaseRequest, "no lease request %s", id).With("requestId", id)
}

// Records lists open requests oldest first; a limit above 0 returns one
// page after the cursor, and the cursor of the next page when there is one.
func (q *Queue) Records(after *contract.ListCursor, limit int) ([]contract.LeaseRequestRecord, string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	out := []contract.LeaseRequestRecord{}
	for w := q.all.head; w != nil; w = w.all.next {
		if w.unsaved || (after != nil && after.Passed(w.rec.CreatedAt, w.rec.ID)) {
			continue
		}
		if limit > 0 && len(out) == limit {
			last := out[len(out)-1]
			return out, contract.ListCursor{At: last.CreatedAt, ID: last.ID}.String()
		}
		out = append(out, w.rec)
	}
	return out, ""
}

// Waiting lists the open requests c may see as status shows them, oldest
// first: queued ones with their place, downloading ones, and those being
// started.
func (q *Queue) Waiting(c Caller) []contract.WaitingRequest {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.WaitingLocked(c)
}

// WaitingLocked is Waiting for a caller holding the lock (in View).
func (q *Queue) WaitingLocked(c Caller) []contract.WaitingRequest {
	t := time.Now().UnixMilli()
	n := q.all.n
	if !c.Admin {
		n = 0
	}
	out := make([]contract.WaitingRequest, 0, n)
	for w := q.all.head; w != nil; w = w.all.next {
		if w.unsaved || !c.Sees(w.rec) {
			continue
		}
		wr := contract.WaitingRequest{RequestID: w.rec.ID, RequesterID: w.rec.RequesterID, Spec: w.rec.Spec, WaitingMs: t - w.rec.CreatedAt}
		switch w.phase {
		case phaseParked:
			wr.Stage = "downloading"
		case phaseInLine:
			wr.Stage, wr.QueuePosition = "queued", w.pos
		default:
			wr.Stage = "starting"
		}
		if w.last.Stage != "" {
			p := w.last
			wr.Progress = &p
		}
		wr.DeviceID = w.deviceID
		out = append(out, wr)
	}
	return out
}

// CountsLocked are how many requests are open and how many wait in line;
// for a caller holding the lock (in View).
func (q *Queue) CountsLocked() (open, depth int) { return q.all.n, q.line.n }

// WaitingOnLocked reports whether a request waits in line for p.
func (q *Queue) WaitingOnLocked(p contract.Platform) bool {
	for _, l := range q.lines {
		if l.platform == p {
			return l.n > 0
		}
	}
	return false
}
