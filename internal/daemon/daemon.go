// Package daemon is the simlock daemon of both modes: it claims
// $SIMLOCK_HOME (one daemon per home), serves the daemon protocol on a unix
// socket (and the HTTP API, when enabled), and answers every operation
// through one table (table.go) against one lease port (port.go). A worker
// runs the lease engine over the SQLite store and the enabled drivers, and
// may join a gateway over an uplink; a gateway runs the fleet of workers
// that dial in and its fleet queue.
//
// Startup claims first and converges after: the admin token is written,
// then the socket listens, before the engine has loaded the registry, so
// clients connect at once and the token they read is this start's. hello and
// status.get answer during startup (status.get with waitReady parks until
// startup has converged or failed); every other operation waits for it.
//
// A Daemon's methods are safe for concurrent use.
package daemon

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/simlock/simlock/internal/atomicfile"
	"github.com/simlock/simlock/internal/components"
	"github.com/simlock/simlock/internal/config"
	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/core"
	"github.com/simlock/simlock/internal/decisionlog"
	"github.com/simlock/simlock/internal/driver"
	"github.com/simlock/simlock/internal/events"
	"github.com/simlock/simlock/internal/gateway"
	"github.com/simlock/simlock/internal/homedir"
	"github.com/simlock/simlock/internal/httpapi"
	"github.com/simlock/simlock/internal/ids"
	"github.com/simlock/simlock/internal/jobs"
	"github.com/simlock/simlock/internal/leasing"
	"github.com/simlock/simlock/internal/metrics"
	"github.com/simlock/simlock/internal/proctable"
	"github.com/simlock/simlock/internal/store"
	"github.com/simlock/simlock/internal/store/postgres"
	"github.com/simlock/simlock/internal/store/sqlite"
	"github.com/simlock/simlock/internal/transfer"
	"github.com/simlock/simlock/internal/wallclock"
)

// Files under SIMLOCK_HOME.
const (
	SocketName     = "daemon.sock"
	LockName       = "daemon.lock"
	AdminTokenName = "admin.token"
	DBName         = "simlock.db"
	LogName        = "daemon.log"
)

// ErrAlreadyRunning means another daemon holds this home.
var ErrAlreadyRunning = errors.New("another simlock daemon is already running for this SIMLOCK_HOME")

// Options configure a daemon. Home, Config and Drivers come from main (or a
// test); nothing is read from the environment here.
type Options struct {
	Home    string
	Version string
	// Lock is the home's lock file, still locked, that the run before this
	// one handed over across its re-execution (HandOverLock): the home is
	// never without its daemon between the two, so no on-demand start
	// meets an empty home then. It is taken only when it is the home's
	// lock file; otherwise the lock is taken anew.
	Lock    *os.File
	Config  *config.Config
	Drivers map[contract.Platform]driver.Driver
	// DriverNotes explain, per platform, why no driver serves it.
	DriverNotes map[contract.Platform]string
	// Rejections are device roots refused at startup; each disables its
	// platform and is recorded as driver.root-rejected.
	Rejections map[contract.Platform]contract.RootRejection
	// Prerequisites reports what each platform lacks, for the doctor.
	Prerequisites func(ctx context.Context) []driver.Missing
	// SetupDrivers, when set, starts the drivers once the home is claimed
	// (a driver may start helpers, such as Android's adb server, that only
	// the daemon holding the home may own); its result replaces Drivers,
	// DriverNotes, Rejections and Prerequisites.
	// installed lists, per platform, the receipts of the components
	// simlock installed in earlier runs (a simulated driver restores them).
	SetupDrivers func(ctx context.Context, installed map[contract.Platform][]string) (DriverSetup, error)
	Host         core.Host
	// HostOS names the operating system release, for status ("" if
	// unknown).
	HostOS string
	// FleetRefresh is how often a gateway reads every worker's view again
	// whole (30 s when 0).
	FleetRefresh time.Duration
	// Processes is the process table lease.bind watches; the machine's
	// when nil.
	Processes leasing.Processes
	// ClassDefaults are configured model preferences per platform and class.
	ClassDefaults map[contract.Platform]map[contract.DeviceClass][]string
	Logger        *slog.Logger
	// StopGrace bounds the wait for driver work at a graceful stop.
	StopGrace time.Duration
	// HTTPHeaderTimeout bounds how long an HTTP client may take to send a
	// request's headers, and HTTPIdleTimeout how long a keep-alive
	// connection may sit with nothing asked; 0 means 10 s and 2 min.
	HTTPHeaderTimeout, HTTPIdleTimeout time.Duration
	// StoreBusyTimeout is how long a write waits for a lock another
	// process holds on the database (SQLite's busy_timeout); 0 means
	// sqlite.DefaultBusyTimeout.
	StoreBusyTimeout time.Duration
	// ReadClock reads the wall and boot clocks, to see the wall clock
	// jump; nil means wallclock.Read.
	ReadClock func() wallclock.Reading
	// Wall is the wall clock the engine keeps its times in, the one
	// ReadClock reads; nil means time.Now. A test that jumps one jumps
	// both.
	Wall func() time.Time
	// MCP serves the MCP sessions of the HTTP API's /mcp; nil leaves
	// /mcp answering UNKNOWN_ROUTE.
	MCP MCPServe
	// CAFile is SIMLOCK_CA: a PEM file of a private certificate authority
	// a gateway replica trusts, beside the system's roots, for an https
	// leader it forwards the API to ("" for none).
	CAFile string

	// engineStore, when set, is what a worker's engine commits its
	// decisions to in place of the home's database, which still serves
	// everything else. Only this package's benchmarks set it, to take the
	// store's cost out of a decision (bench_test.go).
	engineStore func(db *sqlite.DB) leasing.Store
}

