// Package leasing is simlock's lease engine on a worker: the local Placer
// behind the fair queue (internal/queue). It owns the machine's devices and
// leases: it places waiters on devices (grant an idle one, boot, create,
// make room), renews, releases and expires leases, and drives the drivers
// to create, boot, clean, shut down and delete devices; health, the warm
// pool, the idle tiers, quarantine retries and nuke are here too.
//
// One Engine owns every device and lease of a daemon. Every decision runs
// in the queue's decision step (queue.Do), under its one lock, and commits
// to the store in one transaction before anyone is told anything; a failed
// commit stops the engine (Options.Fatal), and the next start converges
// from the database. Driver work runs outside the lock in goroutines the
// engine tracks, so a slow simulator never blocks other requesters.
//
// # Placement consistency model
//
// The local Placer's view is exact: it is the only writer of the devices
// it places on, every reservation (a claim, a new device row) is made in
// the decision that places, under the lock, and capacity is counted from
// those same records by counters kept in step with every change (see
// registry). What it cannot see is the platform itself: a device that
// crashed or vanished since the last look is found by health probes,
// startup convergence and the doctor, and a Start whose driver call fails
// settles its request (or, when the room it was to make could not be made,
// puts it back in line). A decision costs the same whatever the number of
// devices and leases: lookups go through indexes, never over every row.
//
// # Its surface
//
// The Engine's exported methods are the lease port the daemon serves (the
// request operations, answered through the queue's front desk,
// queue.Desk, as a gateway's are; resolve, renew, release, get, watch),
// its lifecycle, and its reads (status, lists, the catalog). The queue
// alone reaches its placement, through an unexported placer; maintenance
// (the doctor's finds and fixes, quarantine retries, cleanup, the warm
// pool's status, runtimes the installer may remove, clock jumps, nuke) is
// on Maintenance.
//
// All exported methods are safe for concurrent use.
package leasing

import (
	"container/list"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/simlock/simlock/internal/components"
	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/core"
	"github.com/simlock/simlock/internal/driver"
	"github.com/simlock/simlock/internal/queue"
	"github.com/simlock/simlock/internal/store"
)

// Store is the persistence the engine needs.
type Store interface {
	// Commit writes one decision atomically and returns its events with
	// their seqs.
	Commit(ctx context.Context, c store.Change) ([]contract.Event, error)
	// Load reads the registry at startup.
	Load(ctx context.Context) (store.Snapshot, error)
	// RequestByKey finds a stored request by its requester and idempotency key.
	RequestByKey(ctx context.Context, requesterID, key string) (contract.LeaseRequestRecord, bool, error)
	// Request finds a stored request by id.
	Request(ctx context.Context, id string) (contract.LeaseRequestRecord, bool, error)
}

