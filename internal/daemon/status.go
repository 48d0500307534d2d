package daemon

import (
	"context"
	"encoding/json"
	"os"
	"runtime"
	"runtime/metrics"
	"sync"
	"time"

	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/leasing"
	"github.com/simlock/simlock/internal/ownership"
)

// openFiles counts the process's open file descriptors, or 0 where they
// cannot be listed. /dev/fd lists them on Linux and macOS alike; reading it
// opens one more, which is not counted.
func openFiles() int {
	fds, err := os.ReadDir("/dev/fd")
	if err != nil || len(fds) == 0 {
		return 0
	}
	return len(fds) - 1
}

// heapBytes reads the live heap without stopping the world.
func heapBytes() int64 {
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(sample)
	if sample[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return int64(sample[0].Value.Uint64())
}

// statusAnswer is status.get's result: the device and lease lists, by the
// thousand in a large fleet, go through their own encoders.
type statusAnswer struct {
	s contract.Status
	// full asks the engine for the lists when the answer is encoded, straight
	// into the frame: a status of 10,000 leases is megabytes, copied once.
	full   bool
	engine *leasing.Engine
	// caller is whom the lists are for: an agent sees its own leases and
	// requests only.
	caller leasing.Caller
}

func (a statusAnswer) MarshalJSON() ([]byte, error) { return a.appendResult(nil) }

// appendResult appends the answer as JSON: for a full status, the engine's
// lists first (from each record's kept encoding), then the rest.
func (a statusAnswer) appendResult(b []byte) ([]byte, error) {
	if !a.full {
		head, err := json.Marshal(a.s)
		return append(b, head...), err
	}
	b = append(b, '{')
	b, snap := a.engine.AppendLists(b, a.caller)
	a.s.Capacity, a.s.Counts, a.s.QueueDepth, a.s.WarmPool = &snap.Capacity, &snap.Counts, snap.QueueDepth, &snap.WarmPool
	a.s.Waiting = snap.Waiting
	a.s.EventSeq = eventSeq(a.s, snap)
	head, err := json.Marshal(a.s)
	if err != nil {
		return nil, err
	}
	b = append(b, ',')
	return append(b, head[1:]...), nil // the rest, its opening brace dropped
}

// status answers status.get: the engine's part read in one snapshot, and
// in a summary without the lists.
func (d *Daemon) status(ctx context.Context, c leasing.Caller, in contract.StatusGetInput) statusAnswer {
	select {
	case <-d.ready:
	default:
		s := contract.Status{Daemon: d.info("starting"), Host: d.host()}
		d.replicaStatus(&s)
		return statusAnswer{s: s}
	}
	health := "running"
	if d.startErr != nil || (d.engine != nil && d.engine.Err() != nil) {
		health = "failed"
	}
	d.mu.Lock()
	if d.stopping {
		health = "stopping"
	}
	d.mu.Unlock()
	s := contract.Status{Daemon: d.info(health), Host: d.host()}
	if d.replicaStatus(&s) {
		// A follower has no fleet to tell of: who leads is its status.
		return statusAnswer{s: s}
	}
	// By the part startup set, not by the config's mode: a gateway whose
	// start failed before its fleet answers as a worker without an engine.
	// A replica's fleet is set when it leads, and read only once it does.
	if d.replica.serves() && d.fleet != nil {
		d.gatewayStatus(&s, c, in.Summary)
		if log, err := d.eventLogStatus(ctx); err == nil {
			s.EventLog = log
		}
		return statusAnswer{s: s}
	}
	return d.workerStatus(ctx, s, c, in)
}

// workerStatus fills a worker's status: its drivers, then, once the engine
// is up, its installs, event log and the engine's part.
func (d *Daemon) workerStatus(ctx context.Context, s contract.Status, c leasing.Caller, in contract.StatusGetInput) statusAnswer {
	for _, p := range contract.Platforms() {
		ds := contract.DriverStatus{Platform: p}
		if drv, ok := d.opts.Drivers[p]; ok {
			ds.Driver, ds.Enabled, ds.Root, ds.Tools = drv.Name(), true, drv.Root(), d.toolVersions(p)
		} else {
			ds.Reason = d.opts.DriverNotes[p]
			if r, ok := d.opts.Rejections[p]; ok {
				ds.RootRejected = &r
			}
		}
		s.Drivers = append(s.Drivers, ds)
	}
	if d.engine == nil {
		return statusAnswer{s: s}
	}
	if d.installer != nil {
		s.Installs = d.installer.Installs()
	}
	// An unreadable event log leaves its part out: status is what an
	// operator reads when something is wrong, so it answers with the rest.
	if log, err := d.eventLogStatus(ctx); err == nil {
		s.EventLog = log
	} else {
		d.log.Warn("status: event log unreadable", "err", err)
	}
	if !in.Summary {
		return statusAnswer{s: s, full: true, engine: d.engine, caller: c}
	}
	snap := d.engine.Snapshot(true)
	s.Capacity, s.Counts, s.QueueDepth, s.WarmPool = &snap.Capacity, &snap.Counts, snap.QueueDepth, &snap.WarmPool
	s.EventSeq = eventSeq(s, snap)
	return statusAnswer{s: s}
}

// eventSeq is the seq of the event log a worker's status reflects: the
// log's last seq read before the engine's snapshot (s.EventLog), or the
// last the engine's decisions committed when the snapshot was read,
// whichever is higher. Every lease change commits its events under the
// decision lock the snapshot is read under, so a change whose event is at
// or below it is in the snapshot, and one above is not: a gateway orders
// the worker's snapshots, and its grants against them, by it.
func eventSeq(s contract.Status, snap leasing.Snapshot) int64 {
	seq := snap.EventSeq
	if s.EventLog != nil {
		seq = max(seq, s.EventLog.LastSeq)
	}
	return seq
}

// gatewayStatus fills a gateway's status from its fleet and its queue: the
// requests waiting in the fleet queue come first, then those waiting on
// each worker.
func (d *Daemon) gatewayStatus(s *contract.Status, c leasing.Caller, summary bool) {
	snap := d.fleet.Snapshot()
	fleetWaiting, depth := d.leasing.Waiting(c)
	snap.Counts.Waiting += len(fleetWaiting)
	s.Fleet, s.Capacity, s.QueueDepth, s.Counts = &snap.Fleet, &snap.Capacity, snap.QueueDepth+depth, &snap.Counts
	s.Installs = snap.Installs
	if summary {
		return
	}
	// An agent sees its own leases and requests, and every device, another
	// agent's shown leased without naming the lease; the counts are of
	// everything (as on a worker). What is its own is the grant records'
	// say, never a worker's.
	s.Devices, s.Leases = d.leasing.ProjectDevices(c, snap.Devices), nonNilLeases(d.leasing.Leases(c, snap.Leases))
	// The requests waiting on a worker are that worker's records, none of
	// them the gateway's: no record here bears out whose they are, so they
	// are an admin's to see alone (queue.Caller.SeesLease).
	s.Waiting = fleetWaiting
	if c.SeesLease("", false) {
		s.Waiting = append(s.Waiting, snap.Waiting...)
	}
}

func nonNilLeases(ls []contract.LeaseRecord) []contract.LeaseRecord {
	if ls == nil {
		return []contract.LeaseRecord{}
	}
	return ls
}

// selfSummary is a worker's line of its fleet of one.
func (d *Daemon) selfSummary() contract.WorkerSummary {
	in, _ := ownership.LoadInstance(d.opts.Home)
	snap := d.engine.Snapshot(true)
	return contract.WorkerSummary{ID: in.ID, Label: d.labelOf(d.opts.Config), Connection: contract.WorkerConnected,
		LastSeenAt: time.Now().UnixMilli(), Version: d.opts.Version, Running: snap.Capacity.Global.Running,
		MaxRunning: snap.Capacity.Global.MaxRunning, Leases: snap.Counts.Leases, QueueDepth: snap.QueueDepth}
}

func (d *Daemon) info(health string) contract.DaemonInfo {
	return contract.DaemonInfo{
		Mode: d.mode(), Version: d.opts.Version, PID: os.Getpid(), StartedAt: d.startedAt.UnixMilli(), Health: health,
		Home: d.opts.Home, Protocol: contract.VersionRange{Min: contract.ProtocolMin, Max: contract.ProtocolMax},
		HTTPURL: d.httpURL, ConsoleURL: d.consoleURL, HeapBytes: heapBytes(), Goroutines: runtime.NumGoroutine(), OpenFiles: openFiles(),
	}
}

func (d *Daemon) host() contract.HostInfo {
	return contract.HostInfo{OS: runtime.GOOS, Arch: runtime.GOARCH, CPUs: d.opts.Host.CPUs, RAMBytes: d.opts.Host.RAMBytes,
		OSVersion: d.opts.HostOS}
}

// toolVersionsTimeout bounds one driver's report of its tool versions
// (xcodebuild -version takes seconds on a cold Mac).
const toolVersionsTimeout = 30 * time.Second

// readToolVersions asks each driver, once and side by side, which tool
// versions it uses, for status. It runs after ready: a slow tool delays
// only its line in status, not the daemon.
func (d *Daemon) readToolVersions() {
	var wg sync.WaitGroup
	for p, drv := range d.opts.Drivers {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(d.life, toolVersionsTimeout)
			defer cancel()
			vs, err := drv.ToolVersions(ctx)
			if err != nil {
				d.log.Warn("tool versions unreadable", "platform", p, "err", err)
				return
			}
			d.mu.Lock()
			d.tools[p] = vs
			d.mu.Unlock()
		})
	}
	wg.Wait()
}

// toolVersions is what p's driver reported, nil until it has.
func (d *Daemon) toolVersions(p contract.Platform) []contract.ToolVersion {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.tools[p]
}

// eventLogStatus is the event log's extent and pruning as status shows it.
func (d *Daemon) eventLogStatus(ctx context.Context) (*contract.EventLogStatus, error) {
	span, err := d.db.EventLogSpan(ctx)
	if err != nil {
		return nil, err
	}
	s := &contract.EventLogStatus{Events: span.Events, OldestSeq: span.OldestSeq, OldestTs: span.OldestTs, LastSeq: span.LastSeq,
		RetentionDays: d.opts.Config.Int("eventLog.retentionDays"), MaxEvents: d.opts.Config.Int("eventLog.maxEvents")}
	d.mu.Lock()
	s.LastPruneAt, s.LastPruned, s.PrunedTotal = d.pruneAt, d.lastPruned, d.prunedTotal
	d.mu.Unlock()
	return s, nil
}