// DriverSetup is what SetupDrivers returns.
type DriverSetup struct {
	Drivers       map[contract.Platform]driver.Driver
	Notes         map[contract.Platform]string
	Rejections    map[contract.Platform]contract.RootRejection
	Prerequisites func(ctx context.Context) []driver.Missing
}

// Daemon is a running daemon.
type Daemon struct {
	opts    Options
	log     *slog.Logger
	bus     *events.Bus
	metrics *metrics.Metrics
	// decisions writes the decision log (decisionlog) from the bus tap.
	decisions *decisionlog.Log
	db        daemonStore
	engine    *leasing.Engine
	installer *components.Installer
	jobs      *jobs.Tracker
	ln        net.Listener
	lock      *os.File
	tokenHash [32]byte
	startedAt time.Time

	tokens     *tokenBook    // set before storeReady closes, when the store opened
	storeReady chan struct{} // closed once the store is open (or failed to)
	httpURL    string
	consoleURL string
	httpSrv    *http.Server
	api        *httpapi.Server
	// life ends when the daemon stops; work that outlives the call that
	// started it runs under it, and a device.exec command ends with it.
	life    context.Context
	endLife context.CancelFunc
	// execs counts the device.exec commands running, per lease.
	execs execSlots
	// freed wakes giveBackMemory: a session dropped for not reading let go
	// of its frames.
	freed chan struct{}

	ready    chan struct{} // closed when startup has converged
	startErr error         // set before ready closes when startup failed
	stopReq  chan struct{}
	stopOnce sync.Once
	// bg tracks the daemon's own background loops; Stop waits for them
	// before closing the store.
	bg sync.WaitGroup

	mu sync.Mutex
	// mu guards the fields below.
	conns    map[*conn]struct{}
	holders  map[string]map[*session]struct{} // lease key (UniqueKey) -> sessions holding or watching it
	stopping bool
	// notices are, by lease key, the device health notices no session
	// heard when they happened, for the lease's next renew (notices.go).
	notices map[string][]contract.Push
	// pruneAt, lastPruned and prunedTotal are the event log's last prune
	// (epoch ms) and what it and all prunes this run deleted.
	pruneAt, lastPruned, prunedTotal int64
	// tools are the tool versions each driver reported, read once after
	// startup.
	tools map[contract.Platform][]contract.ToolVersion

	// transfers are the file transfers in flight (files.go), set by Start.
	transfers *transfer.Registry

	// ops is the operation table the sessions dispatch through.
	ops opTable
	// leases is the lease port of the daemon's mode: the engine on a
	// worker, the fleet queue (leasing) on a gateway; set before ready
	// closes. The operations both modes answer alike use it alone.
	leases LeasePort
	// fleet is a gateway's workers (nil on a worker), and leasing its
	// fleet queue, set before ready closes: a gateway's own handlers and
	// its startup and stop use them.
	fleet   *gateway.Fleet
	leasing *gateway.Leasing
	// appendMu orders a gateway's event commits with their publication:
	// its own events and the relayed ones come from many goroutines.
	appendMu sync.Mutex
	// relays shares the commits of the events a gateway's workers relay
	// (relaygroup.go); set by startGateway.
	relays *relayGroup
	// uplinkState is a worker's uplink as readiness sees it, and
	// lockProbe the liveness probe's wait for the decision lock (ready.go).
	uplinkState uplinkState
	lockProbe   lockProbe
	// replica is a gateway's role among the replicas sharing its
	// PostgreSQL database (replica.go); off on every other daemon.
	replica replica
}

