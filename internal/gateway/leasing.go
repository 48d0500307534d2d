package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/simlock/simlock/internal/client"
	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/queue"
	"github.com/simlock/simlock/internal/store"
)

// LeasingStore keeps what the gateway's leasing decides: the fleet queue's
// request records and events, and the gateway's grant records.
type LeasingStore interface {
	// Commit writes one decision atomically: the queue's writes, the grant
	// records it made (grants, upserted by key) and those it ended (ended,
	// by key), and returns the events with their seqs. If it fails,
	// nothing of it was written.
	Commit(ctx context.Context, w queue.Writes, grants []store.Grant, ended []string) ([]contract.Event, error)
	// RequestByKey finds a stored request by requester and idempotency key.
	RequestByKey(ctx context.Context, requesterID, key string) (contract.LeaseRequestRecord, bool, error)
	// Request finds a stored request by id.
	Request(ctx context.Context, id string) (contract.LeaseRequestRecord, bool, error)
	// Grants lists the grant records, oldest first.
	Grants(ctx context.Context) ([]store.Grant, error)
}

// LeasingReserver is a LeasingStore that can take its write lock ahead of
// a decision (the gateway's SQLite store): the fleet queue then changes
// nothing until the lock is had, so a database another process locks
// delays or refuses a decision, and never fails one already made in
// memory (see queue.Reserver).
type LeasingReserver interface {
	Reserve(ctx context.Context) (LeasingReservation, error)
}

// LeasingReservation is the store's write lock held for one decision:
// Commit writes it, as LeasingStore.Commit would, and gives the lock back;
// Release gives it back unused. Either may be called more than once; only
// the first counts.
type LeasingReservation interface {
	Commit(ctx context.Context, w queue.Writes, grants []store.Grant, ended []string) ([]contract.Event, error)
	Release()
}

// LeasingOptions configure a gateway's leasing.
type LeasingOptions struct {
	// Store keeps the request records, the queue's events and the grant
	// records.
	Store LeasingStore
	// Publish receives the queue's committed events.
	Publish func(...contract.Event)
	// DefaultTTL and MaxTTL are the gateway's lease.defaultTtlMs and
	// lease.maxTtlMs.
	DefaultTTL, MaxTTL time.Duration
	// MinTTL is the gateway's lease.minTtlMs; 0 sets none.
	MinTTL time.Duration
	// RequestTimeout bounds the worker's silence on one forwarded
	// lease.request (gateway.leaseRequestTimeoutMs): the forward fails
	// WORKER_UNREACHABLE once this long passed with no progress push and
	// no answer; each push starts it again.
	RequestTimeout time.Duration
	// ExecTimeout bounds the worker's silence on one forwarded device.exec
	// (gateway.execTimeoutMs): EXEC_TIMEOUT once this long passed with no
	// exec-started, output or answer, a backstop behind the worker's own
	// exec.timeoutMs. (The file transfer calls it bounds are bounded
	// whole.)
	ExecTimeout time.Duration
	// LeaseEnded is told that a gateway lease ended on its worker (expired,
	// released by an operator there, its device lost), with the gateway's
	// lease record and the reason, so its holders hear lease-lost. It must
	// not block.
	LeaseEnded func(lease contract.LeaseRecord, reason string)
	// DeviceHealth is told that the device of a gateway lease crashed
	// (contract.PushDeviceUnhealthy) or runs again after attempts boots
	// (contract.PushDeviceRecovered), with the gateway's lease record, so
	// its holders hear it as they would on the worker. It must not block.
	DeviceHealth func(lease contract.LeaseRecord, notice string, attempts int)
	Logger       *slog.Logger
}

