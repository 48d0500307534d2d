package cli

import (
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/simlock/simlock/internal/contract"
)

// A live line narrower than its words keeps what a person waits to read:
// in line, when the lease waited for ends; downloading, the percentage and
// the time left (the bar shrinks, then the speed and sizes go). It never
// reaches the last column.
func TestTheLiveLineKeepsWhatMattersAtEveryWidth(t *testing.T) {
	now := time.UnixMilli(1_800_000_000_000)
	queued := contract.LeaseProgress{Stage: contract.StageQueued, QueuePosition: 3,
		Wait: &contract.QueueWait{Limit: contract.WaitMachineRunning, InUse: 3, Max: 3,
			LeaseID: "lse_0123456789abcdef", Holder: "claude:build-agent-7", EndsAt: now.Add(4 * time.Minute).UnixMilli()}}
	pct := 45
	download := contract.LeaseProgress{Stage: contract.StageDownloading, Component: "26.4", Percent: &pct,
		BytesDone: 3_865_470_566, BytesTotal: 8_589_934_592}
	rate := &downloadRate{at: now.Add(-10 * time.Second), fromPct: 40, fromBytes: 3_435_973_836}
	full := liveLine(queued, "an iOS device", 12*time.Second, now, 0, nil, 0)
	for _, w := range []string{"Queued 3rd", "2 requests ahead", "waiting 12s", "3/3 running on this machine", "lse_0123456789abcdef held by claude:build-agent-7", "expires in 4m"} {
		if !strings.Contains(full, w) {
			t.Fatalf("the unfitted line %q lacks %q", full, w)
		}
	}
	for _, width := range []int{120, 80, 60, 50} {
		for _, c := range []struct {
			line string
			keep []string
		}{
			{liveLine(queued, "an iOS device", 12*time.Second, now, 0, nil, width), []string{"Queued 3rd", "expires in 4m"}},
			{liveLine(download, "", 10*time.Second, now, 0, rate, width), []string{"Downloading runtime 26.4", "45%", "left"}},
		} {
			if n := utf8.RuneCountInString(c.line); n > width-1 {
				t.Errorf("at %d columns the live line is %d wide, want at most %d: %q", width, n, width-1, c.line)
			}
			for _, k := range c.keep {
				if !strings.Contains(c.line, k) {
					t.Errorf("at %d columns the live line %q lost %q", width, c.line, k)
				}
			}
		}
	}
	if line := liveLine(download, "", 10*time.Second, now, 0, rate, 60); !strings.Contains(line, "[") {
		t.Errorf("at 60 columns the download line %q has no bar: the bar shrinks before it goes", line)
	}
}