// SocketPath is the socket under home.
func SocketPath(home string) string { return filepath.Join(home, SocketName) }

// Run starts a daemon and serves until ctx ends or a client asks it to stop;
// then it stops gracefully. It returns ErrAlreadyRunning (wrapped) when
// another daemon holds the home.
func Run(ctx context.Context, opts Options) error {
	d, err := Start(ctx, opts)
	if err != nil {
		return err
	}
	return d.Wait(ctx)
}

// Wait serves until ctx ends or a client (or a failed startup) asks the
// daemon to stop, then stops it gracefully and returns Stop's error.
func (d *Daemon) Wait(ctx context.Context) error {
	reason := "requested"
	select {
	case <-ctx.Done():
		reason = "signal"
	case <-d.stopReq:
	}
	return d.Stop(reason)
}

// Start claims the home and begins serving; startup convergence continues in
// the background. When it returns, admin.token holds this start's token and
// the socket (and the HTTP API, when enabled) accept connections. Call Stop
// (or Wait) to end it.
func Start(ctx context.Context, opts Options) (*Daemon, error) {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.StopGrace <= 0 {
		opts.StopGrace = 30 * time.Second
	}
	if opts.HTTPHeaderTimeout <= 0 {
		opts.HTTPHeaderTimeout = 10 * time.Second
	}
	if opts.HTTPIdleTimeout <= 0 {
		opts.HTTPIdleTimeout = 2 * time.Minute
	}
	if opts.Config == nil {
		opts.Config = config.Default()
	}
	if opts.Processes == nil {
		opts.Processes = proctable.Table{}
	}
	if opts.ReadClock == nil {
		opts.ReadClock = wallclock.Read
	}
	if err := homedir.Prepare(opts.Home); err != nil {
		return nil, err
	}
	d := &Daemon{
		opts: opts, log: opts.Logger, bus: events.NewBus(), startedAt: time.Now(), ops: newOpTable(),
		ready: make(chan struct{}), stopReq: make(chan struct{}), storeReady: make(chan struct{}),
		conns: map[*conn]struct{}{}, holders: map[string]map[*session]struct{}{}, tools: map[contract.Platform][]contract.ToolVersion{}, freed: make(chan struct{}, 1),
	}
	// A gateway on PostgreSQL is a replica from the start: its HTTP API,
	// which serves before the store opens, must gate as one (replica.on is
	// read-only once the daemon serves).
	d.replica.on = d.mode() == contract.ModeGateway && opts.Config.String("gateway.store") != config.StoreSQLite
	d.newMetrics()
	d.life, d.endLife = context.WithCancel(context.Background())
	if err := d.claim(); err != nil {
		d.endLife()
		return nil, err
	}
	// The home is ours now: what an earlier run staged goes.
	d.transfers = d.newTransfers()
	if err := d.listenHTTP(); err != nil {
		d.ln.Close()
		_ = os.Remove(SocketPath(d.opts.Home))
		_ = os.Remove(filepath.Join(d.opts.Home, AdminTokenName))
		d.unlock()
		d.endLife()
		return nil, err
	}
	// Each decision is logged once, after its commit (decisionlog); the
	// tap goes on before converge publishes anything.
	d.decisions = decisionlog.New(d.log.With("module", "decisions"), d.mode() == contract.ModeGateway)
	d.bus.Tap(d.decisions.Record)
	go d.converge(ctx)
	go d.serve()
	go d.giveBackMemory()
	return d, nil
}

