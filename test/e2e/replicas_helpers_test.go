package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/store/pgtest"
)

// replicaLeaderTimeoutMs is the replicas' gateway.leaderTimeoutMs: short,
// so a test's takeover is quick; the failover assertions stay the issue's
// (within 5 s).
const replicaLeaderTimeoutMs = 2000

// failoverBound is how soon after its leader is lost another replica must
// lead.
const failoverBound = 5 * time.Second

// replicaSet is gateway replicas sharing one PostgreSQL database: each its
// own home, HTTP API on a port of its own, and gateway.advertiseUrl its own
// URL. Replica 0 is started first and waited for as the leader, so it is
// the first leader.
type replicaSet struct {
	t     *testing.T
	db    string // the database's URL
	homes []*home
	urls  []string

	mu    sync.Mutex
	joins map[string]string // join token secrets, by worker label
}

// newReplicaSet starts n replicas on a fresh database of a throwaway
// cluster, and waits until replica 0 leads and the others follow it.
func newReplicaSet(t *testing.T, n int) *replicaSet {
	t.Helper()
	pg := pgtest.Start(t)
	rs := &replicaSet{t: t, db: pg.Database(t), joins: map[string]string{}}
	for i := range n {
		port := freePort(t)
		url := "http://127.0.0.1:" + port
		h := newHome(t, "mode", "gateway", "http.enabled", "true", "http.port", port, "gateway.heartbeatMs", fleetHeartbeat,
			"gateway.store", rs.db, "gateway.advertiseUrl", url, "gateway.leaderTimeoutMs", strconv.Itoa(replicaLeaderTimeoutMs))
		rs.homes, rs.urls = append(rs.homes, h), append(rs.urls, url)
		t.Cleanup(func() {
			if t.Failed() {
				b, _ := os.ReadFile(h.path("daemon.log"))
				t.Logf("replica %d's daemon.log:\n%s", i, b)
			}
		})
	}
	rs.homes[0].startDaemon()
	first := rs.awaitRole(0, contract.RoleLeader, 0, 15*time.Second)
	for i := 1; i < n; i++ {
		rs.homes[i].startDaemon()
		if l := rs.awaitRole(i, contract.RoleFollower, 0, 15*time.Second); l.Term != first.Term || l.LeaderURL != rs.urls[0] {
			t.Fatalf("replica %d follows %s in term %d; want %s in term %d", i, l.LeaderURL, l.Term, rs.urls[0], first.Term)
		}
	}
	return rs
}

// leadership is replica i's status.leadership, read on its socket; ok is
// false when it could not be read (no daemon answers: the CLI would start
// one, racing a replica that runs itself again) or has none.
func (rs *replicaSet) leadership(i int) (contract.Leadership, bool) {
	rs.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := rs.homes[i].Dial(ctx, "e2e", "e2e-checker", true)
	if err != nil {
		return contract.Leadership{}, false
	}
	defer c.Close()
	st, err := c.Status(ctx)
	if err != nil || st.Leadership == nil {
		return contract.Leadership{}, false
	}
	return *st.Leadership, true
}

