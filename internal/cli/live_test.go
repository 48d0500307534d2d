package cli

import (
	"strings"
	"sync"
	"testing"

	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/termtest"
)

// lockedScreen is a terminal the live line's redraws and the test's own
// writes (the echo of a key) reach from two goroutines.
type lockedScreen struct {
	mu sync.Mutex
	s  termtest.Screen
}

func (l *lockedScreen) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	_, _ = l.s.Write(p)
	return len(p), nil
}

func (l *lockedScreen) lines() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.s.Lines()
}

// Ctrl-C while waiting leaves nothing of the live line: the terminal echoes
// "^C" at the cursor, after a line cut to the width, and the clear that
// follows must take both.
func TestCtrlCLeavesNothingOfTheLiveLine(t *testing.T) {
	for _, width := range []int{40, 60, 120} {
		scr := &lockedScreen{s: termtest.Screen{Width: width}}
		in := contract.LeaseRequestInput{Platform: contract.PlatformIOS, Model: "iPad Pro 13-inch (M4) with a long name", OSVersion: "26.1"}
		p := newProgressPrinter(scr, "human", in, func() int { return width })
		p.show(contract.LeaseProgress{Stage: contract.StageQueued, QueuePosition: 3, Wait: &contract.QueueWait{
			Limit: contract.WaitPlatformRunning, InUse: 2, Max: 2, LeaseID: "lse_0123456789abcdef", Holder: "claude-code:0123456789"}})
		_, _ = scr.Write([]byte("^C")) // the terminal's echo of the key
		p.stop(false)
		if got := scr.lines(); strings.TrimSpace(strings.Join(got, "")) != "" {
			t.Errorf("at %d columns the scrollback after Ctrl-C holds %q, want nothing", width, got)
		}
	}
}
