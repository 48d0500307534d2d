package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/simlock/simlock/internal/client"
	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/daemon"
)

// reference is the usage figures worked out from a log's events by the
// definitions in CLI.md, independently of the daemon: counts of the lease
// events, and nearest-rank percentiles of the durations between them.
type reference struct {
	totals                 contract.UsageTotals
	wait, toDevice         []int64
	hold, turnaround       []int64
	requestedAt, grantedAt map[string]int64 // by request id, by lease id
	leaseRequest           map[string]string
}

func newReference() *reference {
	return &reference{
		totals:      contract.UsageTotals{Granted: map[string]int{}, Rejected: map[string]int{}},
		requestedAt: map[string]int64{}, grantedAt: map[string]int64{}, leaseRequest: map[string]string{},
	}
}

// add reads one event.
func (r *reference) add(ev event) {
	switch ev.Event {
	case "lease.requested":
		r.totals.Requests++
		r.requestedAt[ev.str("requestId")] = ev.Timestamp
	case "grant.recorded":
		// A gateway's grant: counted for its worker with the wait the
		// gateway measured; the worker's lease ends on its own clock.
		src, wait := ev.str("source"), int64(ev.Payload["waitMs"].(float64))
		r.totals.Granted[src]++
		r.wait = append(r.wait, wait)
		if src != "warm" {
			r.toDevice = append(r.toDevice, wait)
		}
		l, at := ev.str("workerLeaseId"), int64(ev.Payload["grantedAt"].(float64))
		r.grantedAt[l] = at
		r.requestedAt["recorded:"+l] = at - wait
		r.leaseRequest[l] = "recorded:" + l
	case "lease.granted":
		src := ev.str("source")
		r.totals.Granted[src]++
		at := r.requestedAt[ev.str("requestId")]
		r.wait = append(r.wait, ev.Timestamp-at)
		if src != "warm" {
			r.toDevice = append(r.toDevice, ev.Timestamp-at)
		}
		r.grantedAt[ev.str("leaseId")] = ev.Timestamp
		r.leaseRequest[ev.str("leaseId")] = ev.str("requestId")
	case "lease.rejected":
		switch reason := ev.str("reason"); reason {
		case "cancelled", "killed":
			r.totals.Cancelled++
		case "timeout":
			r.totals.TimedOut++
		default:
			r.totals.Rejected[reason]++
		}
	case "lease.released", "lease.expired":
		l := ev.str("leaseId")
		r.hold = append(r.hold, ev.Timestamp-r.grantedAt[l])
		r.turnaround = append(r.turnaround, ev.Timestamp-r.requestedAt[r.leaseRequest[l]])
	}
}

// nearestRank: pN is the smallest value at least N% of vs are at or below.
func nearestRank(vs []int64) contract.Percentiles {
	if len(vs) == 0 {
		return contract.Percentiles{}
	}
	s := slices.Sorted(slices.Values(vs))
	at := func(p int) int64 { return s[max((p*len(s)+99)/100, 1)-1] }
	return contract.Percentiles{P50: at(50), P90: at(90), P99: at(99), Count: len(s)}
}

func (r *reference) figures() contract.UsageFigures {
	return contract.UsageFigures{Totals: r.totals, Percentiles: contract.UsagePercentiles{
		Wait: nearestRank(r.wait), TimeToDevice: nearestRank(r.toDevice),
		Hold: nearestRank(r.hold), Turnaround: nearestRank(r.turnaround),
	}}
}

// logEvents is every event of h's log (`simlock events --since 1h` pages
// through them all).
func logEvents(t *testing.T, h *home) []event {
	t.Helper()
	r := h.run("events", "--since", "1h")
	if r.code != 0 {
		t.Fatalf("events\n%s", r)
	}
	var out []event
	dec := json.NewDecoder(strings.NewReader(r.stdout))
	for dec.More() {
		var ev event
		if err := dec.Decode(&ev); err != nil {
			t.Fatalf("events: %v\n%s", err, r)
		}
		out = append(out, ev)
	}
	return out
}

