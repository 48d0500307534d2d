package e2e

import (
	"context"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// waiter is a lease request that waits in the fleet queue: made over HTTP
// with its own agent token (so its own requester), in arrival order.
type waiter struct {
	name, token, secret, id string
	cli                     *proc // the remote CLI that follows it, if any
	lease                   string
}

// A gateway failover, measured: three replicas on one database, two demo
// workers of one running slot each whose gateway.urls lists the replicas,
// both devices leased (one over the leader's socket, one over HTTP through
// a follower), and four requests waiting (three over HTTP, one made and
// followed by the remote CLI given every replica's URL). SIGKILL the
// leader: another replica leads within 5 s; every lease is still listed
// and renews under its id; no device is in two leases; every waiting
// request still waits, and releasing leases one at a time grants them in
// their arrival order, the followed one to its CLI; both workers are
// connected to the new leader.
func TestAGatewayFailoverLosesNoLeaseAndNoPlaceInLine(t *testing.T) {
	t.Parallel()
	rs := newReplicaSet(t, 3)
	const lead = 0
	before, _ := rs.leadership(lead)
	gw := rs.homes[lead]
	a, b := rs.worker(lead, "worker-a", 1), rs.worker(lead, "worker-b", 1)
	ids := []string{instanceID(t, a), instanceID(t, b)}
	rs.awaitWorkers(lead, 10*time.Second, ids...)

	// Every device leased: one over the leader's socket, one over HTTP
	// through a follower (which hands it to the leader).
	sockLease := gw.leaseDetached("sock-holder", "ios").Lease.ID
	_, holder := gw.token("agent", "http-holder")
	viaFollower := rs.api(1)
	r := viaFollower.do("POST", "/v1/lease-requests", holder, `{"platform":"ios","timeoutMs":60000}`)
	if r.status != 201 {
		t.Fatalf("create through a follower: %d %s", r.status, r.raw)
	}
	granted := viaFollower.awaitState(holder, requestOf(t, r)["id"].(string), "granted")
	httpLease, _ := granted["lease"].(map[string]any)["id"].(string)
	if httpLease == "" {
		t.Fatalf("the granted request names no lease: %v", granted)
	}

	// Four requests wait, in this order.
	var line []*waiter
	post := func(name string, via *api) {
		t.Helper()
		w := &waiter{name: name}
		w.token, w.secret = gw.token("agent", name)
		r := via.do("POST", "/v1/lease-requests", w.secret, `{"platform":"ios","timeoutMs":60000}`)
		if r.status != 201 || requestOf(t, r)["state"] != "queued" {
			t.Fatalf("%s's request: %d %s; want it created and queued", name, r.status, r.raw)
		}
		w.id = requestOf(t, r)["id"].(string)
		line = append(line, w)
	}
	post("waiter-1", rs.api(lead))
	post("waiter-2", rs.api(2))
	// The third is made and followed by the remote CLI, which knows every
	// replica's URL and starts at the leader's.
	w3 := &waiter{name: "waiter-3"}
	w3.token, w3.secret = gw.token("agent", w3.name)
	rem := remoteHome(t, rs.urlsFlag(), w3.secret)
	w3.cli = rem.start("lease", "--platform", "ios", "--timeout", "60s", "--detach", "--progress", "json")
	w3.cli.waitLine(w3.cli.stderr, "waiter-3 queued", func(s string) bool { return strings.Contains(s, `"stage":"queued"`) })
	for _, q := range openRequests(t, rs.db) {
		if q.requester == w3.token {
			w3.id = q.id
		}
	}
	if w3.id == "" {
		t.Fatalf("the remote CLI's request is not among the gateway's open requests %+v", openRequests(t, rs.db))
	}
	line = append(line, w3)
	post("waiter-4", rs.api(lead))
	arrivalBefore := arrivals(t, rs.db, line)

	// An operator follows the fleet's events with the remote CLI, which
	// knows every replica's URL.
	_, opSecret := gw.token("operator", "operator")
	watch := &follower{p: remoteHome(t, rs.urlsFlag(), opSecret).start("events", "--follow")}
	watch.next("the operator's first event", func(event) bool { return true })

	// The leader dies.
	killed := time.Now()
	rs.kill(lead)
	next, after, took := rs.awaitTakeover(lead, before.Term, killed, failoverBound)
	t.Logf("failover %v (term %d -> %d, replica %d leads)", took.Round(time.Millisecond), before.Term, after.Term, next)
	if took > failoverBound {
		t.Errorf("failover took %v after the leader's SIGKILL, want within %v", took.Round(time.Millisecond), failoverBound)
	}
	if after.LeaderURL != rs.urls[next] {
		t.Errorf("the new leader's status names %s as leader, want its own URL %s", after.LeaderURL, rs.urls[next])
	}
	for i := range rs.homes {
		if i == lead || i == next {
			continue
		}
		if l := rs.awaitRole(i, "follower", before.Term, 5*time.Second); l.LeaderURL != rs.urls[next] || l.Term != after.Term {
			t.Errorf("replica %d follows %s in term %d, want %s in term %d", i, l.LeaderURL, l.Term, rs.urls[next], after.Term)
		}
	}
	newGW, newAPI := rs.homes[next], rs.api(next)
	back := rs.awaitWorkers(next, 10*time.Second, ids...)
	t.Logf("both workers connected to the new leader %v after it led", back.Round(time.Millisecond))

	// Every acknowledged lease is listed, on one device each, and renews
	// under its id through the new leader.
	listed := newGW.leases()
	for _, id := range []string{sockLease, httpLease} {
		if _, ok := listed[id]; !ok {
			t.Errorf("lost lease: %s is not in the new leader's lease list %v", id, slices.Sorted(maps.Keys(listed)))
		}
	}
	noDeviceTwice(t, "the new leader", listed)
	for _, w := range []*home{a, b} {
		noDeviceTwice(t, "worker "+instanceID(t, w), w.leases())
	}
	if r := newGW.run("lease", "renew", "--agent-id", "sock-holder", sockLease); r.code != 0 {
		t.Errorf("renew of %s through the new leader's socket\n%s", sockLease, r)
	}
	if r := rs.api(otherThan(len(rs.homes), lead, next)).do("POST", "/v1/leases/"+httpLease+"/renew", holder, ""); r.status != 200 {
		t.Errorf("HTTP renew of %s through the remaining follower after the failover: %d %s", httpLease, r.status, r.raw)
	}

	// Every request still waits, in the same order.
	for _, w := range line {
		if st := requestOf(t, newAPI.do("GET", "/v1/lease-requests/"+w.id, w.secret, ""))["state"]; st != "queued" {
			t.Errorf("lost place in line: %s's request %s reads %v after the failover, want queued", w.name, w.id, st)
		}
	}
	if w3.cli.running() == false {
		t.Errorf("the remote CLI following %s ended at the failover\n%s", w3.id, w3.cli.dump())
	}
	arrivalAfter := arrivals(t, rs.db, line)
	if !slices.Equal(arrivalBefore, arrivalAfter) || !slices.IsSorted(arrivalAfter) {
		t.Errorf("reordered: the waiting requests' arrivals are %v after the failover, want %v (ascending) as before", arrivalAfter, arrivalBefore)
	}

	// Releasing one lease at a time grants the waiting requests in their
	// arrival order.
	release := func(what string, do func() bool) {
		t.Helper()
		if !do() {
			t.Fatalf("release of %s through the new leader failed", what)
		}
	}
	releases := []struct {
		what string
		do   func() bool
	}{
		{sockLease, func() bool { return newGW.run("release", "--agent-id", "sock-holder", sockLease).code == 0 }},
		{httpLease, func() bool { return newAPI.do("DELETE", "/v1/leases/"+httpLease, holder, "").status == 202 }},
		{"waiter-1's lease", func() bool { return newAPI.do("DELETE", "/v1/leases/"+line[0].lease, line[0].secret, "").status == 202 }},
		{"waiter-2's lease", func() bool { return newAPI.do("DELETE", "/v1/leases/"+line[1].lease, line[1].secret, "").status == 202 }},
	}
	for i, rel := range releases {
		release(rel.what, rel.do)
		got := nextGrant(t, newAPI, line[i:])
		if got != line[i] {
			t.Fatalf("order: after releasing %s, %s's request (arrival %d) was granted; want %s's (arrival %d), the head of the line",
				rel.what, got.name, arrivalBefore[slices.Index(line, got)], line[i].name, arrivalBefore[i])
		}
	}
	// The followed request was granted to its follower, across the
	// failover.
	g := parseGrant(t, w3.cli.waitLine(w3.cli.stdout, "waiter-3's grant", func(string) bool { return true }).text)
	if g.Lease.ID != w3.lease || g.RequestID != w3.id {
		t.Errorf("the remote CLI following %s printed the grant of lease %s (request %s), want lease %s", w3.id, g.Lease.ID, g.RequestID, w3.lease)
	}
	if code := w3.cli.wait(); code != 0 {
		t.Errorf("the remote CLI following %s exited %d\n%s", w3.id, code, w3.cli.dump())
	}
	// The operator's follower went on through the new leader: it shows
	// the grants made after the failover, with no event twice or skipped.
	watch.next("the grant of waiter-3's request", isEvent("grant.recorded", "requestId", w3.id))
	checkJoin(t, "the operator's events --follow across the failover", watch.events)
	rs.awaitWorkers(next, time.Second, ids...)
}

// openRequest is an open request as the gateway database stores it.
type openRequest struct {
	id, requester, state string
	arrival              uint64
}

// openRequests are the open requests the gateway database at db holds.
func openRequests(t *testing.T, db string) []openRequest {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, `SELECT id, requester_id, state, COALESCE((record::jsonb->>'arrival')::bigint, 0)
FROM lease_requests WHERE state NOT IN ('granted', 'failed', 'cancelled') ORDER BY ord`)
	if err != nil {
		t.Fatalf("read the open requests: %v", err)
	}
	var out []openRequest
	for rows.Next() {
		var q openRequest
		if err := rows.Scan(&q.id, &q.requester, &q.state, &q.arrival); err != nil {
			t.Fatal(err)
		}
		out = append(out, q)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// arrivals is each waiter's arrival as the database stores its request.
func arrivals(t *testing.T, db string, line []*waiter) []uint64 {
	t.Helper()
	by := map[string]uint64{}
	for _, q := range openRequests(t, db) {
		by[q.id] = q.arrival
	}
	var out []uint64
	for _, w := range line {
		a, ok := by[w.id]
		if !ok {
			t.Errorf("lost place in line: %s's request %s is not among the open requests", w.name, w.id)
		}
		out = append(out, a)
	}
	return out
}

// nextGrant polls the waiting requests until one is granted, and returns
// it (its lease noted); a request that ends otherwise fails the test.
func nextGrant(t *testing.T, via *api, waiting []*waiter) *waiter {
	t.Helper()
	deadline := time.Now().Add(waitBound)
	for time.Now().Before(deadline) {
		for _, w := range waiting {
			req := requestOf(t, via.do("GET", "/v1/lease-requests/"+w.id, w.secret, ""))
			switch req["state"] {
			case "granted":
				w.lease, _ = req["lease"].(map[string]any)["id"].(string)
				return w
			case "failed", "cancelled":
				t.Fatalf("%s's request %s ended %v while it waited for a released device", w.name, w.id, req)
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("none of the waiting requests was granted within %s of a release", waitBound)
	return nil
}

// noDeviceTwice fails t if a device is in two of leases.
func noDeviceTwice(t *testing.T, who string, leases map[string]leaseRec) {
	t.Helper()
	seen := map[string]string{}
	for _, id := range slices.Sorted(maps.Keys(leases)) {
		l := leases[id]
		dev := l.WorkerID + "/" + l.DeviceID
		if other, ok := seen[dev]; ok {
			t.Errorf("device %s is in two of %s's leases, %s and %s", dev, who, other, id)
		}
		seen[dev] = id
	}
}

// otherThan is the first index below n that is none of not.
func otherThan(n int, not ...int) int {
	for i := range n {
		if !slices.Contains(not, i) {
			return i
		}
	}
	panic(fmt.Sprintf("no index below %d other than %v", n, not))
}

// A leader paused past gateway.leaderTimeoutMs is deposed: a follower takes
// over and grants, and once the old leader runs again it steps down (it
// comes back as a follower in the same process) and nothing it wrote
// commits after the new term began: in the database every event of its
// term has a lower seq than every event of the next, and no grant record
// of its term is dated after the takeover.
func TestAPausedLeaderNeverCommitsAfterItIsDeposed(t *testing.T) {
	t.Parallel()
	rs := newReplicaSet(t, 2)
	const old = 0
	before, _ := rs.leadership(old)
	gw, oldAPI := rs.homes[old], rs.api(old)
	w := rs.worker(old, "worker-a", 1)
	workerID := instanceID(t, w)
	rs.awaitWorkers(old, 10*time.Second, workerID)
	_, holder := gw.token("agent", "holder")
	_, waiting := gw.token("agent", "waiting")
	r := oldAPI.do("POST", "/v1/lease-requests", holder, `{"platform":"ios","timeoutMs":60000}`)
	if r.status != 201 {
		t.Fatalf("create: %d %s", r.status, r.raw)
	}
	held, _ := oldAPI.awaitState(holder, requestOf(t, r)["id"].(string), "granted")["lease"].(map[string]any)["id"].(string)
	r = oldAPI.do("POST", "/v1/lease-requests", waiting, `{"platform":"ios","timeoutMs":60000}`)
	if r.status != 201 || requestOf(t, r)["state"] != "queued" {
		t.Fatalf("the second request: %d %s; want it queued behind the first", r.status, r.raw)
	}
	waitID := requestOf(t, r)["id"].(string)

	pid := lockPID(gw.Dir)
	rs.signal(old, syscall.SIGSTOP)
	stopped := time.Now()
	resumed := false
	defer func() {
		if !resumed {
			rs.signal(old, syscall.SIGCONT) // so the home's cleanup can stop it
		}
	}()
	next, after, took := rs.awaitTakeover(old, before.Term, stopped, time.Duration(replicaLeaderTimeoutMs)*time.Millisecond+failoverBound)
	t.Logf("takeover from a paused leader %v after SIGSTOP (leader timeout %d ms; term %d -> %d)", took.Round(time.Millisecond), replicaLeaderTimeoutMs, before.Term, after.Term)
	newAPI := rs.api(next)
	// The worker's dial of the paused replica hangs until its bound (the
	// uplink's, 10 s) before it tries the next URL.
	back := rs.awaitWorkers(next, 25*time.Second, workerID)
	t.Logf("the worker connected to the new leader %v after it led", back.Round(time.Millisecond))
	// The new leader grants: the held lease released, the waiting request
	// takes the device.
	if r := newAPI.do("DELETE", "/v1/leases/"+held, holder, ""); r.status != 202 {
		t.Fatalf("release through the new leader: %d %s", r.status, r.raw)
	}
	newAPI.awaitState(waiting, waitID, "granted")

	// The old leader runs again: it must step down, in the same process.
	rs.signal(old, syscall.SIGCONT)
	resumed = true
	l := rs.awaitRole(old, "follower", before.Term, 20*time.Second)
	if l.Term != after.Term || l.LeaderURL != rs.urls[next] {
		t.Errorf("the deposed leader follows %s in term %d, want %s in term %d", l.LeaderURL, l.Term, rs.urls[next], after.Term)
	}
	if now := lockPID(gw.Dir); now != pid {
		t.Errorf("the deposed leader's daemon is pid %d, want %d: it steps down by re-executing itself in the same process", now, pid)
	}
	// The home's lock was held across the re-execution: no on-demand
	// start could take the home meanwhile.
	if b, _ := os.ReadFile(gw.path("daemon.log")); !strings.Contains(string(b), "took the home's lock from the run before") {
		t.Errorf("the deposed leader's next run did not take the lock its previous run handed over (daemon.log)")
	}
	if l, _ := rs.leadership(next); l.Role != "leader" || l.Term != after.Term {
		t.Errorf("after the old leader resumed, replica %d says %+v; want it still leading in term %d", next, l, after.Term)
	}
	checkTermsOfRows(t, rs.db, before.Term, after.Term)
}
