package usage

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/simlock/simlock/internal/contract"
)

const t0 = 1_000_000

// script makes the events of a run, seq in order.
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
func relayed(worker string, p m) m {
	p["workerId"] = worker
	return p
}

func TestCompute(t *testing.T) {
	// Worked by hand: waits 1000 (warm), 5000 (provisioned), 3000
	// (booted); holds 10000 and 493000; turnarounds 11000 and 498000.
	evs := script(
		[3]any{-1, "lease.requested", req("r0", "ios")}, // before the window
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
		[3]any{12000, "lease.released", end("l0")}, // granted before the window
		[3]any{400000, "lease.requested", req("r6", "ios")},
		[3]any{403000, "lease.granted", grant("r6", "l6", "booted")},
		[3]any{500000, "lease.expired", end("l2")},
		[3]any{600000, "lease.requested", req("r7", "ios")}, // at To: outside
	)
	got := Compute(evs, Window{From: t0, To: t0 + 600000, Bucket: "5m", Step: 5 * time.Minute, OldestTs: t0 - 1})

	pc := func(p50, p90, p99 int64, n int) contract.Percentiles {
		return contract.Percentiles{P50: p50, P90: p90, P99: p99, Count: n}
	}
	wantAll := contract.UsageFigures{
		Totals: contract.UsageTotals{
			Requests: 6,
			Granted:  map[string]int{"warm": 1, "provisioned": 1, "booted": 1},
			Rejected: map[string]int{"no-wait": 1}, Cancelled: 1, TimedOut: 1,
		},
		Percentiles: contract.UsagePercentiles{
			Wait:         pc(3000, 5000, 5000, 3),
			TimeToDevice: pc(3000, 5000, 5000, 2),
			Hold:         pc(10000, 493000, 493000, 2),
			Turnaround:   pc(11000, 498000, 498000, 2),
		},
	}
	wantIOS := wantAll
	wantIOS.Totals = contract.UsageTotals{
		Requests: 4,
		Granted:  map[string]int{"warm": 1, "provisioned": 1, "booted": 1},
		Rejected: map[string]int{}, Cancelled: 1,
	}
	wantAndroid := contract.UsageFigures{Totals: contract.UsageTotals{
		Requests: 2, Granted: map[string]int{}, Rejected: map[string]int{"no-wait": 1}, TimedOut: 1,
	}}
	wantSeries := []contract.UsagePoint{
		{At: t0, Requests: 5, Granted: 2, Rejected: 3},
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
	if !reflect.DeepEqual(got.Series, wantSeries) {
		t.Errorf("series = %+v, want %+v", got.Series, wantSeries)
	}
	if got.Partial || got.CoversFrom != 0 {
		t.Errorf("partial = %v coversFrom = %d, want false and 0: the log reaches before the window", got.Partial, got.CoversFrom)
	}
	if got.ByWorker != nil {
		t.Errorf("byWorker = %v, want none outside a gateway", got.ByWorker)
	}
}

func TestComputeGateway(t *testing.T) {
	// Both workers use request id r1: the figures keep them apart.
	evs := script(
		[3]any{0, "lease.requested", req("g1", "ios")}, // the gateway's own: not counted
		[3]any{0, "lease.requested", relayed("w1", req("r1", "ios"))},
		[3]any{1000, "lease.requested", relayed("w2", req("r1", "android"))},
		[3]any{2000, "lease.granted", relayed("w1", grant("r1", "l1", "warm"))},
		[3]any{5000, "lease.granted", relayed("w2", grant("r1", "l1", "provisioned"))},
		[3]any{6000, "lease.released", relayed("w1", end("l1"))},
	)
	got := Compute(evs, Window{From: t0, To: t0 + 60000, Bucket: "1m", Step: time.Minute, OldestTs: t0 + 500, Gateway: true})
	if got.Totals.Requests != 2 {
		t.Errorf("totals.requests = %d, want 2 (relayed only)", got.Totals.Requests)
	}
	if want := (contract.Percentiles{P50: 2000, P90: 4000, P99: 4000, Count: 2}); got.Percentiles.Wait != want {
		t.Errorf("wait = %+v, want %+v", got.Percentiles.Wait, want)
	}
	if w1 := got.ByWorker["w1"]; w1.Percentiles.Hold != (contract.Percentiles{P50: 4000, P90: 4000, P99: 4000, Count: 1}) {
		t.Errorf("byWorker.w1.hold = %+v, want 4000 once", w1.Percentiles.Hold)
	}
	if w2 := got.ByWorker["w2"]; w2.Percentiles.TimeToDevice.P50 != 4000 || w2.Percentiles.Hold.Count != 0 {
		t.Errorf("byWorker.w2 = %+v, want time to device 4000 and no hold", w2.Percentiles)
	}
	if !got.Partial || got.CoversFrom != t0+500 {
		t.Errorf("partial = %v coversFrom = %d, want true and %d", got.Partial, got.CoversFrom, t0+500)
	}
}
