package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"time"

	"github.com/simlock/simlock/internal/config"
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
	// RejoinGrace bounds how long, after the gateway's start, requests
	// wait for the workers it remembers to dial in again before the
	// fast-fail table may refuse them (no worker takes requests, none
	// serves the platform or the model); 30 s when 0, a worker's longest
	// wait between two dials.
	RejoinGrace time.Duration
	// Fatal is told, once, that a decision's commit failed and the queue
	// stopped deciding (queue.Options.Fatal); nil ignores it.
	Fatal func(error)
	// Refused is what such a failure is answered as instead of INTERNAL,
	// when it returns non-nil (queue.Options.Refused).
	Refused func(error) *contract.Error
	Logger  *slog.Logger
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
// how the worker's event seqs and uplinks tell which are); a lease under the
// gateway's requester prefix that none of them names, in a worker's first
// snapshot of this run and granted before it loaded the records, is
// nobody's and is given back (a request is
// forwarded while the decision that placed it commits, so a run can end
// with a lease granted for a request it never saved); anything else it
// reports under the gateway's requester prefix is a finding, logged and
// counted on its view, and never owns, routes or blocks anything. A grant
// that repeats a lease id or a device the gateway holds a lease of is
// refused, given back where that cannot end the first lease, and its
// request goes back in line, not to be sent to that worker while the
// first lease lives (skipped).
type Leasing struct {
	// endingRelayed, when set (by tests), is told between endedRelayed's
	// look at the index and the decision that ends the lease.
	endingRelayed func(workerLeaseID string)

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
	// rejoinUntil: until then, while a worker the gateway remembers has
	// not dialled in again since its start, requests wait for the workers
	// rather than fail the fast-fail table (Restore, rejoining).
	rejoinUntil time.Time
	rejoinTimer *time.Timer

	// dec shares the decisions made at the same time (decider.go).
	dec decider
	// early are the leases workers ended before the gateway indexed them
	// (earlyend.go). Guarded by the decision lock.
	early earlyEnds
}

// skipped says how long a waiter is not sent to a worker again: after a
// double grant, while the lease the grant contradicted stays indexed
// (conflict), and until the worker's view has moved since generation gen;
// after the worker said it holds a lease of the requester the gateway did
// not grant, until what routing reads of its view differs from print (the
// lease given back changes its device's lease). An honest worker is tried
// again once the gateway has heard of the change; a lying one is not
// asked again for as long as its lie would repeat, and a status read that
// changes nothing does not end the skip.
type skipped struct {
	gen      uint64
	conflict *indexed
	print    uint64
}

