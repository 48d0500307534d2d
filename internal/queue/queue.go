package queue

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/simlock/simlock/internal/contract"
)

// Need is what a waiter needs placed, as its Placer understands it (a
// resolved device spec on a worker). The queue keeps it and hands it back;
// it reads only the platform, whose line the waiter joins.
type Need interface {
	Platform() contract.Platform
}

// Keyed is a Need that names its class of need: two waiters whose needs
// have equal keys ask for the same thing (what serves one serves the
// other). Only a Keyed need can wait with [ScopeNeed]; the key must not
// change while the waiter is in line.
type Keyed interface {
	Need
	NeedKey() string
}

// Scope is how far a waiter's wait reaches.
type Scope uint8

// The scopes of a block.
const (
	// ScopeNone: the waiter does not wait.
	ScopeNone Scope = iota
	// ScopePlatform: later waiters of the same platform wait too.
	ScopePlatform
	// ScopeAll: every later waiter waits too (a machine-wide limit).
	ScopeAll
	// ScopeNeed: later waiters of the same platform whose need has an
	// equal key (Keyed) wait too; the others are placed past it. A need
	// that is not Keyed blocks its platform instead.
	ScopeNeed
)

// Block is what a waiter's wait imposes on the waiters behind it.
type Block struct {
	Scope Scope
	// Stage, when set, is what the waiter is told instead of its place in
	// line: a reclaiming stage with an ETA when a device that fits it is
	// being cleaned, or a queued stage whose Wait says what it waits for
	// (the queue fills in its place).
	Stage *contract.LeaseProgress
}

// The plain blocks.
var (
	NoBlock       = Block{}
	BlockPlatform = Block{Scope: ScopePlatform}
	BlockAll      = Block{Scope: ScopeAll}
	BlockNeed     = Block{Scope: ScopeNeed}
)

// Start is a placement's slow part: what the waiter is told once the
// placement is committed, the device being readied for it, and the work,
// run outside the lock as tracked work (Options.Go).
type Start struct {
	Progress contract.LeaseProgress
	// Quiet keeps Progress from the requesters (it is only what a read of
	// the request shows): Run's work tells the first step itself, as a
	// gateway's worker does, so the requester hears what it would have
	// heard from the worker directly.
	Quiet  bool
	Target *contract.DeviceSpec
	// DeviceID names the device being readied, when the placer knows it
	// (the waiting lists show it).
	DeviceID string
	Run      func()
	// Early starts Run as the placement is decided, while its decision
	// commits, rather than after: for a Start whose first step is slow
	// and tells nobody anything (a gateway's forward to a worker), so the
	// commit and that step overlap. Run must tell nothing before it ends
	// the waiter, and it ends the waiter only through a decision of its
	// own, which comes after this one has committed (the decision lock is
	// held until then); if this commit fails, that decision is refused and
	// whatever Run made elsewhere is the owner's to find and undo.
	Early bool
	// Carry, with Early and Quiet, lets the decision that made the request
	// and placed it at once leave its commit to the next decision (most
	// often Run's own, which ends the waiter): one commit, not two, for a
	// request served at once. It is taken only when that decision wrote
	// nothing but the new request and tells nobody anything, and only for
	// a request whose caller waits for its answer (not one made as a
	// resource, whose creation is answered at once). Until then the
	// request is not shown to anyone: a status read of it commits it
	// first, lists leave it out, a requester's second request or a repeat
	// of its idempotency key is decided in a decision (which commits it),
	// and a step of progress has a decision of its own commit it and is
	// told then (a Start that pushes progress may run for minutes). A daemon that
	// stops before that commit never recorded the request, as when the
	// commit fails (see Early).
	Carry bool
}

// Placer decides what serves a waiter (see the package doc for its
// consistency model).
type Placer interface {
	// Admit runs in the decision that would put w in line, before it
	// joins: a non-nil error settles w instead, with reason as the
	// lease.rejected reason (a runtime being removed, say).
	Admit(w *Waiter) (cerr *contract.Error, reason contract.RejectReason)
	// Place runs in the decision step, in arrival order; it reserves in tx
	// what w needs and either grants w at once (Txn.Grant), or returns the
	// slow Start, or returns the block w's wait imposes on later waiters.
	Place(tx *Txn, w *Waiter) (Start, Block)
}

