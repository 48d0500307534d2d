package bench

import (
	"context"
	"testing"
	"testing/synctest"
	"time"
)

// settle takes the lowest of the reads once they stop falling: quiet
// reads in a row none lower, or at the bound.
func TestSettleTakesTheLowestReadOnceTheyStopFalling(t *testing.T) {
	for _, tc := range []struct {
		name  string
		reads []int64
		want  int64
		n     int // reads taken
	}{
		{"steady", []int64{100, 100, 100, 100}, 100, 4},
		{"falling, then still", []int64{300, 200, 150, 150, 160, 150}, 150, 6},
		{"a rise does not count", []int64{300, 400, 500, 500, 500}, 300, 4},
		{"falling at the bound", []int64{900, 800, 700, 600, 500, 400, 300, 200, 100, 50, 40, 30}, 40, 11},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				i := 0
				read := func(context.Context) (int64, error) {
					v := tc.reads[min(i, len(tc.reads)-1)]
					i++
					return v, nil
				}
				got, err := settle(context.Background(), read, 100*time.Millisecond, 3, time.Second)
				if err != nil {
					t.Fatal(err)
				}
				if got != tc.want || i != tc.n {
					t.Errorf("settle = %d after %d reads, want %d after %d", got, i, tc.want, tc.n)
				}
			})
		})
	}
}
