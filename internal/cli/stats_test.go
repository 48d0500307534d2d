package cli

import (
	"bytes"
	"testing"
	"time"

	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/termtest"
)

func TestStatsGolden(t *testing.T) {
	from := time.Date(2026, 12, 3, 16, 0, 0, 0, time.UTC).UnixMilli()
	pc := func(p50, p90, p99 int64, n int) contract.Percentiles {
		return contract.Percentiles{P50: p50, P90: p90, P99: p99, Count: n}
	}
	ios := contract.UsageFigures{
		Totals: contract.UsageTotals{Requests: 5, Granted: map[string]int{"warm": 3, "provisioned": 1}, Rejected: map[string]int{}, Cancelled: 1},
		Percentiles: contract.UsagePercentiles{
			Wait: pc(120, 4100, 4100, 4), TimeToDevice: pc(4100, 4100, 4100, 1),
			Hold: pc(60000, 900000, 900000, 4), Turnaround: pc(60200, 904100, 904100, 4),
		},
	}
	android := contract.UsageFigures{Totals: contract.UsageTotals{Requests: 1, Granted: map[string]int{}, Rejected: map[string]int{"no-wait": 1}}}
	all := ios
	all.Totals = contract.UsageTotals{Requests: 6, Granted: ios.Totals.Granted, Rejected: android.Totals.Rejected, Cancelled: 1}
	res := contract.UsageResult{
		From: from, To: from + 3600000, Bucket: "15m", Partial: true, CoversFrom: from + 60000,
		UsageFigures: all,
		ByPlatform:   map[string]contract.UsageFigures{"ios": ios, "android": android},
		Series: []contract.UsagePoint{
			{At: from, Requests: 0}, {At: from + 900000, Requests: 1},
			{At: from + 1800000, Requests: 4, Granted: 3, Rejected: 1}, {At: from + 2700000, Requests: 1, Granted: 1},
		},
	}
	var b bytes.Buffer
	renderUsage(&b, res, time.UTC)
	termtest.Golden(t, "stats", b.Bytes())
}
