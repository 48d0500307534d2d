package daemon

import (
	"context"
	"sync"
	"time"

	"github.com/simlock/simlock/internal/contract"
)

// The bounds of the probes' checks: a check that takes longer fails.
const (
	// liveBound is how long the liveness probe waits for the decision
	// lock. Decisions are short (a commit under the lock); a slow disk may
	// stretch one to a second or two, never to this.
	liveBound = 5 * time.Second
	// storeBound is how long the readiness probe waits for the store to
	// answer a one-row read.
	storeBound = 2 * time.Second
)

// decider is what the liveness probe asks of the lease port: Err takes
// its decision lock.
type decider interface{ Err() error }

// Health runs the checks of GET /livez (live) or GET /readyz. Liveness
// asks whether the daemon still decides: once startup converged, that
// the lease port's decision lock is had within liveBound, and that no
// failed commit stopped it; a lock that is never had again (a deadlock)
// fails it, which is what a restart cures. Readiness asks whether it may
// be sent work: startup converged, the store answers within storeBound,
// on a worker whose config names a gateway, the uplink is connected, and
// on a gateway replica, it leads.
// Details are in words and name no path and no address, since the probes
// answer without a token.
func (d *Daemon) Health(ctx context.Context, live bool) []contract.HealthCheck {
	if live {
		return []contract.HealthCheck{d.checkServing(ctx)}
	}
	checks := []contract.HealthCheck{d.checkStartup(), d.checkStore(ctx)}
	if d.mode() == contract.ModeWorker {
		if c, ok := d.uplinkState.check(); ok {
			checks = append(checks, c)
		}
	}
	if c, ok := d.leaderCheck(); ok {
		checks = append(checks, c)
	}
	return checks
}

// checkStartup passes once startup converged, until the daemon stops.
func (d *Daemon) checkStartup() contract.HealthCheck {
	c := contract.HealthCheck{Name: contract.HealthStartup}
	select {
	case <-d.ready:
	default:
		c.Detail = "starting"
		return c
	}
	d.mu.Lock()
	stopping := d.stopping
	d.mu.Unlock()
	switch {
	case d.startErr != nil:
		c.Detail = "startup failed; the daemon log says why"
	case stopping:
		c.Detail = "stopping"
	default:
		c.OK = true
	}
	return c
}

// checkStore reads the newest event seq, a one-row read of an index.
func (d *Daemon) checkStore(ctx context.Context) contract.HealthCheck {
	c := contract.HealthCheck{Name: contract.HealthStore}
	select {
	case <-d.storeReady:
	default:
		c.Detail = "not open yet"
		return c
	}
	if d.db == nil {
		c.Detail = "could not be opened; the daemon log says why"
		return c
	}
	ctx, cancel := context.WithTimeout(ctx, storeBound)
	defer cancel()
	if _, err := d.db.LastSeq(ctx); err != nil {
		d.log.Debug("readiness: the store did not answer", "err", err)
		if ctx.Err() != nil {
			c.Detail = "did not answer within " + storeBound.String()
		} else {
			c.Detail = "a read failed; the daemon log says why"
		}
		return c
	}
	c.OK = true
	return c
}

// checkServing takes the decision lock of the daemon's lease port, within
// liveBound. Before startup converged there is no port yet: the daemon
// serves (it answered this probe), so it passes.
func (d *Daemon) checkServing(ctx context.Context) contract.HealthCheck {
	c := contract.HealthCheck{Name: contract.HealthServing, OK: true}
	select {
	case <-d.ready:
	default:
		return c
	}
	var port decider
	switch {
	case d.engine != nil:
		port = d.engine
	case d.leasing != nil:
		port = d.leasing
	default:
		return c
	}
	err, done := d.lockProbe.run(ctx, port, liveBound)
	switch {
	case !done:
		c.OK, c.Detail = false, "the decision lock was not had within "+liveBound.String()
	case err != nil:
		c.OK, c.Detail = false, "decisions stopped after a failed commit; the daemon log says why"
	}
	return c
}

// lockProbe runs at most one wait for a decision lock at a time: a probe
// that finds one still waiting (the lock held past the last probe's
// bound) waits for that one rather than start another, so a deadlocked
// daemon probed every few seconds gathers one stuck goroutine, not one a
// probe.
type lockProbe struct {
	mu sync.Mutex
	// mu guards the fields below: the wait in flight (nil when none),
	// closed when it ends, with its result.
	pending chan struct{}
	err     error
}

// run waits for port's decision lock, at most bound or until ctx ends;
// done is false when the lock was not had by then.
func (p *lockProbe) run(ctx context.Context, port decider, bound time.Duration) (err error, done bool) {
	p.mu.Lock()
	wait := p.pending
	if wait == nil {
		wait = make(chan struct{})
		p.pending = wait
		go func() {
			err := port.Err()
			p.mu.Lock()
			p.err, p.pending = err, nil
			p.mu.Unlock()
			close(wait)
		}()
	}
	p.mu.Unlock()
	t := time.NewTimer(bound)
	defer t.Stop()
	select {
	case <-wait:
		p.mu.Lock()
		defer p.mu.Unlock()
		return p.err, true
	case <-t.C:
	case <-ctx.Done():
	}
	return nil, false
}

// uplinkState is a worker's uplink as readiness sees it: whether its
// config names a gateway, and whether it is connected, since when.
type uplinkState struct {
	mu sync.Mutex
	// mu guards the fields below.
	configured, connected bool
	// url is the gateway replica connected to.
	url string
	// since is when the uplink last went down, or when a gateway was
	// first named while it was not connected.
	since time.Time
}

// target records whether the config names a gateway now.
func (u *uplinkState) target(named bool, now time.Time) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if named && !u.configured && !u.connected {
		u.since = now
	}
	u.configured = named
}

// up records that the uplink connected (true) to the gateway at url, or
// ended (false).
func (u *uplinkState) up(connected bool, url string, now time.Time) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.connected && !connected {
		u.since = now
	}
	u.connected, u.url = connected, url
}

// check is the uplink check, or false when no gateway is named.
func (u *uplinkState) check() (contract.HealthCheck, bool) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if !u.configured {
		return contract.HealthCheck{}, false
	}
	c := contract.HealthCheck{Name: contract.HealthUplink, OK: u.connected}
	if !u.connected {
		c.Detail = "not connected to the gateway since " + u.since.UTC().Format(time.RFC3339)
	} else if u.url != "" {
		c.Detail = "connected to " + u.url
	}
	return c, true
}
