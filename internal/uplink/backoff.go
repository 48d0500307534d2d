package uplink

import (
	"math/rand/v2"
	"time"
)

// The reconnect delays Backoff steps through when its fields are zero.
const (
	defaultMinBackoff = 500 * time.Millisecond
	defaultMaxBackoff = 30 * time.Second
	defaultQuickMax   = 2 * time.Second
	defaultQuickTries = 15
	// defaultSettled is how long an uplink must have stayed up for its loss
	// to start the steps over (Ended): longer than a gateway takes to
	// read a worker and drop it (hello, status, catalog), shorter than the
	// time between two failovers of replicas, so a worker whose gateway
	// replicas fail over one after the other keeps its quick attempts.
	defaultSettled = 2 * time.Second
)

// Backoff is a worker's delay between attempts to dial its gateway: a step
// that starts at Min and doubles, capped at QuickMax for the first
// QuickTries attempts and at Max after them; each delay is drawn with equal
// jitter, from half the step to the whole of it.
//
// The quick attempts are for a gateway that was up a moment ago: one that
// restarts is back within a second or two, and its workers find it again
// within QuickMax of its start rather than at a step doubled towards Max.
// A gateway that stays away is then asked ever less often. Half the step
// is a floor, so a gateway that refuses every attempt never sees them come
// in a tight loop; the other half spreads the workers of a fleet that all
// lost the gateway at once over the time they come back in.
//
// The zero value is ready to use. A Backoff is for the one goroutine that
// redials.
type Backoff struct {
	Min, Max time.Duration // 500 ms and 30 s when 0
	// QuickMax caps the step for the first QuickTries attempts after a
	// start over (2 s and 15 when 0).
	QuickMax   time.Duration
	QuickTries int
	// Settled is how long an uplink must stay up for its end to start the
	// steps over (2 s when 0): one that fails as soon as it is made (a
	// gateway that accepts and then drops the worker) keeps backing off.
	Settled time.Duration
	// Rand draws the jitter; nil means the runtime's source. A seeded one
	// makes the delays the same every time.
	Rand *rand.Rand

	step  time.Duration
	tries int
}

// Next is how long to wait before the next attempt.
func (b *Backoff) Next() time.Duration {
	lo, hi := or(b.Min, defaultMinBackoff), or(b.Max, defaultMaxBackoff)
	quick, tries := or(b.QuickMax, defaultQuickMax), b.QuickTries
	if tries <= 0 {
		tries = defaultQuickTries
	}
	capped := hi
	if b.tries++; b.tries <= tries {
		capped = min(hi, quick)
	}
	if b.step == 0 {
		b.step = lo
	}
	step := min(b.step, capped)
	b.step = min(2*step, hi)
	half := step / 2
	return half + b.jitter(step-half)
}

// Reset starts the steps again from Min, quick attempts and all.
func (b *Backoff) Reset() { b.step, b.tries = 0, 0 }

// Ended tells b that an uplink ended after it was up for up: one that
// stayed up at least Settled starts the steps over (Reset), so a worker
// whose gateway just restarted redials quickly; a shorter one does not.
func (b *Backoff) Ended(up time.Duration) {
	if up >= or(b.Settled, defaultSettled) {
		b.Reset()
	}
}

func or(d, def time.Duration) time.Duration {
	if d <= 0 {
		return def
	}
	return d
}

// jitter is a duration in [0, d].
func (b *Backoff) jitter(d time.Duration) time.Duration {
	if b.Rand != nil {
		return time.Duration(b.Rand.Int64N(int64(d) + 1))
	}
	return time.Duration(rand.Int64N(int64(d) + 1))
}