// Writes is the durable part of one decision that the queue made; the
// owner's Store adds its own rows (devices, leases) and writes it all in
// one transaction.
type Writes struct {
	Requests []contract.LeaseRequestRecord
	// Events have no seq yet; Commit returns them with the seqs assigned.
	Events []contract.Event
}

// Store makes decisions durable and reads settled requests back.
type Store interface {
	// Commit writes one decision atomically and returns its events with
	// their seqs. If it fails, nothing of it was written.
	Commit(ctx context.Context, w Writes) ([]contract.Event, error)
	// RequestByKey finds a stored request by requester and idempotency key.
	RequestByKey(ctx context.Context, requesterID, key string) (contract.LeaseRequestRecord, bool, error)
	// Request finds a stored request by id.
	Request(ctx context.Context, id string) (contract.LeaseRequestRecord, bool, error)
}

// Reserver is a Store that can take its write lock before a decision is
// made (see store.Reserver): Do and Try then change nothing until the lock
// is held, so a store locked by another process delays or refuses a
// decision, and never fails one already made in memory.
type Reserver interface {
	Reserve(ctx context.Context) (Reservation, error)
}

// Reservation is the store's write lock held for one decision: Commit
// writes the decision under it and gives it back; Release gives it back
// unused. Either may be called more than once; only the first counts.
type Reservation interface {
	Commit(ctx context.Context, w Writes) ([]contract.Event, error)
	Release()
}

// Options configure a Queue. Store, Placer and LeaseOf are required.
type Options struct {
	Store  Store
	Placer Placer
	// LeaseOf names the active lease a requester holds, if any, and its
	// owner; one lease or one open request per requester.
	LeaseOf func(requester string) (leaseID, ownerID string, ok bool)
	// LeaseHeld reports whether an active lease of owner has the chosen
	// id; a request of that owner that chooses it is LEASE_ID_TAKEN. A
	// chosen id is unique only within its owner. Nil means none ever is.
	LeaseHeld func(owner, leaseID string) bool
	// Gate, when set, refuses new requests before anything is stored (a
	// nuke in progress).
	Gate func() *contract.Error
	// Seal adds the facts a decision implies (capacity.changed) just
	// before it commits.
	Seal func(tx *Txn)
	// Publish receives committed events in order. It must not block.
	Publish func(...contract.Event)
	// Refused, when set, is what a commit failure is answered as instead
	// of INTERNAL, when it returns non-nil: a store that refused the
	// commit on purpose (a gateway replica deposed under the decision)
	// says so to the waiters.
	Refused func(error) *contract.Error
	// Fatal is told, once, that a commit failed and the queue stopped
	// deciding; the owner should stop (the next start converges from the
	// database). It is called in a goroutine of its own.
	Fatal func(error)
	// Go runs a Start and a parked request's continuation as work the
	// owner tracks; nil runs them in plain goroutines.
	Go     func(func())
	Logger *slog.Logger
	// CommitTimeout bounds one commit; 30 s when 0.
	CommitTimeout time.Duration
	// ReserveTimeout bounds one wait for a Reserver's write lock: a
	// caller's decision (Try) waits once, then fails; a decision that
	// must happen (Do) tries again until it is had. 10 s when 0.
	ReserveTimeout time.Duration
}

// Queue is the request book and the fair line. Make one with New.
type Queue struct {
	opts Options
	log  *slog.Logger

	mu sync.Mutex
	// mu is the decision lock: it guards the fields below, and the owner's
	// state too (the owner reads and writes it only in Do and View).
	open        map[string]*Waiter    // open requests by id
	byRequester map[string]*Waiter    // open request of each requester
	byKey       map[reqKey]*Waiter    // open requests with an idempotency key
	byChosen    map[chosenKey]*Waiter // open requests that chose their lease's id
	all         list                  // open requests in arrival order
	line        list                  // waiters in line, all platforms, in arrival order
	lines       []*platformLine       // one line per platform, in first-seen order
	needs       []*needLine           // one line per class of need waiting
	seq         uint64                // last arrival number handed out
	revs        uint64                // last revision handed out
	lastDepth   int
	stopping    bool
	broken      error
	tx          *Txn   // the decision in progress, nil between decisions
	decisions   uint64 // decisions begun: the number of the last (Txn.n)

	// eventSeq is the highest seq of the events the queue's decisions
	// committed (0 before the first): what a read under the decision lock
	// shows is every decision up to it, and none after (SeqLocked).
	eventSeq int64

	// carried is a decision that placed a request at once and told
	// nobody anything (Start.Carry): its request record and events are
	// committed by the next decision, before anything that one tells.
	carried *carry

	// placesDue is the walk that tells a long line's places, when one is
	// due (placesLaterLocked).
	placesDue *time.Timer

	// closed is closed by Close: a decision still waiting for the store's
	// write lock then gives up.
	closed    chan struct{}
	closeOnce sync.Once
}

