package cli

import (
	"testing"
	"time"

	"github.com/simlock/simlock/internal/contract"
)

// status says which replica leads, in which term and since when.
func TestLeadershipLineSaysWhoLeads(t *testing.T) {
	since := time.Date(2026, 3, 1, 12, 1, 2, 0, time.UTC).UnixMilli()
	for _, tc := range []struct {
		in   contract.Leadership
		want string
	}{
		{contract.Leadership{Role: contract.RoleLeader, Term: 3, LeaderURL: "http://a:7420", Since: since, Self: "http://a:7420"},
			"Leader: http://a:7420 (term 3, since 12:01:02)"},
		{contract.Leadership{Role: contract.RoleFollower, Term: 3, LeaderURL: "http://a:7420", Since: since, Self: "http://b:7420"},
			"Follower of http://a:7420 (term 3); this replica is http://b:7420"},
		{contract.Leadership{Role: contract.RoleFollower, Term: 3, Self: "http://b:7420"},
			"Follower: no replica leads now (last term 3); this replica is http://b:7420"},
	} {
		if got := leadershipLine(tc.in, time.UTC); got != tc.want {
			t.Errorf("leadershipLine(%+v) = %q; want %q", tc.in, got, tc.want)
		}
	}
}