// stats runs `simlock stats --json` with args and decodes it.
func stats(t *testing.T, h *home, args ...string) contract.UsageResult {
	t.Helper()
	r := h.run(append([]string{"stats", "--json"}, args...)...)
	if r.code != 0 {
		t.Fatalf("stats\n%s", r)
	}
	var res contract.UsageResult
	if err := json.Unmarshal([]byte(r.stdout), &res); err != nil {
		t.Fatalf("stats --json: %v\n%s", err, r)
	}
	return res
}

func dialAs(t *testing.T, h *home, principal string) *client.Client {
	t.Helper()
	c, err := client.Dial(context.Background(), daemon.SocketPath(h.Dir), contract.HelloInput{Principal: principal,
		Protocol: contract.VersionRange{Min: contract.ProtocolMin, Max: contract.ProtocolMax}})
	if err != nil {
		t.Fatalf("dial as %s: %v", principal, err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// The demo driver's times in the scripted run, in ms: every wait for a
// device it had to make or boot is at least one of these.
const (
	scriptProvisionMs = 40
	scriptBootMs      = 30
)

// stats --json over a demo run of 200 leases reports exactly the counts
// the script produced and the percentiles of the durations between the
// run's own events. Four iOS and four Android devices are provisioned at
// once (8 provisioned); while Android is full, one request is refused
// with noWait, one times out and one is cancelled; then four requesters
// per platform take 24 leases each, one after the other: an iOS device is
// left shut down by its clean and nothing boots it again (rewarm is off),
// so each of those is booted, and an Android one is left running, so each
// is warm. A window that ends before the log's first minute is
// HISTORY_NOT_KEPT; one across it is partial, from that minute.
func TestStatsCountsAScriptedRunOf200Leases(t *testing.T) {
	t.Parallel()
	h := newHome(t, "capacity.strategy", "fixed", "capacity.config.maxRunning", "8",
		"capacity.config.ios.maxRunning", "4", "capacity.config.ios.maxDevices", "4",
		"capacity.config.android.maxRunning", "4", "capacity.config.android.maxDevices", "4",
		"warmPool.rewarmReleased", "false", "health.enabled", "false",
		"drivers.demo.provisionMs", strconv.Itoa(scriptProvisionMs), "drivers.demo.bootMs", strconv.Itoa(scriptBootMs),
		"drivers.demo.reclaimMs", "20")
	h.startDaemon()
	ctx := context.Background()
	var mu sync.Mutex
	sources := map[string]int{}
	lease := func(c *client.Client, platform contract.Platform, want contract.GrantSource) contract.LeaseGrant {
		g, err := c.RequestLease(ctx, contract.LeaseRequestInput{Platform: platform}, nil)
		if err != nil {
			t.Errorf("lease %s: %v", platform, err)
			return g
		}
		if g.Source != want {
			t.Errorf("a %s grant came from %s, want %s as scripted", platform, g.Source, want)
		}
		mu.Lock()
		sources[string(g.Source)]++
		mu.Unlock()
		return g
	}
	release := func(c *client.Client, g contract.LeaseGrant) {
		if _, err := c.Release(ctx, g.Lease.ID); err != nil {
			t.Errorf("release %s: %v", g.Lease.ID, err)
		}
	}

	// Provisioned: eight at once, one device each.
	type held struct {
		c *client.Client
		g contract.LeaseGrant
	}
	first := make([]held, 8)
	var wg sync.WaitGroup
	for i := range first {
		platform := []contract.Platform{contract.PlatformIOS, contract.PlatformAndroid}[i%2]
		c := dialAs(t, h, fmt.Sprintf("p%d", i))
		wg.Go(func() { first[i] = held{c, lease(c, platform, contract.SourceProvisioned)} })
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	// Android is full: refused at once, timed out, cancelled.
	other := dialAs(t, h, "other")
	var ce *contract.Error
	if _, err := other.RequestLease(ctx, contract.LeaseRequestInput{Platform: contract.PlatformAndroid, NoWait: true}, nil); !errors.As(err, &ce) || ce.Code != contract.CodeNoCapacity {
		t.Fatalf("noWait on a full platform: %v, want NO_CAPACITY", err)
	}
	if _, err := other.RequestLease(ctx, contract.LeaseRequestInput{Platform: contract.PlatformAndroid, TimeoutMs: 100}, nil); !errors.As(err, &ce) || ce.Code != contract.CodeQueueTimeout {
		t.Fatalf("a 100 ms wait on a full platform: %v, want QUEUE_TIMEOUT", err)
	}
	var st contract.LeaseRequestStatus
	if err := other.Call(ctx, contract.OpLeaseRequestCreate, contract.LeaseRequestInput{Platform: contract.PlatformAndroid}, &st); err != nil {
		t.Fatal(err)
	}
	var cancelled contract.LeaseCancelResult
	if err := other.Call(ctx, contract.OpLeaseCancel, contract.LeaseCancelInput{RequestID: st.Request.ID}, &cancelled); err != nil {
		t.Fatalf("cancel the queued request: %v", err)
	}
	for _, f := range first {
		release(f.c, f.g)
	}

	// Booted and warm: 24 leases in turn for each of eight requesters.
	for i := range 8 {
		platform, want := contract.PlatformIOS, contract.SourceBooted
		if i%2 == 1 {
			platform, want = contract.PlatformAndroid, contract.SourceWarm
		}
		c := first[i].c
		wg.Go(func() {
			for range 24 {
				g := lease(c, platform, want)
				if g.Lease.ID != "" {
					release(c, g)
				}
			}
		})
	}
	wg.Wait()
	if want := map[string]int{"provisioned": 8, "booted": 96, "warm": 96}; !reflect.DeepEqual(sources, want) {
		t.Fatalf("the run's grants came from %v, want %v", sources, want)
	}

	// What the log says, worked out here.
	evs := logEvents(t, h)
	all, byPlatform := newReference(), map[string]*reference{"ios": newReference(), "android": newReference()}
	platformOf := map[string]string{} // request id → platform
	for _, ev := range evs {
		switch ev.Event {
		case "lease.requested", "lease.rejected":
			platformOf[ev.str("requestId")], _ = ev.Payload["requestSpec"].(map[string]any)["platform"].(string)
		}
		p := platformOf[ev.str("requestId")]
		if l := ev.str("leaseId"); l != "" && p == "" {
			p = platformOf[all.leaseRequest[l]]
		}
		all.add(ev)
		if r := byPlatform[p]; r != nil {
			r.add(ev)
		}
	}
	want := all.figures()
	if want.Totals.Requests != 203 || !reflect.DeepEqual(want.Totals.Granted, sources) ||
		!reflect.DeepEqual(want.Totals.Rejected, map[string]int{"no-wait": 1}) || want.Totals.TimedOut != 1 || want.Totals.Cancelled != 1 {
		t.Fatalf("the log holds %+v, want the script's 203 requests, its grants %v, one no-wait, one timeout, one cancellation", want.Totals, sources)
	}
	if p := want.Percentiles; p.Hold.Count != 200 || p.Turnaround.Count != 200 || p.TimeToDevice.Count != 104 {
		t.Fatalf("the log's durations: %+v, want 200 holds and turnarounds and 104 times to device", p)
	}
	// The demo's waits bound the waits of the devices it made or booted.
	if min := slices.Min(all.toDevice); min < scriptBootMs {
		t.Errorf("a time to device of %d ms, less than the demo's boot of %d ms", min, scriptBootMs)
	}

	res := stats(t, h, "--since", "1h")
	if !reflect.DeepEqual(res.Totals, want.Totals) {
		t.Errorf("stats totals = %+v\nwant %+v", res.Totals, want.Totals)
	}
	if res.Percentiles != want.Percentiles {
		t.Errorf("stats percentiles = %+v\nwant %+v", res.Percentiles, want.Percentiles)
	}
	for name, r := range byPlatform {
		if got := res.ByPlatform[name]; !reflect.DeepEqual(got, r.figures()) {
			t.Errorf("stats byPlatform.%s = %+v\nwant %+v", name, got, r.figures())
		}
	}
	if len(res.ByPlatform) != 2 || res.ByWorker != nil {
		t.Errorf("stats splits by platform %d ways and by worker %v; want ios and android, no workers", len(res.ByPlatform), res.ByWorker)
	}
	sum := 0
	for _, p := range res.Series {
		sum += p.Requests
	}
	if res.From%60000 != 0 || res.To%60000 != 0 || res.Bucket != "1m" || len(res.Series) != int((res.To-res.From)/60000) || sum != 203 {
		t.Errorf("window [%d, %d) bucket %s, %d points of %d requests; want whole minutes, 1m, a point a minute, 203", res.From, res.To, res.Bucket, len(res.Series), sum)
	}
	covers := evs[0].Timestamp - evs[0].Timestamp%60000
	if !res.Partial || res.CoversFrom != covers {
		t.Errorf("partial = %v coversFrom = %d, want true and %d, the minute of the log's first event: the daemon is younger than an hour", res.Partial, res.CoversFrom, covers)
	}

	// A window across the history's start counts its first minute only.
	inFirst := 0
	for _, ev := range evs {
		if ev.Event == "lease.requested" && ev.Timestamp < covers+60000 {
			inFirst++
		}
	}
	straddle := stats(t, h, "--since", strconv.FormatInt(covers-3_600_000, 10), "--until", strconv.FormatInt(covers+60000, 10))
	if !straddle.Partial || straddle.CoversFrom != covers || straddle.Totals.Requests != inFirst {
		t.Errorf("a window across the history's start: partial %v coversFrom %d requests %d; want true, %d, %d", straddle.Partial, straddle.CoversFrom, straddle.Totals.Requests, covers, inFirst)
	}

	e := expectFailure(t, h.run("stats", "--since", "2h", "--until", "1h", "--json"), 1, "HISTORY_NOT_KEPT")
	if ts, _ := e["oldestTs"].(float64); int64(ts) != evs[0].Timestamp {
		t.Errorf("HISTORY_NOT_KEPT oldestTs = %v, want %d, the log's first event", e["oldestTs"], evs[0].Timestamp)
	}
	if ts, _ := e["coversFrom"].(float64); int64(ts) != covers {
		t.Errorf("HISTORY_NOT_KEPT coversFrom = %v, want %d", e["coversFrom"], covers)
	}
}

// On a gateway, stats splits the figures by worker, from the gateway's own
// events: each worker's requests from request.dispatched, its grants from
// grant.recorded, never from what the worker relays but the ends of those
// leases; a request the fleet queue refused before any worker took it
// counts in the totals and by platform, in no worker's figures.
func TestStatsOnAGatewaySplitsByWorkerAndCountsItsOwnRefusals(t *testing.T) {
	t.Parallel()
	f := newFleet(t)
	var ids []string // one running slot each
	for _, label := range []string{"worker-a", "worker-b"} {
		ids = append(ids, instanceID(t, f.worker(label, 1)))
	}
	f.await("both workers connected", 5*time.Second, connected(ids...))
	follow := f.gw.follow()
	g1 := f.gw.leaseDetached("one", "ios")
	g2 := f.gw.leaseDetached("two", "ios")
	if g1.Lease.WorkerID == g2.Lease.WorkerID {
		t.Fatalf("both leases on %s, want one on each worker (one running slot each)", g1.Lease.WorkerID)
	}
	expectFailure(t, f.gw.run("lease", "--platform", "ios", "--agent-id", "three", "--no-wait", "--detach"), 11, "NO_CAPACITY")
	for _, g := range []grant{g1, g2} {
		if r := f.gw.run("release", g.Lease.ID); r.code != 0 {
			t.Fatalf("release\n%s", r)
		}
	}
	for _, id := range ids {
		follow.find("the release on "+id+" relayed", isEvent("lease.released", "workerId", id))
	}

	perWorker := map[string]*reference{ids[0]: newReference(), ids[1]: newReference()}
	for _, ev := range logEvents(t, f.gw) {
		r := perWorker[ev.str("workerId")]
		switch {
		case r == nil:
		case ev.Event == "request.dispatched":
			r.totals.Requests++ // the gateway's request, moved to the worker
		case ev.Event == "grant.recorded", ev.Event == "lease.released", ev.Event == "lease.expired":
			r.add(ev)
		}
	}
	res := stats(t, f.gw, "--since", "1h")
	for id, r := range perWorker {
		want := r.figures()
		if want.Totals.Requests != 1 || want.Totals.Granted["provisioned"] != 1 || want.Percentiles.Hold.Count != 1 {
			t.Fatalf("worker %s relayed %+v, want its one request, provisioned and released", id, want)
		}
		if got := res.ByWorker[id]; !reflect.DeepEqual(got, want) {
			t.Errorf("stats byWorker.%s = %+v\nwant %+v", id, got, want)
		}
	}
	if len(res.ByWorker) != 2 {
		t.Errorf("stats byWorker has %d entries, want the two workers only", len(res.ByWorker))
	}
	wantTotals := contract.UsageTotals{Requests: 3, Granted: map[string]int{"provisioned": 2}, Rejected: map[string]int{"no-wait": 1}}
	if !reflect.DeepEqual(res.Totals, wantTotals) {
		t.Errorf("stats totals = %+v, want %+v: each worker's request, and the fleet queue's refusal", res.Totals, wantTotals)
	}
	if ios := res.ByPlatform["ios"].Totals; !reflect.DeepEqual(ios, wantTotals) {
		t.Errorf("stats byPlatform.ios.totals = %+v, want %+v", ios, wantTotals)
	}
	if res.Percentiles.Hold.Count != 2 || res.Percentiles.Wait.Count != 2 {
		t.Errorf("stats percentiles = %+v, want both workers' holds and waits", res.Percentiles)
	}
}

// GET /v1/usage answers the same figures to an operator token, refuses an
// agent token, names a bad bucket, and answers 410 for a window before
// history.
func TestUsageOverHTTP(t *testing.T) {
	t.Parallel()
	h, a := httpHome(t)
	_, op := h.token("operator", "ops")
	_, agent := h.token("agent", "bot")
	g := h.leaseDetached("a", "android")
	if r := h.run("release", g.Lease.ID); r.code != 0 {
		t.Fatalf("release\n%s", r)
	}

	r := a.do("GET", "/v1/usage?from=1h&bucket=5m", op, "")
	tot := r.obj("totals")
	granted, _ := tot["granted"].(map[string]any)
	if r.status != 200 || tot["requests"] != float64(1) || len(granted) != 1 || r.body["bucket"] != "5m" {
		t.Errorf("GET /v1/usage = %d %s, want one request and one grant in 5m buckets", r.status, r.raw)
	}
	if byp, _ := r.body["byPlatform"].(map[string]any); byp["android"] == nil {
		t.Errorf("GET /v1/usage byPlatform = %v, want android", r.body["byPlatform"])
	}
	if r := a.do("GET", "/v1/usage?from=1h", agent, ""); r.status != 403 {
		t.Errorf("GET /v1/usage with an agent token = %d %s, want 403", r.status, r.raw)
	}
	if r := a.do("GET", "/v1/usage?from=24h&bucket=1m", op, ""); r.status != 400 || r.errCode() != "BAD_REQUEST" {
		t.Errorf("GET /v1/usage 1m over a day = %d %s, want 400 BAD_REQUEST", r.status, r.raw)
	}
	if r := a.do("GET", "/v1/usage?from=2h&to=1h", op, ""); r.status != 410 || r.errCode() != "HISTORY_NOT_KEPT" {
		t.Errorf("GET /v1/usage before history = %d %s, want 410 HISTORY_NOT_KEPT", r.status, r.raw)
	}
}
