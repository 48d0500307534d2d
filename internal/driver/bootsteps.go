package driver

import (
	"context"
	"sync"
)

// bootStepsKey carries, in a context, who is told a boot's steps.
type bootStepsKey struct{}

// WithBootSteps returns ctx carrying f: a MakeReady or Recover called with
// it tells f each step of the boot as it passes (a line a person reads,
// such as "waiting for sys.boot_completed"), so that the requester sees
// where a long boot is. f must not block.
// A step told again right after itself (a boot that starts over after a
// lost console port, say) reaches f once.
func WithBootSteps(ctx context.Context, f func(step string)) context.Context {
	var mu sync.Mutex
	last := ""
	return context.WithValue(ctx, bootStepsKey{}, func(step string) {
		mu.Lock()
		defer mu.Unlock()
		if step == last {
			return
		}
		last = step
		f(step)
	})
}

// BootStep tells the caller of MakeReady or Recover, through ctx, the step
// its boot has reached; it does nothing when the caller asked for none.
func BootStep(ctx context.Context, step string) {
	if f, ok := ctx.Value(bootStepsKey{}).(func(string)); ok && f != nil {
		f(step)
	}
}
