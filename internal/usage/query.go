package usage

import (
	"cmp"
	"maps"
	"slices"
	"time"

	"github.com/simlock/simlock/internal/contract"
)

// Window is what a Query is asked for: [From, To) in epoch ms, whole
// minutes, the series step, and where the kept history starts.
type Window struct {
	From, To int64
	Bucket   string
	Step     time.Duration
	// CoversFrom is the start of the minute of the oldest event the log
	// keeps; 0 when the log is empty. Nothing before it is counted.
	CoversFrom int64
	// Gateway counts the cells of the relayed workers too, and splits the
	// figures by worker.
	Gateway bool
}

// A Query adds up a window's rollup rows, in any order, into its figures.
type Query struct {
	w           Window
	start, step int64
	series      []contract.UsagePoint
	leaves      map[source]*leaf
}

// source is whose figures a cell holds: a worker's (or the daemon's own)
// for one platform.
type source struct{ worker, platform string }

// leaf accumulates the figures of one source.
type leaf struct {
	requests, cancelled, timedOut int
	granted                       [len(sources)]int // by source code; 0 unused
	grantedOther, rejected        map[string]int
	wait, toDevice, hold, turn    samples
}

// samples are durations in blocks of sampleBlock, so that adding to a
// long list never copies it.
type samples struct {
	blocks [][]int64
	n      int
}

const sampleBlock = 4096

func (s *samples) add(v int64) {
	if len(s.blocks) == 0 || len(s.blocks[len(s.blocks)-1]) == sampleBlock {
		s.blocks = append(s.blocks, make([]int64, 0, sampleBlock))
	}
	last := &s.blocks[len(s.blocks)-1]
	*last = append(*last, v)
	s.n++
}

// NewQuery starts the figures of w.
func NewQuery(w Window) *Query {
	q := &Query{w: w, start: max(w.From, w.CoversFrom), step: w.Step.Milliseconds(), leaves: map[source]*leaf{}}
	if q.step > 0 {
		q.series = make([]contract.UsagePoint, contract.UsagePoints(w.From, w.To, w.Step))
		for i := range q.series {
			q.series[i].At = w.From + int64(i)*q.step
		}
	}
	return q
}

// counted reports whether a cell of this worker at minute is in the
// figures.
func (q *Query) counted(minute int64, worker string) bool {
	return minute >= q.start && minute < q.w.To && (worker == "" || q.w.Gateway)
}

func (q *Query) leaf(worker, platform string) *leaf {
	k := source{worker, platform}
	lf := q.leaves[k]
	if lf == nil {
		lf = &leaf{grantedOther: map[string]int{}, rejected: map[string]int{}}
		q.leaves[k] = lf
	}
	return lf
}

// AddMinute adds the records of the cell at minute (AppendDelta's).
func (q *Query) AddMinute(minute int64, worker, platform string, records []byte) error {
	if !q.counted(minute, worker) {
		return nil
	}
	return q.add(q.leaf(worker, platform), minute, records)
}

// AddHour adds a row of the cells of the hour starting at hour
// (AppendChunk's).
func (q *Query) AddHour(hour int64, worker, platform string, chunks []byte) error {
	var lf *leaf
	for len(chunks) > 0 {
		minute, records, rest, err := nextChunk(chunks, hour)
		if err != nil {
			return err
		}
		chunks = rest
		if !q.counted(minute, worker) {
			continue
		}
		if lf == nil {
			lf = q.leaf(worker, platform)
		}
		if err := q.add(lf, minute, records); err != nil {
			return err
		}
	}
	return nil
}

