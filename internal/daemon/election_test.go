package daemon

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/simlock/simlock/internal/config"
	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/leader"
	"github.com/simlock/simlock/internal/store/pgtest"
)

// replicaTimeout is the leader timeout of the tests' replicas.
const replicaTimeout = time.Second

// startReplica starts a gateway daemon on the PostgreSQL database at url.
func startReplica(t *testing.T, url string) *Daemon {
	t.Helper()
	cfg, err := config.Parse([]byte(fmt.Sprintf(`{"mode":"gateway","http":{"enabled":true,"host":"127.0.0.1","port":0},
		"gateway":{"store":%q,"leaderTimeoutMs":%d}}`, url, replicaTimeout.Milliseconds())))
	if err != nil {
		t.Fatal(err)
	}
	d, _ := startDaemonOpts(t, Options{Config: cfg})
	return d
}

// leadsWithin fails the test unless cond holds within d; it polls states that
// have no event to wait on.
func leadsWithin(t *testing.T, d time.Duration, what string, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(d)
	for !cond() {
		select {
		case <-tick.C:
		case <-deadline:
			t.Fatalf("%s: not within %v", what, d)
		}
	}
	return time.Since(start)
}

// Two gateway replicas on one database elect one leader, which serves
// while the other does not; when the leader stops, the follower leads
// within the leader timeout, in the next term, and says so in status.
func TestTwoReplicasElectOneLeaderAndTheFollowerTakesOver(t *testing.T) {
	c := pgtest.Start(t)
	url := c.Database(t)
	a := startReplica(t, url)
	leadsWithin(t, 10*time.Second, "the first replica leads", a.replica.leading.Load)
	b := startReplica(t, url)
	<-b.ready
	leadsWithin(t, 10*time.Second, "the second replica sees who leads", func() bool {
		l, _ := b.replica.leadership()
		return l.Term != 0
	})
	if !a.replica.serves() || b.replica.serves() || b.replica.leading.Load() {
		t.Fatalf("serves: first %t, second %t; want only the first (the leader)", a.replica.serves(), b.replica.serves())
	}
	la, _ := a.replica.leadership()
	lb, _ := b.replica.leadership()
	if la.Role != contract.RoleLeader || lb.Role != contract.RoleFollower || la.Term != lb.Term || lb.LeaderURL != la.Self || la.LeaderURL != la.Self {
		t.Fatalf("leadership: leader's %+v, follower's %+v; want one leader and a follower of it, in one term", la, lb)
	}
	if b.fleet != nil || b.jobs != nil {
		t.Errorf("the follower started the gateway's machinery (fleet %v, jobs %v)", b.fleet != nil, b.jobs != nil)
	}
	// A token the leader makes is known to the follower soon after: the
	// follower checks the tokens of the calls it answers itself.
	tok, err := a.tokens.create(context.Background(), contract.TokenCreateInput{Role: contract.TokenAgent, Label: "late"})
	if err != nil {
		t.Fatal(err)
	}
	leadsWithin(t, 10*time.Second, "the follower knows a token the leader made after it started", func() bool {
		_, ok := b.tokens.lookup(tok.Secret)
		return ok
	})
	for _, r := range []struct {
		d    *Daemon
		lead string
	}{{a, "1"}, {b, "0"}} {
		text, err := r.d.metrics.Text()
		want := []string{"simlock_gateway_leader " + r.lead, fmt.Sprintf("simlock_gateway_term %d", la.Term), "simlock_gateway_leader_since_seconds "}
		for _, w := range want {
			if err != nil || !strings.Contains(text, "\n"+w) {
				t.Errorf("a replica's metrics lack %q (%v)", w, err)
			}
		}
	}
	st, err := dial(t, b.opts.Home, "ops", true).Status(context.Background())
	if err != nil || st.Leadership == nil || st.Leadership.Role != contract.RoleFollower || st.Leadership.Term != la.Term {
		t.Fatalf("the follower's status = %+v, %v; want leadership: follower of term %d", st.Leadership, err, la.Term)
	}

	if err := a.Stop("test"); err != nil {
		t.Fatalf("the leader's stop: %v", err)
	}
	took := leadsWithin(t, replicaTimeout, "the follower leads after the leader stopped", b.replica.leading.Load)
	t.Logf("the follower led %v after the leader stopped", took)
	lb, _ = b.replica.leadership()
	if lb.Role != contract.RoleLeader || lb.Term <= la.Term || lb.LeaderURL != lb.Self {
		t.Errorf("the new leader's leadership = %+v; want leader in a term after %d", lb, la.Term)
	}
	st, err = dial(t, b.opts.Home, "ops", true).Status(context.Background())
	if err != nil || st.Leadership == nil || st.Leadership.Role != contract.RoleLeader || st.Leadership.Term != lb.Term || st.Fleet == nil {
		t.Fatalf("the new leader's status = %+v (fleet %v), %v; want leadership: leader of term %d, with its fleet", st.Leadership, st.Fleet != nil, err, lb.Term)
	}
}

// A leader whose session the database ended steps down: the daemon stops
// as a stop does, and Wait (as Run) returns an error wrapping
// leader.ErrDeposed.
func TestADeposedLeaderStopsWithErrDeposed(t *testing.T) {
	c := pgtest.Start(t)
	url := c.Database(t)
	a := startReplica(t, url)
	leadsWithin(t, 10*time.Second, "the replica leads", a.replica.leading.Load)
	done := make(chan error, 1)
	go func() { done <- a.Wait(context.Background()) }()

	ctx := context.Background()
	admin, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	if _, err := admin.Exec(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
		WHERE application_name = 'simlock-leader' AND datname = current_database()`); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if !errors.Is(err, leader.ErrDeposed) {
			t.Fatalf("Wait = %v; want an error wrapping leader.ErrDeposed", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the deposed leader did not stop within 10s")
	}
	// An election won while the deposed replica stops (its elector may
	// campaign until the stop ends its session) starts nothing: this
	// process runs again as a follower instead.
	won := a.replica.won.Load()
	a.elected(won+1, "http://127.0.0.1:1")
	a.replica.wg.Wait()
	if got := a.replica.won.Load(); got != won {
		t.Errorf("after an election won while stopping the replica took term %d; want term %d kept, and no start as leader", got, won)
	}
}
