package usage

import (
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/simlock/simlock/internal/contract"
)

// t0 is a whole minute.
const t0 = 1_800_000_000_000

// script makes the events of a run, seq in order; each row is an offset
// from t0 in ms, an event name and its payload.
func script(rows ...[3]any) []contract.Event {
	var evs []contract.Event
	for i, r := range rows {
		b, _ := json.Marshal(r[2])
		evs = append(evs, contract.Event{Seq: int64(i + 1), Timestamp: t0 + int64(r[0].(int)), Event: r[1].(string), Payload: b})
	}
	return evs
}

type m = map[string]any

func req(id, platform string) m { return m{"requestId": id, "requestSpec": m{"platform": platform}} }
func grant(req, lease, source string) m {
	return m{"requestId": req, "leaseId": lease, "source": source}
}
func reject(req, platform, reason string) m {
	return m{"requestId": req, "requestSpec": m{"platform": platform}, "reason": reason}
}
func end(lease string) m { return m{"leaseId": lease} }
func dispatch(req, worker string) m {
	return m{"requestId": req, "workerId": worker, "platform": "ios", "reason": "free-capacity"}
}
func relayed(worker string, p m) m {
	p["workerId"] = worker
	return p
}

// fwd is a worker's relayed lease.requested of a request a gateway
// forwarded there: its requester under the gateway's prefix.
func fwd(worker, id, platform string) m {
	p := relayed(worker, req(id, platform))
	p["requester"] = contract.GatewayRequesterPrefix + "ins_gw:agent"
	return p
}

// recorded is a gateway's grant.recorded: its request gwReq granted with
// the worker's lease, from source, waitMs after the request, the lease
// granted on the worker at t0+grantedAt.
func recorded(gwReq, worker, lease, source, platform string, waitMs, grantedAt int64) m {
	return m{"requestId": gwReq, "leaseId": worker + "." + lease, "workerId": worker, "workerLeaseId": lease, "source": source,
		"platform": platform, "waitMs": waitMs, "grantedAt": t0 + grantedAt}
}

// memStore is the store's part of the rollup in memory: it looks up what
// Needs lists, and writes what Fold returns, as the SQLite store does.
type memStore struct {
	cells map[Cell][]byte
	open  map[OpenKey]Open
}

func newMemStore() *memStore {
	return &memStore{cells: map[Cell][]byte{}, open: map[OpenKey]Open{}}
}

func (s *memStore) commit(evs []contract.Event) {
	b := NewBatch(evs)
	known := map[OpenKey]Open{}
	for _, k := range b.Needs() {
		if o, ok := s.open[k]; ok {
			known[k] = o
		}
	}
	ch := b.Fold(known)
	for _, a := range ch.Appends {
		s.cells[a.Cell] = append(s.cells[a.Cell], a.Records...)
	}
	for _, w := range ch.Opens {
		if w.Closed {
			delete(s.open, w.Key)
		} else {
			s.open[w.Key] = w.Open
		}
	}
}

// query reads the cells as minute rows, or, with hours, gathered into hour
// rows as the store's compaction gathers them.
func (s *memStore) query(t *testing.T, w Window, hours bool) contract.UsageResult {
	t.Helper()
	q := NewQuery(w)
	cells := slices.SortedFunc(maps.Keys(s.cells), func(a, b Cell) int { return int(a.Minute - b.Minute) })
	if !hours {
		for _, c := range cells {
			if err := q.AddMinute(c.Minute, c.Worker, c.Platform, s.cells[c]); err != nil {
				t.Fatal(err)
			}
		}
		return q.Result()
	}
	type row struct {
		hour             int64
		worker, platform string
	}
	rows := map[row][]byte{}
	for _, c := range cells {
		r := row{Hour(c.Minute), c.Worker, c.Platform}
		rows[r] = AppendChunk(rows[r], r.hour, c.Minute, s.cells[c])
	}
	for r, chunks := range rows {
		if err := q.AddHour(r.hour, r.worker, r.platform, chunks); err != nil {
			t.Fatal(err)
		}
	}
	return q.Result()
}

