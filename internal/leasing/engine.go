// Package leasing is simlock's lease engine: it grants devices to requesters,
// keeps the fair wait queue, renews, releases and expires leases, and drives
// the drivers to create, boot and clean devices.
//
// One Engine owns every device, lease and open request of a daemon. Each
// decision runs under the engine's lock and commits to the store in one
// transaction before anyone is answered; events are published only after
// that commit. Driver work (provisioning, booting, reclaiming) runs outside
// the lock in goroutines the engine tracks, so a slow simulator never blocks
// other requesters. All exported methods are safe for concurrent use.
package leasing

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"time"

	"github.com/simlock/simlock/internal/components"
	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/core"
	"github.com/simlock/simlock/internal/driver"
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

// Lease-end reasons.
const (
	ReasonExplicit = "explicit"
	ReasonExpired  = "expired"
	ReasonKilled   = "killed"
	// ReasonDeviceLost: the device stopped and could not be booted again,
	// or vanished.
	ReasonDeviceLost = "device-lost"
)

// Options configure an Engine. Store and Limits are required.
type Options struct {
	Store   Store
	Drivers map[contract.Platform]driver.Driver
	Limits  core.Limits
	// ClassDefaults are configured model preferences per platform and
	// class, tried before each driver's own.
	ClassDefaults map[contract.Platform]map[contract.DeviceClass][]string
	// DefaultTTL and MaxTTL bound lease lifetimes.
	DefaultTTL, MaxTTL time.Duration
	Logger             *slog.Logger
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
}

// Caller is who calls an operation.
type Caller struct {
	Principal string
	Admin     bool
}

// sees reports whether the caller may see a request: an admin any, an agent
// the ones it made or that are made for it.
func (c Caller) sees(rec contract.LeaseRequestRecord) bool {
	return c.Admin || rec.OwnerID == c.Principal || rec.RequesterID == c.Principal
}

// Engine is the lease engine. Make one with New, then Start it.
type Engine struct {
	opts Options
	log  *slog.Logger

	// ctx bounds driver work; cancel ends it at Close.
	ctx    context.Context
	cancel context.CancelFunc
	// work tracks background driver work (starts and reclaims).
	work sync.WaitGroup

	mu sync.Mutex
	// mu guards the fields below.
	devices   map[string]*store.Device
	leases    map[string]*store.Lease // active only
	byDevice  map[string]string       // device id -> active lease id
	requests  map[string]*request     // open requests
	revs      uint64                  // last request revision handed out
	removing  map[string]bool         // runtimes being removed ("ios/26.4")
	health    map[string]*healthState // leased devices the monitor tracks
	warm      warmState
	noReclaim map[string]bool        // devices whose lease ends at startup without a clean
	queue     []*request             // waiting, in arrival order
	claims    map[string]string      // device id -> operation in flight
	stuck     map[string]bool        // devices that failed to stop or delete: never victims
	timers    map[string]*time.Timer // lease id -> expiry timer
	catalogs  map[contract.Platform]driver.Catalog
	lastCap   string
	lastDepth int
	started   bool
	stopping  bool
	// ends tracks lease-end participant calls, reclaims and nukes in
	// flight.
	ends endState
}

