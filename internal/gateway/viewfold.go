package gateway

import (
	"sync"

	"github.com/simlock/simlock/internal/queue"
)

// foldMax bounds the view changes one decision folds: a decision that
// reconciles more would hold the decision lock longer than the commits it
// saves are worth.
const foldMax = 64

// viewChange is one call of the fleet's changed handler (viewChanged).
type viewChange struct {
	workerID  string
	read      statusRead
	connected bool
}

// viewFolds gathers the view changes told while a decision folds others:
// many workers whose views change at once (a reconnect storm after the
// gateway's start, a burst of status reads) are folded into a few
// decisions, each one reservation of the store and one walk of the line,
// instead of one each, in which every worker would wait its turn for the
// store's write lock and the decision lock.
type viewFolds struct {
	mu      sync.Mutex
	pending []viewChange // told while folding, in the order told
	folding bool
}

// viewChanged runs after a worker's view changed: the index learns the
// worker's leases from the status read r, if one was (and gives back those
// granted for requests it withdrew), and the line is served again. A
// change told while another caller folds is left to that caller, which
// folds it, in the order told, before it returns; a caller alone folds its
// own at once.
func (l *Leasing) viewChanged(workerID string, r statusRead, connected bool) {
	l.folds.mu.Lock()
	l.folds.pending = append(l.folds.pending, viewChange{workerID, r, connected})
	if l.folds.folding {
		l.folds.mu.Unlock()
		return
	}
	l.folds.folding = true
	for len(l.folds.pending) > 0 {
		n := min(len(l.folds.pending), foldMax)
		batch := l.folds.pending[:n:n]
		l.folds.pending = l.folds.pending[n:]
		if len(l.folds.pending) == 0 {
			l.folds.pending = nil // what was folded is not kept
		}
		l.folds.mu.Unlock()
		_ = l.dec.do(func(tx *queue.Txn) { l.foldLocked(tx, batch) })
		l.folds.mu.Lock()
	}
	l.folds.folding = false
	l.folds.mu.Unlock()
}
