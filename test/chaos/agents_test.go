package chaos

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/simlock/simlock/internal/client"
	"github.com/simlock/simlock/internal/contract"
)

// leaseTTL outlives the run, so no lease expires unless the daemon loses
// its renewals.
const leaseTTL = int64(10 * time.Minute / time.Millisecond)

// unreachableBound is how long an agent tolerates not reaching the daemon
// before it says so: far beyond any restart.
const unreachableBound = 60 * time.Second

// refusals are the answers a lease request may honestly get from a daemon
// in this run.
var refusals = map[contract.Code]bool{
	contract.CodeQueueTimeout: true, contract.CodeNoCapacity: true,
	contract.CodeCancelled: true, contract.CodeDaemonStopping: true,
}

// refused reports whether code is an honest refusal of a lease request:
// through a gateway, also a request whose worker went away under it
// (WORKER_UNREACHABLE); never DAEMON_STOPPING, as nothing in a fleet run
// stops gracefully (the gateway and the workers are killed), so a gateway
// saying so relays a worker's words as its own.
func refused(f *fleetRun, code contract.Code) bool {
	if f == nil {
		return refusals[code]
	}
	return code == contract.CodeWorkerUnreachable || (refusals[code] && code != contract.CodeDaemonStopping)
}

// pick chooses what an agent holding a lease does next: on a daemon, renew
// (80%) or release; through a gateway, also read the lease and run a
// command on it (the demo driver refuses every command, so it exercises
// the forward and its refusal).
func pick(f *fleetRun, rng *rand.Rand) string {
	n := rng.IntN(20)
	switch {
	case f == nil && n < 16, f != nil && n < 9:
		return "renew"
	case f == nil:
		return "release"
	case n < 12:
		return "get"
	case n < 15:
		return "exec"
	}
	return "release"
}

// execTool is a command the gateway forwards for a lease on platform p.
func execTool(p contract.Platform) (string, []string) {
	if p == contract.PlatformAndroid {
		return "adb", []string{"shell", "getprop", "ro.build.version.sdk"}
	}
	return "simctl", []string{"getenv", "booted", "HOME"}
}

// agent is one requester; step does one operation, or part of one that the
// next step retries after a lost connection.
type agent interface {
	step(ctx context.Context) error
	// holding reports whether the agent holds a lease: it then works on it
	// a while between operations, as a real agent does, so that kills find
	// leases held.
	holding() bool
}

// think is how long an agent holding a lease works between operations: up
// to 20 ms, at random.
func think(ctx context.Context, rng *rand.Rand) {
	select {
	case <-ctx.Done():
	case <-time.After(time.Duration(rng.IntN(20_000)) * time.Microsecond):
	}
}

// run steps a until ctx ends; failing to reach the daemon for
// unreachableBound is a violation, and ends the agent.
func run(ctx context.Context, name string, a agent, l *ledger, rng *rand.Rand) {
	var since time.Time
	for ctx.Err() == nil {
		err := a.step(ctx)
		if err == nil || ctx.Err() != nil {
			since = time.Time{}
			if a.holding() {
				think(ctx, rng)
			}
			continue
		}
		if since.IsZero() {
			since = time.Now()
		} else if time.Since(since) > unreachableBound {
			l.violate(checkReachable, "%s could not reach the daemon for %s: %v", name, unreachableBound, err)
			return
		}
		select {
		case <-ctx.Done():
		case <-time.After(20 * time.Millisecond): // back off before redialling a daemon that is restarting
		}
	}
}

// lost reports whether err is the connection failing, not an answer: or
// a replica that does not lead refusing what only the leader serves
// (NOT_LEADER), which the agent takes to the leader instead.
func lost(err error) bool {
	var cerr *contract.Error
	return err != nil && (!errors.As(err, &cerr) || cerr.Code == contract.CodeDaemonConnectionLost || cerr.Code == contract.CodeNotLeader)
}

func codeOf(err error) contract.Code {
	var cerr *contract.Error
	if errors.As(err, &cerr) {
		return cerr.Code
	}
	return ""
}

// sockAgent leases over the socket, as the CLI and MCP server do.
type sockAgent struct {
	name     string
	at       func() *home // the daemon to dial: a replicated fleet's leader as last seen
	l        *ledger
	rng      *rand.Rand
	platform contract.Platform
	fleet    *fleetRun // nil against a daemon

	c       *client.Client
	lease   string
	key     string    // the request being made, kept across a lost connection
	keyAt   time.Time // when it was first sent
	n       int
	retried bool // the release of lease was sent before a lost connection
}

