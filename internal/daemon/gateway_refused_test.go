package daemon

import (
	"errors"
	"fmt"
	"testing"

	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/leader"
)

// A decision a replica could not save is answered NOT_LEADER (the replica
// steps down; the next leader has the requests); on a gateway that is not
// a replica, only a fence's refusal is, and any other commit failure is
// left to the queue's INTERNAL.
func TestACommitAReplicaCouldNotSaveIsAnsweredNotLeader(t *testing.T) {
	deposed := fmt.Errorf("store: commit: fence term 3 (current 4, live true): %w", leader.ErrDeposed)
	lost := errors.New("store: commit: FATAL: terminating connection due to idle-in-transaction timeout")
	for _, tc := range []struct {
		replica bool
		err     error
		want    contract.Code
	}{
		{true, deposed, contract.CodeNotLeader},
		{true, lost, contract.CodeNotLeader},
		{false, deposed, contract.CodeNotLeader},
		{false, errors.New("disk full"), ""},
	} {
		d := &Daemon{}
		d.replica.on = tc.replica
		got := d.refusedCommit(tc.err)
		switch {
		case tc.want == "" && got != nil:
			t.Errorf("replica %v: %v is answered %v, want the queue's own INTERNAL", tc.replica, tc.err, got)
		case tc.want != "" && (got == nil || got.Code != tc.want):
			t.Errorf("replica %v: %v is answered %v, want %s", tc.replica, tc.err, got, tc.want)
		}
	}
}
