package daemon

import (
	"context"
	"errors"
	"net"
	"net/http"
	"os"
	"reflect"
	"time"

	"github.com/simlock/simlock/internal/config"
	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/gateway"
	"github.com/simlock/simlock/internal/ownership"
	"github.com/simlock/simlock/internal/uplink"
)

// uplinkMaxFrame is what a gateway reads from a worker: a worker's answers
// (a full status) are larger than any call, as the typed client allows.
const uplinkMaxFrame = contract.MaxFrameLen * 8

// Uplink serves a worker's uplink on a gateway: the worker's id and label
// are checked, the WebSocket accepted, and the fleet serves it until it
// ends.
func (b httpBackend) Uplink(w http.ResponseWriter, r *http.Request, tok contract.TokenRecord) error {
	d := b.d
	select {
	case <-d.ready:
	case <-r.Context().Done():
		return contract.Errorf(contract.CodeDaemonConnectionLost, "the uplink went away while the gateway was starting")
	}
	if d.startErr != nil {
		return contract.Errorf(contract.CodeDaemonStartupFailed, "gateway startup failed: %v", d.startErr)
	}
	if d.fleet == nil {
		return contract.Errorf(contract.CodeUnsupportedInWorkerMode, "this daemon is a worker; a worker dials its gateway, it is not dialed").
			With("operation", "uplink")
	}
	id := r.Header.Get(uplink.HeaderWorkerID)
	label := r.Header.Get(uplink.HeaderWorkerLabel)
	if label == "" {
		label = id
	}
	for _, check := range []error{uplink.CheckWorkerID(id), uplink.CheckLabel(label)} {
		if check != nil {
			ce := check.(*contract.Error)
			b.UplinkRefused(r, ce)
			return ce
		}
	}
	if err := d.fleet.Claim(id, tok.ID); err != nil {
		ce := err.(*contract.Error)
		b.UplinkRefused(r, ce)
		return ce
	}
	conn, err := uplink.Accept(w, r, uplink.Options{MaxFrame: uplinkMaxFrame, Heartbeat: heartbeat(d.opts.Config), OnRTT: d.metrics.ObserveUplinkRTT})
	if err != nil {
		// The WebSocket library has answered the request itself.
		d.log.Info("uplink upgrade failed", "workerId", id, "err", err)
		return nil
	}
	d.fleet.Attach(d.life, gateway.Attachment{ID: id, Label: label, TokenID: tok.ID, Conn: conn})
	return nil
}

// UplinkRefused records a refused uplink on a gateway (coalesced).
func (b httpBackend) UplinkRefused(r *http.Request, err *contract.Error) {
	d := b.d
	if d.followerRefusedUplink(r, err) {
		return
	}
	select {
	case <-d.ready:
	default:
		return // not serving uplinks yet; the worker retries
	}
	if d.fleet == nil {
		return
	}
	host, _, splitErr := net.SplitHostPort(r.RemoteAddr)
	if splitErr != nil {
		host = r.RemoteAddr
	}
	id := r.Header.Get(uplink.HeaderWorkerID)
	if uplink.CheckWorkerID(id) != nil {
		id = "" // not a name to repeat in an event
	}
	d.fleet.Rejected(time.Now(), err.Code, err.Message, id, host)
}

func heartbeat(cfg *config.Config) time.Duration {
	return time.Duration(cfg.Int("gateway.heartbeatMs")) * time.Millisecond
}

// joinEvery is how often a worker with no gateway configured looks at its
// config again, and how often a connected one checks it still names the
// same gateway.
const joinEvery = 2 * time.Second

// joinDialTimeout bounds one dial of one gateway replica, the handshake
// included.
const joinDialTimeout = 10 * time.Second