func (a *sockAgent) holding() bool { return a.lease != "" }

func (a *sockAgent) step(ctx context.Context) error {
	if a.c == nil {
		c, err := a.at().dial(ctx, a.name, false)
		if err != nil {
			return err
		}
		a.c = c
	}
	a.heard()
	err := a.op(ctx)
	if lost(err) || a.stopping(err) {
		a.c.Close()
		a.c = nil
		return err
	}
	return nil
}

// stopping reports whether err is a fleet's gateway stopping under the
// call (DAEMON_STOPPING), or failing while its database is down
// (fleetRun.storeOutage): a replica that steps down stops as a daemon stop
// does, and what it was asked is asked again of the next leader, where a
// waiting request (the same idempotency key) is still in line.
func (a *sockAgent) stopping(err error) bool {
	return a.fleet != nil && (codeOf(err) == contract.CodeDaemonStopping || a.fleet.storeOutage(string(codeOf(err))))
}

// heard takes the notices the daemon pushed: a lease-lost for the lease
// held tells its holder, who stops using it.
func (a *sockAgent) heard() {
	for {
		select {
		case in := <-a.c.LeaseLost():
			a.fleet.scan(a.name, "a "+in.Push+" notice", in)
			if in.Push == contract.PushLeaseLost && in.LeaseID != "" {
				a.l.told(in.LeaseID)
				if in.LeaseID == a.lease {
					a.lease, a.retried = "", false
				}
			}
		default:
			return
		}
	}
}

func (a *sockAgent) op(ctx context.Context) error {
	if a.lease == "" {
		if a.key == "" {
			a.n++
			a.key, a.keyAt = fmt.Sprintf("%s-%d", a.name, a.n), time.Now()
		}
		in := contract.LeaseRequestInput{Platform: a.platform, TimeoutMs: 2000, TTLMs: leaseTTL, IdempotencyKey: a.key}
		if a.fleet != nil && a.rng.IntN(8) == 0 {
			// Withdraw the request while it may wait: the answer is then
			// CANCELLED, or the grant that won the race.
			go a.cancelSoon(ctx, a.c, time.Duration(a.rng.IntN(300))*time.Millisecond)
		}
		sent := time.Now()
		g, err := a.c.RequestLease(ctx, in, func(p contract.LeaseProgress) { a.fleet.scan(a.name, "lease request progress", p) })
		if lost(err) || a.stopping(err) || ctx.Err() != nil {
			return err
		}
		a.fleet.answered(a.name, "lease request "+in.IdempotencyKey, sent, in.TimeoutMs, g, err)
		a.key = ""
		switch {
		case err == nil:
			a.l.granted(a.name, g.Lease.ID, g.Device.ID, g.Lease.TTLDeadline)
			a.lease = g.Lease.ID
		case refused(a.fleet, codeOf(err)),
			codeOf(err) == contract.CodeDaemonStopping && a.fleet.restartedSince(a.keyAt):
			a.l.acked()
		default:
			a.l.violate(checkAnswer, "%s: lease request %s answered %v", a.name, in.IdempotencyKey, err)
		}
		return nil
	}
	op := "release"
	if !a.retried {
		op = pick(a.fleet, a.rng)
	}
	switch op {
	case "renew":
		rec, err := a.c.Renew(ctx, a.lease, leaseTTL)
		a.fleet.scan(a.name, "renew", rec, err)
		if err == nil {
			a.l.renewed(a.lease, rec.TTLDeadline)
			return nil
		}
		return a.onLease(ctx, op, err)
	case "get":
		var res contract.LeaseGetResult
		err := a.c.Call(ctx, contract.OpLeaseGet, contract.LeaseIDInput{LeaseID: a.lease}, &res)
		a.fleet.scan(a.name, "lease.get", res, err)
		if err == nil {
			a.l.acked()
			return nil
		}
		return a.onLease(ctx, op, err)
	case "exec":
		tool, args := execTool(a.platform)
		res, err := a.c.Exec(ctx, contract.ExecInput{LeaseID: a.lease, Tool: tool, Args: args, TimeoutMs: 10_000},
			func(o contract.ExecOutput) { a.fleet.scan(a.name, "exec output", o) })
		a.fleet.scan(a.name, "device.exec", res, err)
		if err == nil || codeOf(err) == contract.CodePassthroughRefused {
			a.l.acked()
			return nil
		}
		return a.onLease(ctx, op, err)
	}
	a.l.releasing(a.lease)
	res, err := a.c.Release(ctx, a.lease)
	a.fleet.scan(a.name, "release", res, err)
	switch {
	case lost(err) || a.stopping(err) || ctx.Err() != nil:
		a.retried = true
		return err
	case err == nil, a.retried && codeOf(err) == contract.CodeUnknownLease:
		// A retried release the daemon had already made answers that
		// the lease is unknown: released all the same.
		a.l.released(a.lease)
	case codeOf(err) == contract.CodeUnknownLease:
		a.l.vanished(a.lease, "release: "+err.Error())
	case a.fleet != nil && codeOf(err) == contract.CodeWorkerUnreachable:
		// The lease is kept while its worker is away: release it again.
		a.l.acked()
		a.retried = true
		return nil
	default:
		a.l.violate(checkAnswer, "%s: release of %s answered %v", a.name, a.lease, err)
	}
	a.lease, a.retried = "", false
	return nil
}