func pc(p50, p90, p99 int64, n int) contract.Percentiles {
	return contract.Percentiles{P50: p50, P90: p90, P99: p99, Count: n}
}

// aRun is a daemon's own events; its figures over [t0, t0+10m) are worked
// out by hand in TestFoldAndQueryAScriptedRun.
func aRun() []contract.Event {
	return script(
		[3]any{-30000, "lease.requested", req("r0", "ios")}, // before the window
		[3]any{0, "lease.requested", req("r1", "ios")},
		[3]any{1000, "lease.granted", grant("r1", "l1", "warm")},
		[3]any{1000, "device.ready", m{"deviceId": "d1"}},
		[3]any{2000, "lease.requested", req("r2", "ios")},
		[3]any{3000, "lease.requested", req("r3", "android")},
		[3]any{3000, "lease.rejected", reject("r3", "android", "no-wait")},
		[3]any{4000, "lease.requested", req("r4", "android")},
		[3]any{4500, "lease.rejected", reject("r4", "android", "timeout")},
		[3]any{5000, "lease.requested", req("r5", "ios")},
		[3]any{5100, "lease.rejected", reject("r5", "ios", "cancelled")},
		[3]any{7000, "lease.granted", grant("r2", "l2", "provisioned")},
		[3]any{11000, "lease.released", end("l1")},
		[3]any{12000, "lease.released", end("l9")}, // its grant is not in the history
		[3]any{30000, "lease.granted", grant("r0", "l0", "booted")},
		[3]any{400000, "lease.requested", req("r6", "ios")},
		[3]any{403000, "lease.granted", grant("r6", "l6", "booted")},
		[3]any{500000, "lease.expired", end("l2")},
		[3]any{590000, "lease.released", end("l0")},
		[3]any{600000, "lease.requested", req("r7", "ios")}, // at To: outside
	)
}

