package chaos

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/simlock/simlock/internal/bintest"
	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/store/pgtest"
)

var replicaFaults = flag.Int("replica-faults", 16, "faults (of the leader, PostgreSQL and the workers) the replicated fleet run makes, at least")

// replicaCount is how many gateway replicas share the run's database.
const replicaCount = 3

// replicaLeaderTimeoutMs is the replicas' gateway.leaderTimeoutMs.
const replicaLeaderTimeoutMs = 2000

// failoverBound is how soon after its leader is lost (killed, or paused
// past the leader timeout) another replica must lead.
const failoverBound = 5 * time.Second

// The checks of the replicated run, beside the fleet's.
const (
	checkFailover = "failover-within-bound"     // another replica leads within failoverBound of losing the leader
	checkStepDown = "deposed-leader-steps-down" // a paused leader, resumed, follows the new one
	checkTerms    = "no-commit-after-deposed"   // no row of a term is committed once a newer term began
)

// Three gateway replicas on one PostgreSQL database and three demo workers
// whose gateway.urls lists them; agents lease over the leader's socket and
// over HTTP given every replica's URL, while the leader is killed with
// SIGKILL (and started again, as a follower), the leader is paused with
// SIGSTOP past the leader timeout (and, resumed, must step down and commit
// nothing), PostgreSQL is restarted, and the workers are killed and
// paused, at random points of a seeded schedule. After each fault and at
// the end the fleet's invariants are checked as in the one-gateway run,
// with the rows' terms read from the database.
func TestAReplicatedFleetUnderLeaderFaultsKeepsItsInvariants(t *testing.T) {
	enabled(t)
	seed := chaosSeed(t)
	rng := rand.New(rand.NewPCG(seed, 0))
	fl := startReplicatedFleet(t)
	l := newLedger()
	fr := &fleetRun{l: l}

	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	nHTTP := startAgentsOn(ctx, &wg, seed, l, fl.current, fl.urls, fr)

	var vs violationLog
	report := vs.report
	kinds := map[string]int{}
	var failovers []time.Duration
	started := time.Now()
	// The first three faults are the leader's (SIGKILL, SIGSTOP, a
	// PostgreSQL restart) in a seeded order, so every run makes each at
	// least once; the rest are drawn.
	leaderFirst := []int{40, 70, 90}
	rng.Shuffle(len(leaderFirst), func(i, j int) { leaderFirst[i], leaderFirst[j] = leaderFirst[j], leaderFirst[i] })
	leaderFirst = append(leaderFirst, -1)
	n := 0
	for n < *replicaFaults || l.ops.Load() < int64(*minOps)/2 {
		target := l.ops.Load() + 20 + int64(rng.IntN(60))
		if !l.waitOps(target, 60*time.Second) {
			report("before fault "+strconv.Itoa(n+1), []string{named(checkProgress,
				"%d operations acknowledged in all, none of the %d more wanted came within 60s", l.ops.Load(), target-l.ops.Load())})
			break
		}
		n++
		kind, took, found := fl.replicaFault(rng, fr, leaderFirst[min(n-1, len(leaderFirst)-1)])
		kinds[kind]++
		if took > 0 {
			failovers = append(failovers, took)
		}
		when := fmt.Sprintf("after fault %d (%s)", n, kind)
		report(when, found)
		report(when, fl.awaitWorkers(backBound))
		report(when, fl.check(ctx, l, false))
	}
	cancel()
	wg.Wait()
	report("at the end", fl.settle(l))
	report("at the end", fl.check(context.Background(), l, true))
	report("at the end", fl.requestRates())
	report("at the end", fl.terms())
	report("seen by an agent", fl.withTrails(l.found()))
	fl.keepLogs(t, vs.all)

	byCheck := vs.byCheck()
	t.Logf("replicated fleet chaos: seed %d, %v, %d replicas, %d workers, %d agents (%d over HTTP), %d operations acknowledged, %d leases granted, %d faults %v, failovers %v, %d violations %v",
		seed, time.Since(started).Round(time.Second), replicaCount, fleetWorkers, *agents, nHTTP, l.ops.Load(), len(l.snapshot()), n, kinds,
		rounded(failovers), len(vs.all), byCheck)
	if n < *replicaFaults {
		t.Errorf("the run made %d faults, want at least %d", n, *replicaFaults)
	}
	vs.fail(t)
}

func rounded(ds []time.Duration) []string {
	var out []string
	for _, d := range ds {
		out = append(out, d.Round(10*time.Millisecond).String())
	}
	return out
}

