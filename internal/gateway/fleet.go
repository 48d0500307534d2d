// Package gateway is a gateway daemon's fleet: the workers that joined it
// over their uplinks, what each one has (read over the daemon protocol, the
// gateway being the client, and checked before any of it is used), the
// events they relay, and the reads that sum the fleet; and its leasing
// (Leasing): the fleet queue, with the fleet as its Placer, answering the
// request operations through the queue's front desk (queue.Desk) as a
// worker's engine does, and forwarding each lease operation to the worker
// that holds the lease.
//
// A worker's answer is a claim, never a fact: every status, catalog and
// event is checked against the bounds in validate.go, and a worker that
// sends something out of bounds is disconnected with the reason, while the
// gateway goes on serving every other one. What a worker reports of leases
// counts only as far as the gateway's own grant records bear it out
// (leaseindex.go); the events it relays are limited to the names a worker
// records, to a payload size and to a rate, and keep its clock only within
// bounds of the gateway's (relaylimits.go, validate.go); and what any peer
// can make the gateway keep is bounded: one worker id per join token,
// MaxWorkers workers, views dropped with their token or past their
// retention, and refused uplinks coalesced by address (rejections.go). A
// claim the gateway refuses is a finding, logged and counted on the
// worker's view (findings.go).
package gateway

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/simlock/simlock/internal/client"
	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/store"
)

// Store keeps what the gateway must not forget across restarts: which
// workers it knows, which are drained, and how far each one's events were
// relayed.
type Store interface {
	Workers(ctx context.Context) ([]store.Worker, error)
	PutWorker(ctx context.Context, r store.Worker) error
	DeleteWorker(ctx context.Context, id string) error
}

// Options configure a Fleet.
type Options struct {
	Store Store
	// InstanceID is the gateway's instance id; it names the gateway in its
	// hello to each worker.
	InstanceID string
	Version    string
	// Emit commits one of the gateway's own events (worker.connected, …)
	// and publishes it.
	Emit func(ctx context.Context, event string, payload map[string]any) error
	// Relay appends a worker's events to the gateway's log, each once (one
	// whose id the log holds is skipped), moves the worker's relay cursor
	// to lastSeq in the same transaction, and publishes what it appended:
	// one step, so the log's order is the order subscribers hear.
	Relay func(ctx context.Context, workerID string, evs []contract.Event, lastSeq int64) error
	// Refresh is how often every view is read again whole (30 s when 0).
	Refresh time.Duration
	// Retention is how long a disconnected worker that is not drained
	// stays listed (24 h when 0).
	Retention time.Duration
	// PruneEvery is how often Maintain forgets the workers past their
	// retention (1 min when 0).
	PruneEvery time.Duration
	// RelayRate and RelayBurst bound the events relayed from one worker:
	// a token bucket of RelayBurst, refilled at RelayRate a second
	// (relayRate and relayBurst when 0).
	RelayRate, RelayBurst float64
	// MaxWorkers caps the workers the gateway knows, connected or not
	// (gateway.maxWorkers; DefaultMaxWorkers when 0): an uplink from a
	// worker id it does not know yet is refused past it.
	MaxWorkers int
	Logger     *slog.Logger
}

// DefaultMaxWorkers is gateway.maxWorkers's default.
const DefaultMaxWorkers = 1000

// callTimeout bounds each read of a worker: a worker that does not answer
// within it is dropped.
const callTimeout = 30 * time.Second

// Fleet is the gateway's workers.
type Fleet struct {
	opts Options
	log  *slog.Logger

	mu sync.Mutex
	// mu guards the fields below.
	workers map[string]*worker
	// routes is what routing reads of the workers' views, kept as they
	// change (reindex).
	routes   *routeIndex
	rejected rejections
	// revoked are the join tokens revoked while the gateway runs: an
	// uplink authenticated a moment before its token was revoked is
	// refused when it attaches (CloseToken found no link of it to close).
	// One id per revocation, which only an operator makes.
	revoked map[string]struct{}
	closed  bool
	// changed is told, outside the lock, after a worker's view changed:
	// with a status read (its gen 0: no read, the view changed
	// otherwise), or that the worker disconnected.
	changed func(workerID string, r statusRead, connected bool)
	// onEvent is told each event relayed from a worker, after its commit.
	onEvent func(workerID string, ev contract.Event)
	// awaiting, when set (by tests), is told each time a grant's judging
	// starts to wait for a worker's relay (awaitRelayed), outside the
	// lock: a test can then relay what the grant waits for, in that order.
	awaiting func(workerID string)
	// removed is told, outside the lock, that the gateway forgot a worker.
	removed func(workerID string)
}