// Options configure an Engine. Store and Limits are required.
type Options struct {
	Store   Store
	Drivers map[contract.Platform]driver.Driver
	// DriverNotes say, per platform without a driver, why (its
	// detection's error, or that it is not enabled): NO_DRIVER carries it.
	DriverNotes map[contract.Platform]string
	Limits      core.Limits
	// ClassDefaults are configured model preferences per platform and
	// class, tried before each driver's own.
	ClassDefaults map[contract.Platform]map[contract.DeviceClass][]string
	// DefaultTTL is lease.defaultTtlMs, and MaxTTL and MinTTL
	// (lease.maxTtlMs, lease.minTtlMs; 0 sets no minimum) bound lease
	// lifetimes: the configuration's, with no default here.
	DefaultTTL, MaxTTL, MinTTL time.Duration
	Logger                     *slog.Logger
	// Publish receives committed events in order. It must not block.
	Publish func(...contract.Event)
	// LeaseEnded is told whenever a lease ends, with the reason, so the
	// sessions holding it can be told at once. It must not block.
	LeaseEnded func(lease contract.LeaseRecord, reason string)
	// Installer downloads missing runtimes for requests that allow it; nil
	// means no request downloads.
	Installer *components.Installer
	// DownloadPolicy is downloads.policy: never, on-request (the request's
	// allowDownload) or always.
	DownloadPolicy string
	// Quarantine is how quarantined devices are retried.
	Quarantine QuarantinePolicy
	// Stall is when a transition counts as stalled (see StallPolicy).
	Stall StallPolicy
	// Bind is how leases bound to a process are watched (see BindPolicy).
	Bind BindPolicy
	// Health is how leased devices are watched (off unless Enabled).
	Health HealthPolicy
	// Idle is the idle tiers (off unless Enabled; Cleanup runs them on
	// demand either way).
	Idle IdlePolicy
	// WarmPool is what stays booted; nil keeps devices as the queue and
	// the idle tiers leave them.
	WarmPool *WarmPoolPolicy
	// DeviceHealth tells the sessions holding a lease that its device
	// crashed (NoticeUnhealthy) or was booted again (NoticeRecovered, with
	// the attempts it took). It must not block.
	DeviceHealth func(lease contract.LeaseRecord, notice string, attempts int)
	// LeaseEndParticipants are called for every lease that ends, after the
	// end is committed and before the device's clean, which waits for them
	// (see LeaseEndParticipant). None by default: the clean starts at once.
	LeaseEndParticipants []LeaseEndParticipant
	// EndWait is lease.endWaitMs: how long the clean of an ended lease's
	// device waits for its participants at most; 10 minutes when 0.
	EndWait time.Duration
	// FreshIdentity names the platforms whose devices serve one lease
	// each (lease.identity.<platform> fresh): a lease end deletes the
	// device instead of wiping it, so no two leases see one identity.
	FreshIdentity map[contract.Platform]bool
	// DefaultMode is the mode a request naming none gets, per platform
	// (ios.defaultMode); full where unset.
	DefaultMode map[contract.Platform]contract.DeviceMode
	// Fatal is told, once, that a commit failed: the engine decides
	// nothing more, and its owner should stop (the next start converges
	// from the database). It is called in a goroutine of its own.
	Fatal func(error)
	// Wall is the wall clock: the times the engine stores and shows, and
	// the stored deadlines it compares with them. Nil means time.Now.
	// What a running lease's expiry waits on is the monotonic clock,
	// whatever Wall says (see ClockJumped).
	Wall func() time.Time
	// StartClockSkew is how far the wall clock jumped beyond real time
	// since the last run, when that is known and a jump (wallclock.Skew):
	// Start moves the stored deadlines and times by it before it decides
	// anything, so a jump forward expires nothing early and a jump back
	// keeps nothing late, and records clock.jumped. Zero for none.
	StartClockSkew time.Duration
	// StartClock, when set, is the clock reading Start stores with its
	// first decision: the one the stored times are in step with from then
	// on.
	StartClock *store.Clock
}

// Caller is who calls an operation.
type Caller = queue.Caller

// Engine is the lease engine. Make one with New, then Start it.
type Engine struct {
	opts Options
	log  *slog.Logger
	// q is the request book and the line; its decision lock guards every
	// field below it but desk.
	q *queue.Queue
	// desk is the front desk over q (TTL bounds, the request operations).
	desk *queue.Desk

	// ctx bounds driver work; cancel ends it at Close.
	ctx    context.Context
	cancel context.CancelFunc
	// work tracks background driver work (starts and reclaims).
	work sync.WaitGroup

	reg         *registry
	leases      map[string]*lease // active only, by unique key
	byRequester map[string]*lease
	// chosen files the active leases whose id was chosen, by that id and
	// their owner: a chosen id is unique only within its owner.
	chosen map[string]map[string]*lease
	// bound are the active leases bound to a process (lease.bind).
	bound      map[string]*lease
	leaseOrder list.List // of *lease, in (grantedAt, id) order
	due        [contract.NumPlatforms]dueHeap
	pending    pendingWrites
	removing   map[string]bool         // runtimes being removed ("ios/26.4")
	health     map[string]*healthState // leased devices the monitor tracks
	warm       warmState
	noReclaim  map[string]bool // devices whose lease ends at startup without a clean
	timers     map[string]*time.Timer
	catalogs   map[contract.Platform]driver.Catalog
	// slimRefused are the runtimes ("ios/17.5") a slim request was served
	// full on since the start, because they cannot be slimmed: doctor's
	// slim-runtime-unsupported advisory.
	slimRefused map[string]bool
	// sealed is the capacity last reported by capacity.changed.
	sealed   capacityKey
	hasCap   bool
	started  bool
	stopping bool
	// ends tracks lease-end participant calls, reclaims and nukes in
	// flight.
	ends endState
}