// joinGateway keeps a worker's uplink to its gateway (gatewayTargets: the
// replicas of gateway.urls, else gateway.url): each round dials them in
// order, following a refusing replica's hint to the leader when the
// leader is one of them (uplink.DialFirst), and serves the gateway as an
// admin session (the worker's own config named it). After the uplink
// ends, or a round in which every replica failed, it dials again with
// backoff (uplink.Backoff: quick attempts capped at 2 s first, so a
// restarted gateway has its workers back within seconds, then doubling to
// 30 s; jittered). The gateway.* keys are read from the config file at
// each attempt and checked while connected, so `simlock config set
// gateway.url …` takes effect without a restart.
func (d *Daemon) joinGateway() {
	in, err := ownership.LoadInstance(d.opts.Home)
	if err != nil {
		d.log.Error("cannot join a gateway: no instance id", "err", err)
		return
	}
	var backoff uplink.Backoff
	var targets []string
	warned := ""
	round := func() (time.Duration, error) {
		cfg := d.gatewayConfig()
		for targets = gatewayTargets(cfg); ; targets = gatewayTargets(cfg) {
			d.uplinkState.target(len(targets) > 0, time.Now())
			if len(targets) > 0 {
				break
			}
			if !d.pause(joinEvery) {
				return 0, nil
			}
			cfg = d.gatewayConfig()
		}
		dial := func(ctx context.Context, u string) (*uplink.Conn, error) {
			return uplink.Dial(ctx, u, cfg.String("gateway.token"), in.ID, d.labelOf(cfg), uplink.Options{Heartbeat: heartbeat(cfg)})
		}
		conn, at, err := uplink.DialFirst(d.life, targets, joinDialTimeout, dial, func(leader string) {
			// Once per leader named, not once per round.
			if leader != warned {
				warned = leader
				d.log.Warn("a gateway replica named a leader this worker's config does not list; not dialing it",
					"leader", leader, "gateway.urls", targets)
			}
		})
		if err != nil {
			return 0, err
		}
		return d.joinOnce(conn, at, cfg)
	}
	uplink.Redial(d.life, &backoff, round, func(err error, wait time.Duration) {
		d.log.Warn("uplink to the gateway ended; dialing again", "gateway", targets, "err", err, "in", wait)
	})
}

// gatewayTargets are the gateway addresses a worker dials, in order:
// gateway.urls when set, else gateway.url; none when neither is.
func gatewayTargets(cfg *config.Config) []string {
	if urls := cfg.List("gateway.urls"); len(urls) > 0 {
		return urls
	}
	if u := cfg.String("gateway.url"); u != "" {
		return []string{u}
	}
	return nil
}

// joinOnce serves the uplink conn, made to the gateway at url, until it
// ends or a live key of the config changes (config.LiveKeys); up is how
// long the uplink was up.
func (d *Daemon) joinOnce(conn *uplink.Conn, url string, cfg *config.Config) (up time.Duration, err error) {
	joined := time.Now()
	d.log.Info("joined the gateway", "gateway", url)
	d.uplinkState.up(true, url, joined)
	defer func() { d.uplinkState.up(false, "", time.Now()) }()
	c := newConn(d, conn)
	c.trusted = true
	d.mu.Lock()
	if d.stopping {
		d.mu.Unlock()
		conn.Close()
		return 0, errors.New("the daemon is stopping")
	}
	d.conns[c] = struct{}{}
	d.mu.Unlock()
	done := make(chan struct{})
	go func() {
		defer close(done)
		c.run()
	}()
	t := time.NewTicker(joinEvery)
	defer t.Stop()
	for {
		select {
		case <-done:
			return time.Since(joined), errors.New("the uplink closed")
		case <-d.life.Done():
			<-done
			return time.Since(joined), nil
		case <-t.C:
			now := d.gatewayConfig()
			for _, k := range config.LiveKeys() {
				if !sameSetting(now, cfg, k) {
					c.close()
					<-done
					return time.Since(joined), errors.New(k + " changed")
				}
			}
		}
	}
}

// sameSetting reports whether a and b have the same value for key, of any
// kind (gateway.urls is a list).
func sameSetting(a, b *config.Config, key string) bool {
	va, _ := a.Get(key)
	vb, _ := b.Get(key)
	return reflect.DeepEqual(va, vb)
}

// gatewayConfig is the config as the file says now, for the gateway.*
// keys; the config the daemon started with when there is no file, or it
// is unreadable (the daemon's own was checked when it started).
func (d *Daemon) gatewayConfig() *config.Config {
	if _, err := os.Stat(config.Path(d.opts.Home)); err != nil {
		return d.opts.Config
	}
	if cfg, err := config.Load(d.opts.Home); err == nil {
		return cfg
	}
	return d.opts.Config
}

// pause waits for d, or until the daemon stops; false if it stopped.
func (d *Daemon) pause(wait time.Duration) bool {
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-d.life.Done():
		return false
	}
}

// labelOf is how this worker is named in its gateway's fleet: gateway.label,
// else the host name.
func (d *Daemon) labelOf(cfg *config.Config) string {
	if l := cfg.String("gateway.label"); l != "" {
		return l
	}
	if h, err := os.Hostname(); err == nil && h != "" {
		return h
	}
	return "worker"
}