type reqKey struct{ requester, key string }

// chosenKey is a chosen lease id within its owner, the scope it is unique
// in.
type chosenKey struct{ owner, id string }

// platformLine is one platform's waiters in line, in arrival order.
type platformLine struct {
	platform contract.Platform
	list
	// ahead counts, during a walk of the line (placesLocked), the waiters
	// so far whose wait holds the platform.
	ahead int
}

// New makes a queue.
func New(opts Options) *Queue {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Publish == nil {
		opts.Publish = func(...contract.Event) {}
	}
	if opts.Refused == nil {
		opts.Refused = func(error) *contract.Error { return nil }
	}
	if opts.Fatal == nil {
		opts.Fatal = func(error) {}
	}
	if opts.Go == nil {
		opts.Go = func(f func()) { go f() }
	}
	if opts.CommitTimeout <= 0 {
		opts.CommitTimeout = 30 * time.Second
	}
	if opts.ReserveTimeout <= 0 {
		opts.ReserveTimeout = 10 * time.Second
	}
	return &Queue{
		// Revisions start from the wall clock, in µs: a request a queue
		// took over (Restore) is followed by the revisions its readers
		// last saw on the previous queue (an event stream's Last-Event-ID),
		// and a revision of this queue must never equal one of those, or a
		// reader would be told nothing changed. A queue bumps far less
		// often than once a µs, so it never runs ahead of its successor's
		// start.
		revs: uint64(max(time.Now().UnixMicro(), 0)),
		opts: opts, log: opts.Logger, closed: make(chan struct{}),
		open: map[string]*Waiter{}, byRequester: map[string]*Waiter{}, byKey: map[reqKey]*Waiter{}, byChosen: map[chosenKey]*Waiter{},
		all: list{at: allLinks}, line: list{at: lineLinks},
	}
}

// Do runs one decision that must happen (a timer that fired, driver work
// that finished): f changes state through tx, the queue serves the line
// if f kicked it, everything tx holds is committed in one transaction, and
// only then is anyone told. f's error is returned after its writes commit,
// so a decision that refuses should refuse before it writes. With a
// Reserver store, the store's write lock is taken first, outside the
// decision lock, and waited for as long as it takes: tried again, each
// wait bounded by ReserveTimeout, until it is had or the queue is closed
// (then f does not run, and Do returns DAEMON_STOPPING). A failed commit
// is fatal (see the package doc) and returns INTERNAL.
func (q *Queue) Do(f func(tx *Txn) error) error {
	res, err := q.reserveUntilHad()
	if err != nil {
		return err
	}
	return q.decide(res, f)
}

// Try is Do for a decision a caller waits on (a renewal, a release, a new
// request): it waits for a Reserver store's write lock once, at most
// ReserveTimeout, and when it is not had then (another process holds the
// database), nothing is decided and it returns INTERNAL saying so, to this
// caller only: the queue goes on deciding.
func (q *Queue) Try(f func(tx *Txn) error) error {
	res, err := q.reserve()
	if err != nil {
		q.log.Warn("a decision was refused: the store's write lock could not be had", "err", err)
		return contract.Errorf(contract.CodeInternal, "nothing was changed: %v; try again", err)
	}
	return q.decide(res, f)
}

// reserve takes a Reserver store's write lock, waiting at most
// ReserveTimeout; with another store it has nothing to take (nil).
func (q *Queue) reserve() (Reservation, error) {
	r, ok := q.opts.Store.(Reserver)
	if !ok {
		return nil, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), q.opts.ReserveTimeout)
	defer cancel()
	return r.Reserve(ctx)
}

