// Package usage computes usage figures (contract.UsageResult) from the
// daemon's event log: how many leases were asked for and granted, from
// where, how long requesters waited and held, and what was refused and why.
//
// Compute is pure: the window's events in, the figures out, in one pass
// over the events in seq order. It keeps no state between calls and is
// safe to call concurrently. There are no rollups yet: a query reads every
// event of its window from the store, so its cost grows with the window's
// events (the log is bounded by eventLog.maxEvents).
//
// On a gateway the figures come from the workers' events the gateway
// relayed into its log (each carries workerId), and ByWorker splits them;
// the gateway's own fleet-queue events (a request refused before any worker
// took it) are not counted in this version. On a worker or a standalone
// daemon they come from its own events.
package usage

import (
	"encoding/json"
	"time"

	"github.com/simlock/simlock/internal/contract"
)

// Window is what Compute is asked for: [From, To) in epoch ms, the series
// step, and the time of the oldest event the log keeps (0 when the log is
// empty).
type Window struct {
	From, To int64
	Bucket   string
	Step     time.Duration
	OldestTs int64
	// Gateway counts the relayed events (those with a workerId) instead of
	// the log's own.
	Gateway bool
}

// payload holds the lease.* payload fields the figures read.
type payload struct {
	RequestID   string `json:"requestId"`
	LeaseID     string `json:"leaseId"`
	Source      string `json:"source"`
	Reason      string `json:"reason"`
	WorkerID    string `json:"workerId"`
	RequestSpec struct {
		Platform string `json:"platform"`
	} `json:"requestSpec"`
}

// key names a request or a lease within one worker's events: ids are only
// unique per daemon.
type key struct{ worker, id string }

type request struct {
	at       int64
	platform string
}

type lease struct {
	requested, granted int64 // requested is 0 when not in the window
	platform           string
}

// figures accumulates one slice's totals and durations.
type figures struct {
	t                                contract.UsageTotals
	wait, toDevice, hold, turnaround []int64
}

func newFigures() *figures {
	return &figures{t: contract.UsageTotals{Granted: map[string]int{}, Rejected: map[string]int{}}}
}

func (f *figures) result() contract.UsageFigures {
	return contract.UsageFigures{Totals: f.t, Percentiles: contract.UsagePercentiles{
		Wait:         contract.NearestRank(f.wait),
		TimeToDevice: contract.NearestRank(f.toDevice),
		Hold:         contract.NearestRank(f.hold),
		Turnaround:   contract.NearestRank(f.turnaround),
	}}
}

// Compute derives the figures of w from evs, which are the log's events in
// seq order; events outside [w.From, w.To) and events that are not lease
// events are ignored.
func Compute(evs []contract.Event, w Window) contract.UsageResult {
	res := contract.UsageResult{From: w.From, To: w.To, Bucket: w.Bucket}
	if w.OldestTs > w.From {
		res.Partial, res.CoversFrom = true, w.OldestTs
	}
	step := w.Step.Milliseconds()
	n := 0
	if step > 0 {
		n = contract.UsagePoints(w.From, w.To, w.Step)
	}
	res.Series = make([]contract.UsagePoint, n)
	for i := range res.Series {
		res.Series[i].At = w.From + int64(i)*step
	}

	all := newFigures()
	platforms := map[string]*figures{}
	workers := map[string]*figures{}
	requests := map[key]request{}
	leases := map[key]lease{}
	// slices are the figures an event of this worker and platform adds to.
	slices := func(worker, platform string) []*figures {
		out := []*figures{all}
		if platform != "" {
			if platforms[platform] == nil {
				platforms[platform] = newFigures()
			}
			out = append(out, platforms[platform])
		}
		if w.Gateway {
			if workers[worker] == nil {
				workers[worker] = newFigures()
			}
			out = append(out, workers[worker])
		}
		return out
	}

	for _, e := range evs {
		if e.Timestamp < w.From || e.Timestamp >= w.To {
			continue
		}
		switch e.Event {
		case "lease.requested", "lease.granted", "lease.rejected", "lease.released", "lease.expired":
		default:
			continue
		}
		var p payload
		if json.Unmarshal(e.Payload, &p) != nil {
			continue
		}
		if (p.WorkerID != "") != w.Gateway {
			continue
		}
		var point *contract.UsagePoint
		if step > 0 {
			if i := int((e.Timestamp - w.From) / step); i < len(res.Series) {
				point = &res.Series[i]
			}
		}
		switch e.Event {
		case "lease.requested":
			requests[key{p.WorkerID, p.RequestID}] = request{at: e.Timestamp, platform: p.RequestSpec.Platform}
			for _, f := range slices(p.WorkerID, p.RequestSpec.Platform) {
				f.t.Requests++
			}
			if point != nil {
				point.Requests++
			}
		case "lease.granted":
			r, asked := requests[key{p.WorkerID, p.RequestID}]
			l := lease{granted: e.Timestamp, platform: r.platform}
			if asked {
				l.requested = r.at
			}
			leases[key{p.WorkerID, p.LeaseID}] = l
			for _, f := range slices(p.WorkerID, r.platform) {
				f.t.Granted[p.Source]++
				if asked {
					f.wait = append(f.wait, e.Timestamp-r.at)
					if p.Source != string(contract.SourceWarm) {
						f.toDevice = append(f.toDevice, e.Timestamp-r.at)
					}
				}
			}
			if point != nil {
				point.Granted++
			}
		case "lease.rejected":
			for _, f := range slices(p.WorkerID, p.RequestSpec.Platform) {
				switch p.Reason {
				case "cancelled", "killed":
					f.t.Cancelled++
				case "timeout":
					f.t.TimedOut++
				default:
					f.t.Rejected[p.Reason]++
				}
			}
			if point != nil {
				point.Rejected++
			}
		case "lease.released", "lease.expired":
			k := key{p.WorkerID, p.LeaseID}
			l, ok := leases[k]
			if !ok {
				continue // granted before the window
			}
			delete(leases, k)
			for _, f := range slices(p.WorkerID, l.platform) {
				f.hold = append(f.hold, e.Timestamp-l.granted)
				if l.requested != 0 {
					f.turnaround = append(f.turnaround, e.Timestamp-l.requested)
				}
			}
		}
	}

	res.UsageFigures = all.result()
	res.ByPlatform = make(map[string]contract.UsageFigures, len(platforms))
	for p, f := range platforms {
		res.ByPlatform[p] = f.result()
	}
	if w.Gateway {
		res.ByWorker = make(map[string]contract.UsageFigures, len(workers))
		for id, f := range workers {
			res.ByWorker[id] = f.result()
		}
	}
	return res
}
