package daemon

import (
	"context"
	"time"

	"github.com/simlock/simlock/internal/config"
	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/core"
	"github.com/simlock/simlock/internal/jobs"
	"github.com/simlock/simlock/internal/leasing"
	"github.com/simlock/simlock/internal/store/sqlite"
	"github.com/simlock/simlock/internal/wallclock"
)

// converge opens the store and starts the mode's machinery (the engine, or
// the fleet and its queue); parked operations proceed when it is done.
func (d *Daemon) converge(ctx context.Context) {
	defer close(d.ready)
	if err := d.startup(ctx); err != nil {
		d.startFailed(ctx, err)
	}
}

// startFailed records why startup failed and asks the daemon to stop,
// unless a stop cut startup short.
func (d *Daemon) startFailed(ctx context.Context, err error) {
	if ctx.Err() != nil || d.life.Err() != nil {
		// A stop (a signal, daemon.stop) cut startup short: that is the
		// stop asked for, not a failed start.
		d.log.Info("stopped during startup", "err", err)
		return
	}
	d.startErr = err
	d.log.Error("startup failed", "err", err)
	d.requestStop()
}

// startup is converge's work, in order: the store, the jobs the last run
// left, then the mode's own start.
func (d *Daemon) startup(ctx context.Context) error {
	// The store opens first: HTTP tokens live there, and the HTTP API
	// checks them while the rest of startup goes on.
	local, err := d.openStore(ctx)
	close(d.storeReady)
	if err != nil {
		return err
	}
	if d.replica.enabled() {
		// A replica converges following or leading, and writes nothing
		// until elected: what a leader starts, it starts then
		// (election.go).
		return d.campaign(ctx, d.opts.Config.String("gateway.store"))
	}
	// An install the last run left running ended with it, unseen.
	d.jobs = jobs.New(jobs.Options{Store: d.db, Logger: d.log.With("module", "jobs")})
	if err := d.jobs.Recover(ctx); err != nil {
		return err
	}
	if d.mode() == contract.ModeGateway {
		if err := d.startGateway(ctx, d.db); err != nil {
			return err
		}
		d.log.Info("gateway ready", "home", d.opts.Home, "version", d.opts.Version, "http", d.httpURL)
		d.runGatewayLoops()
		return nil
	}
	return d.startWorker(ctx, local)
}

// runGatewayLoops starts a gateway's background work, which Stop waits for.
func (d *Daemon) runGatewayLoops() {
	d.bg.Add(2)
	go func() {
		defer d.bg.Done()
		d.maintain()
	}()
	go func() {
		defer d.bg.Done()
		// Workers past gateway.disconnectedRetentionMs go within a minute
		// of it, whether or not anything else happens.
		d.fleet.Maintain(d.life)
	}()
}

// startWorker is a worker's startup after the store opened: its drivers,
// then the engine over them, which the lease port serves.
func (d *Daemon) startWorker(ctx context.Context, db *sqlite.DB) error {
	if err := d.setupDrivers(ctx, db); err != nil {
		return err
	}
	d.installer = d.newInstaller(db)
	skew, clockNow := d.clockAtStart(ctx)
	d.engine = leasing.New(d.engineOptions(db, skew, clockNow))
	d.leases = d.engine
	if err := d.recordRejections(ctx); err != nil {
		return err
	}
	if err := d.engine.Start(ctx); err != nil {
		return err
	}
	d.engine.EachLease(d.metrics.SeedLease)
	d.log.Info("daemon ready", "home", d.opts.Home, "version", d.opts.Version)
	d.runWorkerLoops(clockNow)
	return nil
}

// setupDrivers starts the drivers, when Options ask for it, once the home
// is claimed, telling them the components earlier runs installed.
func (d *Daemon) setupDrivers(ctx context.Context, db *sqlite.DB) error {
	if d.opts.SetupDrivers == nil {
		return nil
	}
	installed := map[contract.Platform][]string{}
	recs, err := db.Components(ctx)
	if err != nil {
		return err
	}
	for _, r := range recs {
		installed[r.Platform] = append(installed[r.Platform], r.Receipt)
	}
	// Written before ready closes; read only after.
	set, err := d.opts.SetupDrivers(ctx, installed)
	if err != nil {
		return err
	}
	d.opts.Drivers, d.opts.DriverNotes, d.opts.Rejections, d.opts.Prerequisites = set.Drivers, set.Notes, set.Rejections, set.Prerequisites
	return nil
}

