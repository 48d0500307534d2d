// Package metrics keeps a daemon's Prometheus metrics: one registry per
// daemon (never the process-wide default), holding the Go runtime and
// process collectors and simlock's own series.
//
// Counters and histograms move at the commit that makes their fact: the
// daemon hands every published event to Fold (a tap on its event bus), in
// publish order, and Fold never reads the store. Gauges are read at scrape
// time through Options.Read, which returns counts the daemon keeps where
// its state changes, so a scrape costs a step per series, never one per
// lease, request or past event.
//
// Every label value comes from a closed set in contract (platforms, grant
// sources, error codes, end and reject reasons, worker connections) or is a
// registered worker's id; a value a payload claims outside its set counts
// as "other", so a worker's relayed events cannot grow the series. No
// request, lease or requester id is ever a label.
//
// A Metrics is safe for concurrent use: Fold runs under the bus's lock,
// scrapes on HTTP and socket goroutines.
package metrics

import (
	"bytes"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/common/expfmt"

	"github.com/simlock/simlock/internal/contract"
)

// Snapshot is the present state a scrape reads: counts, each kept by the
// transitions that change it.
type Snapshot struct {
	Platforms []Platform
	// Workers counts a gateway's workers by connection; nil elsewhere.
	Workers map[contract.WorkerConnection]int
	// Replica is a gateway replica's place in its election; nil on any
	// other daemon.
	Replica *Replica
}

// Replica is who leads a gateway replica's group, as the replica sees it.
type Replica struct {
	// Leader is whether this replica leads.
	Leader bool
	// Term is the last term seen; Since when its leader took over (epoch
	// ms, 0 while none leads).
	Term  int64
	Since int64
}

// Platform is one platform's present counts.
type Platform struct {
	Platform contract.Platform
	// QueueDepth and OldestQueuedAt (epoch ms, 0 when none waits) are the
	// platform's line of waiting requests.
	QueueDepth     int
	OldestQueuedAt int64
	// Leases counts active leases; Devices, devices by state (on a
	// gateway, what its connected workers last reported).
	Leases  int
	Devices map[contract.DeviceState]int
	// Busy and Free are the running slots in use (running or reserved)
	// and left under the platform's limit.
	Busy, Free int
}

// Options configures a Metrics.
type Options struct {
	// Version and Mode (worker or gateway) label simlock_build_info.
	Version, Mode string
	// Read returns the present state at each scrape; nil exports no
	// state gauges (before the daemon has it).
	Read func() Snapshot
	// Now is the clock the oldest wait is measured on; nil means
	// time.Now.
	Now func() time.Time
}

// Metrics is one daemon's registry and the state its event fold keeps.
type Metrics struct {
	reg  *prometheus.Registry
	opts Options

	grants       *prometheus.CounterVec
	rejections   *prometheus.CounterVec
	ends         *prometheus.CounterVec
	dispatches   *prometheus.CounterVec
	queueWait    *prometheus.HistogramVec
	timeToDevice prometheus.Histogram
	storeCommit  prometheus.Histogram
	uplinkRTT    prometheus.Histogram

	mu sync.Mutex
	// mu guards the fold's state below: what it must remember between
	// the event that opens a fact and the one that closes it. Each map
	// holds only open things (requests in flight, active leases, devices
	// being started), and each entry goes when its fact ends.
	f fold
}

// waitBuckets cover a warm grant (milliseconds) to a queued request
// waiting for a download (an hour).
var waitBuckets = []float64{0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600}

// New makes a Metrics with its own registry.
func New(opts Options) *Metrics {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	m := &Metrics{reg: prometheus.NewRegistry(), opts: opts, f: newFold()}
	m.grants = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "simlock_grants_total",
		Help: "Leases granted, by platform and by how the device came to be ready (warm, booted, provisioned)."},
		[]string{"platform", "source"})
	m.rejections = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "simlock_rejections_total",
		Help: "Stored lease requests that ended without a lease, by platform and error code."},
		[]string{"platform", "code"})
	m.ends = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "simlock_lease_ends_total",
		Help: "Leases ended, by platform and reason (explicit, expired, killed, device-lost, bound-process-exited)."},
		[]string{"platform", "reason"})
	m.dispatches = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "simlock_dispatch_total",
		Help: "Requests a gateway dispatched to a worker, by worker and how they ended (granted, or the reject reason)."},
		[]string{"worker", "result"})
	m.queueWait = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "simlock_queue_wait_seconds",
		Help:    "Time a granted request waited before its device was chosen (on a gateway: before its dispatch), by platform and grant source.",
		Buckets: waitBuckets}, []string{"platform", "source"})
	m.timeToDevice = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "simlock_time_to_device_seconds",
		Help:    "Time from a request's arrival to its grant: the wait plus the device's creation and boot.",
		Buckets: waitBuckets})
	m.storeCommit = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "simlock_store_commit_seconds",
		Help:    "Time each store commit held the writer.",
		Buckets: []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1}})
	m.uplinkRTT = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "simlock_uplink_rtt_seconds",
		Help:    "Round trips of the heartbeat pings on worker uplinks.",
		Buckets: []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5}})
	buildInfo := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "simlock_build_info",
		Help: "Always 1: the daemon's version and mode (worker or gateway)."}, []string{"version", "mode"})
	buildInfo.WithLabelValues(opts.Version, opts.Mode).Set(1)
	m.reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		m.grants, m.rejections, m.ends, m.queueWait, m.timeToDevice, m.storeCommit, buildInfo,
		stateCollector{m},
	)
	if opts.Mode == "gateway" {
		m.reg.MustRegister(m.dispatches, m.uplinkRTT)
	}
	return m
}

// Registry is the daemon's registry, for promhttp.HandlerFor.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// ObserveCommit records one store commit's time (sqlite.Options.OnCommit).
func (m *Metrics) ObserveCommit(d time.Duration) { m.storeCommit.Observe(d.Seconds()) }

// ObserveUplinkRTT records one heartbeat round trip on a worker's uplink.
func (m *Metrics) ObserveUplinkRTT(d time.Duration) { m.uplinkRTT.Observe(d.Seconds()) }

// Text is the registry in the Prometheus text format, as GET /metrics
// answers it.
func (m *Metrics) Text() (string, error) {
	mfs, err := m.reg.Gather()
	if err != nil {
		return "", err
	}
	var b bytes.Buffer
	enc := expfmt.NewEncoder(&b, expfmt.NewFormat(expfmt.TypeTextPlain))
	for _, mf := range mfs {
		if err := enc.Encode(mf); err != nil {
			return "", err
		}
	}
	return b.String(), nil
}
