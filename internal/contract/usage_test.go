package contract

import (
	"errors"
	"testing"
)

func TestUsageWindow(t *testing.T) {
	const now = 1_800_000_000_000
	const hour = 3_600_000
	for _, c := range []struct {
		name       string
		in         UsageGetInput
		wantTo     int64
		wantBucket string
		bad        bool
	}{
		{name: "an hour picks 1m", in: UsageGetInput{From: now - hour}, wantTo: now, wantBucket: "1m"},
		{name: "a day picks 15m", in: UsageGetInput{From: now - 24*hour}, wantTo: now, wantBucket: "15m"},
		{name: "90 days picks 1d", in: UsageGetInput{From: now - 90*24*hour}, wantTo: now, wantBucket: "1d"},
		{name: "over 90 days", in: UsageGetInput{From: now - 90*24*hour - 1}, bad: true},
		{name: "too many points", in: UsageGetInput{From: now - 24*hour, Bucket: "1m"}, bad: true},
		{name: "exactly 200 points", in: UsageGetInput{From: now - 200*60000, Bucket: "1m"}, wantTo: now, wantBucket: "1m"},
		{name: "unknown bucket", in: UsageGetInput{From: now - hour, Bucket: "2m"}, bad: true},
		{name: "to before from", in: UsageGetInput{From: now - hour, To: now - 2*hour}, bad: true},
		{name: "from in the future", in: UsageGetInput{From: now + 1}, bad: true},
	} {
		to, b, err := c.in.Window(now)
		if c.bad {
			if !errors.Is(err, &Error{Code: CodeBadRequest}) {
				t.Errorf("%s: err = %v, want BAD_REQUEST", c.name, err)
			}
			continue
		}
		if err != nil || to != c.wantTo || b != c.wantBucket {
			t.Errorf("%s: = %d, %q, %v; want %d, %q", c.name, to, b, err, c.wantTo, c.wantBucket)
		}
	}
}

func TestNearestRank(t *testing.T) {
	vs := []int64{50, 10, 40, 20, 30, 60, 70, 80, 90, 100}
	if got, want := NearestRank(vs), (Percentiles{P50: 50, P90: 90, P99: 100, Count: 10}); got != want {
		t.Errorf("NearestRank = %+v, want %+v", got, want)
	}
	if got := NearestRank(nil); got != (Percentiles{}) {
		t.Errorf("NearestRank(nil) = %+v, want zeros", got)
	}
}