func TestFoldAndQueryAScriptedRun(t *testing.T) {
	s := newMemStore()
	s.commit(aRun())
	w := Window{From: t0, To: t0 + 600000, Bucket: "5m", Step: 5 * time.Minute, CoversFrom: t0 - 60000}
	got := s.query(t, w, false)

	// Waits 1000 (warm), 5000 (provisioned), 60000 (booted: r0 asked
	// before the window) and 3000 (booted); holds 10000, 493000 and
	// 560000; turnarounds 11000, 498000 and 620000. l9 ended with no grant
	// in the history: nothing.
	wantAll := contract.UsageFigures{
		Totals: contract.UsageTotals{
			Requests: 6,
			Granted:  map[string]int{"warm": 1, "provisioned": 1, "booted": 2},
			Rejected: map[string]int{"no-wait": 1}, Cancelled: 1, TimedOut: 1,
		},
		Percentiles: contract.UsagePercentiles{
			Wait:         pc(3000, 60000, 60000, 4),
			TimeToDevice: pc(5000, 60000, 60000, 3),
			Hold:         pc(493000, 560000, 560000, 3),
			Turnaround:   pc(498000, 620000, 620000, 3),
		},
	}
	wantIOS := wantAll
	wantIOS.Totals = contract.UsageTotals{
		Requests: 4,
		Granted:  map[string]int{"warm": 1, "provisioned": 1, "booted": 2},
		Rejected: map[string]int{}, Cancelled: 1,
	}
	wantAndroid := contract.UsageFigures{Totals: contract.UsageTotals{
		Requests: 2, Granted: map[string]int{}, Rejected: map[string]int{"no-wait": 1}, TimedOut: 1,
	}}
	wantSeries := []contract.UsagePoint{
		{At: t0, Requests: 5, Granted: 3, Rejected: 3},
		{At: t0 + 300000, Requests: 1, Granted: 1},
	}

	if !reflect.DeepEqual(got.Totals, wantAll.Totals) {
		t.Errorf("totals = %+v, want %+v", got.Totals, wantAll.Totals)
	}
	if got.Percentiles != wantAll.Percentiles {
		t.Errorf("percentiles = %+v, want %+v", got.Percentiles, wantAll.Percentiles)
	}
	if !reflect.DeepEqual(got.ByPlatform["ios"], wantIOS) {
		t.Errorf("byPlatform.ios = %+v, want %+v", got.ByPlatform["ios"], wantIOS)
	}
	if !reflect.DeepEqual(got.ByPlatform["android"], wantAndroid) {
		t.Errorf("byPlatform.android = %+v, want %+v", got.ByPlatform["android"], wantAndroid)
	}
	if len(got.ByPlatform) != 2 {
		t.Errorf("byPlatform has %v, want ios and android only", slices.Sorted(maps.Keys(got.ByPlatform)))
	}
	if !reflect.DeepEqual(got.Series, wantSeries) {
		t.Errorf("series = %+v, want %+v", got.Series, wantSeries)
	}
	if got.From != t0 || got.To != t0+600000 || got.Bucket != "5m" {
		t.Errorf("window = [%d, %d) %s, want [%d, %d) 5m", got.From, got.To, got.Bucket, t0, t0+600000)
	}
	if got.Partial || got.CoversFrom != 0 {
		t.Errorf("partial = %v coversFrom = %d, want false and 0: the log reaches before the window", got.Partial, got.CoversFrom)
	}
	if got.ByWorker != nil {
		t.Errorf("byWorker = %v, want none outside a gateway", got.ByWorker)
	}

	// What stays open: l6 (not ended) and r7 (not settled); nothing else.
	wantOpen := map[OpenKey]Open{
		{"", KindLease, "l6"}:   {At: t0 + 403000, Requested: t0 + 400000, Platform: "ios"},
		{"", KindRequest, "r7"}: {At: t0 + 600000, Platform: "ios"},
	}
	if !reflect.DeepEqual(s.open, wantOpen) {
		t.Errorf("open entries = %+v, want %+v", s.open, wantOpen)
	}
}

// aGatewayRun is a gateway's log: its fleet queue's own events and those
// it relayed from w1 and w2, whose ids overlap.
func aGatewayRun() []contract.Event {
	return script(
		[3]any{0, "lease.requested", req("g1", "ios")},
		[3]any{0, "lease.requested", req("g2", "android")},
		[3]any{100, "lease.requested", req("g3", "ios")},
		[3]any{150, "lease.requested", fwd("w1", "r3", "ios")},
		[3]any{200, "request.dispatched", dispatch("g3", "w1")},
		[3]any{290, "lease.rejected", relayed("w1", reject("r3", "ios", "provision-failed"))}, // the worker's word: not counted
		[3]any{300, "lease.rejected", reject("g3", "ios", "worker-refused")},                  // the gateway's, for w1
		[3]any{500, "request.dispatched", dispatch("g1", "w1")},
		[3]any{600, "lease.requested", fwd("w1", "r1", "ios")},
		[3]any{1000, "lease.requested", relayed("w2", req("r1", "android"))}, // w2's own agent: not the gateway's
		[3]any{1000, "lease.requested", req("g6", "android")},
		[3]any{1100, "lease.requested", fwd("w2", "r2", "android")},
		[3]any{1200, "request.dispatched", dispatch("g6", "w2")},
		[3]any{1400, "lease.granted", relayed("w1", grant("r1", "l1", "warm"))},
		[3]any{1400, "grant.recorded", recorded("g1", "w1", "l1", "warm", "ios", 1400, 1400)},
		[3]any{5000, "lease.granted", relayed("w2", grant("r1", "l1", "provisioned"))}, // w2's own
		[3]any{5100, "lease.granted", relayed("w2", grant("r2", "l2", "provisioned"))},
		[3]any{5100, "grant.recorded", recorded("g6", "w2", "l2", "provisioned", "android", 4100, 5100)},
		[3]any{5200, "lease.granted", relayed("w2", grant("r9", "l9", "warm"))}, // no grant of the gateway's
		[3]any{5400, "lease.released", relayed("w1", end("l1"))},
		[3]any{7000, "lease.rejected", reject("g2", "android", "timeout")}, // never reached a worker
		[3]any{9000, "lease.requested", req("g4", "ios")},
		[3]any{9000, "lease.rejected", reject("g4", "ios", "no-wait")}, // never reached a worker
		[3]any{9500, "lease.requested", req("g5", "android")},          // waits still
	)
}