// Leasing is leasing through a gateway: one fleet-wide queue (the queue
// package, with the fleet as its Placer), dispatch of each request to the
// worker routing picks, and the lease index that names the leases the
// gateway granted.
//
// The index believes only the gateway's own grants. Each grant is recorded
// (a store.Grant: the gateway's key and the worker's lease id, the device,
// owner, requester, chosen id and request) in the commit that grants the
// request, so no requester hears of a grant that is not recorded; the
// index is loaded from those records at start. A worker's status can then
// only confirm a lease the gateway granted on it, or end one (when a
// snapshot read after its grant leaves it out: leaseIndex.reconcile says
// how the worker's event seqs and uplinks tell which are); anything else it
// reports under the gateway's requester prefix is a finding, logged and
// counted on its view, and never owns, routes or blocks anything. A grant
// that repeats a lease id or a device the gateway holds a lease of is
// refused, given back where that cannot end the first lease, and its
// request goes back in line, not to be sent to that worker while the
// first lease lives (skipped).
type Leasing struct {
	f    *Fleet
	q    *queue.Queue
	desk *queue.Desk // the front desk over q
	opts LeasingOptions
	log  *slog.Logger

	// Guarded by the queue's decision lock (touched only in q.Do and
	// q.View, and in Place, which runs under it).
	idx *leaseIndex
	// pass is the decision whose serving pass is placing now, and busy the
	// workers a waiter was dispatched to in it: at most one per worker
	// per pass, so a stale view sends one request, not a burst.
	pass *queue.Txn
	busy map[string]bool
	// skip are, per waiter, the workers it is not sent to again for now
	// after a double grant.
	skip map[*queue.Waiter]map[string]skipped
	// stale are the workers whose view a request of a class of need
	// bounced off (stale.go).
	stale map[staleKey]*staleMark
	// held are, by worker, the holds of the dispatches in flight to it,
	// and of those granted until its view has moved past the generation
	// they were granted at (until), when the view shows the grant itself.
	held map[string][]*dispatchHold
}

// skipped says how long a waiter is not sent to a worker again after a
// double grant: while the lease the grant contradicted stays indexed
// (conflict), and until the worker's view has moved since generation gen.
// An honest worker's stale grant of a device whose lease just ended on it
// is tried again once the gateway has heard of that end; a lying worker is
// not asked again for as long as its lie would repeat.
type skipped struct {
	gen      uint64
	conflict *indexed
}

// skipping reports whether a waiter skipped as s skips workerID now. The
// decision lock must be held.
func (l *Leasing) skipping(s skipped, workerID string) bool {
	if s.conflict != nil {
		if e, ok := l.idx.ofKey(s.conflict.key); ok && e == s.conflict {
			return true
		}
	}
	return l.f.generation(workerID) <= s.gen
}

// skipFor records that w is not sent to workerID for now (skipped). The
// decision lock must be held.
func (l *Leasing) skipFor(w *queue.Waiter, workerID string, s skipped) {
	if l.skip[w] == nil {
		l.skip[w] = map[string]skipped{}
	}
	l.skip[w][workerID] = s
}

// dispatchHold is one dispatch's hold on its worker's view.
type dispatchHold struct {
	hold
	until uint64 // 0 while in flight
}

// fleetNeed is what the fleet places: the request as routing reads it,
// and its class of need (needKey).
type fleetNeed struct {
	ask Ask
	key string
}

func (n *fleetNeed) Platform() contract.Platform { return n.ask.Platform }

// NeedKey is the request's class of need: a waiter nothing can serve now
// holds only the later waiters of its class (queue.ScopeNeed).
func (n *fleetNeed) NeedKey() string { return n.key }

// NewLeasing makes the gateway's leasing over f; f tells it when a view
// changes (a slot may have freed, a drain may make a request unservable).
func NewLeasing(f *Fleet, opts LeasingOptions) *Leasing {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.RequestTimeout <= 0 {
		opts.RequestTimeout = 5 * time.Minute
	}
	if opts.ExecTimeout <= 0 {
		opts.ExecTimeout = 11 * time.Minute
	}
	l := &Leasing{f: f, opts: opts, log: opts.Logger, idx: newLeaseIndex(f.opts.InstanceID),
		busy: map[string]bool{}, skip: map[*queue.Waiter]map[string]skipped{}, stale: map[staleKey]*staleMark{},
		held: map[string][]*dispatchHold{}}
	l.q = queue.New(queue.Options{
		Store: leasingStore{l}, Placer: l, Publish: opts.Publish, Logger: opts.Logger,
		LeaseOf: func(requester string) (string, string, bool) {
			e, ok := l.idx.ofRequester(requester)
			if !ok {
				return "", "", false
			}
			return e.id, e.owner, true
		},
		// A chosen id is unique within its owner, in the queue's line and
		// in the index alike (heldBy, resolve): two owners' leases of one
		// chosen id live side by side.
		LeaseHeld: func(owner, id string) bool { return l.idx.heldBy(owner, id) },
	})
	l.desk = &queue.Desk{Q: l.q, DefaultTTL: opts.DefaultTTL, MinTTL: opts.MinTTL, MaxTTL: opts.MaxTTL, Resolve: l.resolveRequest}
	if opts.LeaseEnded == nil {
		l.opts.LeaseEnded = func(contract.LeaseRecord, string) {}
	}
	if opts.DeviceHealth == nil {
		l.opts.DeviceHealth = func(contract.LeaseRecord, string, int) {}
	}
	f.setChanged(l.viewChanged)
	f.setOnEvent(l.onEvent)
	f.setRemoved(l.workerRemoved)
	return l
}

