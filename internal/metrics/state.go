package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/simlock/simlock/internal/contract"
)

// The gauges of the present state, read at each scrape.
var (
	descQueueDepth = prometheus.NewDesc("simlock_queue_depth",
		"Requests waiting in the queue, by platform (requests whose device is being started are not in it).", []string{"platform"}, nil)
	descOldestWait = prometheus.NewDesc("simlock_queue_oldest_wait_seconds",
		"How long the earliest request still in the platform's queue has waited; 0 when none waits.", []string{"platform"}, nil)
	descLeases = prometheus.NewDesc("simlock_leases_active",
		"Active leases, by platform.", []string{"platform"}, nil)
	descDevices = prometheus.NewDesc("simlock_devices",
		"Devices kept, by platform and state.", []string{"platform", "state"}, nil)
	descSlots = prometheus.NewDesc("simlock_capacity_slots",
		"Running slots, by platform: busy (running or being started) and free (left under the limit).", []string{"platform", "state"}, nil)
	descDownloads = prometheus.NewDesc("simlock_downloads_active",
		"Runtime installs running on this daemon.", nil, nil)
	descWorkers = prometheus.NewDesc("simlock_workers",
		"A gateway's workers, by connection (connected, disconnected, incompatible).", []string{"connection"}, nil)
	descLeader = prometheus.NewDesc("simlock_gateway_leader",
		"1 when this gateway replica leads its database's replicas, else 0.", nil, nil)
	descTerm = prometheus.NewDesc("simlock_gateway_term",
		"The last leadership term this gateway replica has seen (each takeover is the next).", nil, nil)
	descLeaderSince = prometheus.NewDesc("simlock_gateway_leader_since_seconds",
		"When the current leader of this gateway replica's group took over, in Unix seconds; 0 while none leads.", nil, nil)
)

// stateCollector turns a Snapshot into gauges at each scrape: a step per
// series, whatever the number of leases, requests or past events.
type stateCollector struct{ m *Metrics }

func (c stateCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descQueueDepth, descOldestWait, descLeases, descDevices, descSlots, descDownloads, descWorkers,
		descLeader, descTerm, descLeaderSince} {
		ch <- d
	}
}

func (c stateCollector) Collect(ch chan<- prometheus.Metric) {
	m := c.m
	m.mu.Lock()
	downloads := m.f.downloads
	m.mu.Unlock()
	ch <- prometheus.MustNewConstMetric(descDownloads, prometheus.GaugeValue, float64(downloads))
	if m.opts.Read == nil {
		return
	}
	s := m.opts.Read()
	now := m.opts.Now().UnixMilli()
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	for _, p := range s.Platforms {
		pl := string(p.Platform)
		gauge(descQueueDepth, float64(p.QueueDepth), pl)
		var oldest float64
		if p.QueueDepth > 0 && p.OldestQueuedAt > 0 {
			oldest = seconds(max(now-p.OldestQueuedAt, 0))
		}
		gauge(descOldestWait, oldest, pl)
		gauge(descSlots, float64(p.Busy), pl, "busy")
		gauge(descSlots, float64(p.Free), pl, "free")
		gauge(descLeases, float64(p.Leases), pl)
		for _, st := range deviceStates {
			gauge(descDevices, float64(p.Devices[st]), pl, string(st))
		}
	}
	if s.Workers != nil {
		for _, conn := range connections {
			gauge(descWorkers, float64(s.Workers[conn]), string(conn))
		}
	}
	if r := s.Replica; r != nil {
		leads := 0.0
		if r.Leader {
			leads = 1
		}
		gauge(descLeader, leads)
		gauge(descTerm, float64(r.Term))
		gauge(descLeaderSince, seconds(r.Since))
	}
}

// PlatformFrom fills a Platform's capacity slots from a capacity line:
// busy is what holds or will hold a running slot, free what is left under
// the limit.
func PlatformFrom(p contract.Platform, c contract.PlatformCapacity) Platform {
	busy := c.Running + c.Reserved
	return Platform{Platform: p, Busy: busy, Free: max(c.MaxRunning-busy, 0)}
}