// worker is one worker: its view, and its link while connected.
type worker struct {
	view    contract.WorkerView
	lastSeq int64
	// toldSeq is the seq of the last event relayed and told to the
	// leasing (onEvent); told, when not nil, is closed when it moves or
	// the link ends (awaitRelayed).
	toldSeq int64
	told    chan struct{}
	// link is the uplink being served, nil when there is none; gen tells
	// one link from the next, so a replaced link's end changes nothing.
	link    *link
	gen     int
	tokenID string
	// owner is the join token the worker id belongs to: the one it first
	// joined with, until that token is revoked or the worker removed.
	owner string
	// client is the session over the link once hello is done, for the
	// reads made on demand and the calls forwarded to the worker.
	client *client.Client
	// viewGen counts the view's changes: a request that bounced off the
	// worker is sent to it again once it moved.
	viewGen uint64
	// refreshNow asks the link to read the worker's status again at once
	// (a stale view found by a bounced request).
	refreshNow chan struct{}
	// recatalog asks the link to read the worker's catalog (and all else)
	// again at once (catalog.changed, or a request refused for what its
	// catalog listed).
	recatalog chan struct{}
	// pending is the newest status read the leasing has not been told of
	// yet, and telling whether a goroutine is telling it (notifyLater):
	// one at a time, in the order they were read.
	pending *statusRead
	telling bool
	// statusSeq is the event seq of the newest status read applied on
	// the current link (contract.Status.EventSeq; 0 when the worker does
	// not say): an older one is not applied.
	statusSeq int64
	// folds are the relayed events folded into the view while a status
	// read is in flight (reading; foldRelayedLocked): folded again on top
	// of that read when they are newer than it. At most maxFolds.
	folds []contract.Event
	// reading is set while a status read is in flight on the link: only
	// then are the events folded kept (folds), to be folded again on top
	// of that read when it comes. An event folded before the read was
	// asked for is in it already (the worker's log held it then).
	reading bool
	// read is the newest status read of the current link, for the
	// leasing, but its leases, which are the view's (its gen 0 when it
	// lists nothing to reconcile: read while the worker was starting).
	read statusRead
	// logged is when each kind of the worker's findings was last logged.
	logged map[findingKind]*findingLog
	// relayed is the rate limit of the events relayed from the worker,
	// kept across its uplinks (a reconnect does not refill it).
	relayed *tokenBucket
	// counts are the devices and leases of the newest status read, by
	// platform, counted when it is applied so that a metrics scrape reads
	// a few numbers per worker rather than every device.
	counts map[contract.Platform]viewCounts
}

type link struct {
	conn   net.Conn
	reason string // why the gateway closed it, if it did
	// revoked: its join token was revoked, and the view goes with it.
	revoked bool
}

// New makes a Fleet; Start loads what the store remembers.
func New(opts Options) *Fleet {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Refresh <= 0 {
		opts.Refresh = 30 * time.Second
	}
	if opts.Retention <= 0 {
		opts.Retention = 24 * time.Hour
	}
	if opts.MaxWorkers <= 0 {
		opts.MaxWorkers = DefaultMaxWorkers
	}
	if opts.PruneEvery <= 0 {
		opts.PruneEvery = time.Minute
	}
	if opts.RelayRate <= 0 {
		opts.RelayRate = relayRate
	}
	if opts.RelayBurst <= 0 {
		opts.RelayBurst = relayBurst
	}
	return &Fleet{opts: opts, log: opts.Logger, workers: map[string]*worker{}, routes: newRouteIndex(nil), revoked: map[string]struct{}{}}
}

