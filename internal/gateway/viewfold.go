package gateway

import "github.com/simlock/simlock/internal/queue"

// viewChange is one call of the fleet's changed handler (viewChanged).
type viewChange struct {
	workerID  string
	read      statusRead
	connected bool
}

// viewChanged runs after a worker's view changed: the index learns the
// worker's leases from the status read r, if one was (and gives back those
// granted for requests it withdrew), and the line is served again. It is a
// part of a shared decision (decider): the views of many workers that
// change at once (a reconnect storm after the gateway's start, a burst of
// status reads) take a few reservations of the store and a few passes of
// the line, not one each in turn.
func (l *Leasing) viewChanged(workerID string, r statusRead, connected bool) {
	_ = l.dec.do(func(tx *queue.Txn) { l.foldLocked(tx, []viewChange{{workerID, r, connected}}) })
}