// onLease takes the error an operation on the lease held answered.
func (a *sockAgent) onLease(ctx context.Context, op string, err error) error {
	switch {
	case lost(err) || a.stopping(err) || ctx.Err() != nil:
		return err
	case codeOf(err) == contract.CodeUnknownLease:
		a.l.vanished(a.lease, op+": "+err.Error())
		a.lease = ""
	case a.fleet != nil && codeOf(err) == contract.CodeWorkerUnreachable:
		a.l.acked() // kept while its worker is away
	default:
		a.l.violate(checkAnswer, "%s: %s of %s answered %v", a.name, op, a.lease, err)
	}
	return nil
}

// cancelSoon withdraws the session's waiting request after delay.
func (a *sockAgent) cancelSoon(ctx context.Context, c *client.Client, delay time.Duration) {
	select {
	case <-ctx.Done():
		return
	case <-time.After(delay):
	}
	res, err := c.Cancel(ctx, contract.LeaseCancelInput{})
	a.fleet.scan(a.name, "lease.cancel", res, err)
}

// httpAgent leases over the HTTP API with an agent token: requests are
// records it follows, and survive its connections.
type httpAgent struct {
	name, secret string
	// bases are the URLs of the daemon's API: a replicated fleet's
	// replicas; a call that cannot reach one, or that one answers
	// NOT_LEADER, goes to the next (cur) the next time.
	bases    []string
	cur      int
	l        *ledger
	rng      *rand.Rand
	platform contract.Platform
	hc       *http.Client
	fleet    *fleetRun // nil against a daemon

	lease, request, key string
	n                   int
	retried             bool
	created             time.Time // when the request was answered 201
	late                bool      // its deadline was found passed
}

// call does one HTTP request; a transport failure is returned as an error,
// an answer as its status and decoded body.
func (a *httpAgent) call(ctx context.Context, method, path, body string, headers ...string) (int, map[string]any, error) {
	var rd io.Reader
	if body != "" {
		rd = bytes.NewReader([]byte(body))
	}
	base := a.bases[a.cur%len(a.bases)]
	req, err := http.NewRequestWithContext(ctx, method, base+path, rd)
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+a.secret)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := a.hc.Do(req)
	if err != nil {
		a.cur++
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, nil, err
	}
	a.fleet.scan(a.name, method+" "+path, string(b))
	var out map[string]any
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		return resp.StatusCode, nil, nil // a command that ran: its stream
	}
	if len(b) > 0 {
		if err := json.Unmarshal(b, &out); err != nil {
			return 0, nil, fmt.Errorf("%s %s answered %d with a body that is not JSON: %q", method, path, resp.StatusCode, b)
		}
	}
	if a.fleet.storeOutage(errCode(out)) {
		return 0, nil, fmt.Errorf("%s %s while the database was down: %v", method, path, out)
	}
	if resp.StatusCode == http.StatusServiceUnavailable && (errCode(out) == string(contract.CodeNotLeader) ||
		a.fleet != nil && errCode(out) == string(contract.CodeDaemonStopping)) {
		// A replica that does not lead, or one stepping down: nothing
		// was done; the next URL (or this one, once a leader is back)
		// is asked again.
		a.cur++
		return 0, nil, fmt.Errorf("%s %s at %s: %v", method, path, base, out)
	}
	if resp.StatusCode == http.StatusServiceUnavailable && errCode(out) == string(contract.CodeDaemonConnectionLost) {
		return 0, nil, fmt.Errorf("%s %s: %v", method, path, out)
	}
	return resp.StatusCode, out, nil
}