// lease is an active lease.
type lease struct {
	store.Lease
	// expiry is when the lease expires on the monotonic clock: set from
	// its deadline when the deadline is set (grant, renewal, start, a
	// clock jump moving it), so a wall clock that jumps later moves
	// neither it nor its timer. armed counts the timers armed for it: a
	// timer that fires for an older count does nothing.
	expiry time.Time
	armed  uint64
	timer  *time.Timer
	at     *list.Element
	// plat is its device's platform (an index in contract.Platforms) and
	// due its place in that platform's dueHeap, -1 when in none.
	plat, due int
	// view is the lease record encoded, kept until the lease changes.
	view []byte
}

// viewJSON is the lease record as JSON.
func (l *lease) viewJSON() []byte {
	if l.view == nil {
		l.view = l.LeaseRecord.AppendJSON(nil)
	}
	return l.view
}

// capacityKey is what capacity.changed reports, comparable by value.
type capacityKey struct {
	use  core.Usage
	warm core.PerPlatform
}

// New makes an engine. It does nothing until Start.
func New(opts Options) *Engine {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Publish == nil {
		opts.Publish = func(...contract.Event) {}
	}
	if opts.LeaseEnded == nil {
		opts.LeaseEnded = func(contract.LeaseRecord, string) {}
	}
	if opts.Fatal == nil {
		opts.Fatal = func(error) {}
	}
	opts.Quarantine = opts.Quarantine.withDefaults()
	opts.Stall = opts.Stall.withDefaults()
	if opts.Bind.Interval <= 0 {
		opts.Bind.Interval = time.Second
	}
	opts.Health = opts.Health.withDefaults()
	opts.Idle = opts.Idle.withDefaults()
	if opts.WarmPool != nil {
		wp := opts.WarmPool.withDefaults()
		opts.WarmPool = &wp
	}
	if opts.DeviceHealth == nil {
		opts.DeviceHealth = func(contract.LeaseRecord, string, int) {}
	}
	if opts.Wall == nil {
		opts.Wall = time.Now
	}
	ctx, cancel := context.WithCancel(context.Background())
	e := &Engine{
		opts: opts, log: opts.Logger, ctx: ctx, cancel: cancel,
		reg: newRegistry(opts.Limits), leases: map[string]*lease{}, byRequester: map[string]*lease{}, bound: map[string]*lease{},
		chosen:   map[string]map[string]*lease{},
		removing: map[string]bool{}, health: map[string]*healthState{}, noReclaim: map[string]bool{},
		warm:   newWarmState(),
		timers: map[string]*time.Timer{}, catalogs: map[contract.Platform]driver.Catalog{}, slimRefused: map[string]bool{},
	}
	e.leaseOrder.Init()
	e.q = queue.New(queue.Options{
		Store:   engineStore{e},
		Placer:  placer{e},
		LeaseOf: e.leaseOfLocked,
		LeaseHeld: func(owner, id string) bool {
			return e.chosen[id][owner] != nil
		},
		Gate:    e.gateLocked,
		Seal:    e.sealLocked,
		Publish: opts.Publish,
		Fatal:   opts.Fatal,
		Go:      e.goWork,
		Logger:  opts.Logger.With("module", "queue"),
	})
	e.desk = &queue.Desk{Q: e.q, DefaultTTL: opts.DefaultTTL, MinTTL: opts.MinTTL, MaxTTL: opts.MaxTTL, Resolve: e.resolveRequest}
	return e
}

// now is the wall clock, epoch milliseconds.
func (e *Engine) now() int64 { return e.opts.Wall().UnixMilli() }

// untilWall is how long until the wall time at (epoch ms), as a duration
// to wait for.
func (e *Engine) untilWall(at int64) time.Duration {
	return time.Duration(at-e.now()) * time.Millisecond
}

// monoAt is the wall time at (epoch ms) on the monotonic clock: the
// instant that many milliseconds from now.
func (e *Engine) monoAt(at int64) time.Time { return time.Now().Add(e.untilWall(at)) }