// request is an open lease request and the requesters waiting on it.
type request struct {
	rec      contract.LeaseRequestRecord
	want     core.Want
	spec     contract.DeviceSpec // resolved spec to create, when one is needed
	progress []func(contract.LeaseProgress)
	done     chan struct{}
	grant    *contract.LeaseGrant
	err      *contract.Error
	timer    *time.Timer
	// abandoned marks a request whose requester went away while its device
	// was being started; the device is kept, the grant is not made.
	abandoned bool
	last      contract.LeaseProgress
	// Releasing is the device shut down to make room for this request.
	releasing string
	// target is the device being readied, once the request left the queue.
	target *contract.DeviceSpec
	// downloading is set while the request waits for a runtime download;
	// it is not in the queue then, and cannot be cancelled.
	downloading bool
	// queuedAt is when the request entered the queue (after any download);
	// its timeoutMs counts from there.
	queuedAt time.Time
	// detached requests were made as a resource (lease-request.create):
	// they wait whether or not anyone watches, until cancelled.
	detached bool
	// replayed marks a settled request answered again for a repeated
	// idempotency key.
	replayed bool
	// rev grows with every change a reader could see; changed is closed
	// (and replaced) at each, waking lease-request.get waits.
	rev     uint64
	changed chan struct{}
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
	opts.Quarantine = opts.Quarantine.withDefaults()
	opts.Health = opts.Health.withDefaults()
	opts.Idle = opts.Idle.withDefaults()
	if opts.WarmPool != nil {
		wp := opts.WarmPool.withDefaults()
		opts.WarmPool = &wp
	}
	if opts.DeviceHealth == nil {
		opts.DeviceHealth = func(contract.LeaseRecord, string, int) {}
	}
	if opts.DefaultTTL <= 0 {
		opts.DefaultTTL = 15 * time.Minute
	}
	if opts.MaxTTL <= 0 {
		opts.MaxTTL = 4 * time.Hour
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Engine{
		opts: opts, log: opts.Logger, ctx: ctx, cancel: cancel,
		devices: map[string]*store.Device{}, leases: map[string]*store.Lease{}, byDevice: map[string]string{},
		requests: map[string]*request{}, claims: map[string]string{}, stuck: map[string]bool{}, removing: map[string]bool{}, health: map[string]*healthState{},
		noReclaim: map[string]bool{},
		warm:      warmState{booting: map[string]int{}, reason: map[int]string{}, failed: map[int]time.Time{}}, timers: map[string]*time.Timer{},
		catalogs: map[contract.Platform]driver.Catalog{},
	}
}

func now() int64 { return time.Now().UnixMilli() }

func newID(prefix string) string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}