// claim takes the home's lock, recovers a stale socket, writes a fresh
// admin token, and only then listens: a client that connects the moment the
// socket accepts reads this start's token, never a missing or stale one.
func (d *Daemon) claim() error {
	lockPath := filepath.Join(d.opts.Home, LockName)
	f := handedOver(d.opts.Lock, lockPath)
	if f != nil {
		d.log.Info("took the home's lock from the run before, held across its run again")
	} else {
		var err error
		if f, err = homedir.OpenFile(lockPath, os.O_RDWR|os.O_CREATE, 0o600); err != nil {
			return fmt.Errorf("open lock: %w", err)
		}
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		b, _ := homedir.ReadFile(lockPath)
		f.Close()
		if pid := strings.TrimSpace(string(b)); pid != "" {
			return fmt.Errorf("%w (pid %s)", ErrAlreadyRunning, pid)
		}
		return ErrAlreadyRunning
	}
	_ = f.Truncate(0)
	_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	d.lock = f

	sock := SocketPath(d.opts.Home)
	// We hold the lock, so a socket file left here belongs to a daemon that
	// died: remove it.
	if err := os.Remove(sock); err != nil && !errors.Is(err, os.ErrNotExist) {
		d.unlock()
		return fmt.Errorf("remove stale socket: %w", err)
	}
	tokenPath := filepath.Join(d.opts.Home, AdminTokenName)
	if err := d.writeAdminToken(tokenPath); err != nil {
		d.unlock()
		return err
	}
	ln, err := net.Listen("unix", sock)
	if err != nil {
		_ = os.Remove(tokenPath)
		d.unlock()
		return fmt.Errorf("listen on %s: %w", sock, err)
	}
	_ = os.Chmod(sock, 0o600)
	d.ln = ln
	return nil
}

// writeAdminToken makes this start's admin secret, keeps its hash, and
// replaces path with it at once (a temporary file renamed over it, mode
// 0600), so a reader sees the old file or the new one, never a part.
func (d *Daemon) writeAdminToken(path string) error {
	var secret [32]byte
	_, _ = rand.Read(secret[:])
	token := hex.EncodeToString(secret[:])
	d.tokenHash = sha256.Sum256([]byte(token))
	if err := atomicfile.Write(path, []byte(token+"\n"), 0o600); err != nil {
		return fmt.Errorf("write admin token: %w", err)
	}
	return nil
}

// handedOver is lock when it is the lock file at path (the same file, not
// only the same name), nil otherwise: a descriptor that is something else
// is not the daemon's to use, nor to close.
func handedOver(lock *os.File, path string) *os.File {
	if lock == nil {
		return nil
	}
	held, err1 := lock.Stat()
	named, err2 := os.Stat(path)
	if err1 != nil || err2 != nil || !os.SameFile(held, named) {
		return nil
	}
	return lock
}

// HandOverLock is, after a deposed gateway replica's Stop, the home's lock
// file, still locked, for the next run of the daemon in this process
// (Options.Lock): the caller clears its close-on-exec flag and names it
// to the new run. nil when Stop gave the lock back.
func (d *Daemon) HandOverLock() *os.File {
	if !d.replica.deposed() {
		return nil
	}
	return d.lock
}

func (d *Daemon) unlock() {
	if d.lock != nil {
		_ = syscall.Flock(int(d.lock.Fd()), syscall.LOCK_UN)
		d.lock.Close()
	}
}

// openStore opens the store, sets d.db and loads the tokens. It returns
// the SQLite database a worker's parts need beyond d.db; a gateway whose
// gateway.store is a PostgreSQL URL gets nil.
func (d *Daemon) openStore(ctx context.Context) (*sqlite.DB, error) {
	where := d.opts.Config.String("gateway.store")
	if err := storeAllowed(d.mode(), where); err != nil {
		return nil, err
	}
	if where != config.StoreSQLite {
		// A gateway on PostgreSQL is a replica (replica.on, set by
		// Start): its writes are fenced by the term it leads, and refused
		// until it leads one.
		pg, err := postgres.Open(ctx, where, postgres.Options{BusyTimeout: d.opts.StoreBusyTimeout, OnCommit: d.metrics.ObserveCommit,
			Group: leaderGroup, LeaderTimeout: d.leaderTimeout(),
			OnDeposed: func(term int64) { d.deposed(term, "a write fenced with it was refused") }})
		if err != nil {
			return nil, err
		}
		return nil, d.useStore(ctx, pg)
	}
	dbPath := filepath.Join(d.opts.Home, DBName)
	// SQLite opens these itself, following links: none may be one.
	if err := homedir.RefuseLinks(dbPath, dbPath+"-wal", dbPath+"-shm", dbPath+"-journal"); err != nil {
		return nil, fmt.Errorf("open the database: %w", err)
	}
	// SQLite gives its -wal and -shm files the database file's mode: make
	// it private before SQLite creates it.
	f, err := homedir.OpenFile(dbPath, os.O_CREATE|os.O_RDONLY, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open the database: %w", err)
	}
	f.Close()
	db, err := sqlite.OpenWith(ctx, dbPath, sqlite.Options{BusyTimeout: d.opts.StoreBusyTimeout, OnCommit: d.metrics.ObserveCommit})
	if err != nil {
		return nil, err
	}
	if err := d.useStore(ctx, db); err != nil {
		return nil, err
	}
	return db, nil
}