// engineOptions are a worker's engine options, from the config and the
// daemon's own parts: skew and clockNow are the clocks as startup read
// them.
func (d *Daemon) engineOptions(db *sqlite.DB, skew time.Duration, clockNow wallclock.Reading) leasing.Options {
	cfg := d.opts.Config
	var st leasing.Store = db
	if d.opts.engineStore != nil {
		st = d.opts.engineStore(db)
	}
	return leasing.Options{
		Wall:           d.opts.Wall,
		StartClockSkew: skew,
		StartClock:     toStore(clockNow),
		Store:          st,
		Drivers:        d.opts.Drivers,
		DriverNotes:    driverNotes(d.opts.DriverNotes, d.opts.Rejections),
		Limits:         core.LimitsFrom(cfg, d.opts.Host),
		ClassDefaults:  d.opts.ClassDefaults,
		DefaultTTL:     time.Duration(cfg.Int("lease.defaultTtlMs")) * time.Millisecond,
		MaxTTL:         time.Duration(cfg.Int("lease.maxTtlMs")) * time.Millisecond,
		MinTTL:         time.Duration(cfg.Int("lease.minTtlMs")) * time.Millisecond,
		Logger:         d.log.With("module", "leasing"),
		Publish:        d.bus.Publish,
		LeaseEnded:     d.leaseEnded,
		// A lease's file transfers and commands end before its device
		// is cleaned.
		LeaseEndParticipants: []leasing.LeaseEndParticipant{stagingParticipant{d}, execParticipant{d}},
		Installer:            d.installer,
		DownloadPolicy:       cfg.String("downloads.policy"),
		Health: leasing.HealthPolicy{
			Enabled:            cfg.Bool("health.enabled"),
			ProbeInterval:      time.Duration(cfg.Int("health.probeIntervalMs")) * time.Millisecond,
			StableObservations: int(cfg.Int("health.stableObservations")),
			MaxAttempts:        int(cfg.Int("health.maxRecoveryAttempts")),
			Backoff:            time.Duration(cfg.Int("health.recoveryBackoffMs")) * time.Millisecond,
			MaxConcurrent:      int(cfg.Int("health.maxConcurrentRecoveries")),
		},
		DeviceHealth: d.deviceHealth,
		// A decision the store could not save stops the daemon: memory is
		// ahead of the database, and the next start converges from what
		// was saved.
		Fatal: func(err error) {
			d.log.Error("could not save a decision; stopping", "err", err)
			d.requestStop()
		},
		WarmPool: warmPoolPolicy(cfg),
		EndWait:  time.Duration(cfg.Int("lease.endWaitMs")) * time.Millisecond,
		FreshIdentity: map[contract.Platform]bool{
			contract.PlatformIOS:     cfg.String("lease.identity.ios") == "fresh",
			contract.PlatformAndroid: cfg.String("lease.identity.android") == "fresh",
		},
		DefaultMode: map[contract.Platform]contract.DeviceMode{
			contract.PlatformIOS: contract.DeviceMode(cfg.String("ios.defaultMode")),
		},
		Idle: leasing.IdlePolicy{
			Enabled:           true,
			ShutdownAfter:     time.Duration(cfg.Int("idle.shutdownAfterMs")) * time.Millisecond,
			DeleteAfter:       time.Duration(cfg.Int("idle.deleteAfterMs")) * time.Millisecond,
			PressureThreshold: cfg.Int("diskPressure.freeBytesThreshold"),
			FreeBytes:         freeBytes,
		},
		Bind: leasing.BindPolicy{Processes: d.opts.Processes},
		Stall: leasing.StallPolicy{
			Multiplier: int(cfg.Int("stalledTransition.thresholdMultiplier")),
			Minimum:    time.Duration(cfg.Int("stalledTransition.minimumThresholdMs")) * time.Millisecond,
		},
		Quarantine: leasing.QuarantinePolicy{
			MaxRetries: int(cfg.Int("warmPool.quarantine.maxRetries")),
			Backoff:    time.Duration(cfg.Int("warmPool.quarantine.retryBackoffMs")) * time.Millisecond,
			Multiplier: int(cfg.Int("warmPool.quarantine.retryBackoffMultiplier")),
			MaxBackoff: time.Duration(cfg.Int("warmPool.quarantine.maxRetryBackoffMs")) * time.Millisecond,
		},
	}
}

// runWorkerLoops starts a worker's background work, which Stop waits for.
func (d *Daemon) runWorkerLoops(clockNow wallclock.Reading) {
	// Readiness counts the uplink from now, not from joinGateway's first
	// turn.
	d.uplinkState.target(d.gatewayConfig().String("gateway.url") != "", time.Now())
	d.bg.Add(4)
	go func() {
		defer d.bg.Done()
		d.watchClock(clockNow)
	}()
	go func() {
		defer d.bg.Done()
		d.joinGateway()
	}()
	go func() {
		defer d.bg.Done()
		d.maintain()
	}()
	go func() {
		defer d.bg.Done()
		d.readToolVersions()
	}()
}

// warmPoolPolicy reads warmPool.* from the config.
func warmPoolPolicy(cfg *config.Config) *leasing.WarmPoolPolicy {
	wp := &leasing.WarmPoolPolicy{
		Enabled: cfg.Bool("warmPool.enabled"),
		Reserve: map[contract.Platform]int{
			contract.PlatformIOS:     int(cfg.Int("warmPool.reserveRunning.ios")),
			contract.PlatformAndroid: int(cfg.Int("warmPool.reserveRunning.android")),
		},
		MaxConcurrentBoots: int(cfg.Int("warmPool.maxConcurrentBoots")),
		RewarmReleased:     cfg.Bool("warmPool.rewarmReleased"),
	}
	for _, t := range cfg.Targets("warmPool.targets") {
		wp.Targets = append(wp.Targets, contract.WarmTarget{Platform: contract.Platform(t.Platform), Model: t.Model, OSVersion: t.OSVersion,
			ImageTag: t.ImageTag, Mode: contract.DeviceMode(t.Mode), Count: t.Count})
	}
	return wp
}