// leasingStore is the queue's store: each decision's commit carries the
// grant records the index staged in it (under the decision lock, like
// everything that stages them).
type leasingStore struct{ l *Leasing }

func (s leasingStore) Commit(ctx context.Context, w queue.Writes) ([]contract.Event, error) {
	puts, ends := s.l.idx.take()
	return s.l.opts.Store.Commit(ctx, w, puts, ends)
}

// Reserve takes the store's write lock for the decision to come, when the
// store can (LeasingReserver); with one that cannot, there is nothing to
// take and the decision commits as it ends.
func (s leasingStore) Reserve(ctx context.Context) (queue.Reservation, error) {
	r, ok := s.l.opts.Store.(LeasingReserver)
	if !ok {
		return nil, nil
	}
	res, err := r.Reserve(ctx)
	if err != nil {
		return nil, err
	}
	return leasingReservation{l: s.l, res: res}, nil
}

// leasingReservation commits a decision with the grant records the index
// staged in it, under the lock reserved for it.
type leasingReservation struct {
	l   *Leasing
	res LeasingReservation
}

func (r leasingReservation) Commit(ctx context.Context, w queue.Writes) ([]contract.Event, error) {
	puts, ends := r.l.idx.take()
	return r.res.Commit(ctx, w, puts, ends)
}

func (r leasingReservation) Release() { r.res.Release() }

func (s leasingStore) RequestByKey(ctx context.Context, requesterID, key string) (contract.LeaseRequestRecord, bool, error) {
	return s.l.opts.Store.RequestByKey(ctx, requesterID, key)
}

func (s leasingStore) Request(ctx context.Context, id string) (contract.LeaseRequestRecord, bool, error) {
	return s.l.opts.Store.Request(ctx, id)
}

// Load rebuilds the lease index from the grant records, at start, before
// any worker's view is read: the leases the gateway granted are its own
// again, each until its worker's snapshots show it ended.
func (l *Leasing) Load(ctx context.Context) error {
	gs, err := l.opts.Store.Grants(ctx)
	if err != nil {
		return fmt.Errorf("load grant records: %w", err)
	}
	return l.q.Do(func(*queue.Txn) error {
		l.idx.load(gs)
		return nil
	})
}

// onEvent learns from a worker's relayed events what the holders of the
// gateway's leases must hear: that a lease ended there (the index forgets
// it), or that its device crashed or runs again. They are told with the
// gateway's lease id, owner and device, from the index, never the
// worker's.
func (l *Leasing) onEvent(workerID string, ev contract.Event) {
	var p struct {
		LeaseID  string `json:"leaseId"`
		Reason   string `json:"reason"`
		Attempts int    `json:"attempts"`
	}
	switch ev.Event {
	case "lease.expired", "lease.released", "device.crash-detected", "device.recovered":
	default:
		return
	}
	if json.Unmarshal(ev.Payload, &p) != nil || p.LeaseID == "" {
		return
	}
	switch ev.Event {
	case "device.crash-detected":
		l.deviceHealth(workerID, p.LeaseID, contract.PushDeviceUnhealthy, 0)
		return
	case "device.recovered":
		if p.Attempts < 1 {
			l.log.Warn("a worker's device.recovered names an impossible attempt count; not relayed", "worker", workerID, "attempts", p.Attempts)
			return
		}
		l.deviceHealth(workerID, p.LeaseID, contract.PushDeviceRecovered, p.Attempts)
		return
	}
	e, ok := l.ended(workerID, p.LeaseID)
	if !ok {
		return
	}
	reason := p.Reason
	switch {
	case e.ending != "":
		reason = e.ending
	case ev.Event == "lease.expired":
		reason = string(contract.EndExpired)
	}
	l.tellEnded(e, reason)
}