func (q *Query) add(lf *leaf, minute int64, records []byte) error {
	var pt contract.UsagePoint // added to the series' point when it has one
	for len(records) > 0 {
		r, rest, err := nextRecord(records)
		if err != nil {
			return err
		}
		records = rest
		lf.requests += int(r.requests)
		pt.Requests += int(r.requests)
		if r.flags&fGranted != 0 {
			pt.Granted++
			if r.source != 0 {
				lf.granted[r.source]++
			} else {
				lf.grantedOther[string(r.sourceName)]++
			}
		}
		if r.flags&(fRejected|fCancelled|fTimedOut) != 0 {
			pt.Rejected++
		}
		if r.flags&fRejected != 0 {
			lf.rejected[string(r.reason)]++
		}
		if r.flags&fCancelled != 0 {
			lf.cancelled++
		}
		if r.flags&fTimedOut != 0 {
			lf.timedOut++
		}
		if r.flags&fWait != 0 {
			lf.wait.add(r.wait)
			if r.flags&fToDevice != 0 {
				lf.toDevice.add(r.wait)
			}
		}
		if r.flags&fHold != 0 {
			lf.hold.add(r.hold)
		}
		if r.flags&fTurnaround != 0 {
			lf.turn.add(r.turnaround)
		}
	}
	if q.step > 0 {
		if i := int((minute - q.w.From) / q.step); i < len(q.series) {
			p := &q.series[i]
			p.Requests += pt.Requests
			p.Granted += pt.Granted
			p.Rejected += pt.Rejected
		}
	}
	return nil
}

// Result is the figures of everything added. The partial result's
// figures count from CoversFrom.
func (q *Query) Result() contract.UsageResult {
	res := contract.UsageResult{From: q.w.From, To: q.w.To, Bucket: q.w.Bucket, Series: q.series}
	if res.Series == nil {
		res.Series = []contract.UsagePoint{}
	}
	if q.w.CoversFrom > q.w.From {
		res.Partial, res.CoversFrom = true, q.w.CoversFrom
	}
	keys := slices.SortedFunc(maps.Keys(q.leaves), func(a, b source) int {
		return cmp.Or(cmp.Compare(a.worker, b.worker), cmp.Compare(a.platform, b.platform))
	})
	var scratch []int64
	of := func(keep func(source) bool) contract.UsageFigures {
		var ls []*leaf
		for _, k := range keys {
			if keep(k) {
				ls = append(ls, q.leaves[k])
			}
		}
		return figures(ls, &scratch)
	}
	res.UsageFigures = of(func(source) bool { return true })
	res.ByPlatform = map[string]contract.UsageFigures{}
	if q.w.Gateway {
		res.ByWorker = map[string]contract.UsageFigures{}
	}
	for _, k := range keys {
		if _, done := res.ByPlatform[k.platform]; k.platform != "" && !done {
			res.ByPlatform[k.platform] = of(func(s source) bool { return s.platform == k.platform })
		}
		if _, done := res.ByWorker[k.worker]; q.w.Gateway && k.worker != "" && !done {
			res.ByWorker[k.worker] = of(func(s source) bool { return s.worker == k.worker })
		}
	}
	return res
}

// figures adds up ls; the percentiles are taken over a copy of their
// samples in scratch, which it reuses.
func figures(ls []*leaf, scratch *[]int64) contract.UsageFigures {
	t := contract.UsageTotals{Granted: map[string]int{}, Rejected: map[string]int{}}
	for _, lf := range ls {
		t.Requests += lf.requests
		t.Cancelled += lf.cancelled
		t.TimedOut += lf.timedOut
		for c, n := range lf.granted {
			if n > 0 {
				t.Granted[sources[c]] += n
			}
		}
		for s, n := range lf.grantedOther {
			t.Granted[s] += n
		}
		for r, n := range lf.rejected {
			t.Rejected[r] += n
		}
	}
	pc := func(of func(*leaf) *samples) contract.Percentiles {
		n := 0
		for _, lf := range ls {
			n += of(lf).n
		}
		if cap(*scratch) < n {
			*scratch = make([]int64, 0, n)
		}
		vs := (*scratch)[:0]
		for _, lf := range ls {
			for _, b := range of(lf).blocks {
				vs = append(vs, b...)
			}
		}
		return contract.NearestRank(vs)
	}
	return contract.UsageFigures{Totals: t, Percentiles: contract.UsagePercentiles{
		Wait:         pc(func(lf *leaf) *samples { return &lf.wait }),
		TimeToDevice: pc(func(lf *leaf) *samples { return &lf.toDevice }),
		Hold:         pc(func(lf *leaf) *samples { return &lf.hold }),
		Turnaround:   pc(func(lf *leaf) *samples { return &lf.turn }),
	}}
}