func TestFoldAndQueryAGatewaysRun(t *testing.T) {
	s := newMemStore()
	s.commit(aGatewayRun())
	got := s.query(t, Window{From: t0, To: t0 + 60000, Bucket: "1m", Step: time.Minute, CoversFrom: t0, Gateway: true}, false)

	// The fleet queue's own requests count until dispatched: g2, g4 and
	// g5 remain, with g2's timeout and g4's no-wait. g1 and g3 count for
	// w1 (g3 refused there), g6 for w2, from the gateway's own events;
	// nothing a worker relays counts but the end of a lease the gateway
	// recorded. Waits 1400 (w1, warm) and 4100 (w2, provisioned), as the
	// gateway measured them; w1's hold 4000, turnaround 5400.
	wantTotals := contract.UsageTotals{
		Requests: 6,
		Granted:  map[string]int{"warm": 1, "provisioned": 1},
		Rejected: map[string]int{"no-wait": 1, "worker-refused": 1}, TimedOut: 1,
	}
	if !reflect.DeepEqual(got.Totals, wantTotals) {
		t.Errorf("totals = %+v, want %+v", got.Totals, wantTotals)
	}
	if want := (contract.UsagePercentiles{Wait: pc(1400, 4100, 4100, 2), TimeToDevice: pc(4100, 4100, 4100, 1),
		Hold: pc(4000, 4000, 4000, 1), Turnaround: pc(5400, 5400, 5400, 1)}); got.Percentiles != want {
		t.Errorf("percentiles = %+v, want %+v", got.Percentiles, want)
	}
	wantIOS := contract.UsageTotals{Requests: 3, Granted: map[string]int{"warm": 1}, Rejected: map[string]int{"no-wait": 1, "worker-refused": 1}}
	if ios := got.ByPlatform["ios"].Totals; !reflect.DeepEqual(ios, wantIOS) {
		t.Errorf("byPlatform.ios.totals = %+v, want %+v", ios, wantIOS)
	}
	wantAndroid := contract.UsageTotals{Requests: 3, Granted: map[string]int{"provisioned": 1}, Rejected: map[string]int{}, TimedOut: 1}
	if android := got.ByPlatform["android"].Totals; !reflect.DeepEqual(android, wantAndroid) {
		t.Errorf("byPlatform.android.totals = %+v, want %+v", android, wantAndroid)
	}
	wantW1 := contract.UsageFigures{
		Totals: contract.UsageTotals{Requests: 2, Granted: map[string]int{"warm": 1}, Rejected: map[string]int{"worker-refused": 1}},
		Percentiles: contract.UsagePercentiles{Wait: pc(1400, 1400, 1400, 1),
			Hold: pc(4000, 4000, 4000, 1), Turnaround: pc(5400, 5400, 5400, 1)},
	}
	if !reflect.DeepEqual(got.ByWorker["w1"], wantW1) {
		t.Errorf("byWorker.w1 = %+v, want %+v", got.ByWorker["w1"], wantW1)
	}
	wantW2 := contract.UsageFigures{
		Totals:      contract.UsageTotals{Requests: 1, Granted: map[string]int{"provisioned": 1}, Rejected: map[string]int{}},
		Percentiles: contract.UsagePercentiles{Wait: pc(4100, 4100, 4100, 1), TimeToDevice: pc(4100, 4100, 4100, 1)},
	}
	if !reflect.DeepEqual(got.ByWorker["w2"], wantW2) {
		t.Errorf("byWorker.w2 = %+v, want %+v", got.ByWorker["w2"], wantW2)
	}
	if len(got.ByWorker) != 2 {
		t.Errorf("byWorker has %v, want w1 and w2: the fleet queue's own refusals are in no worker's figures", slices.Sorted(maps.Keys(got.ByWorker)))
	}
	if want := []contract.UsagePoint{{At: t0, Requests: 6, Granted: 2, Rejected: 3}}; !reflect.DeepEqual(got.Series, want) {
		t.Errorf("series = %+v, want %+v", got.Series, want)
	}

	// A worker's own query of the same rows (not a gateway) counts only
	// the events of the daemon itself.
	own := s.query(t, Window{From: t0, To: t0 + 60000, Bucket: "1m", Step: time.Minute, CoversFrom: t0}, false)
	if own.Totals.Requests != 3 || own.ByWorker != nil || len(own.Totals.Granted) != 0 {
		t.Errorf("outside gateway mode: totals %+v byWorker %v, want the 3 own requests and no workers", own.Totals, own.ByWorker)
	}

	// g1 and g6 closed with their grants; g5 waits still, and w2's lease
	// is open.
	wantOpen := map[OpenKey]Open{
		{"", KindRequest, "g5"}: {At: t0 + 9500, Platform: "android"},
		{"w2", KindLease, "l2"}: {At: t0 + 5100, Requested: t0 + 1000, Platform: "android"},
	}
	if !reflect.DeepEqual(s.open, wantOpen) {
		t.Errorf("open entries = %+v, want %+v", s.open, wantOpen)
	}
}

