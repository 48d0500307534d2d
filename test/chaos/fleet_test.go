package chaos

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/simlock/simlock/internal/bintest"
	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/store/pgtest"
)

var faults = flag.Int("faults", 24, "faults (SIGKILLs and SIGSTOPs of workers and of the gateway) the fleet chaos run makes, at least")

// fleetWorkers is how many workers join the fleet run's gateway.
const fleetWorkers = 3

// fleetHeartbeat keeps the uplinks' liveness checks short, so that a
// stopped peer is noticed within a fault.
const fleetHeartbeat = "500"

// deadlineSlack is how far past its timeoutMs a request's answer may come.
const deadlineSlack = 2 * time.Second

// backBound is how soon after a gateway restart every worker must be back.
const backBound = 5 * time.Second

// maxBouncesPerSecond is "a handful": the most lease.request calls a
// worker may get, in any one second, that it does not grant.
const maxBouncesPerSecond = 5

// A gateway and three demo workers, each joined with its own join token;
// agents lease over the gateway's socket and HTTP API (lease, renew, get,
// exec, cancel, release) while workers and the gateway are killed with
// SIGKILL (and started again) or stopped with SIGSTOP for a while, at
// random points of a seeded schedule. After each fault, and at the end once
// the fleet settled, the fleet's invariants are checked; the run ends with
// a summary of its faults, operations and violations by check.
func TestAFleetUnderKillsAndStopsKeepsItsInvariants(t *testing.T) {
	enabled(t)
	seed := chaosSeed(t)
	rng := rand.New(rand.NewPCG(seed, 0))
	fl := startFleet(t)
	l := newLedger()
	fr := &fleetRun{l: l}

	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	nHTTP := startAgents(ctx, &wg, seed, l, fl.gw, fl.url, fr)

	var vs violationLog
	report := vs.report
	kinds := map[string]int{}
	started := time.Now()
	n := 0
	for n < *faults || l.ops.Load() < int64(*minOps) {
		target := l.ops.Load() + 20 + int64(rng.IntN(60))
		if !l.waitOps(target, 60*time.Second) {
			report("before fault "+strconv.Itoa(n+1), []string{named(checkProgress,
				"%d operations acknowledged in all, none of the %d more wanted came within 60s", l.ops.Load(), target-l.ops.Load())})
			break
		}
		n++
		kind := fl.fault(rng, fr)
		kinds[kind]++
		when := fmt.Sprintf("after fault %d (%s)", n, kind)
		if strings.HasPrefix(kind, "gateway") {
			report(when, fl.awaitWorkers(backBound))
		}
		report(when, fl.check(ctx, l, false))
	}
	cancel()
	wg.Wait()
	report("at the end", fl.settle(l))
	report("at the end", fl.check(context.Background(), l, true))
	report("at the end", fl.requestRates())
	report("seen by an agent", fl.withTrails(l.found()))
	fl.keepLogs(t, vs.all)

	byCheck := vs.byCheck()
	t.Logf("fleet chaos: seed %d, %v, %d workers, %d agents (%d over HTTP), %d operations acknowledged, %d leases granted, %d faults %v, %d violations %v",
		seed, time.Since(started).Round(time.Second), fleetWorkers, *agents, nHTTP, l.ops.Load(), len(l.snapshot()), n, kinds, len(vs.all), byCheck)
	if n < *faults || l.ops.Load() < int64(*minOps) {
		t.Errorf("the run made %d faults and %d operations, want at least %d and %d", n, l.ops.Load(), *faults, *minOps)
	}
	vs.fail(t)
}

var leaseKey = regexp.MustCompile(`acknowledged lease (\S+) of`)

// withTrails adds to the first lost leases the agents saw what the logs say
// of them.
func (fl *fleet) withTrails(found []string) []string {
	n := 0
	for i, v := range found {
		if m := leaseKey.FindStringSubmatch(v); m != nil && checkOf(v) == checkLeaseLost && n < 5 {
			n++
			found[i] += "; " + fl.trails(m[1])
		}
	}
	return found
}

// chaosSeed is SIMLOCK_CHAOS_SEED when set, else the clock; it is logged
// either way, so a run can be made again.
func chaosSeed(t *testing.T) uint64 {
	t.Helper()
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("SIMLOCK_CHAOS_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("SIMLOCK_CHAOS_SEED=%q: %v", s, err)
		}
		seed = v
	}
	t.Logf("seed %d (SIMLOCK_CHAOS_SEED=%d runs it again)", seed, seed)
	return seed
}

