package usage

import "testing"

// Appends go to a cell's row until it would pass PartBytes, then to a new
// row named by the seq of the commit that starts it; each cell has rows
// of its own.
func TestPlaceStartsARowWhenTheCellsWouldPassTheBound(t *testing.T) {
	var p Parts
	a, b := Cell{Minute: 60_000, Platform: "ios"}, Cell{Minute: 60_000, Platform: "android"}
	steps := []struct {
		cell Cell
		n    int
		seq  int64
		want int64
	}{
		{a, 500, 10, 10},
		{a, 268, 11, 10}, // exactly PartBytes
		{b, 100, 12, 12},
		{a, 1, 13, 13}, // one byte more: a new row
		{a, PartBytes - 1, 14, 13},
		{a, PartBytes + 1, 15, 15}, // larger than a row: a row of its own
		{a, 1, 16, 16},
		{b, 100, 17, 12},
	}
	for i, s := range steps {
		if got := p.Place(s.cell, s.n, s.seq); got != s.want {
			t.Errorf("step %d: %d bytes to %v went to part %d, want %d", i, s.n, s.cell, got, s.want)
		}
	}
}