// deviceHealth tells the holders of the gateway lease that is workerID's
// workerLeaseID, if the gateway issued it, that its device crashed or runs
// again.
func (l *Leasing) deviceHealth(workerID, workerLeaseID, notice string, attempts int) {
	var e *indexed
	var ok bool
	l.q.View(func() { e, ok = l.idx.ofWorker(workerID, workerLeaseID) })
	if !ok {
		return
	}
	l.opts.DeviceHealth(e.record(), notice, attempts)
}

// tellEnded tells the holders of e that it ended, once: a second call
// returns when the first has told them.
func (l *Leasing) tellEnded(e *indexed, reason string) {
	e.told.Do(func() { l.opts.LeaseEnded(e.record(), reason) })
}

// viewChanged runs after a worker's view changed: the index learns the
// worker's leases from the status read r, if one was (and gives back those
// granted for requests it withdrew), and the line is served again.
func (l *Leasing) viewChanged(workerID string, r statusRead, connected bool) {
	_ = l.q.Do(func(tx *queue.Txn) error {
		// A request that bounced and then ended in line (timed out,
		// cancelled, failed by the fast-fail table) leaves its skips:
		// views change often enough (each worker's refresh) to sweep them.
		for w := range l.skip {
			if tx.Abandoned(w) {
				delete(l.skip, w)
			}
		}
		l.forgetStale("", "", time.Now())
		switch {
		case !connected:
			l.idx.disconnected(workerID)
		case r.gen > 0:
			giveBack, found := l.idx.reconcile(workerID, r, time.Now())
			for _, id := range giveBack {
				l.log.Info("giving back a lease granted for a request the gateway gave up on", "workerId", workerID, "leaseId", id)
				go l.releaseOnWorker(workerID, id)
			}
			if len(found) > 0 {
				// Counted at once, told by the last: one lock of the
				// fleet's and one line per snapshot, however many.
				l.f.found(workerID, findingUngranted, int64(len(found)), found[len(found)-1].what())
			}
		}
		tx.Kick()
		return nil
	})
}

// workerRemoved ends the leases the gateway granted on a worker it forgot
// (worker remove, or past its retention): nobody can reach them through the
// gateway any more, and their requesters may lease again.
func (l *Leasing) workerRemoved(workerID string) {
	_ = l.q.Do(func(tx *queue.Txn) error {
		for _, e := range l.idx.ofWorkerAll(workerID) {
			l.idx.remove(e)
		}
		// After the removals, which remember each lease as ended.
		l.idx.forget(workerID)
		// Its dispatch holds go too: no view of it is routed to again.
		// (A dispatch still in flight drops its own when it ends.)
		delete(l.held, workerID)
		l.forgetStale(workerID, "", time.Now())
		tx.Kick()
		return nil
	})
}

// Settle fails the requests a previous run of the gateway left open: their
// place in the queue went with it (failed, DAEMON_STOPPING, reason
// gateway-restarted), so a client reading one by id learns it ended. A
// lease a worker granted for one of them that the gateway never recorded
// (its answer came after the gateway stopped) is given back when the
// worker's snapshot shows it, so what a request reads agrees with what
// became of its lease: failed, and nobody's.
func (l *Leasing) Settle(open []contract.LeaseRequestRecord) error {
	if len(open) == 0 {
		return nil
	}
	now := time.Now()
	return l.q.Do(func(tx *queue.Txn) error {
		for _, rec := range open {
			tx.SettleStale(rec, "gateway-restarted")
			l.idx.settle(rec.RequesterID, now)
		}
		return nil
	})
}

// Close stops the queue: waiting requests fail DAEMON_STOPPING.
func (l *Leasing) Close() {
	l.q.Stop()
	// Requests dispatched and still in flight are answered too, but not
	// settled: the next start settles them as gateway-restarted. A
	// decision still waiting for the store's write lock (a worker's view
	// that changed as its uplink closed) gives up rather than wait for a
	// database that is closing.
	l.q.Close()
}