// Start lists the workers the store remembers, disconnected until they
// dial in again.
func (f *Fleet) Start(ctx context.Context) error {
	recs, err := f.opts.Store.Workers(ctx)
	if err != nil {
		return fmt.Errorf("load workers: %w", err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	shared := map[string][]string{}
	for _, r := range recs {
		f.workers[r.ID] = &worker{lastSeq: r.LastSeq, owner: r.TokenID, view: contract.WorkerView{ID: r.ID, Label: r.Label,
			Connection: contract.WorkerDisconnected, Drained: r.Drained, LastSeenAt: r.LastSeenAt,
			Reason: "not connected since the gateway started"}}
		f.reindex(f.workers[r.ID])
		if r.TokenID != "" {
			shared[r.TokenID] = append(shared[r.TokenID], r.ID)
		}
	}
	for tok, ids := range shared {
		if len(ids) > 1 {
			f.log.Warn("workers share a join token: they keep joining with it, but no other worker can; make one token per worker and rotate them",
				"tokenId", tok, "workerIds", ids)
		}
	}
	return nil
}

// Close ends every uplink.
func (f *Fleet) Close() {
	f.mu.Lock()
	f.closed = true
	var conns []net.Conn
	for _, w := range f.workers {
		if w.link != nil {
			conns = append(conns, w.link.conn)
		}
	}
	f.mu.Unlock()
	for _, c := range conns {
		c.Close()
	}
}

// Attachment is an uplink the HTTP layer accepted: its token checked, the
// worker's id and label read from its headers and checked.
type Attachment struct {
	ID, Label string
	// TokenID is the join token's id: revoking it closes the uplink.
	TokenID string
	Conn    net.Conn
}

// Claim says whether an uplink with join token tokenID may speak for
// worker id. A join token is one worker's: a worker id belongs to the
// token it first joined with (a worker's id is a header, which any holder
// of a join token could copy), and a token to the one worker id it joined
// as, until that token is revoked or the worker removed; an id the gateway
// does not know is refused once it knows MaxWorkers. A token revoked
// since it was authenticated is refused.
func (f *Fleet) Claim(id, tokenID string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.claimLocked(id, tokenID)
}

func (f *Fleet) claimLocked(id, tokenID string) error {
	if _, ok := f.revoked[tokenID]; ok {
		return contract.Errorf(contract.CodeUnauthenticated, "the join token was revoked").With("workerId", id)
	}
	w, known := f.workers[id]
	if known && w.owner == tokenID {
		// Its own token. (Workers that shared one token before a token
		// was one worker's keep joining with it; no new id does.)
		return nil
	}
	if known && w.owner != "" {
		return contract.Errorf(contract.CodeForbidden,
			"worker %s joined with another join token; revoke that token, or run simlock worker remove %s on the gateway, to let this one take the id", id, id).
			With("workerId", id)
	}
	for other, ow := range f.workers {
		if other != id && ow.owner == tokenID {
			return contract.Errorf(contract.CodeForbidden,
				"this join token already joined worker %s, and a join token is one worker's: make one for this worker (simlock token create --role worker on the gateway), or run simlock worker remove %s there to move the token",
				other, other).With("workerId", id)
		}
	}
	if !known && len(f.workers) >= f.opts.MaxWorkers {
		return contract.Errorf(contract.CodeTooManyWorkers,
			"this gateway knows %d workers, its gateway.maxWorkers: remove one it no longer needs (simlock worker remove <id>), or raise the limit", len(f.workers)).
			With("maxWorkers", f.opts.MaxWorkers)
	}
	return nil
}

// Attach serves one worker's uplink until it ends. A second uplink with
// the same worker id (and its token) replaces the first.
func (f *Fleet) Attach(ctx context.Context, a Attachment) {
	l := &link{conn: a.Conn}
	f.mu.Lock()
	if f.closed {
		f.mu.Unlock()
		a.Conn.Close()
		return
	}
	if f.claimLocked(a.ID, a.TokenID) != nil {
		// Claimed by another token between the HTTP check and here.
		f.mu.Unlock()
		a.Conn.Close()
		return
	}
	w, ok := f.workers[a.ID]
	if !ok {
		w = &worker{view: contract.WorkerView{ID: a.ID}}
		f.workers[a.ID] = w
	}
	if w.owner == "" {
		// The id is the token's, and the token the id's, from the
		// uplink on: a second id dialing with it at the same time is
		// refused by claimLocked.
		w.owner = a.TokenID
	}
	var old *link
	if w.link != nil {
		old = w.link
		old.reason = "replaced by a new uplink from the same worker"
	}
	w.gen++
	gen := w.gen
	w.statusSeq, w.read, w.folds, w.reading = 0, statusRead{}, nil, false // a new link's worker may have a new event log
	w.link, w.tokenID = l, a.TokenID
	w.view.Label = a.Label
	f.reindex(w)
	f.mu.Unlock()
	if old != nil {
		old.conn.Close()
	}
	reason := f.serve(ctx, a, w, gen)
	a.Conn.Close()
	f.mu.Lock()
	if l.reason != "" {
		reason = l.reason
	}
	current := w.gen == gen
	wasConnected := w.view.Connection == contract.WorkerConnected
	if current {
		w.link = nil
		w.wakeTold()
		if w.view.Connection != contract.WorkerIncompatible {
			w.view.Connection = contract.WorkerDisconnected
		}
		if l.revoked {
			w.view = dropped(w.view)
		}
		w.view.Reason, w.view.ReasonCode = reason, reasonCode(reason)
		w.viewGen++
		f.reindex(w)
	}
	label := w.view.Label
	f.mu.Unlock()
	if current && wasConnected {
		f.emit(contract.EvWorkerDisconnected, map[string]any{"workerId": a.ID, "label": label, "reason": reason})
		f.notify(a.ID, statusRead{}, false)
	}
}

// dropped is a view with what the worker reported forgotten: its devices,
// leases, requests, installs, catalog, capacity and host. What is left is
// its line: id, label, connection, drain, when it was last seen, and the
// findings against it.
func dropped(v contract.WorkerView) contract.WorkerView {
	return contract.WorkerView{ID: v.ID, Label: v.Label, Connection: v.Connection, Drained: v.Drained, Reason: v.Reason, ReasonCode: v.ReasonCode,
		LastSeenAt: v.LastSeenAt, Version: v.Version, Findings: v.Findings}
}

// Maintain forgets the workers disconnected past their retention, every
// PruneEvery, until ctx ends: also while no worker connects or
// disconnects.
func (f *Fleet) Maintain(ctx context.Context) {
	t := time.NewTicker(f.opts.PruneEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			pctx, cancel := context.WithTimeout(ctx, time.Minute)
			f.Prune(pctx, now)
			cancel()
		}
	}
}
