package contract

import (
	"fmt"
	"math/bits"
	"slices"
	"strconv"
	"strings"
	"time"
)

// OpUsageGet answers usage figures (UsageResult) over a window of the
// event log: how many leases were asked for and granted, how long the
// requesters waited, what was refused and why.
const OpUsageGet Op = "usage.get"

// GatewayRequesterPrefix starts the requester id of every request a
// gateway forwards to a worker (gw:<gateway instance>:<requester>).
const GatewayRequesterPrefix = "gw:"

// GatewayPrincipalPrefix starts the principal a gateway says hello with on
// a worker's uplink (gateway:<gateway instance>); nobody else may.
const GatewayPrincipalPrefix = "gateway:"

// MaxUsageWindow bounds a usage.get window.
const MaxUsageWindow = 90 * 24 * time.Hour

// MaxUsagePoints bounds the points of a usage series.
const MaxUsagePoints = 200

// UsageBuckets are the bucket sizes a usage series may use, smallest first.
var UsageBuckets = []string{"1m", "5m", "15m", "1h", "6h", "1d"}

// UsageBucketDuration is the length of a bucket named in UsageBuckets.
func UsageBucketDuration(b string) (time.Duration, bool) {
	switch b {
	case "1m":
		return time.Minute, true
	case "5m":
		return 5 * time.Minute, true
	case "15m":
		return 15 * time.Minute, true
	case "1h":
		return time.Hour, true
	case "6h":
		return 6 * time.Hour, true
	case "1d":
		return 24 * time.Hour, true
	}
	return 0, false
}

// UsageGetInput asks for the usage figures of [From, To), epoch ms, which
// Window takes to whole minutes.
type UsageGetInput struct {
	From int64 `json:"from"`
	// To is the end of the window, exclusive; 0 is now.
	To int64 `json:"to,omitempty"`
	// Bucket is the series step, one of UsageBuckets; "" picks the
	// smallest that gives at most MaxUsagePoints points.
	Bucket string `json:"bucket,omitempty"`
}

// Validate checks the fields that do not depend on the time of the call;
// Window checks the rest.
func (in *UsageGetInput) Validate() error {
	if in.From <= 0 {
		return BadRequest("from", "must be a time in epoch milliseconds, got %d", in.From)
	}
	if in.To < 0 {
		return BadRequest("to", "must not be negative")
	}
	if in.To != 0 && in.To <= in.From {
		return BadRequest("to", "must be after from")
	}
	if _, ok := UsageBucketDuration(in.Bucket); in.Bucket != "" && !ok {
		return BadRequest("bucket", "must be one of %v, got %.16q", UsageBuckets, in.Bucket)
	}
	return nil
}

// Window resolves the input at now (epoch ms) to the window a query
// covers: whole minutes, from From rounded down to to (To, or now)
// rounded up, so every minute the asked window touches is in it, and the
// series bucket for that window. An asked window longer than
// MaxUsageWindow, or a bucket that would give more than MaxUsagePoints
// points, is BAD_REQUEST.
func (in UsageGetInput) Window(now int64) (from, to int64, bucket string, err error) {
	if err := in.Validate(); err != nil {
		return 0, 0, "", err
	}
	to = in.To
	if to == 0 {
		to = now
	}
	if to <= in.From {
		return 0, 0, "", BadRequest("from", "must be before to (%d), got %d", to, in.From)
	}
	span := time.Duration(to-in.From) * time.Millisecond
	if span > MaxUsageWindow {
		return 0, 0, "", BadRequest("from", "the window is at most 90 days, got %s", span.Round(time.Minute))
	}
	from, to = UsageMinute(in.From), UsageMinute(to+UsageMinuteMs-1)
	if in.Bucket != "" {
		d, _ := UsageBucketDuration(in.Bucket)
		if n := UsagePoints(from, to, d); n > MaxUsagePoints {
			return 0, 0, "", BadRequest("bucket", "%s gives %d points over this window, at most %d", in.Bucket, n, MaxUsagePoints)
		}
		return from, to, in.Bucket, nil
	}
	for _, b := range UsageBuckets {
		d, _ := UsageBucketDuration(b)
		if UsagePoints(from, to, d) <= MaxUsagePoints {
			return from, to, b, nil
		}
	}
	return 0, 0, "", fmt.Errorf("usage: no bucket fits a window of %s", span) // unreachable: 90 d / 1 d
}

// UsageMinuteMs is the grain of usage figures: a minute, in ms.
const UsageMinuteMs = 60_000

// UsageMinute is the start of the minute ms (epoch ms) falls in.
func UsageMinute(ms int64) int64 {
	m := ms % UsageMinuteMs
	if m < 0 {
		m += UsageMinuteMs
	}
	return ms - m
}

// UsagePoints is how many buckets of d cover [from, to).
func UsagePoints(from, to int64, d time.Duration) int {
	step := d.Milliseconds()
	return int((to - from + step - 1) / step)
}