// reserveUntilHad is reserve tried again, with a growing pause, until the
// lock is had or the queue is closed.
func (q *Queue) reserveUntilHad() (Reservation, error) {
	pause := 100 * time.Millisecond
	for {
		res, err := q.reserve()
		if err == nil {
			return res, nil
		}
		q.log.Warn("a decision waits: the store's write lock could not be had", "err", err, "retryIn", pause)
		t := time.NewTimer(pause)
		select {
		case <-q.closed:
			t.Stop()
			return nil, contract.Errorf(contract.CodeDaemonStopping, "the daemon stopped")
		case <-t.C:
		}
		pause = min(2*pause, 2*time.Second)
	}
}

// decide runs f as one decision under the decision lock, committing it
// under res when there is one.
func (q *Queue) decide(res Reservation, f func(tx *Txn) error) error {
	if res != nil {
		defer res.Release() // a decision that panicked, or a broken queue
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.broken != nil {
		return q.brokenError()
	}
	tx := q.beginLocked()
	tx.res = res
	ferr := f(tx)
	if err := q.finishLocked(tx); err != nil {
		return err
	}
	return ferr
}

// View runs f under the decision lock, for reads of state that decisions
// change. f must not decide anything.
func (q *Queue) View(f func()) {
	q.mu.Lock()
	defer q.mu.Unlock()
	f()
}

// SeqLocked is the highest event seq the queue's decisions committed so far
// (0 before the first): state read under the decision lock (View) shows
// each decision whose events are at or below it, and none above, since
// every decision commits its events under that lock. The decision lock
// must be held.
func (q *Queue) SeqLocked() int64 { return q.eventSeq }

// Err is the commit failure that stopped the queue, or nil.
func (q *Queue) Err() error {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.broken
}

func (q *Queue) brokenError() *contract.Error {
	if cerr := q.opts.Refused(q.broken); cerr != nil {
		return cerr
	}
	return contract.Errorf(contract.CodeInternal, "simlock stopped deciding after it could not save its state (%v); it restarts from what was saved", q.broken)
}

func (q *Queue) beginLocked() *Txn {
	q.decisions++
	tx := &Txn{q: q, n: q.decisions}
	q.tx = tx
	if c := q.carried; c != nil {
		// The carried decision's writes come first, as though it had
		// committed just before this one.
		q.carried = nil
		tx.events = c.events
		tx.write(c.w)
		tx.carried = c
	}
	return tx
}

// carry is a decision's writes left to the next decision (Start.Carry).
type carry struct {
	w      *Waiter
	events []contract.Event
	// told is set when a step of progress came for w before its record
	// committed: it is told once it has.
	told bool
}

// carryLocked leaves tx's writes to the next decision when tx made one
// request, placed it at once with a Start that carries, and has nothing
// else to write or tell. It reports whether it did.
func (q *Queue) carryLocked(tx *Txn) bool {
	w := tx.carry
	if w == nil || tx.carried != nil || q.carried != nil || w.phase != phaseStarting || !q.isOpen(w) ||
		len(tx.written) != 1 || tx.written[0] != w || len(tx.stale) > 0 || len(tx.settled) > 0 ||
		len(tx.tells) > 0 || len(tx.hinted) > 0 || tx.rescoped || len(tx.touched) != 1 ||
		len(tx.moved) != 1 || tx.moved[0] != w || q.opts.Seal != nil {
		return false
	}
	q.carried = &carry{w: w, events: tx.events}
	w.unsaved = true
	return true
}

// finishLocked serves the line if the decision kicked it, seals, commits and
// then tells.
func (q *Queue) finishLocked(tx *Txn) error {
	defer func() {
		q.tx = nil
		tx.done()
	}()
	if tx.kick {
		q.serveLocked(tx)
	}
	depth := q.line.n
	if depth != q.lastDepth {
		tx.Event(contract.EvQueueChanged, map[string]any{"depth": depth})
	}
	if q.carryLocked(tx) {
		// Nothing to commit or tell now: the next decision commits it.
		q.lastDepth = depth
		return nil
	}
	if q.opts.Seal != nil {
		q.opts.Seal(tx)
	}
	w := Writes{Events: tx.events}
	w.Requests = append(w.Requests, tx.stale...)
	for _, wt := range tx.written {
		w.Requests = append(w.Requests, wt.rec)
	}
	ctx, cancel := context.WithTimeout(context.Background(), q.opts.CommitTimeout)
	var evs []contract.Event
	var err error
	if tx.res != nil {
		evs, err = tx.res.Commit(ctx, w)
	} else {
		evs, err = q.opts.Store.Commit(ctx, w)
	}
	cancel()
	if err != nil {
		q.failLocked(tx, err)
		return q.brokenError()
	}
	q.lastDepth = depth
	for _, ev := range evs {
		q.eventSeq = max(q.eventSeq, ev.Seq)
	}
	if len(evs) > 0 {
		q.opts.Publish(evs...)
	}
	if c := tx.carried; c != nil {
		c.w.unsaved = false
		if c.told && q.isOpen(c.w) && c.w.last.Stage != "" {
			c.w.push(c.w.last)
		}
	}
	for _, f := range tx.tells {
		f()
	}
	q.reportPositionsLocked(tx)
	for _, wt := range tx.touched {
		wt.bump(q)
	}
	return nil
}

// failLocked stops the queue after a commit failed: nothing of the failed
// decision is told; every waiter, those the decision settled included,
// hears INTERNAL (or what Options.Refused makes of the failure); their stored records stay as they were, and the next start
// takes up the open ones.
func (q *Queue) failLocked(tx *Txn, err error) {
	q.broken = err
	q.log.Error("commit failed; the queue stops deciding", "err", err)
	cerr := q.brokenError()
	for _, w := range tx.settled {
		w.answer(cerr)
	}
	for _, w := range q.open {
		w.answer(cerr)
	}
	q.open, q.byRequester, q.byKey, q.byChosen = map[string]*Waiter{}, map[string]*Waiter{}, map[reqKey]*Waiter{}, map[chosenKey]*Waiter{}
	go q.opts.Fatal(err)
}

// Stop stops taking requests and answers every waiter still in line with
// DAEMON_STOPPING. Their records stay open: the next start settles them as
// daemon-restarted. Requests being started or downloading finish as their
// work ends (or hear DAEMON_STOPPING at Close).
func (q *Queue) Stop() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.stopping = true
	cerr := contract.Errorf(contract.CodeDaemonStopping, "the daemon is stopping")
	for w := q.line.head; w != nil; {
		next := w.line.next
		q.forgetLocked(w)
		w.answer(cerr)
		w = next
	}
}

