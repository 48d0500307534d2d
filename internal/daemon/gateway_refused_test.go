package daemon

import (
	"errors"
	"fmt"
	"testing"

	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/leader"
)

// A decision the fence refused to a deposed leader is answered
// NOT_LEADER; any other commit failure is left to the queue (INTERNAL).
func TestACommitRefusedToADeposedLeaderIsAnsweredNotLeader(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want contract.Code
	}{
		{fmt.Errorf("store: commit: fence term 3 (current 4, live true): %w", leader.ErrDeposed), contract.CodeNotLeader},
		{fmt.Errorf("store: this replica holds no term: %w", leader.ErrDeposed), contract.CodeNotLeader},
		{errors.New("store: commit: FATAL: terminating connection due to administrator command"), ""},
		{errors.New("disk full"), ""},
	} {
		got := refusedToDeposed(tc.err)
		switch {
		case tc.want == "" && got != nil:
			t.Errorf("%v is answered %v, want the queue's own INTERNAL", tc.err, got)
		case tc.want != "" && (got == nil || got.Code != tc.want):
			t.Errorf("%v is answered %v, want %s", tc.err, got, tc.want)
		}
	}
}
