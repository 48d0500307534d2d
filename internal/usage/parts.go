package usage

import "sync"

// PartBytes bounds one row of a minute cell: a store appends a commit's
// records to the cell's current row until the row would pass this, then
// starts another. A store rewrites a row whole when it appends to it
// (SQLite rewrites the row, onto overflow pages past about a kilobyte of
// a 4 KiB page; PostgreSQL writes a new version of the tuple, toasted
// past about 2 KiB), so a cell kept as one row made every commit of a
// busy minute cost as much as the minute had gathered so far. A cell's
// records are its rows', in any order: they are deltas, summed.
const PartBytes = 768

// partsKept bounds the cells Parts remembers: past it the map starts
// again, each cell then getting a new row.
const partsKept = 256

// Parts is which row (part) of each recent cell a store's next append
// goes to, and how large that row is. It is a hint, never the truth: a
// row it names that a rolled-back commit never wrote is created by the
// next append (the append is an upsert), and a cell it forgot (a
// restart, a reset, another process writing the same database) gets a
// new row. A new row's part is the seq of the first event of the commit
// that starts it, which no other commit's events have. The zero value is
// ready to use; it is safe for concurrent use.
type Parts struct {
	mu   sync.Mutex
	rows map[Cell]part
}

type part struct {
	id   int64
	size int
}

// Place returns the part an append of n bytes to cell goes to, in a
// commit whose first event has seq: the cell's current row while it
// stays within PartBytes, else a new row named seq.
func (p *Parts) Place(cell Cell, n int, seq int64) int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	if r, ok := p.rows[cell]; ok && r.size+n <= PartBytes {
		r.size += n
		p.rows[cell] = r
		return r.id
	}
	if p.rows == nil || len(p.rows) >= partsKept {
		p.rows = map[Cell]part{}
	}
	p.rows[cell] = part{id: seq, size: n}
	return seq
}