// Close answers every open request with DAEMON_STOPPING without settling
// it, as after a crash; a decision still waiting for the store's write
// lock gives up.
func (q *Queue) Close() {
	q.closeOnce.Do(func() { close(q.closed) })
	q.mu.Lock()
	defer q.mu.Unlock()
	q.stopping = true
	if q.placesDue != nil {
		q.placesDue.Stop()
		q.placesDue = nil
	}
	cerr := contract.Errorf(contract.CodeDaemonStopping, "the daemon stopped")
	for w := q.all.head; w != nil; {
		next := w.all.next
		q.forgetLocked(w)
		w.answer(cerr)
		w = next
	}
}

// Stopping reports whether Stop or Close was called.
func (q *Queue) Stopping() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.stopping
}

// lineOf is p's line, made on first use.
func (q *Queue) lineOf(p contract.Platform) *platformLine {
	for _, l := range q.lines {
		if l.platform == p {
			return l
		}
	}
	l := &platformLine{platform: p, list: list{at: platLinks}}
	q.lines = append(q.lines, l)
	return l
}

// serveLocked places waiters in arrival order, taking each time the
// earliest waiter, among the platforms no waiter has blocked in this pass,
// whose class of need no earlier waiter has blocked (ScopeNeed). Each
// class of need has its own line (needLine), so a pass never walks the
// waiters a block holds: it costs the waiters placed plus one Place per
// blocked class, times the number of classes waiting.
func (q *Queue) serveLocked(tx *Txn) {
	tx.kick = false
	if q.stopping || q.line.n == 0 {
		return
	}
	var platforms []contract.Platform // blocked in this pass
	var needs map[*needLine]bool      // blocked in this pass
	for {
		var w *Waiter
		var wl *needLine
		for _, nl := range q.needs {
			if h := nl.head; h != nil && (w == nil || h.seq < w.seq) && !needs[nl] && !slices.Contains(platforms, nl.platform) {
				w, wl = h, nl
			}
		}
		if w == nil {
			return
		}
		start, block := q.opts.Placer.Place(tx, w)
		if w.phase != phaseInLine {
			continue // granted or settled by the placer
		}
		if start.Run != nil {
			tx.started(w, start)
			continue
		}
		if block.Scope == ScopeNone {
			// A placer that neither placed nor blocked: treat it as a
			// wait, or the pass would ask again for ever.
			q.log.Error("placer neither placed nor blocked a waiter", "requestId", w.rec.ID)
			block.Scope = ScopePlatform
		}
		if _, keyed := w.need.(Keyed); block.Scope == ScopeNeed && !keyed {
			block.Scope = ScopePlatform
		}
		tx.hint(w, block.Stage)
		if w.scope != block.Scope {
			w.scope, tx.rescoped = block.Scope, true
		}
		switch block.Scope {
		case ScopeAll:
			return
		case ScopeNeed:
			if needs == nil {
				needs = map[*needLine]bool{}
			}
			needs[wl] = true
		default:
			platforms = append(platforms, w.platform)
		}
	}
}