// UsageResult answers usage.get. Figures come from the event log's
// lease.* events, counted by the minute they fall in: an event counts when
// its minute is in [From, To), which are whole minutes (see
// UsageGetInput.Window).
//
// Each duration is measured between two events of one request, and counted
// in the minute of the event that ends it, whenever the event that starts
// it is still in the log's history (it may be before From):
//   - wait: lease.requested → lease.granted, every grant;
//   - timeToDevice: lease.requested → lease.granted, for grants whose source
//     is not warm (a device had to be booted or created);
//   - hold: lease.granted → lease.released or lease.expired;
//   - turnaround: lease.requested → lease.released or lease.expired.
type UsageResult struct {
	From   int64  `json:"from"`
	To     int64  `json:"to"`
	Bucket string `json:"bucket"`
	// Partial is true when the window starts before the minute of the
	// oldest event the log keeps; CoversFrom is then the start of that
	// minute, and nothing before it is counted.
	Partial    bool  `json:"partial"`
	CoversFrom int64 `json:"coversFrom,omitempty"`
	UsageFigures
	// ByPlatform splits the figures by the platform asked for.
	ByPlatform map[string]UsageFigures `json:"byPlatform"`
	// ByWorker (gateway only) splits them by the worker whose relayed
	// events they come from. A gateway's totals and ByPlatform also count
	// the requests its fleet queue ended before any worker took them
	// (refused, timed out, cancelled), which are in no worker's figures.
	ByWorker map[string]UsageFigures `json:"byWorker,omitempty"`
	// Series counts requests, grants and rejections per bucket, the first
	// point at From.
	Series []UsagePoint `json:"series"`
}

// UsageFigures are the counts and durations of one slice of the window.
type UsageFigures struct {
	Totals      UsageTotals      `json:"totals"`
	Percentiles UsagePercentiles `json:"percentiles"`
}

// UsageTotals counts the window's lease events.
type UsageTotals struct {
	// Requests counts lease.requested.
	Requests int `json:"requests"`
	// Granted counts lease.granted by source (warm, booted, provisioned).
	Granted map[string]int `json:"granted"`
	// Rejected counts lease.rejected by reason, except the reasons
	// cancelled and killed (Cancelled) and timeout (TimedOut).
	Rejected  map[string]int `json:"rejected"`
	Cancelled int            `json:"cancelled"`
	TimedOut  int            `json:"timedOut"`
}

// UsagePercentiles are the window's durations (see UsageResult).
type UsagePercentiles struct {
	Wait         Percentiles `json:"wait"`
	TimeToDevice Percentiles `json:"timeToDevice"`
	Hold         Percentiles `json:"hold"`
	Turnaround   Percentiles `json:"turnaround"`
}

// Percentiles of a set of durations in ms, by nearest rank: pN is the
// smallest value at least N% of the set is at or below. All 0 when Count
// is 0.
type Percentiles struct {
	P50   int64 `json:"p50"`
	P90   int64 `json:"p90"`
	P99   int64 `json:"p99"`
	Count int   `json:"count"`
}

// UsagePoint is one bucket of the series, starting At (epoch ms).
type UsagePoint struct {
	At       int64 `json:"at"`
	Requests int   `json:"requests"`
	Granted  int   `json:"granted"`
	Rejected int   `json:"rejected"`
}

// NearestRank computes the percentiles of vs, which it reorders. It
// selects the three ranks rather than sorting: linear in len(vs) on
// average.
func NearestRank(vs []int64) Percentiles {
	if len(vs) == 0 {
		return Percentiles{}
	}
	rank := func(p int) int { return max((p*len(vs)+99)/100, 1) - 1 }
	r50, r90, r99 := rank(50), rank(90), rank(99)
	// Each selection leaves the larger values to the right of its rank,
	// so the next looks only there.
	selectRank(vs, r50)
	selectRank(vs[r50+1:], r90-r50-1)
	selectRank(vs[r90+1:], r99-r90-1)
	return Percentiles{P50: vs[r50], P90: vs[r90], P99: vs[r99], Count: len(vs)}
}

// selectRank reorders vs so that vs[k] is the value a sort would put there,
// with none greater before it and none smaller after it; k out of range
// does nothing. A quickselect with a median-of-three pivot that sorts what
// is left once its range is small or it has split badly too often, so no
// input makes it quadratic.
func selectRank(vs []int64, k int) {
	if k < 0 || k >= len(vs) {
		return
	}
	lo, hi := 0, len(vs)-1
	budget := 2 * bits.Len(uint(len(vs)))
	for lo < hi {
		if hi-lo < 16 || budget == 0 {
			slices.Sort(vs[lo : hi+1])
			return
		}
		budget--
		mid := lo + (hi-lo)/2
		if vs[mid] < vs[lo] {
			vs[mid], vs[lo] = vs[lo], vs[mid]
		}
		if vs[hi] < vs[lo] {
			vs[hi], vs[lo] = vs[lo], vs[hi]
		}
		if vs[hi] < vs[mid] {
			vs[hi], vs[mid] = vs[mid], vs[hi]
		}
		p := vs[mid]
		i, j := lo, hi
		for i <= j {
			for vs[i] < p {
				i++
			}
			for vs[j] > p {
				j--
			}
			if i <= j {
				vs[i], vs[j] = vs[j], vs[i]
				i++
				j--
			}
		}
		// Now vs[lo..j] <= p <= vs[i..hi], and what lies between equals p.
		switch {
		case k <= j:
			hi = j
		case k >= i:
			lo = i
		default:
			return
		}
	}
}

// ParseUsageTime reads a usage window bound as given on the HTTP query or
// the command line: epoch milliseconds, or a duration before now ("24h",
// "90m"; Go's time.ParseDuration, plus "d" for days).
func ParseUsageTime(field, v string, now int64) (int64, error) {
	if n, err := strconv.ParseInt(v, 10, 64); err == nil {
		return n, nil
	}
	d, err := parseDays(v)
	if err != nil || d <= 0 {
		return 0, BadRequest(field, "must be epoch milliseconds or a duration before now such as 24h or 7d, got %.32q", v)
	}
	return now - d.Milliseconds(), nil
}

func parseDays(v string) (time.Duration, error) {
	if n, ok := strings.CutSuffix(v, "d"); ok {
		days, err := strconv.Atoi(n)
		if err != nil {
			return 0, err
		}
		return time.Duration(days) * 24 * time.Hour, nil
	}
	return time.ParseDuration(v)
}
