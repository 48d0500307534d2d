package uplink

import (
	"math/rand/v2"
	"time"
)

// The reconnect delays Backoff steps through when its fields are zero.
const (
	defaultMinBackoff = time.Second
	defaultMaxBackoff = 30 * time.Second
)

// Backoff is a worker's delay between attempts to dial its gateway: a step
// that starts at Min and doubles up to Max, each delay drawn with equal
// jitter, from half the step to the whole of it. Half the step is a floor,
// so a gateway that refuses every attempt never sees them come in a tight
// loop; the other half spreads the workers of a fleet that all lost the
// gateway at once, as it restarted, over the time they come back in.
//
// The zero value is ready to use. A Backoff is for the one goroutine that
// redials.
type Backoff struct {
	Min, Max time.Duration // 1 s and 30 s when 0
	// Rand draws the jitter; nil means the runtime's source. A seeded one
	// makes the delays the same every time.
	Rand *rand.Rand

	step time.Duration
}

// Next is how long to wait before the next attempt.
func (b *Backoff) Next() time.Duration {
	lo, hi := b.Min, b.Max
	if lo <= 0 {
		lo = defaultMinBackoff
	}
	if hi <= 0 {
		hi = defaultMaxBackoff
	}
	if b.step == 0 {
		b.step = min(lo, hi)
	}
	step := b.step
	b.step = min(2*b.step, hi)
	half := step / 2
	return half + b.jitter(step-half)
}

// Reset starts the steps again from Min. Call it once a connection has
// stayed up for longer than Max: one that fails as soon as it is made (a
// gateway that accepts and then drops the worker) must keep backing off.
func (b *Backoff) Reset() { b.step = 0 }

// jitter is a duration in [0, d].
func (b *Backoff) jitter(d time.Duration) time.Duration {
	if b.Rand != nil {
		return time.Duration(b.Rand.Int64N(int64(d) + 1))
	}
	return time.Duration(rand.Int64N(int64(d) + 1))
}