// useStore loads the tokens from db and makes it the daemon's store; on
// failure it closes db.
func (d *Daemon) useStore(ctx context.Context, db daemonStore) error {
	tokens, err := loadTokens(ctx, db)
	if err != nil {
		db.Close()
		return err
	}
	d.db, d.tokens = db, tokens
	return nil
}

// storeAllowed refuses a gateway.store other than sqlite where it cannot
// be used: a worker's devices and leases live on its own machine, in its
// home's file; only a gateway's state may live in PostgreSQL.
func storeAllowed(mode, where string) error {
	if where == config.StoreSQLite {
		return nil
	}
	if mode != contract.ModeGateway {
		return fmt.Errorf("gateway.store is %s: only a gateway keeps its state in PostgreSQL; a worker keeps it in its home (simlock config set gateway.store sqlite)", config.RedactStoreURL(where))
	}
	return nil
}

// Retention of settled history in the database (requests: config keys
// lease.requestRetentionMs and lease.maxRequestRecords; events:
// eventLog.retentionDays and eventLog.maxEvents).
const (
	leaseRetention = 7 * 24 * time.Hour
	pruneEvery     = 10 * time.Minute
)

// maintain prunes settled history so the database stays bounded: at start,
// then every pruneEvery until the daemon stops.
func (d *Daemon) maintain() {
	t := time.NewTicker(pruneEvery)
	defer t.Stop()
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		if err := d.pruneHistory(ctx, time.Now()); err != nil {
			d.log.Warn("prune history", "err", err)
		}
		cancel()
		select {
		case <-d.stopReq:
			return
		case <-t.C:
		}
	}
}

// pruneHistory deletes, as of now, the events, settled requests and ended
// leases past their retention, and notes what the event log lost for
// status.
func (d *Daemon) pruneHistory(ctx context.Context, now time.Time) error {
	cfg := d.opts.Config
	days := time.Duration(cfg.Int("eventLog.retentionDays")) * 24 * time.Hour
	pruned, err1 := d.db.PruneEvents(ctx, now.Add(-days).UnixMilli(), int(cfg.Int("eventLog.maxEvents")))
	if err1 == nil {
		d.mu.Lock()
		d.pruneAt, d.lastPruned, d.prunedTotal = now.UnixMilli(), pruned, d.prunedTotal+pruned
		d.mu.Unlock()
		if pruned > 0 {
			d.log.Info("pruned the event log", "events", pruned)
		}
	}
	retention := time.Duration(cfg.Int("lease.requestRetentionMs")) * time.Millisecond
	_, err2 := d.db.PruneRequests(ctx, now.Add(-retention).UnixMilli(), int(cfg.Int("lease.maxRequestRecords")))
	_, err3 := d.db.PruneLeases(ctx, now.Add(-leaseRetention).UnixMilli())
	_, err4 := d.jobs.Prune(ctx, now, time.Duration(cfg.Int("jobs.retentionDays"))*24*time.Hour)
	return errors.Join(err1, err2, err3, err4)
}

// recordRejections commits driver.root-rejected for each refused root, so
// operators see it in the event history as well as in status and doctor.
func (d *Daemon) recordRejections(ctx context.Context) error {
	var evs []store.NewEvent
	for _, p := range contract.Platforms() {
		r, ok := d.opts.Rejections[p]
		if !ok {
			continue
		}
		d.log.Warn("device root refused; platform disabled", "platform", p, "root", r.Path, "reason", r.Reason, "detail", r.Detail)
		payload, _ := json.Marshal(map[string]any{"platform": p, "rootPath": r.Path, "reason": r.Reason, "detail": r.Detail})
		evs = append(evs, store.NewEvent{ID: ids.New("evt_", ids.Short), Timestamp: time.Now().UnixMilli(), Event: contract.EvDriverRootRejected, Payload: payload})
	}
	if len(evs) == 0 {
		return nil
	}
	committed, err := d.db.Commit(ctx, store.Change{Events: evs})
	if err != nil {
		return fmt.Errorf("record root rejections: %w", err)
	}
	d.bus.Publish(committed...)
	return nil
}