func errCode(body map[string]any) string {
	e, _ := body["error"].(map[string]any)
	c, _ := e["code"].(string)
	return c
}

func deadlineOf(lease map[string]any) int64 {
	s, _ := lease["expiresAt"].(string)
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return 0
	}
	return t.UnixMilli()
}

func (a *httpAgent) holding() bool { return a.lease != "" }

func (a *httpAgent) step(ctx context.Context) error {
	switch {
	case a.lease == "" && a.request == "":
		return a.create(ctx)
	case a.lease == "":
		return a.follow(ctx)
	}
	op := "release"
	if !a.retried {
		op = pick(a.fleet, a.rng)
	}
	var (
		status int
		body   map[string]any
		err    error
	)
	switch op {
	case "renew":
		status, body, err = a.call(ctx, "POST", "/v1/leases/"+a.lease+"/renew", fmt.Sprintf(`{"ttlMs":%d}`, leaseTTL))
		if err == nil && status == 200 {
			a.l.renewed(a.lease, deadlineOf(body))
			return nil
		}
	case "get":
		status, body, err = a.call(ctx, "GET", "/v1/leases/"+a.lease, "")
		if err == nil && status == 200 {
			a.l.acked()
			return nil
		}
	case "exec":
		tool, args := execTool(a.platform)
		in, _ := json.Marshal(map[string]any{"tool": tool, "args": args})
		status, body, err = a.call(ctx, "POST", "/v1/leases/"+a.lease+"/exec", string(in))
		if err == nil && (status == 200 || errCode(body) == string(contract.CodePassthroughRefused)) {
			a.l.acked()
			return nil
		}
	default:
		return a.release(ctx)
	}
	switch {
	case err != nil:
		return err
	case status == 404:
		a.l.vanished(a.lease, fmt.Sprintf("HTTP %s: 404 %v", op, body))
		a.lease = ""
	case a.fleet != nil && errCode(body) == string(contract.CodeWorkerUnreachable):
		a.l.acked() // kept while its worker is away
	default:
		a.l.violate(checkAnswer, "%s: %s of %s answered %d %v", a.name, op, a.lease, status, body)
	}
	return nil
}

func (a *httpAgent) release(ctx context.Context) error {
	a.l.releasing(a.lease)
	status, body, err := a.call(ctx, "DELETE", "/v1/leases/"+a.lease, "")
	switch {
	case err != nil:
		a.retried = true
		return err
	case status == 202, a.retried && status == 404:
		a.l.released(a.lease)
	case status == 404:
		a.l.vanished(a.lease, "HTTP release: 404")
	case a.fleet != nil && errCode(body) == string(contract.CodeWorkerUnreachable):
		// The lease is kept while its worker is away: release it again.
		a.l.acked()
		a.retried = true
		return nil
	default:
		a.l.violate(checkAnswer, "%s: release of %s answered %d %v", a.name, a.lease, status, body)
	}
	a.lease, a.retried = "", false
	return nil
}

func (a *httpAgent) create(ctx context.Context) error {
	if a.key == "" {
		a.n++
		a.key = fmt.Sprintf("%s-%d", a.name, a.n)
	}
	body := fmt.Sprintf(`{"platform":%q,"timeoutMs":2000,"ttlMs":%d}`, a.platform, leaseTTL)
	status, out, err := a.call(ctx, "POST", "/v1/lease-requests", body, "Idempotency-Key", a.key)
	switch {
	case err != nil:
		return err
	case status == 201:
		req, _ := out["request"].(map[string]any)
		a.request, _ = req["id"].(string)
		a.created, a.late = time.Now(), false
		a.settled(req)
		if a.request != "" && a.fleet != nil && a.rng.IntN(8) == 0 {
			return a.cancel(ctx)
		}
	case refused(a.fleet, contract.Code(errCode(out))):
		a.l.acked()
		a.key = ""
	default:
		a.l.violate(checkAnswer, "%s: lease request %s answered %d %v", a.name, a.key, status, out)
		a.key = ""
	}
	return nil
}

func (a *httpAgent) follow(ctx context.Context) error {
	sent := time.Now()
	status, out, err := a.call(ctx, "GET", "/v1/lease-requests/"+a.request+"?wait=5", "")
	switch {
	case err != nil:
		return err
	case status == 200:
		req, _ := out["request"].(map[string]any)
		a.settled(req)
		if a.request != "" && !a.late && a.fleet != nil {
			a.late = a.fleet.pastDeadline(a.name, "request "+a.request, a.created, sent, 2000)
		}
	default:
		a.l.violate(checkAnswer, "%s: acknowledged request %s answered %d %v", a.name, a.request, status, out)
		a.request, a.key = "", ""
	}
	return nil
}

