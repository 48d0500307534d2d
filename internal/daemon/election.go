package daemon

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"time"

	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/jobs"
	"github.com/simlock/simlock/internal/leader"
	"github.com/simlock/simlock/internal/store/postgres"
)

// leaderGroup is the election group of the gateway replicas of one
// database.
const leaderGroup = "gateway"

// leaderStore is what the election needs of a replica's store: the fenced
// PostgreSQL store.
type leaderStore interface {
	Lead(ctx context.Context, term int64) error
}

var _ leaderStore = (*postgres.DB)(nil)

// leaderTimeout is gateway.leaderTimeoutMs.
func (d *Daemon) leaderTimeout() time.Duration {
	return time.Duration(d.opts.Config.Int("gateway.leaderTimeoutMs")) * time.Millisecond
}

// advertiseURL is where followers and clients reach this replica:
// gateway.advertiseUrl, else this machine's name and the HTTP port bound.
func (d *Daemon) advertiseURL() string {
	if u := d.opts.Config.String("gateway.advertiseUrl"); u != "" {
		return u
	}
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "localhost"
	}
	port := ""
	if u, err := url.Parse(d.httpURL); err == nil {
		port = u.Port()
	}
	return "http://" + net.JoinHostPort(host, port)
}

// campaign starts the replica's elector and the watch that keeps
// d.replica's view of who leads current; both end with the daemon's life,
// and Stop waits for them (and for a leader's startup) before it closes
// what they use. It returns once the first round is decided (this replica
// serves as leader, another leads, or the leader timeout passed with
// neither), so that calls parked on startup meet a lone replica leading
// rather than a moment of following.
func (d *Daemon) campaign(ctx context.Context, storeURL string) error {
	self := d.advertiseURL()
	timeout := d.leaderTimeout()
	var e *leader.Elector
	e, err := leader.New(leader.Options{
		URL: storeURL, Group: leaderGroup, AdvertiseURL: self, Timeout: timeout,
		OnElected: func(term int64) { d.elected(term, self) },
		OnDeposed: func(term int64) { d.deposed(term, "the elector lost the leadership") },
	})
	if err != nil {
		return err
	}
	d.replica.see(contract.Leadership{Role: contract.RoleFollower, Self: self})
	d.replica.wg.Add(2)
	go func() {
		defer d.replica.wg.Done()
		_ = e.Run(d.life)
	}()
	go func() {
		defer d.replica.wg.Done()
		t := time.NewTicker(timeout / 10)
		defer t.Stop()
		var reloaded time.Time
		for {
			d.observe(e, self)
			// A follower checks the tokens of the calls it answers itself
			// (status, metrics, readiness): those the leader creates or
			// revokes reach it within followerTokenReload.
			if !d.replica.leading.Load() && time.Since(reloaded) >= followerTokenReload {
				reloaded = time.Now()
				if err := d.tokens.reload(d.life); err != nil && d.life.Err() == nil {
					d.log.Warn("a follower could not read the tokens again", "err", err)
				}
			}
			select {
			case <-d.life.Done():
				return
			case <-t.C:
			}
		}
	}()
	d.log.Info("gateway replica campaigning", "self", self, "leaderTimeout", timeout)
	tick := time.NewTicker(timeout / 20)
	defer tick.Stop()
	deadline := time.After(timeout)
	for !d.replica.leading.Load() && d.replica.stopErr() == nil {
		if info, ok := e.Leader(); ok && info.Live && e.Term() == 0 {
			return nil // another replica leads
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-d.life.Done():
			return d.life.Err()
		case <-deadline:
			return nil
		case <-tick.C:
		}
	}
	return nil
}

// elected is the elector's news that this replica won term: unless it is
// stopping, it starts leading, beside the elector (whose heartbeat must go
// on while the fleet and the queue load).
func (d *Daemon) elected(term int64, self string) {
	if d.replica.stopErr() != nil {
		// Deposed (or failed) and stopping: this process never leads
		// again, or a second fleet and queue would start beside the
		// first's; it runs itself again as a follower, and its elector's
		// session, which holds the term it just won, ends with the stop.
		d.log.Info("elected while stopping; not leading", "term", term)
		return
	}
	d.replica.won.Store(term)
	d.replica.wg.Add(1)
	go func() {
		defer d.replica.wg.Done()
		d.lead(term, self)
	}()
}

// followerTokenReload is how often a follower reads the tokens again.
const followerTokenReload = 2 * time.Second

// observe records who leads as the elector last read it.
func (d *Daemon) observe(e *leader.Elector, self string) {
	info, ok := e.Leader()
	if !ok {
		return
	}
	l := contract.Leadership{Role: contract.RoleFollower, Term: info.Term, LeaderURL: info.URL, Self: self}
	if info.Live || d.replica.leading.Load() {
		l.Since = info.Since.UnixMilli()
	}
	if !info.Live && !d.replica.leading.Load() {
		// The last leader's session has ended and none has taken over.
		l.LeaderURL = ""
	}
	if d.replica.leading.Load() && e.Term() == info.Term {
		l.Role = contract.RoleLeader
	}
	d.replica.see(l)
}

// lead is a replica's start as leader of term: its writes fenced with the
// term, the tokens read again (a follower's are stale), jobs recovery, the
// fleet and its queue, the loops; then it serves. A failure stops the
// daemon with it.
func (d *Daemon) lead(term int64, self string) {
	ctx := d.life
	err := d.startLeading(ctx, term)
	if err != nil {
		if ctx.Err() != nil {
			return // a stop cut it short
		}
		if errors.Is(err, leader.ErrDeposed) {
			d.deposed(term, err.Error())
			return
		}
		d.replica.fail(fmt.Errorf("start as the leader of term %d: %w", term, err))
		d.log.Error("could not start as leader; stopping", "term", term, "err", err)
		d.requestStop()
		return
	}
	since := time.Now().UnixMilli()
	d.replica.leading.Store(true)
	d.replica.see(contract.Leadership{Role: contract.RoleLeader, Term: term, LeaderURL: self, Since: since, Self: self})
	d.log.Info("elected leader", "term", term, "url", self)
	if err := d.emit(ctx, contract.EvGatewayElected, map[string]any{"term": term, "url": self}); err != nil && !errors.Is(err, leader.ErrDeposed) {
		d.log.Warn("could not record the election", "err", err)
	}
}

// startLeading is lead's work until the replica serves.
func (d *Daemon) startLeading(ctx context.Context, term int64) error {
	ls, ok := d.db.(leaderStore)
	if !ok {
		return errors.New("the store of a gateway replica is not fenced")
	}
	if err := ls.Lead(ctx, term); err != nil {
		return err
	}
	if err := d.tokens.reload(ctx); err != nil {
		return err
	}
	d.jobs = jobs.New(jobs.Options{Store: d.db, Logger: d.log.With("module", "jobs")})
	if err := d.jobs.Recover(ctx); err != nil {
		return err
	}
	if err := d.startGateway(ctx, d.db); err != nil {
		return err
	}
	d.runGatewayLoops()
	return nil
}

// deposed stops a replica that has lost the term it won (the elector
// stepped down, or the store refused a write fenced with it) the way a
// stop does; Run then returns an error wrapping leader.ErrDeposed. A
// deposition seen as the daemon stops is the stop's own doing.
func (d *Daemon) deposed(term int64, why string) {
	if d.life.Err() != nil || term == 0 || d.replica.won.Load() != term {
		return
	}
	if d.replica.depose(fmt.Errorf("term %d: %s: %w", term, why, leader.ErrDeposed)) {
		d.log.Warn("deposed", "term", term, "why", why)
		d.requestStop()
	}
}