// Start loads the registry and converges it: requests left open by the last
// run fail as daemon-restarted, leases get their expiry timers back (a
// deadline that passed while the daemon was down expires now), devices left
// mid-creation are removed and devices left mid-clean are cleaned again.
func (e *Engine) Start(ctx context.Context) error {
	for p, d := range e.opts.Drivers {
		cat, err := d.ListCatalog(ctx)
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
	e.mu.Lock()
	defer e.mu.Unlock()
	for i := range snap.Devices {
		d := snap.Devices[i]
		e.devices[d.ID] = &d
	}
	for i := range snap.Leases {
		l := snap.Leases[i]
		e.leases[l.ID] = &l
		e.byDevice[l.DeviceID] = l.ID
	}
	tx := e.begin()
	for _, rec := range snap.Requests {
		rec.State = contract.RequestFailed
		rec.SettledAt = now()
		rec.Stage = ""
		rec.QueuePosition = 0
		rec.Error = contract.Errorf(contract.CodeDaemonStopping, "the daemon stopped while this request was open").
			With("reason", "daemon-restarted")
		tx.change.Requests = append(tx.change.Requests, rec)
		tx.event("lease.rejected", map[string]any{
			"requestId": rec.ID, "requester": rec.RequesterID, "requestSpec": rec.Spec, "reason": "daemon-restarted",
			"code": rec.Error.Code,
		})
	}
	var reclaim, remove, quarantined []string
	for id, d := range e.devices {
		switch d.State {
		case contract.DeviceQuarantined:
			// Retries resume from the stored next-retry time; a device
			// quarantined before retries existed gets its first one now.
			if d.QuarantineNextRetry == 0 && d.QuarantineAttempts < e.opts.Quarantine.MaxRetries {
				nd := *d
				nd.QuarantineNextRetry = now() + e.opts.Quarantine.delay(nd.QuarantineAttempts).Milliseconds()
				tx.putDevice(nd)
			}
			quarantined = append(quarantined, id)
		case contract.DeviceProvisioning:
			remove = append(remove, id)
		case contract.DeviceReclaiming:
			if _, leased := e.byDevice[id]; !leased && reality.readable(d.Platform) {
				// Interrupted (or put off while its platform was
				// unreadable): clean it in full now.
				reclaim = append(reclaim, id)
			}
		case contract.DeviceReady, contract.DeviceShutdown:
			if _, leased := e.byDevice[id]; leased || !reality.readable(d.Platform) {
				break
			}
			state, present := reality.state(d)
			switch {
			case !present:
				tx.setState(id, contract.DeviceDeleted)
				tx.event("device.deleted", map[string]any{"deviceId": id, "initiator": "missing"})
			case d.State == contract.DeviceReady && state == driver.Stopped:
				nd := tx.setState(id, contract.DeviceShutdown)
				nd.Address = ""
				tx.putDevice(nd)
				tx.event("device.shutdown", map[string]any{"deviceId": id, "initiator": "startup"})
			}
		case contract.DeviceLeased:
			if _, leased := e.byDevice[id]; !leased {
				// A leased device with no lease cannot be handed out as it
				// is: clean it first.
				nd := *d
				nd.State = contract.DeviceReclaiming
				nd.StateSince = now()
				tx.putDevice(nd)
				reclaim = append(reclaim, id)
			}
		}
	}
	tx.event("daemon.started", map[string]any{"limits": e.opts.Limits})
	if _, err := e.commitLocked(tx); err != nil {
		return err
	}
	e.started = true
	for _, id := range remove {
		e.claims[id] = "destroy"
		e.goWork(func() { e.destroyAbandoned(id) })
	}
	for _, id := range reclaim {
		e.startReclaimLocked(id)
	}
	for _, id := range quarantined {
		e.armQuarantineLocked(id)
	}
	t := time.Now()
	var expired []string
	for id, l := range e.leases {
		if l.TTLDeadline <= t.UnixMilli() {
			expired = append(expired, id)
			continue
		}
		e.armLocked(l)
	}
	sort.Strings(expired)
	for _, id := range expired {
		e.expireLocked(id)
	}
	e.convergeLeasesLocked(reality)
	if e.opts.Health.Enabled {
		go e.watchHealth()
	}
	if e.opts.Idle.Enabled {
		go e.reapIdle()
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
	e.mu.Lock()
	tx := e.begin()
	tx.event("daemon.stopping", map[string]any{"reason": reason})
	if _, err := e.commitLocked(tx); err != nil {
		e.log.Warn("could not record daemon.stopping", "err", err)
	}
	e.stopping = true
	// Participant waits end now: a stop waits for the cleans, not for them.
	e.cutEndsLocked(errStopping)
	// Waiters hear at once that the daemon is going; the records stay open,
	// like every request still open at the end, and the next start settles
	// them as daemon-restarted.
	for _, r := range e.queue {
		e.answerLocked(r, contract.Errorf(contract.CodeDaemonStopping, "the daemon is stopping"))
	}
	e.queue = nil
	e.mu.Unlock()
	done := make(chan struct{})
	go func() {
		e.work.Wait()
		close(done)
	}()
	var err error
	select {
	case <-done:
	case <-ctx.Done():
		err = fmt.Errorf("driver work still in flight: %w", ctx.Err())
	}
	e.Close()
	return err
}

// Close cancels driver work and stops every timer without waiting.
func (e *Engine) Close() {
	e.cancel()
	e.mu.Lock()
	defer e.mu.Unlock()
	e.stopping = true
	e.cutEndsLocked(errStopping)
	for id, t := range e.timers {
		t.Stop()
		delete(e.timers, id)
	}
	// Requests still open are answered but not settled in the store: their
	// records stay open, and the next start settles them as
	// daemon-restarted, as after a crash.
	for _, r := range e.requests {
		e.answerLocked(r, contract.Errorf(contract.CodeDaemonStopping, "the daemon stopped"))
	}
	e.queue = nil
}

// answerLocked ends the wait on an open request without settling its
// stored record.
func (e *Engine) answerLocked(r *request, cerr *contract.Error) {
	if r.timer != nil {
		r.timer.Stop()
	}
	r.err = cerr
	delete(e.requests, r.rec.ID)
	close(r.done)
}

// Wait blocks until background driver work has finished. Tests use it.
func (e *Engine) Wait() { e.work.Wait() }

func (e *Engine) driverFor(p contract.Platform) (driver.Driver, *contract.Error) {
	d, ok := e.opts.Drivers[p]
	if !ok {
		return nil, contract.Errorf(contract.CodeNoDriver,
			"no driver serves %s in this daemon (simlock status says why; SIMLOCK_DRIVERS=demo or drivers.demo.enabled serves simulated devices from the next daemon start)", p).
			With("platform", p)
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