// resolveRequest is the fleet's resolution of a request: what routing
// reads of it, and its class of need. Nothing is asked of a worker yet.
func (l *Leasing) resolveRequest(_ context.Context, in contract.LeaseRequestInput) queue.Resolution {
	ttl, _ := l.desk.TTL(in.TTLMs, "ttlMs") // checked by the desk already
	a, err := askOf(in.Spec(), ttl.Milliseconds(), in.AllowDownload)
	if err != nil {
		// The input was validated with its osVersion; nothing reaches here.
		return queue.Resolution{Err: contract.AsError(err), Reason: "unresolvable-spec"}
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
func (l *Leasing) Admit(w *queue.Waiter) (*contract.Error, string) {
	if cerr := assess(w.Need().(*fleetNeed).ask, l.f.views()); cerr != nil {
		return cerr, rejectedReason(cerr)
	}
	return nil, ""
}

// Place routes a waiter over the views, skipping the workers already
// dispatched to in this pass, those stale for its class of need (a
// request of it bounced off them: stale.go), and those a double grant of
// its own makes it skip. A waiter no worker can serve now is passed over
// (queue.ScopeNeed): it holds only the later waiters of its class of
// need, and the others go to the workers that can serve them.
func (l *Leasing) Place(tx *queue.Txn, w *queue.Waiter) (queue.Start, queue.Block) {
	if tx != l.pass {
		l.pass, l.busy = tx, map[string]bool{}
	}
	n := w.Need().(*fleetNeed)
	all := l.f.views()
	// The fast-fail table again, on the views as they are now: a drain or
	// a disconnect may have left no worker that could ever serve it.
	if cerr := assess(n.ask, all); cerr != nil {
		tx.Settle(w, cerr, rejectedReason(cerr))
		return queue.Start{}, queue.NoBlock
	}
	var views []*contract.WorkerView
	now := time.Now()
	for _, v := range all {
		if l.busy[v.ID] {
			continue
		}
		if skip, reserve := l.staleFor(v, n.key, now); skip {
			if reserve {
				l.busy[v.ID] = true
			}
			continue
		}
		if s, ok := l.skip[w][v.ID]; ok && l.skipping(s, v.ID) {
			continue
		}
		views = append(views, heldView(v, l.holdsOn(v.ID)))
	}
	r, ok := route(warmThenFree, n.ask, views)
	if !ok {
		return queue.Start{}, queue.BlockNeed
	}
	l.busy[r.WorkerID] = true
	h := &dispatchHold{hold: hold{platform: n.ask.Platform, device: r.DeviceID}}
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
		Run:      func() { l.dispatch(w, r, req, h) },
	}, queue.NoBlock
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
				_ = l.q.Do(func(tx *queue.Txn) error {
					if !tx.Abandoned(w) {
						l.announce(tx, w, r, announced)
					}
					return nil
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
		reason := "worker-unreachable"
		switch {
		case ce.Code == contract.CodeInternal:
			reason = "worker-answer-invalid"
		case ce.Details["reason"] == reasonWorkerStopping:
			reason = reasonWorkerStopping
		}
		_ = l.q.Do(func(tx *queue.Txn) error {
			// The worker may still grant it (or did, in an answer the
			// gateway could not take): a lease nobody holds, to be given
			// back when its snapshot shows it.
			l.idx.withdraw(r.WorkerID, w.Requester(), time.Now())
			l.unhold(r.WorkerID, h)
			tx.Settle(w, ce, reason)
			// Every settled attempt serves the line again.
			delete(l.skip, w)
			tx.Kick()
			return nil
		})
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
	_ = l.q.Do(func(tx *queue.Txn) error {
		l.unhold(r.WorkerID, h)
		tx.Settle(w, ce, "worker-refused")
		delete(l.skip, w)
		tx.Kick()
		return nil
	})
}

// bounce puts w back in line, with workerID stale for its class of need
// (markStale); the dispatch's hold goes (it took nothing).
func (l *Leasing) bounce(w *queue.Waiter, workerID string, h *dispatchHold) {
	var print uint64
	for _, v := range l.f.views() {
		if v.ID == workerID {
			print = viewPrint(v)
		}
	}
	_ = l.q.Do(func(tx *queue.Txn) error {
		l.unhold(workerID, h)
		l.markStale(workerID, w.Need().(*fleetNeed).key, print, time.Now())
		tx.Requeue(w)
		tx.Kick()
		return nil
	})
}

// announce records request.dispatched for w, routed by r, once: at the
// worker's first progress push or at the grant, whichever commits first.
func (l *Leasing) announce(tx *queue.Txn, w *queue.Waiter, r Route, announced *bool) {
	if *announced {
		return
	}
	*announced = true
	tx.Event("request.dispatched", map[string]any{"requestId": w.ID(), "workerId": r.WorkerID, "requesterId": w.Requester(),
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
	_ = l.q.Do(func(tx *queue.Txn) error {
		delete(l.skip, w)
		// The worker served the need: its view is not stale for it.
		l.forgetStale(r.WorkerID, w.Need().(*fleetNeed).key, time.Now())
		tx.Kick()
		// Held until a view read after this grant shows it.
		h.until = l.f.generation(r.WorkerID)
		if tx.Abandoned(w) {
			// Nobody wants it any more: give it back.
			go l.releaseOnWorker(r.WorkerID, g.Lease.ID)
			return nil
		}
		now := time.Now()
		rec := store.Grant{Key: gatewayLeaseID(r.WorkerID, g.Lease.ID), WorkerID: r.WorkerID, WorkerLeaseID: g.Lease.ID,
			DeviceID: g.Lease.DeviceID, OwnerID: w.Owner(), RequesterID: w.Requester(), ChosenID: w.ChosenLeaseID(),
			RequestID: w.ID(), GrantedAt: now.UnixMilli()}
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
			return nil
		case err != nil:
			go l.releaseOnWorker(r.WorkerID, g.Lease.ID)
			l.unhold(r.WorkerID, h)
			code := contract.CodeRequesterAlreadyLeased
			if errors.Is(err, errChosenTaken) {
				code = contract.CodeLeaseIDTaken
			}
			tx.Settle(w, contract.Errorf(code, "%v", err), "worker-refused")
			return nil
		}
		workerRequest, workerGranted := g.RequestID, g.Lease.GrantedAt
		g.Lease.ID, g.Lease.RequesterID, g.Lease.OwnerID, g.Lease.WorkerID = e.id, w.Requester(), w.Owner(), r.WorkerID
		g.Lease.IDChosenByRequester, g.Lease.Key = e.chosen != "", e.keyIfChosen()
		g.Lease.Worker = l.f.names().ref(r.WorkerID)
		g.RequestID = w.ID() // the gateway's request, not the worker's
		g.Device.WorkerID = r.WorkerID
		l.announce(tx, w, r, announced)
		tx.Event("grant.recorded", map[string]any{"requestId": w.ID(), "leaseId": e.id, "leaseKey": e.key, "workerId": r.WorkerID,
			"workerLeaseId": e.workerLeaseID, "workerRequestId": workerRequest, "deviceId": e.deviceID, "requesterId": e.requester,
			"ownerId": e.owner, "source": g.Source, "platform": w.Platform(), "waitMs": max(now.UnixMilli()-w.CreatedAt(), 0),
			"grantedAt": workerTime(workerGranted, now)})
		tx.Grant(w, g)
		tx.Kick()
		return nil
	})
	if refresh {
		l.f.refresh(r.WorkerID)
	}
}

// holdsOn are the holds on workerID's view that routing counts now: the
// dispatches in flight, and the grants its view does not show yet. The
// decision lock must be held.
func (l *Leasing) holdsOn(workerID string) []hold {
	gen := l.f.generation(workerID)
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

// actsOn finds a gateway lease the caller may run a command on, or move
// files into and out of: its own, or, for an admin, one whose requester it
// names, as on a worker. A requester named by anyone must be the lease's.
func (l *Leasing) actsOn(c queue.Caller, id, requesterID string) (*indexed, error) {
	e, err := l.owned(c, id)
	if err != nil {
		return nil, err
	}
	if requesterID != "" && requesterID != e.requester {
		return nil, contract.Errorf(contract.CodeForbidden, "lease %s was not made for %s", id, requesterID).With("leaseId", id)
	}
	if c.Admin && e.owner != c.Principal && requesterID == "" {
		return nil, contract.Errorf(contract.CodeForbidden,
			"to act on someone else's lease, name its requester (requesterId)").With("leaseId", id)
	}
	return e, nil
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
	l.ended(e.workerID, e.workerLeaseID)
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
		res.Cancelled = tx.CancelAll(contract.Errorf(contract.CodeCancelled, "an operator released everything"), string(contract.EndKilled), false)
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

// Exec forwards device.exec to the lease's worker, checked first against
// the gateway's index (the caller owns the lease, or is an admin naming
// its requester, as on a worker) and again by the worker. started is told
// when the worker started the command, so a refusal before it stays a
// plain error; output is told each chunk until the call ends. ctx is the
// caller's call: when it ends (the caller went away), the forward is
// cancelled, which the client tells the worker (call.cancel), and the
// worker stops the command; so it does past the gateway's backstop
// (ExecTimeout, EXEC_TIMEOUT), and for a caller too far behind.
func (l *Leasing) Exec(ctx context.Context, c queue.Caller, in contract.ExecInput, started func(), output func(contract.ExecOutput)) (contract.ExecResult, error) {
	e, err := l.actsOn(c, in.LeaseID, in.RequesterID)
	if err != nil {
		return contract.ExecResult{}, err
	}
	cl := l.f.clientOf(e.workerID)
	if cl == nil {
		return contract.ExecResult{}, contract.Errorf(contract.CodeWorkerUnreachable, "worker %s is not connected", e.workerID).
			With("workerId", e.workerID).With("leaseId", e.id)
	}
	fwd := in
	fwd.LeaseID, fwd.RequesterID = e.workerLeaseID, l.idx.prefix+e.requester
	caller := ctx
	// Bounded by the worker's silence: a command that writes output runs
	// as long as the worker's exec.timeoutMs lets it.
	ctx, heard, cancel := withSilence(ctx, l.opts.ExecTimeout)
	defer cancel()
	relay := newExecRelay(started, output, cancel)
	res, err := cl.ExecStarted(ctx, fwd, func() {
		if ctx.Err() == nil {
			heard()
			relay.start()
		}
	}, func(o contract.ExecOutput) {
		if ctx.Err() == nil {
			heard()
			relay.add(o)
		}
	})
	relay.close()
	switch {
	case relay.overflowed():
		return contract.ExecResult{}, contract.Errorf(contract.CodeCancelled,
			"the caller fell more than %d MiB of output behind; the gateway stopped relaying the command on worker %s", maxExecBacklog>>20, e.workerID).
			With("leaseId", e.id)
	case err == nil:
		return res, nil
	case caller.Err() != nil:
		return contract.ExecResult{}, contract.Errorf(contract.CodeCancelled, "the caller went away; the command on worker %s was stopped", e.workerID).
			With("leaseId", e.id)
	case ctx.Err() != nil:
		return contract.ExecResult{}, contract.Errorf(contract.CodeExecTimeout, "worker %s sent nothing of the command for gateway.execTimeoutMs (%d)",
			e.workerID, l.opts.ExecTimeout.Milliseconds()).With("timeoutMs", l.opts.ExecTimeout.Milliseconds())
	}
	ce, refused := forwardError(ctx, e.workerID, "the command", err)
	if !refused {
		return contract.ExecResult{}, ce.With("leaseId", e.id)
	}
	ce = l.scrub(e.workerID, ce)
	if ce.Code == contract.CodeUnknownLease {
		ce = ce.With("leaseId", e.id)
	}
	return contract.ExecResult{}, ce
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
			case ok && (c.Admin || e.owner == c.Principal):
				out = append(out, project(e, r, ws))
			case !ok && c.Admin:
				r.Worker, r.Unreachable = ws.ref(r.WorkerID), false
				out = append(out, r)
			}
		}
		var unseen []contract.LeaseRecord
		for _, e := range l.idx.byKey {
			if reported[e] || !(c.Admin || e.owner == c.Principal) {
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
				case ok && (c.Admin || e.owner == c.Principal):
					d.LeaseID = e.id
				case !c.Admin:
					d.LeaseID = ""
				}
			}
			out[i] = d
		}
	})
	return out
}

// Waiting lists the fleet queue's open requests the caller may see, and
// how many wait in line.
func (l *Leasing) Waiting(c queue.Caller) ([]contract.WaitingRequest, int) {
	var depth int
	l.q.View(func() { _, depth = l.q.CountsLocked() })
	return l.q.Waiting(c), depth
}

// ended forgets a lease its worker says ended (a relayed lease.expired or
// lease.released).
func (l *Leasing) ended(workerID, workerLeaseID string) (*indexed, bool) {
	var e *indexed
	var ok bool
	_ = l.q.Do(func(tx *queue.Txn) error {
		if e, ok = l.idx.ofWorker(workerID, workerLeaseID); ok {
			l.idx.remove(e)
			tx.Kick()
		}
		return nil
	})
	return e, ok
}
