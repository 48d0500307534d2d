package usage

// HourRow is one gathered hour of a worker and platform: the chunks of its
// minutes (AppendChunk), as a store appends them to its usage_hours row.
type HourRow struct {
	Hour             int64
	Worker, Platform string
	Chunks           []byte
}

// Gather folds minute rows into hour rows, for a store's pruning pass.
// Every backend reads its minutes by worker, platform and minute, so an
// hour's minutes come consecutively and start one row each.
type Gather struct{ rows []*HourRow }

// Add folds one minute row's records into its hour's row.
func (g *Gather) Add(minute int64, worker, platform string, records []byte) {
	h := Hour(minute)
	if n := len(g.rows); n == 0 || g.rows[n-1].Hour != h || g.rows[n-1].Worker != worker || g.rows[n-1].Platform != platform {
		g.rows = append(g.rows, &HourRow{Hour: h, Worker: worker, Platform: platform})
	}
	r := g.rows[len(g.rows)-1]
	r.Chunks = AppendChunk(r.Chunks, h, minute, records)
}

// Rows are the hour rows gathered, in the order their minutes came.
func (g *Gather) Rows() []*HourRow { return g.rows }
