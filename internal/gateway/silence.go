package gateway

import (
	"context"
	"errors"
	"time"
)

// errSilent is why a forward bounded by silence ended: the worker sent
// nothing of it (no progress, no output, no answer) for the whole bound.
var errSilent = errors.New("the worker sent nothing for the gateway's bound")

// withSilence derives a context from parent that ends (cause errSilent)
// once bound passes without a call of heard: a forward bounded by the
// worker's silence, not by the clock, so a worker that says it is still at
// work (a download's progress, a command's output) is waited for as long
// as it keeps saying so, and one that falls silent is given up on. The
// whole wait stays bounded by parent, and by the worker's own bounds
// (downloads.timeoutMs, exec.timeoutMs), which are the authoritative ones.
// stop releases the timer; call it when the forward ends.
func withSilence(parent context.Context, bound time.Duration) (ctx context.Context, heard func(), stop context.CancelFunc) {
	ctx, cancel := context.WithCancelCause(parent)
	t := time.AfterFunc(bound, func() { cancel(errSilent) })
	heard = func() {
		// A Reset that races the timer firing only restarts a timer
		// whose context has ended already: harmless.
		if ctx.Err() == nil {
			t.Reset(bound)
		}
	}
	stop = func() {
		t.Stop()
		cancel(context.Canceled)
	}
	return ctx, heard, stop
}

// silent reports whether ctx, made by withSilence, ended for the worker's
// silence (rather than its parent's end).
func silent(ctx context.Context) bool {
	return errors.Is(context.Cause(ctx), errSilent)
}