// awaitRole polls replica i's status until it has role in a term above
// after; it fails the test after bound.
func (rs *replicaSet) awaitRole(i int, role string, after int64, bound time.Duration) contract.Leadership {
	rs.t.Helper()
	deadline := time.Now().Add(bound)
	var last contract.Leadership
	for {
		l, ok := rs.leadership(i)
		if ok && l.Role == role && l.Term > after {
			if l.Self != rs.urls[i] {
				rs.t.Fatalf("replica %d's status.leadership.self is %q, want its gateway.advertiseUrl %s", i, l.Self, rs.urls[i])
			}
			return l
		}
		if ok {
			last = l
		}
		if time.Now().After(deadline) {
			rs.t.Fatalf("replica %d was not %s in a term above %d within %s; it last said %+v", i, role, after, bound, last)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// probeClient reads /readyz with a short bound: a replica that does not
// answer is simply not ready yet.
var probeClient = &http.Client{Timeout: time.Second}

// ready reports whether replica i answers /readyz 200.
func (rs *replicaSet) ready(i int) bool {
	resp, err := probeClient.Get(rs.urls[i] + "/readyz")
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// awaitTakeover polls the replicas other than gone until one answers
// /readyz ready, and checks by its status that it leads in a term above
// after. It returns the new leader, its leadership and how long after
// from the takeover took; it fails the test when none did within bound.
func (rs *replicaSet) awaitTakeover(gone int, after int64, from time.Time, bound time.Duration) (int, contract.Leadership, time.Duration) {
	rs.t.Helper()
	deadline := from.Add(bound + 10*time.Second) // read on past the bound, to say how late it was
	for {
		for i := range rs.homes {
			if i == gone || !rs.ready(i) {
				continue
			}
			took := time.Since(from)
			l := rs.awaitRole(i, contract.RoleLeader, after, 5*time.Second)
			return i, l, took
		}
		if time.Now().After(deadline) {
			rs.t.Fatalf("no replica was ready (leading) within %s of losing replica %d", time.Since(from).Round(time.Millisecond), gone)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// kill sends SIGKILL to replica i's daemon and waits until its lock is
// free.
func (rs *replicaSet) kill(i int) {
	rs.t.Helper()
	h := rs.homes[i]
	if err := syscall.Kill(lockPID(h.Dir), syscall.SIGKILL); err != nil {
		rs.t.Fatal(err)
	}
	if !waitLockFree(h.Dir, 10*time.Second) {
		rs.t.Fatalf("replica %d still holds its lock 10 s after SIGKILL", i)
	}
}

// signal sends sig to replica i's daemon.
func (rs *replicaSet) signal(i int, sig syscall.Signal) {
	rs.t.Helper()
	if err := syscall.Kill(lockPID(rs.homes[i].Dir), sig); err != nil {
		rs.t.Fatalf("%v to replica %d: %v", sig, i, err)
	}
}

// join is the secret of the join token for label, made on the leader on
// first use.
func (rs *replicaSet) join(leader int, label string) string {
	rs.t.Helper()
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if s, ok := rs.joins[label]; ok {
		return s
	}
	_, s := rs.homes[leader].token("worker", label)
	rs.joins[label] = s
	return s
}

// urlList is gateway.urls' value: the replicas' URLs as a JSON list.
func (rs *replicaSet) urlList() string {
	b, err := json.Marshal(rs.urls)
	if err != nil {
		rs.t.Fatal(err)
	}
	return string(b)
}

// worker starts a demo worker of maxRunning running slots whose
// gateway.urls lists every replica, joined with a token made on leader.
func (rs *replicaSet) worker(leader int, label string, maxRunning int) *home {
	rs.t.Helper()
	settings := append([]string{"capacity.strategy", "fixed", "capacity.config.maxRunning", fmt.Sprint(maxRunning),
		"gateway.urls", rs.urlList(), "gateway.token", rs.join(leader, label), "gateway.label", label,
		"gateway.heartbeatMs", fleetHeartbeat}, fastDemo...)
	w := newHome(rs.t, settings...)
	w.startDaemon()
	rs.t.Cleanup(func() {
		if rs.t.Failed() {
			b, _ := os.ReadFile(w.path("daemon.log"))
			rs.t.Logf("worker %s's daemon.log:\n%s", label, b)
		}
	})
	return w
}

// workers is `simlock worker list --json` on replica i, by worker id.
func (rs *replicaSet) workers(i int) map[string]workerLine {
	rs.t.Helper()
	r := rs.homes[i].run("worker", "list", "--json")
	var out struct {
		Workers []workerLine `json:"workers"`
	}
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &out) != nil {
		rs.t.Fatalf("worker list --json on replica %d\n%s", i, r)
	}
	m := map[string]workerLine{}
	for _, w := range out.Workers {
		m[w.ID] = w
	}
	return m
}

// awaitWorkers polls replica i's worker list until every id is connected;
// it returns how long that took, and fails the test after bound.
func (rs *replicaSet) awaitWorkers(i int, bound time.Duration, ids ...string) time.Duration {
	rs.t.Helper()
	start := time.Now()
	for {
		ws := rs.workers(i)
		if connected(ids...)(ws) {
			return time.Since(start)
		}
		if time.Since(start) > bound {
			rs.t.Fatalf("within %s the workers %v were not all connected to replica %d; it lists %+v", bound, ids, i, ws)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// api is replica i's HTTP API.
func (rs *replicaSet) api(i int) *api { return &api{t: rs.t, base: rs.urls[i]} }

// urlsFlag is the replicas' URLs as SIMLOCK_URL takes a list:
// comma-separated.
func (rs *replicaSet) urlsFlag() string { return strings.Join(rs.urls, ",") }