// settled takes a request's state: a grant, a refusal, or still waiting.
func (a *httpAgent) settled(req map[string]any) {
	switch req["state"] {
	case "granted":
		lease, _ := req["lease"].(map[string]any)
		id, _ := lease["id"].(string)
		dev, _ := lease["deviceId"].(string)
		a.l.granted(a.name, id, dev, deadlineOf(lease))
		a.lease, a.request, a.key = id, "", ""
	case "failed", "cancelled":
		e, _ := req["error"].(map[string]any)
		c, _ := e["code"].(string)
		if !refused(a.fleet, contract.Code(c)) && !(c == string(contract.CodeDaemonStopping) && a.fleet.restartedSince(a.created)) {
			a.l.violate(checkAnswer, "%s: request %s ended %v", a.name, a.request, req)
		}
		a.l.acked()
		a.request, a.key = "", ""
	}
}

// cancel withdraws the request just made (DELETE): it ends cancelled, or
// the grant that won the race is followed as any other.
func (a *httpAgent) cancel(ctx context.Context) error {
	status, out, err := a.call(ctx, "DELETE", "/v1/lease-requests/"+a.request, "")
	switch {
	case err != nil:
		return err
	case status == 204, errCode(out) == string(contract.CodeRequestNotCancellable),
		errCode(out) == string(contract.CodeUnknownLeaseRequest):
		a.l.acked()
	default:
		a.l.violate(checkAnswer, "%s: cancel of request %s answered %d %v", a.name, a.request, status, out)
	}
	return nil
}

// startAgents starts *agents agents, each on its own goroutine in wg until
// ctx ends, half of them leasing iOS and half Android: a quarter (at least
// one) over h's HTTP API at base with an agent token each, the rest over
// its socket. fr is the fleet run they check their answers against, nil
// against a daemon. It returns how many go over HTTP.
func startAgents(ctx context.Context, wg *sync.WaitGroup, seed uint64, l *ledger, h *home, base string, fr *fleetRun) int {
	return startAgentsOn(ctx, wg, seed, l, func() *home { return h }, []string{base}, fr)
}

// startAgentsOn is startAgents against daemons that may change: the socket
// agents dial the home at returns when they (re)connect, and the HTTP
// agents go through bases in turn.
func startAgentsOn(ctx context.Context, wg *sync.WaitGroup, seed uint64, l *ledger, at func() *home, bases []string, fr *fleetRun) int {
	platforms := []contract.Platform{contract.PlatformIOS, contract.PlatformAndroid}
	nHTTP := max(*agents/4, 1)
	for i := range *agents {
		p := platforms[i%2]
		arng := rand.New(rand.NewPCG(seed, uint64(i+1)))
		var a agent
		name := fmt.Sprintf("agent-%d", i)
		if i < nHTTP {
			a = &httpAgent{name: name, bases: bases, secret: at().token("agent", name), l: l, rng: arng, platform: p,
				hc: &http.Client{Timeout: 30 * time.Second}, fleet: fr}
		} else {
			a = &sockAgent{name: name, at: at, l: l, rng: arng, platform: p, fleet: fr}
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			run(ctx, name, a, l, rand.New(rand.NewPCG(seed, uint64(1000+i))))
		}()
	}
	return nHTTP
}

// violationLog keeps each violation once, with the first check that saw
// it.
type violationLog struct {
	all  []string
	seen map[string]bool
}

// byCheck counts the violations by check.
func (v *violationLog) byCheck() map[string]int {
	n := map[string]int{}
	for _, f := range v.all {
		n[checkOf(f)]++
	}
	return n
}

// fail fails t with each check's first violations in full; the rest are
// counted in the run's summary.
func (v *violationLog) fail(t *testing.T) {
	t.Helper()
	shown := map[string]int{}
	for _, f := range v.all {
		if c := checkOf(f); shown[c] < 10 {
			shown[c]++
			t.Errorf("violation: %s", f)
		}
	}
}

// report adds what a check found, when naming the moment it looked.
func (v *violationLog) report(when string, found []string) {
	if v.seen == nil {
		v.seen = map[string]bool{}
	}
	for _, f := range found {
		if !v.seen[f] {
			v.seen[f] = true
			v.all = append(v.all, when+": "+f)
		}
	}
}