// checkAdmin reports whether token is this start's admin secret.
func (d *Daemon) checkAdmin(token string) bool {
	h := sha256.Sum256([]byte(token))
	return subtle.ConstantTimeCompare(h[:], d.tokenHash[:]) == 1
}

func (d *Daemon) requestStop() {
	d.stopOnce.Do(func() { close(d.stopReq) })
}

// Stopped is closed when a client or a failed startup asked the daemon to
// stop.
func (d *Daemon) Stopped() <-chan struct{} { return d.stopReq }

// HTTPURL is where the HTTP API listens ("http://host:port"), or "" when it
// is off.
func (d *Daemon) HTTPURL() string { return d.httpURL }

// ConsoleURL is where the operator console opens ("http://host:port/"),
// or "" when the HTTP API is off.
func (d *Daemon) ConsoleURL() string { return d.consoleURL }

// Stop ends the daemon gracefully: new connections are refused, waiting
// requests fail with DAEMON_STOPPING, driver work in flight (reclaims
// included) gets up to StopGrace to finish, then everything closes.
func (d *Daemon) Stop(reason string) error {
	d.mu.Lock()
	if d.stopping {
		d.mu.Unlock()
		return nil
	}
	d.stopping = true
	d.mu.Unlock()
	d.requestStop()
	d.ln.Close()
	d.closeHTTP()
	d.endLife()
	d.transfers.Close()
	<-d.ready
	// A replica's elector, and a leader's startup, end with life: what
	// they set is read below.
	d.replica.wg.Wait()
	if d.installer != nil {
		// Installs in flight stop; the requests waiting on them fail.
		d.installer.Close()
	}
	if d.leasing != nil {
		d.leasing.Close()
	}
	if d.fleet != nil {
		d.fleet.Close()
	}
	if d.engine != nil {
		ctx, cancel := context.WithTimeout(context.Background(), d.opts.StopGrace)
		if err := d.engine.Shutdown(ctx, reason); err != nil {
			d.log.Warn("stopped with driver work unfinished", "err", err)
		}
		cancel()
	}
	d.tellStopping(reason)
	d.closeSessions()
	d.bus.Close()
	d.bg.Wait()
	// Nothing publishes now: the decisions queued are written before the
	// home is let go.
	d.decisions.Close()
	for p, drv := range d.opts.Drivers {
		// Drivers that run helpers of their own (Android's adb server)
		// stop them with the daemon.
		if c, ok := drv.(io.Closer); ok {
			if err := c.Close(); err != nil {
				d.log.Warn("driver close", "platform", p, "err", err)
			}
		}
	}
	if d.db != nil {
		d.db.Close()
	}
	_ = os.Remove(filepath.Join(d.opts.Home, AdminTokenName))
	_ = os.Remove(SocketPath(d.opts.Home))
	if !d.replica.deposed() {
		d.unlock()
	} // else the lock is kept for HandOverLock: a deposed replica runs again
	d.log.Info("daemon stopped", "reason", reason)
	if d.startErr == nil && d.engine != nil && d.engine.Err() != nil {
		return fmt.Errorf("stopped after a commit failed: %w", d.engine.Err())
	}
	if d.startErr == nil && d.replica.stopErr() != nil {
		return d.replica.stopErr()
	}
	return d.startErr
}

// connsNow is the open connections at this moment.
func (d *Daemon) connsNow() []*conn {
	d.mu.Lock()
	defer d.mu.Unlock()
	conns := make([]*conn, 0, len(d.conns))
	for c := range d.conns {
		conns = append(conns, c)
	}
	return conns
}

// tellStopping sends every session that said hello the news that the
// daemon stops, ahead of the end of its connection.
func (d *Daemon) tellStopping(reason string) {
	for _, c := range d.connsNow() {
		c.mu.Lock()
		hello := c.sess != nil
		c.mu.Unlock()
		if hello {
			c.push(contract.Push{Push: contract.PushDaemonStopping, Reason: reason})
		}
	}
}

