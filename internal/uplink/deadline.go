package uplink

import (
	"context"
	"os"
	"sync"
	"time"
)

// deadline is one of a Conn's deadlines as a context that is cancelled, with
// the cause os.ErrDeadlineExceeded, once the deadline passes. An operation
// takes the context when it starts: moving a deadline that has not passed
// yet moves it for the operations already waiting on it (net.Conn's
// contract), and a deadline set again after it passed gives later operations
// a fresh context. This is net.Pipe's deadline, as a context, so a write can
// hand it to the websocket.
type deadline struct {
	parent context.Context

	mu sync.Mutex
	// mu guards the fields below.
	ctx    context.Context
	cancel context.CancelCauseFunc
	timer  *time.Timer
}

func newDeadline(parent context.Context) *deadline {
	d := &deadline{parent: parent}
	d.ctx, d.cancel = context.WithCancelCause(parent)
	return d
}

// context is cancelled when the deadline passes, or when the parent is.
func (d *deadline) context() context.Context {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.ctx
}

// set moves the deadline to t; the zero time means none.
func (d *deadline) set(t time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.timer != nil && !d.timer.Stop() {
		// The timer has fired: wait for it to cancel, or the context kept
		// below would be cancelled under the new deadline.
		<-d.ctx.Done()
	}
	d.timer = nil
	if d.ctx.Err() != nil && (t.IsZero() || time.Until(t) > 0) {
		d.ctx, d.cancel = context.WithCancelCause(d.parent)
	}
	if t.IsZero() {
		return
	}
	if wait := time.Until(t); wait > 0 {
		cancel := d.cancel
		d.timer = time.AfterFunc(wait, func() { cancel(os.ErrDeadlineExceeded) })
		return
	}
	d.cancel(os.ErrDeadlineExceeded)
}

// expired reports whether ctx ended because its deadline passed (rather
// than because the Conn closed).
func expired(ctx context.Context) bool {
	return context.Cause(ctx) == os.ErrDeadlineExceeded
}
