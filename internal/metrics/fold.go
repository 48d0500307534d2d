package metrics

import (
	"encoding/json"
	"slices"

	"github.com/simlock/simlock/internal/contract"
)

// other is the label value of a claim outside its closed set.
const other = "other"

// oneOf is v when set holds it, else "other": a label value a payload
// claims never makes a series of its own.
func oneOf[T ~string](v string, set []T) string {
	if slices.Contains(set, T(v)) {
		return v
	}
	return other
}

// The closed sets the labels come from.
var (
	grantSources = []contract.GrantSource{contract.SourceWarm, contract.SourceBooted, contract.SourceProvisioned}
	endReasons   = []contract.EndReason{contract.EndReleased, contract.EndExpired, contract.EndKilled,
		contract.EndDeviceLost, contract.EndBoundProcessExited}
	// deviceStates are the states a kept device can be in.
	deviceStates = []contract.DeviceState{contract.DeviceProvisioning, contract.DeviceReady, contract.DeviceLeased,
		contract.DeviceReclaiming, contract.DeviceShutdown, contract.DeviceQuarantined}
	connections = []contract.WorkerConnection{contract.WorkerConnected, contract.WorkerDisconnected, contract.WorkerIncompatible}
)

// platformLabel is p when it names a platform, else "other".
func platformLabel(p string) string { return oneOf(p, contract.Platforms()) }

// leaseKey names a lease the fold waits on the end of: a worker's lease id
// is unique only within that worker, so a gateway keys by both.
type leaseKey struct{ worker, lease string }

type openRequest struct {
	platform string
	at       int64
}

type dispatch struct {
	worker   string
	queuedMs int64
}

// fold is what the event fold remembers between the event that opens a
// fact and the one that closes it.
type fold struct {
	requests   map[string]openRequest // own open requests, by id
	leases     map[leaseKey]string    // active leases' platforms
	starts     map[string]int64       // ms each device being started for a request took so far
	dispatched map[string]dispatch    // a gateway's requests on a worker, by request id
	installs   map[string]int         // own installs running, by platform/component
	downloads  int
}

func newFold() fold {
	return fold{requests: map[string]openRequest{}, leases: map[leaseKey]string{}, starts: map[string]int64{},
		dispatched: map[string]dispatch{}, installs: map[string]int{}}
}

// payload holds the fields the fold reads of the events it counts.
type payload struct {
	RequestID     string `json:"requestId"`
	LeaseID       string `json:"leaseId"`
	DeviceID      string `json:"deviceId"`
	WorkerID      string `json:"workerId"`
	WorkerLeaseID string `json:"workerLeaseId"`
	Source        string `json:"source"`
	Reason        string `json:"reason"`
	Code          string `json:"code"`
	Initiator     string `json:"initiator"`
	Platform      string `json:"platform"`
	Component     string `json:"component"`
	RequestSpec   struct {
		Platform string `json:"platform"`
	} `json:"requestSpec"`
	Duration     int64 `json:"duration"`
	BootDuration int64 `json:"bootDuration"`
	WaitMs       int64 `json:"waitMs"`
	QueuedMs     int64 `json:"queuedMs"`
}

// counted are the events Fold reads; it skips the others before decoding.
var counted = map[string]bool{
	contract.EvLeaseRequested: true, contract.EvLeaseGranted: true, contract.EvLeaseRejected: true,
	contract.EvLeaseReleased: true, contract.EvLeaseExpired: true, contract.EvGrantRecorded: true,
	contract.EvRequestDispatched: true, contract.EvDeviceProvisioned: true, contract.EvDeviceReady: true,
	contract.EvDeviceDeleted: true, contract.EvComponentInstallStarted: true, contract.EvComponentInstalled: true,
	contract.EvComponentInstallFailed: true,
}

