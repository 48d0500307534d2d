package daemon

import (
	"context"
	"sync"
	"time"

	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/store"
)

// The bounds of one shared relay commit (relayGroup): at most
// relayShareMax batches, and no more events than relayShareEvents unless
// its first batch alone has more. A commit that held more would keep
// the log's order lock (appendMu), which the fleet queue's decisions
// also take, longer than the commits it saves are worth.
const (
	relayShareMax    = 64
	relayShareEvents = 4096
)

// relayCommitTimeout bounds a shared relay commit. It runs for every
// caller in it, so no one caller's context ends it: a worker that
// disconnects while its batch is in a commit does not fail the others'.
const relayCommitTimeout = 30 * time.Second

// relayStore is the store call a relay commit makes.
type relayStore interface {
	RelayBatches(ctx context.Context, bs []store.RelayBatch) ([][]contract.Event, error)
}

// relayGroup shares the commits of a gateway's relayed events between the
// workers' follow loops that relay at the same time, as the fleet queue's
// decider shares decisions: a batch told while a commit runs goes in the
// next commit with every other batch told meanwhile (up to the bounds
// above), one transaction for all of them instead of one each. Each
// caller returns after the commit that holds its batch, with that
// commit's error; a failed commit publishes nothing. A worker's follow
// loop relays one batch at a time, and the batches of a commit are
// written in the order told, so each worker's events and cursor keep
// their order.
//
// It lives in the daemon, not in the gateway's Fleet.relay: a commit must
// hold appendMu, the lock that orders the gateway's own events with the
// relayed ones in the log and on the bus, and that lock, the store and
// the bus are the daemon's; the gateway hands each worker's batch over
// (Options.Relay) as it did when each had a commit of its own.
//
// A caller that finds no commit running runs the next one (leads), with
// the batches first in line, its own among them or after them; one that
// finds a commit running waits to be told that its batch committed or
// that the commit ended. Whoever is running when a commit ends may lead
// the next, so a follow loop that has just read its worker's events
// commits them with the others waiting without first waking one of those
// (on a busy machine each such hand-off is a scheduler wake-up, and at
// 1,000 workers they were the relay's cost); the first in line is told
// too, and leads when nobody else has. No caller runs a commit after its
// own batch has committed.
type relayGroup struct {
	store   relayStore
	lock    sync.Locker // held across a commit and its publication
	publish func(evs ...contract.Event)

	mu         sync.Mutex
	pending    []*relayPart
	committing bool
}

// relayPart is one caller's batch in a shared commit.
type relayPart struct {
	ctx  context.Context
	b    store.RelayBatch
	wake chan struct{} // a token: done, or a commit ended
	done bool
	err  error
}

// tell wakes q's caller, if it is not already to wake.
func (q *relayPart) tell() {
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// relay commits b, perhaps with other callers' batches, publishes what it
// appended in commit order, and returns when that commit has ended, with
// its error. A batch whose caller's ctx has ended before its commit
// starts is left out, and its caller returns ctx's error.
func (g *relayGroup) relay(ctx context.Context, b store.RelayBatch) error {
	p := &relayPart{ctx: ctx, b: b, wake: make(chan struct{}, 1)}
	g.mu.Lock()
	g.pending = append(g.pending, p)
	for !p.done {
		if g.committing {
			g.mu.Unlock()
			<-p.wake
			g.mu.Lock()
			continue
		}
		g.committing = true
		batch := g.take()
		g.mu.Unlock()
		var err error
		if len(batch) > 0 {
			err = g.commit(ctx, batch)
		}
		g.mu.Lock()
		for _, q := range batch {
			q.done, q.err = true, err
			q.tell()
		}
		g.committing = false
		if len(g.pending) > 0 {
			g.pending[0].tell()
		}
	}
	g.mu.Unlock()
	return p.err
}

// take removes from the line the parts of the next commit, within the
// bounds; a part whose context has ended is told so and left out. g.mu
// is held.
func (g *relayGroup) take() []*relayPart {
	var batch []*relayPart
	events, n := 0, 0
	for ; n < len(g.pending) && len(batch) < relayShareMax; n++ {
		q := g.pending[n]
		if err := q.ctx.Err(); err != nil {
			q.done, q.err = true, err
			q.tell()
			continue
		}
		if len(batch) > 0 && events+len(q.b.Events) > relayShareEvents {
			break
		}
		events += len(q.b.Events)
		batch = append(batch, q)
	}
	g.pending = g.pending[n:]
	if len(g.pending) == 0 {
		g.pending = nil // what was committed is not kept
	}
	return batch
}

// commit writes the batches in one transaction and publishes what they
// appended, in the log's order, under the lock that orders the log.
func (g *relayGroup) commit(ctx context.Context, batch []*relayPart) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), relayCommitTimeout)
	defer cancel()
	bs := make([]store.RelayBatch, len(batch))
	for i, q := range batch {
		bs[i] = q.b
	}
	g.lock.Lock()
	defer g.lock.Unlock()
	out, err := g.store.RelayBatches(ctx, bs)
	if err != nil {
		return err
	}
	for _, evs := range out {
		g.publish(evs...)
	}
	return nil
}