// needLine is one class of need's waiters in line, in arrival order: the
// waiters of a platform whose needs are Keyed with one key, or those that
// are not Keyed (key "").
type needLine struct {
	platform contract.Platform
	key      string
	list
	// ahead counts, during a walk of the line (placesLocked), the waiters
	// so far that hold only their class of need.
	ahead int
}

// needKeyOf is w's class of need within its platform ("" unless Keyed).
func needKeyOf(n Need) string {
	if k, ok := n.(Keyed); ok {
		return k.NeedKey()
	}
	return ""
}

// needLineOf is the line of w's class of need, made on first use.
func (q *Queue) needLineOf(w *Waiter) *needLine {
	for _, l := range q.needs {
		if l.platform == w.platform && l.key == w.key {
			return l
		}
	}
	l := &needLine{platform: w.platform, key: w.key, list: list{at: needLinks}}
	q.needs = append(q.needs, l)
	return l
}

// forgetLocked removes an open request from every index and line.
func (q *Queue) forgetLocked(w *Waiter) {
	if w.phase == phaseInLine {
		q.leaveLineLocked(w)
		if q.tx != nil {
			q.tx.kick = true // a waiter that blocked others is gone
		}
	}
	if w.timer != nil {
		w.timer.Stop()
	}
	if q.open[w.rec.ID] == w {
		delete(q.open, w.rec.ID)
		q.all.remove(w)
	}
	if q.byRequester[w.rec.RequesterID] == w {
		delete(q.byRequester, w.rec.RequesterID)
	}
	if k := w.rec.IdempotencyKey; k != "" && q.byKey[reqKey{w.rec.RequesterID, k}] == w {
		delete(q.byKey, reqKey{w.rec.RequesterID, k})
	}
	if id := w.rec.ChosenLeaseID; id != "" && q.byChosen[chosenKey{w.rec.OwnerID, id}] == w {
		delete(q.byChosen, chosenKey{w.rec.OwnerID, id})
	}
}

func (q *Queue) leaveLineLocked(w *Waiter) {
	if q.tx != nil && w.line.next != nil {
		q.tx.moved = append(q.tx.moved, w.line.next)
	}
	q.line.remove(w)
	w.pl.remove(w)
	nl := w.nl
	nl.remove(w)
	w.pl, w.nl = nil, nil
	if nl.n == 0 {
		// Forgotten when empty: requests may name many classes of need
		// over a daemon's life.
		q.needs = slices.DeleteFunc(q.needs, func(l *needLine) bool { return l == nl })
	}
	w.phase = phaseOut
}

func (q *Queue) nextRev() uint64 {
	q.revs++
	return q.revs
}

func marshal(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("marshal %T: %v", v, err))
	}
	return b
}
