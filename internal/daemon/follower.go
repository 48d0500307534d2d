package daemon

import (
	"crypto/x509"
	"fmt"
	"net/http"

	"github.com/simlock/simlock/internal/apiclient"
	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/uplink"
)

// What a gateway replica that does not lead serves. It holds none of the
// gateway's machinery (d.fleet, d.leasing, d.leases and d.jobs are nil),
// so each surface has one gate, run before anything reads them: the HTTP
// API forwards to the leader (httpapi's follow, fed by following), the
// socket answers NOT_LEADER (followerRefusal, from dispatch), status says
// whom it follows (replicaStatus) and readiness fails (leaderCheck).

// view is who leads as this replica last saw it, with its own role as the
// gates see it (whether it serves); ok is false on a daemon that is not a
// replica.
func (r *replica) view() (l contract.Leadership, ok bool) {
	l, ok = r.leadership()
	if !ok {
		return l, false
	}
	l.Role = contract.RoleFollower
	if r.serves() {
		l.Role = contract.RoleLeader
	}
	return l, true
}

// following is the HTTP API's gate (httpapi.Options.Follow): whether this
// daemon is a replica that does not lead, and who leads.
func (d *Daemon) following() (contract.Leadership, bool) {
	if d.replica.serves() {
		return contract.Leadership{}, false
	}
	l, _ := d.replica.view()
	return l, true
}

// followerAnswers reports whether a replica that does not lead answers op
// itself: its own status, config, metrics, stop and ping, which read nothing of
// the gateway's machinery. hello and call.cancel are the connection's,
// answered before any dispatch.
func followerAnswers(op contract.Op) bool {
	switch op {
	case contract.OpStatusGet, contract.OpConfigGet, contract.OpMetricsGet, contract.OpDaemonStop, contract.OpPing:
		return true
	}
	return false
}

// followerRefusal is the socket's gate: NOT_LEADER, naming the leader, for
// an operation a replica that does not lead leaves to the leader; nil
// when the daemon serves op.
func (d *Daemon) followerRefusal(op contract.Op) error {
	if d.replica.serves() || followerAnswers(op) {
		return nil
	}
	l, _ := d.replica.view()
	return contract.NotLeader(l)
}

// replicaStatus fills status.leadership on a replica, and reports whether
// the daemon follows: its status is then its daemon and host and whom it
// follows, nothing of the fleet.
func (d *Daemon) replicaStatus(s *contract.Status) (follows bool) {
	l, ok := d.replica.view()
	if !ok {
		return false
	}
	s.Leadership = &l
	return l.Role == contract.RoleFollower
}

// leaderCheck is the readiness check of a replica: it passes on the
// leader, so that a load balancer that checks /readyz sends work there
// only. false on a daemon that is not a replica.
func (d *Daemon) leaderCheck() (contract.HealthCheck, bool) {
	l, ok := d.replica.view()
	if !ok {
		return contract.HealthCheck{}, false
	}
	c := contract.HealthCheck{Name: contract.HealthLeader, OK: l.Role == contract.RoleLeader}
	switch {
	case c.OK:
	case l.LeaderURL == "" || l.LeaderURL == l.Self:
		c.Detail = "no leader yet"
	default:
		c.Detail = fmt.Sprintf("following %s (term %d)", l.LeaderURL, l.Term)
	}
	return c, true
}

// leaderRoots are the roots a replica checks an https leader's certificate
// against: the system's, and SIMLOCK_CA's when set (Options.CAFile); nil
// means the system's alone. A CA file that cannot be read is warned of and
// left out rather than stopping the start: the variable is the CLI's too,
// and most daemons forward nothing.
func (d *Daemon) leaderRoots() *x509.CertPool {
	if d.opts.CAFile == "" {
		return nil
	}
	pool, err := x509.SystemCertPool()
	if err != nil {
		pool = x509.NewCertPool()
	}
	pool, err = apiclient.AppendCA(pool, d.opts.CAFile)
	if err != nil {
		d.log.Warn("an https leader is checked against the system's roots only", "err", err)
		return nil
	}
	return pool
}

// followerRefusedUplink records an uplink refused by a replica that does
// not lead, and reports whether it did. A follower writes nothing to the
// database, so the refusal is a line of its log, not a worker.rejected
// event (the leader records those); the worker follows the refusal's
// leaderUrl.
func (d *Daemon) followerRefusedUplink(r *http.Request, err *contract.Error) bool {
	if d.replica.serves() {
		return false
	}
	id := r.Header.Get(uplink.HeaderWorkerID)
	if uplink.CheckWorkerID(id) != nil {
		id = "" // not a name to repeat in the log
	}
	d.log.Info("uplink refused: this replica does not lead", "code", err.Code, "leaderUrl", err.Details["leaderUrl"],
		"workerId", id, "remote", r.RemoteAddr)
	return true
}