// startReplicatedFleet starts the database, the replicas (replica 0 first,
// so it is the first leader and its instance id the fleet's) and the
// workers, and waits until every worker is connected to the leader.
func startReplicatedFleet(t *testing.T) *fleet {
	t.Helper()
	fl := &fleet{t: t, pg: pgtest.Start(t)}
	fl.db = fl.pg.Database(t)
	for i := range replicaCount {
		port, err := bintest.FreePort()
		if err != nil {
			t.Fatal(err)
		}
		url := fmt.Sprintf("http://127.0.0.1:%d", port)
		h := newHome(t, "mode", "gateway", "http.enabled", "true", "http.port", strconv.Itoa(port), "gateway.heartbeatMs", fleetHeartbeat,
			"gateway.store", fl.db, "gateway.advertiseUrl", url, "gateway.leaderTimeoutMs", strconv.Itoa(replicaLeaderTimeoutMs))
		h.start()
		fl.replicas, fl.urls = append(fl.replicas, h), append(fl.urls, url)
		if i == 0 {
			// The first replica started is the first leader.
			if _, bad := fl.awaitLeader(-1, 0, time.Now(), 15*time.Second); len(bad) > 0 {
				t.Fatal(bad)
			}
		}
	}
	// The fleet's id, its requesters' prefix on the workers, is the one
	// the database keeps, whichever replica leads.
	fl.gwID = fleetID(t, fl.db)
	list := `["` + strings.Join(fl.urls, `","`) + `"]`
	for i := range fleetWorkers {
		label := fmt.Sprintf("worker-%c", 'a'+i)
		w := newHome(t, append([]string{"capacity.strategy", "fixed", "capacity.config.maxRunning", "2",
			"gateway.urls", list, "gateway.token", fl.gw.token("worker", label), "gateway.label", label,
			"gateway.heartbeatMs", fleetHeartbeat}, fastDemo...)...)
		w.start()
		fl.workers = append(fl.workers, w)
		fl.ids = append(fl.ids, w.InstanceID(t))
	}
	if bad := fl.awaitWorkers(30 * time.Second); len(bad) > 0 {
		t.Fatal(bad)
	}
	return fl
}

// setLeader makes replica i the one the checkers and the socket agents
// use.
func (fl *fleet) setLeader(i int) {
	fl.mu.Lock()
	defer fl.mu.Unlock()
	fl.lead, fl.gw, fl.url = i, fl.replicas[i], fl.urls[i]
}

// current is the replica the socket agents use: the leader as last seen.
func (fl *fleet) current() *home {
	fl.mu.Lock()
	defer fl.mu.Unlock()
	return fl.gw
}

// leadership is replica i's status.leadership, read over its socket.
func (fl *fleet) leadership(ctx context.Context, i int) (contract.Leadership, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	c, err := fl.replicas[i].dial(ctx, "chaos-checker", true)
	if err != nil {
		return contract.Leadership{}, err
	}
	defer c.Close()
	st, err := c.Status(ctx)
	if err != nil {
		return contract.Leadership{}, err
	}
	if st.Leadership == nil {
		return contract.Leadership{}, fmt.Errorf("replica %d's status has no leadership", i)
	}
	return *st.Leadership, nil
}

