package queue

import "github.com/simlock/simlock/internal/contract"

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