// closeSessions stops every session reading, lets the calls in flight
// answer (the engine has already settled its waiters), then closes them.
func (d *Daemon) closeSessions() {
	conns := d.connsNow()
	for _, c := range conns {
		c.drain()
	}
	deadline := time.Now().Add(flushTimeout)
	for _, c := range conns {
		for c.busy() && time.Now().Before(deadline) {
			time.Sleep(5 * time.Millisecond)
		}
		c.close()
	}
}

func (d *Daemon) serve() {
	for {
		nc, err := d.ln.Accept()
		if err != nil {
			return
		}
		c := newConn(d, nc)
		d.mu.Lock()
		if d.stopping {
			d.mu.Unlock()
			nc.Close()
			continue
		}
		d.conns[c] = struct{}{}
		d.mu.Unlock()
		go c.run()
	}
}

func (d *Daemon) dropConn(c *conn) {
	c.mu.Lock()
	s := c.sess
	c.mu.Unlock()
	d.mu.Lock()
	delete(d.conns, c)
	d.mu.Unlock()
	if s != nil {
		d.dropSession(s)
	}
}

// dropSession forgets the leases a session watched.
func (d *Daemon) dropSession(s *session) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for id, set := range d.holders {
		delete(set, s)
		if len(set) == 0 {
			delete(d.holders, id)
		}
	}
}

// holds records that session s holds or watches the lease with key id, so
// it hears if the daemon ends it.
func (d *Daemon) holds(s *session, id string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	set := d.holders[id]
	if set == nil {
		set = map[*session]struct{}{}
		d.holders[id] = set
	}
	set[s] = struct{}{}
}

// unhold forgets that session s holds lease id.
func (d *Daemon) unhold(s *session, id string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.holders[id], s)
}

// leaseEnded tells the sessions that hold a lease the daemon ended it: by
// its key, which names it alone (two owners may each have chosen its id),
// and only those that may hold it (its owner's, and admins'); the notice
// names it by its id, as its owner does.
func (d *Daemon) leaseEnded(l contract.LeaseRecord, reason string) {
	if d.fleet != nil {
		// A gateway's relayed transfers of the lease end with it (a
		// worker's end before its device is cleaned, as a lease-end
		// participant): gone before whoever ended the lease hears so,
		// their sessions closed and running calls waited for apart.
		finish := d.transfers.EndLeaseNow(l.UniqueKey())
		go finish(context.Background())
	}
	d.mu.Lock()
	var told []*session
	for s := range d.holders[l.UniqueKey()] {
		if s.mayHold(l) {
			told = append(told, s)
		}
	}
	delete(d.holders, l.UniqueKey())
	delete(d.notices, l.UniqueKey())
	d.mu.Unlock()
	for _, c := range told {
		c.push(contract.Push{Push: contract.PushLeaseLost, LeaseID: l.ID, DeviceID: l.DeviceID, Reason: reason})
	}
}

// mayHold reports whether s may be a holder of l: its owner's session, or
// an admin's.
func (s *session) mayHold(l contract.LeaseRecord) bool {
	return s.role == contract.RoleAdmin || s.principal == l.OwnerID
}

// deviceHealth tells the sessions holding a lease that its device crashed
// or was booted again; when none holds it (an HTTP agent between calls),
// the lease's next renew tells its caller (notices.go).
func (d *Daemon) deviceHealth(l contract.LeaseRecord, notice string, attempts int) {
	d.mu.Lock()
	set := make([]*session, 0, len(d.holders[l.UniqueKey()]))
	for s := range d.holders[l.UniqueKey()] {
		if s.mayHold(l) {
			set = append(set, s)
		}
	}
	p := contract.Push{Push: notice, LeaseID: l.ID, DeviceID: l.DeviceID, Attempts: attempts}
	if len(set) == 0 {
		d.keepNotice(l.UniqueKey(), p)
	}
	d.mu.Unlock()
	for _, s := range set {
		s.push(p)
	}
}

// mode is the daemon's mode, worker unless the config says gateway.
func (d *Daemon) mode() string {
	if d.opts.Config.String("mode") == contract.ModeGateway {
		return contract.ModeGateway
	}
	return contract.ModeWorker
}