// fleet is the run's gateway and workers.
type fleet struct {
	t       *testing.T
	gw      *home
	url     string
	gwID    string // the gateway's instance id: its requesters on a worker are gw:<gwID>:<requester>
	workers []*home
	ids     []string // the workers' instance ids, their ids in the fleet

	// A replicated fleet's gateways: replicas on the database db of pg,
	// at urls; gw and url are the leader's as last seen (lead), set
	// under mu, which the socket agents read through current.
	pg       *pgtest.Cluster
	db       string
	replicas []*home
	urls     []string
	lead     int
	mu       sync.Mutex
}

func startFleet(t *testing.T) *fleet {
	t.Helper()
	port, err := bintest.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	gw := newHome(t, "mode", "gateway", "http.enabled", "true", "http.port", strconv.Itoa(port), "gateway.heartbeatMs", fleetHeartbeat)
	gw.start()
	fl := &fleet{t: t, gw: gw, url: fmt.Sprintf("http://127.0.0.1:%d", port), gwID: gw.InstanceID(t)}
	for i := range fleetWorkers {
		label := fmt.Sprintf("worker-%c", 'a'+i)
		w := newHome(t, append([]string{"capacity.strategy", "fixed", "capacity.config.maxRunning", "2",
			"gateway.url", fl.url, "gateway.token", gw.token("worker", label), "gateway.label", label,
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

// fault makes one fault, chosen with rng, and undoes it (a restart, a
// SIGCONT) before it returns; it returns its kind.
func (fl *fleet) fault(rng *rand.Rand, run *fleetRun) string {
	w := rng.IntN(fleetWorkers)
	switch n := rng.IntN(100); {
	case n < 30:
		fl.workers[w].kill()
		pause(rng, 1500)
		fl.workers[w].start()
		return "worker SIGKILL"
	case n < 55:
		fl.workers[w].signal(syscall.SIGSTOP)
		pause(rng, 3000)
		fl.workers[w].signal(syscall.SIGCONT)
		return "worker SIGSTOP"
	case n < 80:
		run.gatewayDown(true)
		fl.gw.kill()
		fl.gw.start()
		run.gatewayUp()
		return "gateway SIGKILL"
	}
	run.gatewayDown(false)
	fl.gw.signal(syscall.SIGSTOP)
	pause(rng, 2000)
	fl.gw.signal(syscall.SIGCONT)
	run.gatewayUp()
	return "gateway SIGSTOP"
}

// pause waits between 300 ms and upMs.
func pause(rng *rand.Rand, upMs int) {
	time.Sleep(time.Duration(300+rng.IntN(upMs-300)) * time.Millisecond)
}

// awaitWorkers waits until the gateway lists every worker connected: a
// violation when that takes longer than bound, in which case it waits up to
// a minute more, so the checks that follow see the whole fleet.
func (fl *fleet) awaitWorkers(bound time.Duration) []string {
	start := time.Now()
	var last []contract.WorkerSummary
	for time.Since(start) < bound+time.Minute {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		ws, err := fl.workerList(ctx)
		cancel()
		if err == nil {
			last = ws
			up := 0
			for _, w := range ws {
				if w.Connection == contract.WorkerConnected {
					up++
				}
			}
			if up == fleetWorkers {
				if took := time.Since(start); took > bound {
					return []string{named(checkWorkersBack, "the workers were all back %v after the gateway was, want within %v",
						took.Round(time.Millisecond), bound)}
				}
				return nil
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	return []string{named(checkWorkersBack, "the workers were not all back %v after the gateway was: %+v", bound+time.Minute, last)}
}

func (fl *fleet) workerList(ctx context.Context) ([]contract.WorkerSummary, error) {
	c, err := fl.gw.dial(ctx, "chaos-checker", true)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	var res contract.WorkerListResult
	if err := c.Call(ctx, contract.OpWorkerList, contract.Empty{}, &res); err != nil {
		return nil, err
	}
	return res.Workers, nil
}

// keepLogs copies each daemon's log and database to SIMLOCK_CHAOS_LOGS, when set, with
// every violation (violations.txt; the test's output shows the first of
// each check), so they outlive the run's temporary homes.
func (fl *fleet) keepLogs(t *testing.T, violations []string) {
	dir := os.Getenv("SIMLOCK_CHAOS_LOGS")
	if dir == "" {
		return
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Log(err)
		return
	}
	// The log, and the database with its write-ahead log (its events and
	// records: sqlite3 reads the copy as it was).
	copyLog := func(h *home, name string) {
		for from, to := range map[string]string{"daemon.log": name + ".log", "simlock.db": name + ".db",
			"simlock.db-wal": name + ".db-wal"} {
			b, err := os.ReadFile(filepath.Join(h.Dir, from))
			if err == nil {
				err = os.WriteFile(filepath.Join(dir, to), b, 0o644)
			}
			if err != nil && !os.IsNotExist(err) {
				t.Log(err)
			}
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "violations.txt"), []byte(strings.Join(violations, "\n")+"\n"), 0o644); err != nil {
		t.Log(err)
	}
	if len(fl.replicas) > 0 {
		fl.keepReplicaLogs(t, dir)
	} else {
		copyLog(fl.gw, "gateway-"+fl.gwID)
	}
	for i, w := range fl.workers {
		copyLog(w, fmt.Sprintf("worker-%c-%s", 'a'+i, fl.ids[i]))
	}
	t.Logf("the daemons' logs are in %s", dir)
}

// fleetRun is what the agents of a fleet run check as they go: answers
// within their deadline, and no worker's own id in what an agent is shown.
type fleetRun struct {
	l *ledger

	mu     sync.Mutex
	down   []window // when the gateway was stopped or dead
	dbDown []window // when a replicated fleet's database was down, until a replica led again
}

// window is a span of time; to is zero while it lasts.
type window struct {
	from, to time.Time
	restart  bool // the gateway was killed and started again
}

func (f *fleetRun) gatewayDown(restart bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.down = append(f.down, window{from: time.Now(), restart: restart})
}

// restartedSince reports whether the gateway was killed and started again
// since t: a call it was answering then heard DAEMON_STOPPING (its
// request waits again on the restarted gateway, as FLEET.md says). A restart counts when it ended
// after t, not only when it began after it: a request the gateway
// answered just before it was killed reaches its agent after the kill
// began.
func (f *fleetRun) restartedSince(t time.Time) bool {
	if f == nil {
		return false
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, w := range f.down {
		if w.restart && (w.to.IsZero() || w.to.After(t)) {
			return true
		}
	}
	return false
}

func (f *fleetRun) gatewayUp() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.down[len(f.down)-1].to = time.Now()
}

// excused reports whether the span from-to met a time the gateway was
// stopped or dead, or the slack after one: the gateway could not answer
// then, which is not a waiter overtaking its deadline.
func (f *fleetRun) excused(from, to time.Time) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, w := range f.down {
		end := w.to
		if end.IsZero() {
			end = time.Now()
		}
		if from.Before(end.Add(deadlineSlack)) && to.After(w.from) {
			return true
		}
	}
	return false
}

// answered is told of a lease request's answer: sent is when it was sent.
func (f *fleetRun) answered(agent, what string, sent time.Time, timeoutMs int64, vs ...any) {
	if f == nil {
		return
	}
	f.scan(agent, what, vs...)
	f.pastDeadline(agent, what, sent, sent, timeoutMs)
}

// pastDeadline reports (and records as a violation) that a request made at
// start with timeoutMs had no final answer by now, when a read of it sent
// at read still found it open (or, read == start, its answer came only
// now).
func (f *fleetRun) pastDeadline(agent, what string, start, read time.Time, timeoutMs int64) bool {
	if f == nil {
		return false
	}
	now := time.Now()
	bound := time.Duration(timeoutMs)*time.Millisecond + deadlineSlack
	end := now
	if read != start {
		end = read
	}
	waited := end.Sub(start)
	if waited <= bound || f.excused(start, end) {
		return false
	}
	f.l.violate(checkDeadline, "%s: %s (timeoutMs %d) was still unanswered %v after it was made, more than %v past its deadline",
		agent, what, timeoutMs, waited.Round(time.Millisecond), deadlineSlack)
	return true
}

var (
	// bareLeaseID is a worker's lease id on its own: through the gateway a
	// lease is named <workerId>.<lse_…>, never lse_… alone.
	bareLeaseID = regexp.MustCompile(`(^|[^.\w])lse_[0-9a-f]+`)
	// gwRequester is a gateway's requester id on a worker.
	gwRequester = regexp.MustCompile(`gw:[^\s"',]+`)
)

// scan records each worker's own id in what an agent was shown: vs are
// answers (results, errors, bodies, notices).
func (f *fleetRun) scan(agent, what string, vs ...any) {
	if f == nil {
		return
	}
	for _, v := range vs {
		var s string
		switch v := v.(type) {
		case nil:
			continue
		case string:
			s = v
		case error:
			b, _ := json.Marshal(v)
			s = v.Error() + " " + string(b)
		default:
			b, _ := json.Marshal(v)
			s = string(b)
		}
		found := append(bareLeaseID.FindAllStringIndex(s, -1), gwRequester.FindAllStringIndex(s, -1)...)
		for _, m := range found {
			id := strings.TrimLeft(s[m[0]:m[1]], " :\"'([{")
			f.l.violate(checkWorkerIDs, "%s: %s showed a worker's own id %q: …%s…", agent, what, id, s[max(m[0]-160, 0):min(m[1]+80, len(s))])
		}
	}
}

// sorted is m's keys in order.
func sorted[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
