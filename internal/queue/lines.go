package queue

import (
	"time"

	"github.com/simlock/simlock/internal/contract"
)

// LineCount is one platform's line as a metrics scrape reads it.
type LineCount struct {
	Platform contract.Platform
	// Depth is how many requests wait in the platform's line.
	Depth int
	// OldestCreatedAt is when the request at the head of the line (the
	// earliest arrival) was made, epoch ms; 0 when the line is empty.
	OldestCreatedAt int64
}

// LinesLocked appends each platform's line that ever held a waiter to out:
// its depth and its oldest waiter's arrival. It costs one step per
// platform, whatever the number of waiters. The caller holds the decision
// lock (View or Do).
func (q *Queue) LinesLocked(out []LineCount) []LineCount {
	for _, l := range q.lines {
		c := LineCount{Platform: l.platform, Depth: l.n}
		if l.head != nil {
			c.OldestCreatedAt = l.head.rec.CreatedAt
		}
		out = append(out, c)
	}
	return out
}

// placesInline is the longest line whose places are told in the decision
// that changed them. A longer line's places are told at most once every
// placesEvery, by one walk for all the decisions meanwhile: a grant at the
// head of a line of n changes n places, and telling each of them in every
// decision would make each grant cost the length of the line under the
// decision lock (10,000 waiting at 1,000 grants a second is ten million
// pushes a second that nobody can read).
const (
	placesInline = 256
	placesEvery  = 100 * time.Millisecond
)

// reportPositionsLocked tells waiters whose place changed in tx their new
// place (placesLocked), at once in a short line, and within placesEvery in
// a long one, where a waiter that joins the line (or comes back to it) in
// tx is told its place in the whole line at once, and the walk corrects it
// to the waiters it waits behind. It walks the line only when the line or
// a block's reach changed.
func (q *Queue) reportPositionsLocked(tx *Txn) {
	if len(tx.moved) > 0 || tx.rescoped {
		if q.line.n <= placesInline {
			q.placesLocked()
		} else {
			for _, w := range tx.moved {
				if w.phase == phaseInLine && w.rec.QueuePosition == 0 {
					w.pos = q.positionLocked(w)
					w.rec.QueuePosition = w.pos
					w.report(q)
				}
			}
			q.placesLaterLocked()
		}
	}
	for _, w := range tx.hinted {
		if w.phase == phaseInLine {
			w.report(q)
		}
	}
}

// placesLocked walks the line and tells each waiter whose place changed.
// A place counts only the earlier waiters a waiter waits behind: those of
// its class of need (served in arrival order), and those whose wait, when
// last asked, held it too (its platform's, or everyone's); or, when its
// own wait is for room everyone needs (ScopeAll), every earlier waiter.
// An Android request is not told it is behind an iOS one that waits for
// an iOS limit while it waits for an Android one.
func (q *Queue) placesLocked() {
	for _, l := range q.lines {
		l.ahead = 0
	}
	for _, l := range q.needs {
		l.ahead = 0
	}
	// Each earlier waiter counts in one bucket, by how far it holds:
	// everyone, its platform, or its class of need.
	all, ahead := 0, 0
	for w := q.line.head; w != nil; w, ahead = w.line.next, ahead+1 {
		pos := 1 + all + w.pl.ahead + w.nl.ahead
		if w.scope == ScopeAll {
			// It waits for room everyone needs, which the earlier
			// waiters are offered first.
			pos = 1 + ahead
		}
		switch w.scope {
		case ScopeAll:
			all++
		case ScopePlatform:
			w.pl.ahead++
		default:
			w.nl.ahead++
		}
		if w.pos != pos {
			w.pos = pos
			w.rec.QueuePosition = pos
			w.report(q)
		}
	}
}

// placesLaterLocked has the line's places told by one walk within
// placesEvery, unless one is due already.
func (q *Queue) placesLaterLocked() {
	if q.placesDue != nil || q.stopping {
		return
	}
	q.placesDue = time.AfterFunc(placesEvery, func() {
		q.mu.Lock()
		defer q.mu.Unlock()
		q.placesDue = nil
		if q.stopping || q.broken != nil {
			return
		}
		q.placesLocked()
	})
}

// serveJoinedLocked serves the line as w joins it. A newcomer behind an
// earlier waiter of its class of need is not served: that waiter is
// placed first, it could not be placed when the line was last served (or
// it would not be waiting), and nothing has made room since, since what
// makes room kicks, and a kick serves the line before the decision
// commits. So a request that joins a long line costs no Place, where
// asking the head again for each newcomer would cost one routing decision
// per arrival.
func (q *Queue) serveJoinedLocked(tx *Txn, w *Waiter, again bool) {
	if !again && !tx.kick && w.nl.head != w {
		return
	}
	q.serveLocked(tx)
}
