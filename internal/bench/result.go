package bench

import (
	"math"
	"slices"
	"time"
)

// The result of a run; the JSON field names are stable.
type (
	Result struct {
		Command string       `json:"command"`
		Version string       `json:"version"`
		Date    string       `json:"date"`
		Machine benchMachine `json:"machine"`
		Samples int          `json:"samples"`
		Runs    []benchRun   `json:"runs"`
		// PushLatency comes from an in-process daemon (see measurePush).
		PushLatency benchStat `json:"pushLatency"`
		Floor       benchStat `json:"floor"`
		// FloorIdle is the floor commit after an idle pause each (see
		// floorIdleGap); the goals are stated against Floor.
		FloorIdle benchStat   `json:"floorIdle"`
		Start     benchStart  `json:"start"`
		Ratios    benchRatios `json:"ratios"`
	}
	benchMachine struct {
		CPU string `json:"cpu"`
		// Cores counts logical cores.
		Cores    int    `json:"cores"`
		RAMBytes int64  `json:"ramBytes"`
		OS       string `json:"os"`
		Arch     string `json:"arch"`
		Go       string `json:"go"`
	}
	// benchStat is a series of timings: p50 and p99 in microseconds.
	benchStat struct {
		P50Us   float64 `json:"p50Us"`
		P99Us   float64 `json:"p99Us"`
		Samples int     `json:"samples"`
	}
	benchRun struct {
		Leases         int       `json:"leases"`
		Renew          benchStat `json:"renew"`
		WarmGrant      benchStat `json:"warmGrant"`
		ReleaseToGrant benchStat `json:"releaseToGrant"`
		StatusFull     benchStat `json:"statusFull"`
		StatusSummary  benchStat `json:"statusSummary"`
		// Ping is one ping round trip: the protocol's cost, no lock, no
		// store; with the floor commit it is the in-situ floor.
		Ping benchStat `json:"ping"`
		// RenewsPerSecond50 is renewals a second with renewAgents agent
		// sessions renewing as fast as each can (see measureRenewRate).
		RenewsPerSecond50 float64 `json:"renewsPerSecond50"`
		// RSSKiB is the daemon's RSS holding Leases leases; RSSStartKiB
		// its RSS once it ran, before the first lease.
		RSSKiB      int64 `json:"rssKiB"`
		RSSStartKiB int64 `json:"rssStartKiB"`
	}
	benchStart struct {
		Leases int     `json:"leases"`
		Events int     `json:"events"`
		Ms     float64 `json:"ms"`
	}
	// benchRatios are the figures the project's goals are stated in, from
	// p50s: "smallest" and "largest" are the smallest and largest lease
	// counts of the run. The scale ratios need two counts.
	benchRatios struct {
		Smallest                int      `json:"smallest"`
		Largest                 int      `json:"largest"`
		RenewScale              *float64 `json:"renewScale,omitempty"`
		RenewOverFloor          float64  `json:"renewOverFloor"`
		WarmGrantOverFloor      float64  `json:"warmGrantOverFloor"`
		WarmGrantScale          *float64 `json:"warmGrantScale,omitempty"`
		ReleaseToGrantOverFloor float64  `json:"releaseToGrantOverFloor"`
		// RenewOverIdleFloor compares renew with the commit it makes as a
		// daemon between requests makes it; not a goal, a reading aid.
		RenewOverIdleFloor float64  `json:"renewOverIdleFloor"`
		SummaryScale       *float64 `json:"summaryScale,omitempty"`
		StatusFullMs       float64  `json:"statusFullMs"`
		RSSPerLeaseKiB     float64  `json:"rssPerLeaseKiB"`
		StartMs            float64  `json:"startMs"`
		// The *OverInSitu ratios are against the in-situ floor: one ping
		// round trip p50 plus one floor commit p50, both of the same run.
		// A round trip that commits nothing costs a few hot-loop commits
		// on a small machine, so the goals are stated against both.
		InSituUs                 float64 `json:"inSituUs"`
		RenewOverInSitu          float64 `json:"renewOverInSitu"`
		WarmGrantOverInSitu      float64 `json:"warmGrantOverInSitu"`
		ReleaseToGrantOverInSitu float64 `json:"releaseToGrantOverInSitu"`
	}
)

// percentile is the nearest-rank p-th percentile (0 < p <= 100) of sorted:
// the smallest sample that at least p percent of the samples do not exceed.
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	rank := int(math.Ceil(p / 100 * float64(len(sorted))))
	rank = min(max(rank, 1), len(sorted))
	return sorted[rank-1]
}

// summarize turns timings into a benchStat.
func summarize(ds []time.Duration) benchStat {
	s := slices.Clone(ds)
	slices.Sort(s)
	us := func(d time.Duration) float64 {
		if d < 10*time.Microsecond {
			// A decision timed alone (a route) takes nanoseconds: kept to
			// the nanosecond, not rounded to nothing.
			return math.Round(float64(d)/float64(time.Microsecond)*1000) / 1000
		}
		return math.Round(float64(d)/float64(time.Microsecond)*10) / 10
	}
	return benchStat{P50Us: us(percentile(s, 50)), P99Us: us(percentile(s, 99)), Samples: len(s)}
}

func round2(v float64) float64 { return math.Round(v*100) / 100 }

// ratio is a/b rounded, or 0 when b is not positive.
func ratio(a, b float64) float64 {
	if b <= 0 {
		return 0
	}
	return round2(a / b)
}

// computeRatios fills res.Ratios from the runs, the floor and the start.
func computeRatios(res *Result) {
	small, large := res.Runs[0], res.Runs[len(res.Runs)-1]
	r := benchRatios{
		Smallest: small.Leases, Largest: large.Leases,
		RenewOverFloor:          ratio(small.Renew.P50Us, res.Floor.P50Us),
		WarmGrantOverFloor:      ratio(small.WarmGrant.P50Us, res.Floor.P50Us),
		ReleaseToGrantOverFloor: ratio(small.ReleaseToGrant.P50Us, res.Floor.P50Us),
		RenewOverIdleFloor:      ratio(small.Renew.P50Us, res.FloorIdle.P50Us),
		StatusFullMs:            round2(large.StatusFull.P50Us / 1000),
		StartMs:                 res.Start.Ms,
	}
	if small.Ping.P50Us > 0 {
		r.InSituUs = round2(small.Ping.P50Us + res.Floor.P50Us)
		r.RenewOverInSitu = ratio(small.Renew.P50Us, r.InSituUs)
		r.WarmGrantOverInSitu = ratio(small.WarmGrant.P50Us, r.InSituUs)
		r.ReleaseToGrantOverInSitu = ratio(small.ReleaseToGrant.P50Us, r.InSituUs)
	}
	if len(res.Runs) > 1 {
		scale := func(a, b benchStat) *float64 { v := ratio(a.P50Us, b.P50Us); return &v }
		r.RenewScale = scale(large.Renew, small.Renew)
		r.WarmGrantScale = scale(large.WarmGrant, small.WarmGrant)
		r.SummaryScale = scale(large.StatusSummary, small.StatusSummary)
		r.RSSPerLeaseKiB = round2(float64(large.RSSKiB-small.RSSKiB) / float64(large.Leases-small.Leases))
	} else {
		r.RSSPerLeaseKiB = round2(float64(small.RSSKiB-small.RSSStartKiB) / float64(small.Leases))
	}
	res.Ratios = r
}
