package gateway

import (
	"sync"

	"github.com/simlock/simlock/internal/queue"
)

// shareMax bounds the parts one shared decision runs (decider): one that
// runs more would hold the decision lock longer than the commits it
// saves are worth.
const shareMax = 64

// decider shares decisions of the fleet queue between the goroutines that
// make one at the same time: a worker's grant being judged, a lease that
// ended there, a bounce, a fold of view changes. Each is a part, run in
// the order told; the parts told while a decision waits for the store's
// write lock or runs are run together in the next one, with one
// reservation of the store, one commit and one pass of the line, instead
// of one each in turn. Every part still commits before its caller
// returns, and before anyone hears of what it decided (the queue tells
// after the commit): a shared decision is one decision with the parts'
// writes, as though one goroutine had made them all.
//
// The caller whose part is first in line runs the decision (leads); the
// others wait for it, and when parts are left after it, the first of them
// leads the next: no caller runs decisions for others after its own has
// committed.
type decider struct {
	q       *queue.Queue
	mu      sync.Mutex
	pending []*part
	leading bool
}

// part is one caller's share of a decision.
type part struct {
	fn   func(tx *queue.Txn)
	wake chan struct{} // told once: done, or lead
	done bool
	err  error
}

// do runs fn in a decision of the fleet queue, perhaps shared with other
// callers' parts, and returns when that decision has committed: with the
// queue's error, which is every part's (fn itself returns none). fn must
// not make a decision of its own.
func (d *decider) do(fn func(tx *queue.Txn)) error {
	p := &part{fn: fn, wake: make(chan struct{}, 1)}
	d.mu.Lock()
	d.pending = append(d.pending, p)
	lead := !d.leading
	d.leading = true
	d.mu.Unlock()
	if !lead {
		<-p.wake
		if p.done {
			return p.err
		}
	}
	// p is first in line: it leads this decision.
	d.mu.Lock()
	n := min(len(d.pending), shareMax)
	batch := d.pending[:n:n]
	d.pending = d.pending[n:]
	if len(d.pending) == 0 {
		d.pending = nil // what was run is not kept
	}
	d.mu.Unlock()
	err := d.q.Do(func(tx *queue.Txn) error {
		for _, b := range batch {
			b.fn(tx)
		}
		return nil
	})
	d.mu.Lock()
	for _, b := range batch {
		b.done, b.err = true, err
		if b != p {
			b.wake <- struct{}{}
		}
	}
	if len(d.pending) > 0 {
		d.pending[0].wake <- struct{}{}
	} else {
		d.leading = false
	}
	d.mu.Unlock()
	return err
}
