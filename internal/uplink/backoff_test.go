package uplink

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

func TestBackoffDoublesFromOneSecondToThirtyWithEqualJitter(t *testing.T) {
	b := Backoff{Rand: rand.New(rand.NewPCG(1, 2))}
	steps := []time.Duration{1, 2, 4, 8, 16, 30, 30, 30}
	check := func(round string) {
		for i, step := range steps {
			step *= time.Second
			if d := b.Next(); d < step/2 || d > step {
				t.Fatalf("%s: delay %d is %v, want within [%v, %v]", round, i, d, step/2, step)
			}
		}
	}
	check("first round")
	b.Reset()
	check("after Reset")
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
	if d := b.Next(); d < time.Second/2 || d > time.Second {
		t.Fatalf("first delay %v, want within [500ms, 1s]", d)
	}
}