// wallAt is monoAt's inverse: the instant mono on the monotonic clock as
// wall time, epoch milliseconds.
func (e *Engine) wallAt(mono time.Time) int64 {
	return e.opts.Wall().Add(time.Until(mono)).UnixMilli()
}

// do runs one decision that must happen: driver work that finished, a
// timer that fired (see queue.Do: it waits for the store's write lock as
// long as it takes).
func (e *Engine) do(f func(tx *queue.Txn) error) error { return e.q.Do(f) }

// try runs one decision a caller waits on (see queue.Try): a store locked
// by another process past its bound fails the call with INTERNAL, having
// changed nothing.
func (e *Engine) try(f func(tx *queue.Txn) error) error { return e.q.Try(f) }

// view reads state under the decision lock.
func (e *Engine) view(f func()) { e.q.View(f) }

// Err is the commit failure that stopped the engine, or nil.
func (e *Engine) Err() error { return e.q.Err() }

// gateLocked refuses new requests while the engine is not open for them.
func (e *Engine) gateLocked() *contract.Error {
	if e.stopping || !e.started {
		return contract.Errorf(contract.CodeDaemonStopping, "the daemon is stopping")
	}
	return e.maintenanceFenceLocked()
}

func (e *Engine) leaseOfLocked(requester string) (string, string, bool) {
	if l, ok := e.byRequester[requester]; ok {
		return l.ID, l.OwnerID, true
	}
	return "", "", false
}

// sealLocked adds capacity.changed to a decision that changed what it
// reports; the counters are compared by value, never re-encoded.
func (e *Engine) sealLocked(tx *queue.Txn) {
	k := capacityKey{e.reg.use, e.reg.warm}
	if e.hasCap && k == e.sealed {
		return
	}
	e.sealed, e.hasCap = k, true
	tx.Event(contract.EvCapacityChanged, core.Report(e.opts.Limits, k.use, k.warm))
}

// Start loads the registry and converges it: requests left open by the last
// run fail as daemon-restarted, leases get their expiry timers back (a
// deadline that passed while the daemon was down expires now), devices left
// mid-creation are removed and devices left mid-clean are cleaned again.
func (e *Engine) Start(ctx context.Context) error {
	for p, d := range e.opts.Drivers {
		cat, err := e.listCatalog(ctx, d)
		if err != nil {
			e.log.Warn("catalog unreadable", "platform", p, "err", err)
			continue
		}
		e.catalogs[p] = cat
	}
	snap, err := e.opts.Store.Load(ctx)
	if err != nil {
		return fmt.Errorf("load registry: %w", err)
	}
	reality := e.readReality(ctx)
	err = e.do(func(tx *queue.Txn) error {
		for _, d := range snap.Devices {
			e.reg.add(d)
		}
		for _, l := range snap.Leases {
			e.addLeaseLocked(l)
		}
		if skew := e.opts.StartClockSkew; skew != 0 {
			// Before anything compares a stored time with the clock.
			e.shiftClockLocked(tx, skew, "start")
		}
		e.pending.clock = e.opts.StartClock
		for _, rec := range snap.Requests {
			tx.SettleStale(rec, contract.RejectDaemonRestarted)
		}
		e.convergeDevicesLocked(tx, reality)
		tx.Event(contract.EvDaemonStarted, map[string]any{"limits": e.opts.Limits})
		e.started = true
		return nil
	})
	if err != nil {
		return err
	}
	err = e.do(func(tx *queue.Txn) error {
		t := e.now()
		var expired []string
		for el := e.leaseOrder.Front(); el != nil; el = el.Next() {
			l := el.Value.(*lease)
			if l.TTLDeadline <= t {
				expired = append(expired, l.UniqueKey())
				continue
			}
			e.armLocked(tx, l)
		}
		sort.Strings(expired)
		for _, id := range expired {
			e.endLocked(tx, id, contract.EndExpired)
		}
		e.convergeLeasesLocked(tx, reality)
		e.reg.each(func(d *dev) bool {
			e.armStallLocked(tx, d)
			return true
		})
		return nil
	})
	if err != nil {
		return err
	}
	if e.opts.Health.Enabled {
		go e.watchHealth()
	}
	if e.opts.Idle.Enabled {
		go e.reapIdle()
	}
	if e.opts.Bind.Processes != nil {
		go e.watchBound()
	}
	if e.opts.WarmPool != nil {
		go e.runWarmPool()
	}
	return nil
}