// skipping reports whether a waiter skipped as s skips workerID now. The
// decision lock must be held.
func (l *Leasing) skipping(s skipped, workerID string) bool {
	if s.print != 0 {
		p, ok := l.f.printOf(workerID)
		return ok && p == s.print
	}
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
	until     uint64 // 0 while in flight
	requester string // the request's requester
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
	// Unset bounds are the config keys' defaults: one home for them.
	def := config.Default()
	if opts.RequestTimeout <= 0 {
		opts.RequestTimeout = time.Duration(def.Int("gateway.leaseRequestTimeoutMs")) * time.Millisecond
	}
	if opts.RejoinGrace <= 0 {
		opts.RejoinGrace = 30 * time.Second
	}
	if opts.ExecTimeout <= 0 {
		opts.ExecTimeout = time.Duration(def.Int("gateway.execTimeoutMs")) * time.Millisecond
	}
	l := &Leasing{f: f, opts: opts, log: opts.Logger, idx: newLeaseIndex(f.opts.InstanceID),
		busy: map[string]bool{}, skip: map[*queue.Waiter]map[string]skipped{}, stale: map[staleKey]*staleMark{},
		held: map[string][]*dispatchHold{}}
	l.idx.dispatching = l.dispatching
	l.q = queue.New(queue.Options{
		Store: leasingStore{l}, Placer: l, Publish: opts.Publish, Logger: opts.Logger,
		Fatal: opts.Fatal, Refused: opts.Refused,
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
	l.dec.q = l.q
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
		l.idx.load(gs, time.Now())
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
	case contract.EvLeaseExpired, contract.EvLeaseReleased, contract.EvDeviceCrashDetected, contract.EvDeviceRecovered:
	default:
		return
	}
	if json.Unmarshal(ev.Payload, &p) != nil || p.LeaseID == "" {
		return
	}
	switch ev.Event {
	case contract.EvDeviceCrashDetected:
		l.deviceHealth(workerID, p.LeaseID, contract.PushDeviceUnhealthy, 0)
		return
	case contract.EvDeviceRecovered:
		if p.Attempts < 1 {
			l.log.Warn("a worker's device.recovered names an impossible attempt count; not relayed", "worker", workerID, "attempts", p.Attempts)
			return
		}
		l.deviceHealth(workerID, p.LeaseID, contract.PushDeviceRecovered, p.Attempts)
		return
	}
	e, ok := l.endedRelayed(workerID, p.LeaseID)
	if !ok {
		return
	}
	reason := p.Reason
	switch {
	case e.ending != "":
		reason = e.ending
	case ev.Event == contract.EvLeaseExpired:
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

// foldLocked applies view changes in one decision, in the order told:
// the index learns each worker's leases from its status read, if one was
// (and gives back those granted for requests it withdrew), and the line is
// served once for all of them. The decision lock must be held.
func (l *Leasing) foldLocked(tx *queue.Txn, changes []viewChange) {
	// A request that bounced and then ended in line (timed out,
	// cancelled, failed by the fast-fail table) leaves its skips: views
	// change often enough (each worker's refresh) to sweep them.
	for w := range l.skip {
		if tx.Abandoned(w) {
			delete(l.skip, w)
		}
	}
	l.forgetStale("", "", time.Now())
	for _, c := range changes {
		switch {
		case !c.connected:
			l.idx.disconnected(c.workerID)
		case c.read.gen > 0:
			giveBack, found := l.idx.reconcile(c.workerID, c.read, time.Now())
			for _, id := range giveBack {
				l.log.Info("giving back a lease granted for a request the gateway gave up on", "workerId", c.workerID, "leaseId", id)
				go l.releaseOnWorker(c.workerID, id)
			}
			if len(found) > 0 {
				// Counted at once, told by the last: one lock of the
				// fleet's and one line per snapshot, however many.
				l.f.found(c.workerID, findingUngranted, int64(len(found)), found[len(found)-1].what())
			}
		}
	}
	tx.Kick()
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
		l.early.forget(workerID)
		// Its dispatch holds go too: no view of it is routed to again.
		// (A dispatch still in flight drops its own when it ends.)
		delete(l.held, workerID)
		l.forgetStale(workerID, "", time.Now())
		tx.Kick()
		return nil
	})
}

// Restore puts back in line the requests a previous run of the gateway,
// or the replica that led before this one, left open: each keeps its id,
// its place (its stored arrival) and its original deadline, is resolved
// as a new request is (resolveRequest) and admitted again, and waits, as
// a request made as a resource, until the serving pass places it; one
// that was dispatched to a worker when that run ended waits again. A
// client that follows one by id, or repeats its acquire with the same
// idempotency key, follows it here.
//
// No worker is connected when the gateway starts: until the workers it
// remembers (those not drained) have all dialled in again, for at most
// RejoinGrace, a request the fast-fail table would refuse (no worker, no
// driver, no model) waits for them instead, whether it was restored or is
// made meanwhile (an agent that asks during a failover is not told that
// the fleet is empty). A lease a worker granted for a restored request
// before now that the gateway never recorded (its answer came after that
// run ended) is nobody's, and is given back when the worker's snapshot
// shows it; the request is placed again like any other.
func (l *Leasing) Restore(ctx context.Context, open []contract.LeaseRequestRecord) error {
	now := time.Now()
	l.q.View(func() {
		l.rejoinUntil = now.Add(l.opts.RejoinGrace)
		for _, rec := range open {
			if !rec.State.Terminal() {
				l.idx.settle(rec.RequesterID, now)
			}
		}
	})
	if len(open) > 0 {
		err := l.q.Restore(ctx, open, func(ctx context.Context, rec contract.LeaseRequestRecord) queue.Resolution {
			return l.resolveRequest(ctx, queue.InputOf(rec))
		})
		if err != nil {
			return fmt.Errorf("restore the fleet queue: %w", err)
		}
	}
	// When the grace ends, what the workers that came back cannot serve
	// fails by the fast-fail table, as it would for a new request.
	t := time.AfterFunc(l.opts.RejoinGrace, func() {
		_ = l.q.Do(func(tx *queue.Txn) error { tx.Kick(); return nil })
	})
	l.q.View(func() { l.rejoinTimer = t })
	return nil
}

// rejoining reports whether the gateway still waits for the workers it
// remembers to dial in again after its start (Restore): within
// RejoinGrace, while one that is not drained is not connected. The
// decision lock must be held.
func (l *Leasing) rejoining() bool {
	if !time.Now().Before(l.rejoinUntil) {
		return false
	}
	for _, v := range l.f.views() {
		if !v.Drained && v.Connection != contract.WorkerConnected {
			return true
		}
	}
	return false
}

// Close stops the queue: waiting requests fail DAEMON_STOPPING.
func (l *Leasing) Close() {
	l.q.View(func() {
		if l.rejoinTimer != nil {
			l.rejoinTimer.Stop()
		}
	})
	l.q.Stop()
	// Requests dispatched and still in flight are answered too, but not
	// settled: the next start puts them back in line (Restore). A
	// decision still waiting for the store's write lock (a worker's view
	// that changed as its uplink closed) gives up rather than wait for a
	// database that is closing.
	l.q.Close()
}