// The rollup does not depend on how the events were split into commits,
// nor on whether the store gathered the cells into hours.
func TestTheFoldIsTheSameInOneCommitOrManyAndInHourRows(t *testing.T) {
	for name, run := range map[string]struct {
		evs []contract.Event
		w   Window
	}{
		"own":     {aRun(), Window{From: t0, To: t0 + 600000, Bucket: "5m", Step: 5 * time.Minute, CoversFrom: t0 - 60000}},
		"gateway": {aGatewayRun(), Window{From: t0, To: t0 + 60000, Bucket: "1m", Step: time.Minute, CoversFrom: t0, Gateway: true}},
	} {
		whole := newMemStore()
		whole.commit(run.evs)
		want := whole.query(t, run.w, false)
		if got := whole.query(t, run.w, true); !reflect.DeepEqual(got, want) {
			t.Errorf("%s: from hour rows %+v, want as from minute rows %+v", name, got, want)
		}
		rng := rand.New(rand.NewPCG(3, 4))
		for split := range 20 {
			s := newMemStore()
			for evs := run.evs; len(evs) > 0; {
				n := 1 + rng.IntN(len(evs))
				if split == 0 {
					n = 1 // one event a commit
				}
				s.commit(evs[:n])
				evs = evs[n:]
			}
			if got := s.query(t, run.w, false); !reflect.DeepEqual(got, want) {
				t.Fatalf("%s, split %d: %+v, want as in one commit %+v", name, split, got, want)
			}
			if !reflect.DeepEqual(s.open, whole.open) {
				t.Fatalf("%s, split %d: open entries %+v, want as in one commit %+v", name, split, s.open, whole.open)
			}
		}
	}
}

