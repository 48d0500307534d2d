package uplink

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// within checks that b's next delays fall in the equal-jitter range of
// each step, in milliseconds.
func within(t *testing.T, b *Backoff, round string, steps ...time.Duration) {
	t.Helper()
	for i, step := range steps {
		step *= time.Millisecond
		if d := b.Next(); d < step/2 || d > step {
			t.Fatalf("%s: delay %d is %v, want within [%v, %v]", round, i, d, step/2, step)
		}
	}
}

func TestBackoffRedialsQuicklyFirstThenDoublesToThirtySeconds(t *testing.T) {
	b := Backoff{Rand: rand.New(rand.NewPCG(1, 2))}
	quick := []time.Duration{500, 1000, 2000, 2000, 2000, 2000, 2000, 2000, 2000, 2000, 2000, 2000, 2000, 2000, 2000}
	slow := []time.Duration{4000, 8000, 16000, 30000, 30000}
	within(t, &b, "first round", append(quick, slow...)...)
	b.Reset()
	within(t, &b, "after Reset", append(quick, slow...)...)
}

// A worker whose uplink was up for a while redials quickly when it ends (a
// gateway restart); one that ends as soon as it is made keeps backing off.
func TestBackoffStartsOverOnlyAfterAnUplinkThatStayedUp(t *testing.T) {
	b := Backoff{Rand: rand.New(rand.NewPCG(5, 6)), QuickTries: 2}
	within(t, &b, "first", 500, 1000, 2000, 4000)
	b.Ended(time.Second)
	within(t, &b, "after an uplink up for 1 s", 8000)
	b.Ended(2 * time.Second)
	within(t, &b, "after an uplink up for 2 s", 500, 1000, 2000)
}

func TestBackoffIsTheSameUnderTheSameSeed(t *testing.T) {
	draw := func() []time.Duration {
		b := Backoff{Rand: rand.New(rand.NewPCG(7, 7))}
		var ds []time.Duration
		for range 8 {
			ds = append(ds, b.Next())
		}
		return ds
	}
	if a, b := draw(), draw(); !slices.Equal(a, b) {
		t.Fatalf("two backoffs under one seed: %v and %v", a, b)
	}
}

func TestBackoffJitters(t *testing.T) {
	b := Backoff{Rand: rand.New(rand.NewPCG(3, 4))}
	seen := map[time.Duration]bool{}
	for range 20 {
		seen[b.Next()] = true
		b.Reset()
	}
	if len(seen) < 10 {
		t.Fatalf("20 first delays took %d values, want them spread: %v", len(seen), seen)
	}
}

func TestBackoffZeroValueUsesTheRuntimesSource(t *testing.T) {
	var b Backoff
	if d := b.Next(); d < 250*time.Millisecond || d > 500*time.Millisecond {
		t.Fatalf("first delay %v, want within [250ms, 500ms]", d)
	}
}