// awaitLeader waits until a replica other than gone says it leads in a
// term above after, and makes it the fleet's gateway; a violation when
// that took longer than bound from from. It returns how long it took.
func (fl *fleet) awaitLeader(gone int, after int64, from time.Time, bound time.Duration) (time.Duration, []string) {
	deadline := from.Add(bound + time.Minute)
	for time.Now().Before(deadline) {
		for i := range fl.replicas {
			if i == gone {
				continue
			}
			l, err := fl.leadership(context.Background(), i)
			if err != nil || l.Role != contract.RoleLeader || l.Term <= after {
				continue
			}
			took := time.Since(from)
			fl.setLeader(i)
			if took > bound {
				return took, []string{named(checkFailover, "replica %d led in term %d %v after the leader was lost, want within %v", i, l.Term, took.Round(time.Millisecond), bound)}
			}
			return took, nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return time.Since(from), []string{named(checkFailover, "no replica led in a term above %d %v after the leader was lost", after, bound+time.Minute)}
}

// replicaFault makes one fault, chosen with rng (or by pick, a draw of
// 0 to 99 made beforehand, when it is not negative), and undoes it before
// it returns: its kind, how long the failover took when it was one, and
// what it found wrong on the way.
func (fl *fleet) replicaFault(rng *rand.Rand, run *fleetRun, pick int) (string, time.Duration, []string) {
	ctx := context.Background()
	lead := fl.lead
	before, err := fl.leadership(ctx, lead)
	if err != nil || before.Role != contract.RoleLeader {
		return "none", 0, []string{named("checker", "replica %d, the leader as last seen, says %+v (%v)", lead, before, err)}
	}
	w := rng.IntN(fleetWorkers)
	n := rng.IntN(100)
	if pick >= 0 {
		n = pick
	}
	switch {
	case n < 15:
		fl.workers[w].kill()
		pause(rng, 1500)
		fl.workers[w].start()
		return "worker SIGKILL", 0, nil
	case n < 25:
		fl.workers[w].signal(syscall.SIGSTOP)
		pause(rng, 3000)
		fl.workers[w].signal(syscall.SIGCONT)
		return "worker SIGSTOP", 0, nil
	case n < 55:
		run.gatewayDown(true)
		killed := time.Now()
		fl.replicas[lead].kill()
		took, found := fl.awaitLeader(lead, before.Term, killed, failoverBound)
		run.gatewayUp()
		fl.replicas[lead].start()
		return "leader SIGKILL", took, found
	case n < 85:
		run.gatewayDown(false)
		pid := fl.replicas[lead].PID
		fl.replicas[lead].signal(syscall.SIGSTOP)
		stopped := time.Now()
		took, found := fl.awaitLeader(lead, before.Term, stopped, time.Duration(replicaLeaderTimeoutMs)*time.Millisecond+failoverBound)
		pause(rng, 1000) // the new leader serves a while before the old one wakes
		fl.replicas[lead].signal(syscall.SIGCONT)
		found = append(found, fl.awaitStepDown(lead, pid, before.Term)...)
		run.gatewayUp()
		return "leader SIGSTOP", took, found
	}
	run.gatewayDown(true)
	run.storeDown()
	fl.pg.Stop(fl.t)
	pause(rng, 1500)
	fl.pg.Restart(fl.t)
	restarted := time.Now()
	found := fl.reviveReplicas()
	took, more := fl.awaitLeader(-1, before.Term, restarted, failoverBound)
	run.storeUp()
	run.gatewayUp()
	return "PostgreSQL restart", took, append(found, more...)
}

// awaitStepDown waits until replica i, a leader of term old paused past
// the leader timeout and resumed, says it follows in a newer term, from
// the same process (it steps down by re-executing itself).
func (fl *fleet) awaitStepDown(i, pid int, old int64) []string {
	deadline := time.Now().Add(20 * time.Second)
	var last contract.Leadership
	var err error
	for time.Now().Before(deadline) {
		last, err = fl.leadership(context.Background(), i)
		if err == nil && last.Role == contract.RoleFollower && last.Term > old {
			if now := bintest.LockPID(fl.replicas[i].Dir); now != pid {
				return []string{named(checkStepDown, "the deposed leader %d came back as pid %d, want it to re-execute itself as pid %d", i, now, pid)}
			}
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return []string{named(checkStepDown, "replica %d, leader of term %d paused past the leader timeout and resumed, says %+v (%v) 20s later, want a follower of a newer term", i, old, last, err)}
}

// reviveReplicas starts again any replica whose daemon is not running
// (one that could not reach PostgreSQL may have exited), and says which.
func (fl *fleet) reviveReplicas() []string {
	var revived []string
	for i, h := range fl.replicas {
		if !bintest.LockHeld(h.Dir) {
			h.start()
			revived = append(revived, strconv.Itoa(i))
		}
	}
	if len(revived) > 0 {
		fl.t.Logf("replicas %s had exited while PostgreSQL was down and were started again", strings.Join(revived, ", "))
	}
	return nil
}

// terms reads the rows' terms from the database: no row committed by a
// leader once a newer term began.
func (fl *fleet) terms() []string {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	terms, err := pgtest.ReadTerms(ctx, fl.db, "gateway")
	if err != nil {
		return []string{named("checker", "read the rows' terms: %v", err)}
	}
	fl.t.Logf("events by term: %v (term %d leads)", terms.Events, terms.Current)
	var bad []string
	for _, v := range terms.Violations {
		bad = append(bad, named(checkTerms, "%s", v))
	}
	return bad
}

// keepReplicaLogs copies each replica's log to dir.
func (fl *fleet) keepReplicaLogs(t *testing.T, dir string) {
	for i, h := range fl.replicas {
		b, err := os.ReadFile(filepath.Join(h.Dir, "daemon.log"))
		if err == nil {
			err = os.WriteFile(filepath.Join(dir, fmt.Sprintf("replica-%d.log", i)), b, 0o644)
		}
		if err != nil && !os.IsNotExist(err) {
			t.Log(err)
		}
	}
}

// fleetID is the fleet identity the gateway database keeps.
func fleetID(t *testing.T, db string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var id string
	if err := conn.QueryRow(ctx, `SELECT id FROM fleet_identity`).Scan(&id); err != nil {
		t.Fatalf("read the fleet's identity: %v", err)
	}
	return id
}

// storeDown and storeUp bound a PostgreSQL outage the run made.
func (f *fleetRun) storeDown() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.dbDown = append(f.dbDown, window{from: time.Now()})
}

func (f *fleetRun) storeUp() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.dbDown[len(f.dbDown)-1].to = time.Now()
}

// storeOutage reports whether an answer with code, heard now, is the
// gateway failing while its database is down, or just after: INTERNAL
// (it could not save a decision, or read a record) is then honest, as
// FLEET.md says PostgreSQL must be available; the agent asks again.
func (f *fleetRun) storeOutage(code string) bool {
	if f == nil || code != string(contract.CodeInternal) {
		return false
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	now := time.Now()
	for _, w := range f.dbDown {
		if !now.Before(w.from) && (w.to.IsZero() || now.Before(w.to.Add(deadlineSlack))) {
			return true
		}
	}
	return false
}
