package contract

import (
	"errors"
	"math/rand/v2"
	"slices"
	"testing"
)

func TestUsageWindow(t *testing.T) {
	const now = 1_800_000_000_000
	const hour = 3_600_000
	for _, c := range []struct {
		name       string
		in         UsageGetInput
		wantFrom   int64 // 0: in.From
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
		{name: "whole minutes", in: UsageGetInput{From: now - hour + 1, To: now + 1}, wantFrom: now - hour, wantTo: now + 60000, wantBucket: "1m"},
		{name: "200 minutes off the minute are 201 points", in: UsageGetInput{From: now - 200*60000 + 1, To: now + 1, Bucket: "1m"}, bad: true},
		{name: "and pick 5m", in: UsageGetInput{From: now - 200*60000 + 1, To: now + 1}, wantFrom: now - 200*60000, wantTo: now + 60000, wantBucket: "5m"},
		{name: "unknown bucket", in: UsageGetInput{From: now - hour, Bucket: "2m"}, bad: true},
		{name: "to before from", in: UsageGetInput{From: now - hour, To: now - 2*hour}, bad: true},
		{name: "from in the future", in: UsageGetInput{From: now + 1}, bad: true},
	} {
		from, to, b, err := c.in.Window(now)
		if c.bad {
			if !errors.Is(err, &Error{Code: CodeBadRequest}) {
				t.Errorf("%s: err = %v, want BAD_REQUEST", c.name, err)
			}
			continue
		}
		wantFrom := c.wantFrom
		if wantFrom == 0 {
			wantFrom = c.in.From
		}
		if err != nil || from != wantFrom || to != c.wantTo || b != c.wantBucket {
			t.Errorf("%s: = %d, %d, %q, %v; want %d, %d, %q", c.name, from, to, b, err, wantFrom, c.wantTo, c.wantBucket)
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

// TestNearestRankSelectsWhatASortWould compares the selection with the
// ranks read off a sorted copy, over sizes around the small-range cutoff
// and inputs with many equal values, sorted, reversed and organ-pipe.
func TestNearestRankSelectsWhatASortWould(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	shapes := map[string]func(i, n int) int64{
		"random":     func(int, int) int64 { return rng.Int64N(1 << 40) },
		"few values": func(int, int) int64 { return rng.Int64N(4) },
		"sorted":     func(i, _ int) int64 { return int64(i) },
		"reversed":   func(i, n int) int64 { return int64(n - i) },
		"organ pipe": func(i, n int) int64 { return int64(min(i, n-i)) },
		"negative":   func(int, int) int64 { return rng.Int64N(100) - 50 },
	}
	for name, gen := range shapes {
		for _, n := range []int{1, 2, 3, 15, 16, 17, 99, 100, 101, 1000, 4097} {
			vs := make([]int64, n)
			for i := range vs {
				vs[i] = gen(i, n)
			}
			sorted := slices.Sorted(slices.Values(vs))
			at := func(p int) int64 { return sorted[max((p*n+99)/100, 1)-1] }
			want := Percentiles{P50: at(50), P90: at(90), P99: at(99), Count: n}
			if got := NearestRank(vs); got != want {
				t.Errorf("%s, %d values: NearestRank = %+v, want %+v", name, n, got, want)
			}
		}
	}
}