// Fold counts one published event. The daemon taps its bus with it, so it
// sees each event once, in publish order, after its commit.
//
// An event whose payload carries a workerId is one a gateway relayed from
// that worker: the gateway counts its own facts (its fleet queue's
// requests and refusals, its grant.recorded and request.dispatched), and of
// a worker's only the end of a lease its own grant.recorded opened. So a
// worker's relayed events, whatever they claim, add no grant, refusal or
// series to a gateway's figures.
func (m *Metrics) Fold(ev contract.Event) {
	if !counted[ev.Event] {
		return
	}
	var p payload
	if json.Unmarshal(ev.Payload, &p) != nil {
		return
	}
	relayed := p.WorkerID != ""
	m.mu.Lock()
	defer m.mu.Unlock()
	f := &m.f
	switch ev.Event {
	case contract.EvLeaseRequested:
		if !relayed {
			f.requests[p.RequestID] = openRequest{platform: platformLabel(p.RequestSpec.Platform), at: ev.Timestamp}
		}
	case contract.EvLeaseGranted:
		if relayed {
			return
		}
		r, open := f.requests[p.RequestID]
		delete(f.requests, p.RequestID)
		start := f.starts[p.DeviceID]
		delete(f.starts, p.DeviceID)
		if !open {
			r.platform = other // a request of an earlier run
		}
		source := oneOf(p.Source, grantSources)
		f.leases[leaseKey{"", p.LeaseID}] = r.platform
		m.grants.WithLabelValues(r.platform, source).Inc()
		if open {
			total := max(ev.Timestamp-r.at, 0)
			if source == string(contract.SourceWarm) {
				start = 0
			}
			m.timeToDevice.Observe(seconds(total))
			m.queueWait.WithLabelValues(r.platform, source).Observe(seconds(max(total-start, 0)))
		}
	case contract.EvGrantRecorded:
		if p.WorkerID == "" || p.WorkerLeaseID == "" {
			return
		}
		delete(f.requests, p.RequestID)
		platform, source := platformLabel(p.Platform), oneOf(p.Source, grantSources)
		f.leases[leaseKey{p.WorkerID, p.WorkerLeaseID}] = platform
		m.grants.WithLabelValues(platform, source).Inc()
		wait := max(p.WaitMs, 0)
		queued := wait
		if d, ok := f.dispatched[p.RequestID]; ok {
			queued = min(max(d.queuedMs, 0), wait)
			delete(f.dispatched, p.RequestID)
		}
		m.timeToDevice.Observe(seconds(wait))
		m.queueWait.WithLabelValues(platform, source).Observe(seconds(queued))
		m.dispatches.WithLabelValues(p.WorkerID, "granted").Inc()
	case contract.EvRequestDispatched:
		// The gateway's own event: workerId names where it went.
		f.dispatched[p.RequestID] = dispatch{worker: p.WorkerID, queuedMs: p.QueuedMs}
	case contract.EvLeaseRejected:
		if relayed {
			return
		}
		delete(f.requests, p.RequestID)
		m.rejections.WithLabelValues(platformLabel(p.RequestSpec.Platform), oneOf(p.Code, contract.Codes())).Inc()
		if d, ok := f.dispatched[p.RequestID]; ok {
			delete(f.dispatched, p.RequestID)
			m.dispatches.WithLabelValues(d.worker, oneOf(p.Reason, contract.RejectReasons())).Inc()
		}
	case contract.EvLeaseReleased, contract.EvLeaseExpired:
		k := leaseKey{p.WorkerID, p.LeaseID}
		platform, ok := f.leases[k]
		if !ok {
			if relayed {
				return // not a lease this gateway granted
			}
			platform = other // a lease of an earlier run
		}
		delete(f.leases, k)
		reason := p.Reason
		if ev.Event == contract.EvLeaseExpired {
			reason = string(contract.EndExpired)
		}
		m.ends.WithLabelValues(platform, oneOf(reason, endReasons)).Inc()
	case contract.EvDeviceProvisioned:
		if !relayed {
			f.starts[p.DeviceID] = max(p.Duration, 0)
		}
	case contract.EvDeviceReady:
		switch {
		case relayed:
		case p.Initiator == "" || p.Initiator == "rewarm":
			// A boot a request may take: its grant follows in this commit.
			f.starts[p.DeviceID] += max(p.BootDuration, 0)
		default:
			delete(f.starts, p.DeviceID)
		}
	case contract.EvDeviceDeleted:
		if !relayed {
			delete(f.starts, p.DeviceID)
		}
	case contract.EvComponentInstallStarted:
		if !relayed {
			f.installs[p.Platform+"/"+p.Component]++
			f.downloads++
		}
	case contract.EvComponentInstalled, contract.EvComponentInstallFailed:
		// A failure before the install started (no disk space) ends
		// nothing that was counted.
		k := p.Platform + "/" + p.Component
		if !relayed && f.installs[k] > 0 {
			if f.installs[k]--; f.installs[k] == 0 {
				delete(f.installs, k)
			}
			f.downloads--
		}
	}
}

func seconds(ms int64) float64 { return float64(ms) / 1000 }

// SeedGrant tells a gateway's fold of a lease it granted through worker
// workerID before this start (the worker's lease id and the platform its
// grant record keeps), so that the worker's relayed end of it is counted,
// as its grant.recorded would have had it; a lease the fold already knows
// is left as it is.
func (m *Metrics) SeedGrant(workerID, workerLeaseID string, p contract.Platform) {
	m.mu.Lock()
	defer m.mu.Unlock()
	k := leaseKey{workerID, workerLeaseID}
	if _, ok := m.f.leases[k]; !ok {
		m.f.leases[k] = platformLabel(string(p))
	}
}

// SeedLease tells the fold of a lease granted before this start (its
// unique key and platform), so that its end is counted by its platform.
// The daemon calls it once per active lease when its engine has started;
// a lease the fold already knows is left as it is.
func (m *Metrics) SeedLease(key string, p contract.Platform) {
	m.mu.Lock()
	defer m.mu.Unlock()
	k := leaseKey{"", key}
	if _, ok := m.f.leases[k]; !ok {
		m.f.leases[k] = platformLabel(string(p))
	}
}
