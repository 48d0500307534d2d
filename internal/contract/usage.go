package contract

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// OpUsageGet answers usage figures (UsageResult) over a window of the
// event log: how many leases were asked for and granted, how long the
// requesters waited, what was refused and why.
const OpUsageGet Op = "usage.get"

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

// UsageGetInput asks for the usage figures of [From, To), epoch ms.
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

// Window resolves the input at now (epoch ms): the window's end and its
// bucket. A window longer than MaxUsageWindow, or a bucket that would give
// more than MaxUsagePoints points, is BAD_REQUEST.
func (in UsageGetInput) Window(now int64) (to int64, bucket string, err error) {
	if err := in.Validate(); err != nil {
		return 0, "", err
	}
	to = in.To
	if to == 0 {
		to = now
	}
	if to <= in.From {
		return 0, "", BadRequest("from", "must be before to (%d), got %d", to, in.From)
	}
	span := time.Duration(to-in.From) * time.Millisecond
	if span > MaxUsageWindow {
		return 0, "", BadRequest("from", "the window is at most 90 days, got %s", span.Round(time.Minute))
	}
	if in.Bucket != "" {
		d, _ := UsageBucketDuration(in.Bucket)
		if n := UsagePoints(in.From, to, d); n > MaxUsagePoints {
			return 0, "", BadRequest("bucket", "%s gives %d points over this window, at most %d", in.Bucket, n, MaxUsagePoints)
		}
		return to, in.Bucket, nil
	}
	for _, b := range UsageBuckets {
		d, _ := UsageBucketDuration(b)
		if UsagePoints(in.From, to, d) <= MaxUsagePoints {
			return to, b, nil
		}
	}
	return 0, "", fmt.Errorf("usage: no bucket fits a window of %s", span) // unreachable: 90 d / 1 d
}

// UsagePoints is how many buckets of d cover [from, to).
func UsagePoints(from, to int64, d time.Duration) int {
	step := d.Milliseconds()
	return int((to - from + step - 1) / step)
}

// UsageResult answers usage.get. Figures come from the event log's
// lease.* events whose timestamp is in [From, To).
//
// Each duration is measured between two events of one request, and counted
// when both are in the window:
//   - wait: lease.requested → lease.granted, every grant;
//   - timeToDevice: lease.requested → lease.granted, for grants whose source
//     is not warm (a device had to be booted or created);
//   - hold: lease.granted → lease.released or lease.expired;
//   - turnaround: lease.requested → lease.released or lease.expired.
type UsageResult struct {
	From   int64  `json:"from"`
	To     int64  `json:"to"`
	Bucket string `json:"bucket"`
	// Partial is true when the window reaches before the oldest event the
	// log keeps; CoversFrom is then that event's time.
	Partial    bool  `json:"partial"`
	CoversFrom int64 `json:"coversFrom,omitempty"`
	UsageFigures
	// ByPlatform splits the figures by the platform asked for.
	ByPlatform map[string]UsageFigures `json:"byPlatform"`
	// ByWorker (gateway only) splits them by the worker whose relayed
	// events they come from.
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

// NearestRank computes the percentiles of vs (sorted in place).
func NearestRank(vs []int64) Percentiles {
	if len(vs) == 0 {
		return Percentiles{}
	}
	slices.Sort(vs)
	at := func(p int) int64 {
		r := (p*len(vs) + 99) / 100
		if r < 1 {
			r = 1
		}
		return vs[r-1]
	}
	return Percentiles{P50: at(50), P90: at(90), P99: at(99), Count: len(vs)}
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