// goWork runs f as tracked background work.
func (e *Engine) goWork(f func()) {
	e.work.Add(1)
	go func() {
		defer e.work.Done()
		f()
	}()
}

// Shutdown records daemon.stopping with reason, stops taking requests,
// answers the ones still waiting with DAEMON_STOPPING, and waits for driver
// work in flight (reclaims included) until ctx ends; then it cancels what
// is left.
func (e *Engine) Shutdown(ctx context.Context, reason string) error {
	stop := func() {
		e.stopping = true
		// Participant waits end now: a stop waits for the cleans, not for
		// them.
		e.cutEndsLocked(errStopping)
	}
	// A stop does not wait on a database another process holds: past the
	// bound it goes on without its event.
	err := e.try(func(tx *queue.Txn) error {
		tx.Event(contract.EvDaemonStopping, map[string]any{"reason": reason})
		stop()
		return nil
	})
	if err != nil {
		e.log.Warn("could not record daemon.stopping", "err", err)
		e.view(stop)
	}
	// Waiters hear at once that the daemon is going; the records stay
	// open, like every request still open at the end, and the next start
	// settles them as daemon-restarted.
	e.q.Stop()
	done := make(chan struct{})
	go func() {
		e.work.Wait()
		close(done)
	}()
	select {
	case <-done:
		err = nil
	case <-ctx.Done():
		err = fmt.Errorf("driver work still in flight: %w", ctx.Err())
	}
	e.Close()
	return err
}

// Close cancels driver work and stops every timer without waiting.
func (e *Engine) Close() {
	e.cancel()
	e.view(func() {
		e.stopping = true
		e.cutEndsLocked(errStopping)
		for id, t := range e.timers {
			t.Stop()
			delete(e.timers, id)
		}
		for _, l := range e.leases {
			if l.timer != nil {
				l.timer.Stop()
			}
		}
	})
	// Requests still open are answered but not settled in the store: their
	// records stay open, and the next start settles them as
	// daemon-restarted, as after a crash.
	e.q.Close()
}

// wait blocks until background driver work has finished. Tests use it.
func (e *Engine) wait() { e.work.Wait() }

func (e *Engine) driverFor(p contract.Platform) (driver.Driver, *contract.Error) {
	d, ok := e.opts.Drivers[p]
	if !ok {
		// The usual way here is a command run with SIMLOCK_DRIVERS=demo
		// against a daemon that was already running without it: say that the
		// variable only shapes a daemon the command starts.
		why := "simlock status says why"
		note := e.opts.DriverNotes[p]
		if note != "" {
			why = "its driver: " + strings.TrimSuffix(note, ".")
		}
		err := contract.Errorf(contract.CodeNoDriver,
			"no driver serves %s in the running daemon (%s). SIMLOCK_DRIVERS configures only a daemon a command starts, not one already running: "+
				"for simulated devices run `simlock daemon stop` and the command again, or `simlock config set drivers.demo.enabled true` and restart the daemon", p, why).
			With("platform", p)
		if note != "" {
			err = err.With("reason", note)
		}
		return nil, err
	}
	return d, nil
}

func (e *Engine) estimate(p contract.Platform, op driver.Operation, spec contract.DeviceSpec) int64 {
	d, ok := e.opts.Drivers[p]
	if !ok {
		return 0
	}
	return d.Estimate(op, spec).Milliseconds()
}

func marshal(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("marshal %T: %v", v, err))
	}
	return b
}

func (e *Engine) errorf(err error) *contract.Error { return driver.ContractError(err) }

var errStopping = errors.New("engine stopping")

// listCatalog reads drv's catalog with the engine's default mode in it, so
// that whoever matches a request against it (the engine, a gateway
// routing to this worker) applies the same default.
func (e *Engine) listCatalog(ctx context.Context, drv driver.Driver) (driver.Catalog, error) {
	cat, err := drv.ListCatalog(ctx)
	if err != nil {
		return cat, err
	}
	cat.DefaultMode = e.opts.DefaultMode[drv.Platform()]
	if cat.DefaultMode == "" {
		cat.DefaultMode = contract.DeviceModeFull
	}
	return cat, nil
}
