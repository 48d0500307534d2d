package daemon

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/metrics"
)

// newMetrics makes the daemon's registry and taps the bus with its fold,
// before anything is published, so the counters see every fact once.
func (d *Daemon) newMetrics() {
	d.metrics = metrics.New(metrics.Options{Version: d.opts.Version, Mode: d.mode(), Read: d.metricsState})
	d.bus.Tap(d.metrics.Fold)
}

// metricsHandler serves GET /metrics from the daemon's registry.
func (d *Daemon) metricsHandler() http.Handler {
	return promhttp.HandlerFor(d.metrics.Registry(), promhttp.HandlerOpts{})
}

// metricsState is what a scrape reads of the daemon's present state: the
// engine's counts on a worker, the fleet's and its queue's on a gateway.
// Until startup has converged there is none.
func (d *Daemon) metricsState() metrics.Snapshot {
	select {
	case <-d.ready:
	default:
		return metrics.Snapshot{}
	}
	var s metrics.Snapshot
	if l, ok := d.replica.leadership(); ok {
		s.Replica = &metrics.Replica{Leader: l.Role == contract.RoleLeader, Term: l.Term, Since: l.Since}
	}
	switch {
	case !d.replica.serves():
		// A follower's fleet and queue are the leader's to report.
	case d.engine != nil:
		for _, g := range d.engine.Gauges() {
			p := metrics.PlatformFrom(g.Platform, g.Capacity)
			p.QueueDepth, p.OldestQueuedAt = g.QueueDepth, g.OldestQueuedAt
			p.Leases, p.Devices = g.Leases, g.Devices
			s.Platforms = append(s.Platforms, p)
		}
	case d.fleet != nil && d.leasing != nil:
		fg := d.fleet.Gauges()
		lines := d.leasing.Lines()
		s.Workers = fg.Workers
		for _, pl := range contract.Platforms() {
			p := metrics.PlatformFrom(pl, fg.Capacity[pl])
			p.Leases, p.Devices = fg.Leases[pl], fg.Devices[pl]
			for _, l := range lines {
				if l.Platform == pl {
					p.QueueDepth, p.OldestQueuedAt = l.Depth, l.OldestCreatedAt
				}
			}
			s.Platforms = append(s.Platforms, p)
		}
	}
	return s
}

// metricsOps answer the metrics over the socket, as GET /metrics does.
func metricsOps() []opEntry {
	return []opEntry{
		{op: contract.OpMetricsGet, both: handle(func(c *call, _ contract.Empty) (contract.MetricsResult, error) {
			text, err := c.d.metrics.Text()
			if err != nil {
				return contract.MetricsResult{}, contract.Errorf(contract.CodeInternal, "gather metrics: %v", err)
			}
			return contract.MetricsResult{Text: text}, nil
		})},
	}
}