func TestAWindowCountsItsWholeMinutesFromTheKeptHistory(t *testing.T) {
	s := newMemStore()
	s.commit(script(
		[3]any{-1, "lease.requested", req("a", "ios")},            // the minute before From
		[3]any{0, "lease.requested", req("b", "ios")},             // From
		[3]any{119999, "lease.requested", req("c", "ios")},        // the last ms of the second minute
		[3]any{180000, "lease.requested", req("d", "ios")},        // To
		[3]any{120000, "lease.granted", grant("a", "la", "warm")}, // wait 120001, in the third minute
	))
	w := Window{From: t0, To: t0 + 180000, Bucket: "1m", Step: time.Minute, CoversFrom: t0 - 60000}
	got := s.query(t, w, false)
	if got.Totals.Requests != 2 || got.Percentiles.Wait != pc(120001, 120001, 120001, 1) {
		t.Errorf("totals %+v wait %+v: want b and c, and a's wait", got.Totals, got.Percentiles.Wait)
	}
	if want := []contract.UsagePoint{{At: t0, Requests: 1}, {At: t0 + 60000, Requests: 1}, {At: t0 + 120000, Granted: 1}}; !reflect.DeepEqual(got.Series, want) {
		t.Errorf("series = %+v, want %+v", got.Series, want)
	}

	// A history kept from the second minute: partial, and the first
	// minute is not counted.
	w.CoversFrom = t0 + 60000
	got = s.query(t, w, false)
	if !got.Partial || got.CoversFrom != t0+60000 || got.Totals.Requests != 1 {
		t.Errorf("partial %v coversFrom %d requests %d, want true, %d and c only", got.Partial, got.CoversFrom, got.Totals.Requests, t0+60000)
	}
}

func TestADeltaReadsBackAsWritten(t *testing.T) {
	ds := []Delta{
		{Requests: 1},
		{Requests: -1},
		{Granted: "warm", Wait: 1200, Has: HasWait},
		{Granted: "provisioned", Wait: 0, Has: HasWait | HasToDevice},
		{Granted: "cloned"}, // a source this build does not name
		{Rejected: "no-wait"},
		{Cancelled: true},
		{TimedOut: true},
		{Hold: 86_400_000, Turnaround: -5, Has: HasHold | HasTurnaround}, // a clock that stepped back
	}
	var b []byte
	for _, d := range ds {
		b = AppendDelta(b, d)
	}
	got, err := Deltas(b)
	if err != nil || !reflect.DeepEqual(got, ds) {
		t.Fatalf("Deltas = %+v, %v; want %+v", got, err, ds)
	}
	for n := 1; n < len(b); n++ {
		if got, err := Deltas(b[:n]); err == nil && len(got) == len(ds) {
			t.Fatalf("%d of %d bytes read back as every delta", n, len(b))
		}
	}
	if _, err := Deltas([]byte{0xff, 0x7f}); err == nil {
		t.Error("flags this build does not know read as a delta")
	}
	q := NewQuery(Window{From: t0, To: t0 + 60000})
	if err := q.AddHour(t0, "", "ios", []byte{60, 0}); err == nil {
		t.Error("a chunk 60 minutes into its hour was taken")
	}
}

// A worker that bounces a request the gateway forwarded (no room after
// all, refused no-wait) has not refused anyone: the gateway asks again,
// and its own request is the one counted, once, however it ends. What a
// worker's own agents ask of it is not the gateway's to count.
func TestABounceOfAForwardedRequestIsNoRequestAndNoRefusal(t *testing.T) {
	s := newMemStore()
	s.commit(script(
		[3]any{0, "lease.requested", req("g1", "ios")},
		[3]any{100, "lease.requested", fwd("w1", "r1", "ios")},
		[3]any{150, "lease.rejected", relayed("w1", reject("r1", "ios", "no-wait"))}, // a bounce
		[3]any{200, "lease.requested", fwd("w2", "r1", "ios")},
		[3]any{300, "request.dispatched", dispatch("g1", "w2")},
		[3]any{900, "lease.granted", relayed("w2", grant("r1", "l1", "booted"))},
		[3]any{900, "grant.recorded", recorded("g1", "w2", "l1", "booted", "ios", 900, 900)},
		[3]any{1000, "lease.requested", relayed("w1", req("r2", "ios"))}, // the worker's own agent
		[3]any{1000, "lease.rejected", relayed("w1", reject("r2", "ios", "no-wait"))},
	))
	got := s.query(t, Window{From: t0, To: t0 + 60000, Bucket: "1m", Step: time.Minute, CoversFrom: t0, Gateway: true}, false)
	want := contract.UsageTotals{Requests: 1, Granted: map[string]int{"booted": 1}, Rejected: map[string]int{}}
	if !reflect.DeepEqual(got.Totals, want) {
		t.Errorf("totals = %+v, want %+v: g1 once, granted on w2, and nothing of the worker's own agent", got.Totals, want)
	}
	if w1, ok := got.ByWorker["w1"]; ok {
		t.Errorf("byWorker.w1 = %+v, want no figures: the bounce is not w1's", w1)
	}
}

// On a gateway a worker's relayed events count for nothing but the end of
// a lease the gateway recorded: a worker that relays requests, grants and
// refusals of its own making, under the gateway's requester prefix or not,
// moves no figure.
func TestAWorkersRelayedLeaseEventsAddNothingToAGatewaysFigures(t *testing.T) {
	s := newMemStore()
	var rows [][3]any
	rows = append(rows, [3]any{0, "lease.requested", req("g1", "ios")}, [3]any{10, "lease.requested", fwd("w1", "r1", "ios")},
		[3]any{20, "request.dispatched", dispatch("g1", "w1")})
	for i := range 50 {
		id := fmt.Sprintf("fake_%d", i)
		rows = append(rows, [3]any{30 + i, "lease.requested", fwd("w1", id, "ios")},
			[3]any{100 + i, "lease.granted", relayed("w1", grant(id, id, "warm"))},
			[3]any{200 + i, "lease.rejected", relayed("w1", reject(id, "ios", "boot-failed"))})
	}
	rows = append(rows, [3]any{500, "lease.released", relayed("w1", end("fake_1"))})
	s.commit(script(rows...))
	got := s.query(t, Window{From: t0, To: t0 + 60000, Bucket: "1m", Step: time.Minute, CoversFrom: t0, Gateway: true}, false)
	if len(got.Totals.Granted) != 0 || len(got.Totals.Rejected) != 0 || got.Percentiles.Wait.Count != 0 || got.Percentiles.Hold.Count != 0 {
		t.Errorf("after 50 fake requests, grants and refusals relayed: granted %v, refused %v, waits %d, holds %d; want nothing counted",
			got.Totals.Granted, got.Totals.Rejected, got.Percentiles.Wait.Count, got.Percentiles.Hold.Count)
	}
	if got.Totals.Requests != 1 || got.ByWorker["w1"].Totals.Requests != 1 {
		t.Errorf("requests = %d (w1's %d), want the one the gateway dispatched to w1", got.Totals.Requests, got.ByWorker["w1"].Totals.Requests)
	}
}

// A lease's end that a worker stamps before the gateway recorded its
// grant, and before its request (a clock that stepped back, or a worker
// that lies), is a hold and a turnaround of nothing, never negative ones
// that would take from the gateway's figures.
func TestAnEndBeforeItsGrantIsNoNegativeHold(t *testing.T) {
	s := newMemStore()
	s.commit(script(
		[3]any{0, "lease.requested", req("g1", "ios")},
		[3]any{100, "request.dispatched", dispatch("g1", "w1")},
		[3]any{5000, "grant.recorded", recorded("g1", "w1", "l1", "warm", "ios", 5000, 5000)},
		[3]any{-1000, "lease.released", relayed("w1", end("l1"))},
	))
	got := s.query(t, Window{From: t0 - 60000, To: t0 + 60000, Bucket: "1m", Step: time.Minute, CoversFrom: t0 - 60000, Gateway: true}, false)
	if want := pc(0, 0, 0, 1); got.Percentiles.Hold != want || got.Percentiles.Turnaround != want {
		t.Errorf("hold %+v, turnaround %+v of a lease ended before its grant, want %+v for both", got.Percentiles.Hold, got.Percentiles.Turnaround, want)
	}
}
