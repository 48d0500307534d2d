package metrics

import (
	"encoding/json"
	"math"
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"

	"github.com/simlock/simlock/internal/contract"
)

// ev makes an event as the bus publishes it.
func ev(name string, ts int64, payload map[string]any) contract.Event {
	b, _ := json.Marshal(payload)
	return contract.Event{Event: name, Timestamp: ts, Payload: b}
}

func spec(platform string) map[string]any { return map[string]any{"platform": platform} }

// histogram reads one histogram series' count and sum.
func histogram(t *testing.T, c prometheus.Collector) (count uint64, sum float64) {
	t.Helper()
	ch := make(chan prometheus.Metric, 1)
	c.Collect(ch)
	var m dto.Metric
	if err := (<-ch).Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetHistogram().GetSampleCount(), m.GetHistogram().GetSampleSum()
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

// Each counter moves on its own event, by the labels its payload gives,
// and the histograms split a grant's time into its wait and its device's
// start.
func TestFoldCountsEachFactOnItsEvent(t *testing.T) {
	m := New(Options{Version: "1.0", Mode: "worker"})
	// A request served by a new device: 300 ms to create it, 200 ms to
	// boot it, granted 1500 ms after it arrived.
	m.Fold(ev(contract.EvLeaseRequested, 1000, map[string]any{"requestId": "req_1", "requestSpec": spec("ios")}))
	m.Fold(ev(contract.EvDeviceProvisioned, 2000, map[string]any{"deviceId": "dev_1", "duration": 300}))
	m.Fold(ev(contract.EvDeviceReady, 2500, map[string]any{"deviceId": "dev_1", "bootDuration": 200}))
	m.Fold(ev(contract.EvLeaseGranted, 2500, map[string]any{"requestId": "req_1", "leaseId": "lse_1", "deviceId": "dev_1", "source": "provisioned"}))
	if got := testutil.ToFloat64(m.grants.WithLabelValues("ios", "provisioned")); got != 1 {
		t.Errorf("grants{ios,provisioned} = %v after lease.granted, want 1", got)
	}
	if n, sum := histogram(t, m.timeToDevice); n != 1 || !near(sum, 1.5) {
		t.Errorf("time to device: %d samples summing %v s, want 1 of 1.5 s (arrival to grant)", n, sum)
	}
	if n, sum := histogram(t, m.queueWait.WithLabelValues("ios", "provisioned").(prometheus.Histogram)); n != 1 || !near(sum, 1.0) {
		t.Errorf("queue wait{ios,provisioned}: %d samples summing %v s, want 1 of 1.0 s (1.5 s less the 0.5 s start)", n, sum)
	}

	// A warm grant waited its whole time.
	m.Fold(ev(contract.EvLeaseRequested, 5000, map[string]any{"requestId": "req_2", "requestSpec": spec("android")}))
	m.Fold(ev(contract.EvLeaseGranted, 5250, map[string]any{"requestId": "req_2", "leaseId": "lse_2", "deviceId": "dev_2", "source": "warm"}))
	if n, sum := histogram(t, m.queueWait.WithLabelValues("android", "warm").(prometheus.Histogram)); n != 1 || !near(sum, 0.25) {
		t.Errorf("queue wait{android,warm}: %d samples summing %v, want 1 of 0.25 s", n, sum)
	}

	// Ends, by the platform of their grant and their reason.
	m.Fold(ev(contract.EvLeaseReleased, 6000, map[string]any{"leaseId": "lse_1", "deviceId": "dev_1", "reason": "explicit"}))
	m.Fold(ev(contract.EvLeaseExpired, 6000, map[string]any{"leaseId": "lse_2", "deviceId": "dev_2"}))
	if got := testutil.ToFloat64(m.ends.WithLabelValues("ios", "explicit")); got != 1 {
		t.Errorf("lease ends{ios,explicit} = %v, want 1", got)
	}
	if got := testutil.ToFloat64(m.ends.WithLabelValues("android", "expired")); got != 1 {
		t.Errorf("lease ends{android,expired} = %v, want 1", got)
	}

	// A refusal, by the platform asked and its code.
	m.Fold(ev(contract.EvLeaseRequested, 7000, map[string]any{"requestId": "req_3", "requestSpec": spec("ios")}))
	m.Fold(ev(contract.EvLeaseRejected, 7100, map[string]any{"requestId": "req_3", "requestSpec": spec("ios"), "reason": "no-wait", "code": "NO_CAPACITY"}))
	if got := testutil.ToFloat64(m.rejections.WithLabelValues("ios", "NO_CAPACITY")); got != 1 {
		t.Errorf("rejections{ios,NO_CAPACITY} = %v, want 1", got)
	}

	// Installs running.
	m.Fold(ev(contract.EvComponentInstallStarted, 8000, map[string]any{"platform": "ios", "component": "26.4"}))
	if got := m.downloads(); got != 1 {
		t.Errorf("downloads active = %d after install-started, want 1", got)
	}
	m.Fold(ev(contract.EvComponentInstallFailed, 8000, map[string]any{"platform": "android", "component": "37", "code": "INSUFFICIENT_DISK_SPACE"}))
	if got := m.downloads(); got != 1 {
		t.Errorf("downloads active = %d after a failure of an install that never started, want 1", got)
	}
	m.Fold(ev(contract.EvComponentInstalled, 9000, map[string]any{"platform": "ios", "component": "26.4"}))
	if got := m.downloads(); got != 0 {
		t.Errorf("downloads active = %d after installed, want 0", got)
	}

	if open := m.openEntries(); open != 0 {
		t.Errorf("the fold keeps %d entries with every request and lease ended, want 0", open)
	}
}

// A gateway counts its own grant.recorded and request.dispatched; of a
// worker's relayed events only the end of a lease it granted, and a value
// outside its closed set is "other".
func TestFoldOnAGatewayCountsItsOwnFactsAndBoundsClaims(t *testing.T) {
	m := New(Options{Version: "1.0", Mode: "gateway"})
	m.Fold(ev(contract.EvLeaseRequested, 1000, map[string]any{"requestId": "req_1", "requestSpec": spec("ios")}))
	m.Fold(ev(contract.EvRequestDispatched, 1100, map[string]any{"requestId": "req_1", "workerId": "ins_w1", "platform": "ios", "queuedMs": 100}))
	// The worker's own grant, relayed: not the gateway's.
	m.Fold(ev(contract.EvLeaseGranted, 1400, map[string]any{"requestId": "req_w", "leaseId": "lse_w1", "deviceId": "dev_w", "source": "warm", "workerId": "ins_w1"}))
	m.Fold(ev(contract.EvGrantRecorded, 1400, map[string]any{"requestId": "req_1", "workerId": "ins_w1", "workerLeaseId": "lse_w1",
		"leaseId": "ins_w1.lse_w1", "platform": "ios", "source": "booted", "waitMs": 400}))
	if got := testutil.ToFloat64(m.grants.WithLabelValues("ios", "booted")); got != 1 {
		t.Errorf("grants{ios,booted} = %v, want 1 (the grant.recorded)", got)
	}
	if got := testutil.CollectAndCount(m.grants); got != 1 {
		t.Errorf("grants has %d series, want 1: a relayed lease.granted counts nothing", got)
	}
	if got := testutil.ToFloat64(m.dispatches.WithLabelValues("ins_w1", "granted")); got != 1 {
		t.Errorf("dispatch{ins_w1,granted} = %v, want 1", got)
	}
	if n, sum := histogram(t, m.queueWait.WithLabelValues("ios", "booted").(prometheus.Histogram)); n != 1 || !near(sum, 0.1) {
		t.Errorf("queue wait on a gateway: %d samples summing %v, want 1 of 0.1 s (arrival to dispatch)", n, sum)
	}
	if n, sum := histogram(t, m.timeToDevice); n != 1 || !near(sum, 0.4) {
		t.Errorf("time to device on a gateway: %d samples summing %v, want 1 of 0.4 s (waitMs)", n, sum)
	}

	// A relayed end of a lease the gateway never granted counts nothing;
	// of the one it granted, it counts.
	m.Fold(ev(contract.EvLeaseReleased, 2000, map[string]any{"leaseId": "lse_other", "reason": "explicit", "workerId": "ins_w1"}))
	if got := testutil.CollectAndCount(m.ends); got != 0 {
		t.Errorf("a relayed end of a lease the gateway did not grant made %d series, want 0", got)
	}
	m.Fold(ev(contract.EvLeaseReleased, 2000, map[string]any{"leaseId": "lse_w1", "reason": "device-lost", "workerId": "ins_w1"}))
	if got := testutil.ToFloat64(m.ends.WithLabelValues("ios", "device-lost")); got != 1 {
		t.Errorf("ends{ios,device-lost} = %v, want 1", got)
	}

	// A dispatched request that ended without a lease, by its reason.
	m.Fold(ev(contract.EvLeaseRequested, 3000, map[string]any{"requestId": "req_2", "requestSpec": spec("android")}))
	m.Fold(ev(contract.EvRequestDispatched, 3000, map[string]any{"requestId": "req_2", "workerId": "ins_w2", "queuedMs": 0}))
	m.Fold(ev(contract.EvLeaseRejected, 3500, map[string]any{"requestId": "req_2", "requestSpec": spec("android"), "reason": "worker-unreachable", "code": "WORKER_UNREACHABLE"}))
	if got := testutil.ToFloat64(m.dispatches.WithLabelValues("ins_w2", "worker-unreachable")); got != 1 {
		t.Errorf("dispatch{ins_w2,worker-unreachable} = %v, want 1", got)
	}

	// Claims outside their sets: one "other" series each, however many.
	for i, src := range []string{"evil-1", "evil-2", "evil-3"} {
		id := string(rune('a' + i))
		m.Fold(ev(contract.EvGrantRecorded, 4000, map[string]any{"requestId": "req_x" + id, "workerId": "ins_w1", "workerLeaseId": "lse_x" + id,
			"platform": "plan9-" + id, "source": src, "waitMs": 1}))
		m.Fold(ev(contract.EvLeaseRejected, 4000, map[string]any{"requestId": "req_y" + id, "requestSpec": spec("x" + id), "code": "MADE_UP_" + id}))
	}
	if got := testutil.ToFloat64(m.grants.WithLabelValues("other", "other")); got != 3 {
		t.Errorf("grants{other,other} = %v, want 3", got)
	}
	if got := testutil.ToFloat64(m.rejections.WithLabelValues("other", "other")); got != 3 {
		t.Errorf("rejections{other,other} = %v, want 3", got)
	}
}

// The gauges are the state Read returns at the scrape, the oldest wait
// measured on the scrape's clock.
func TestGaugesReadTheStateAtTheScrape(t *testing.T) {
	now := time.UnixMilli(100_000)
	state := Snapshot{Platforms: []Platform{
		{Platform: contract.PlatformIOS, QueueDepth: 2, OldestQueuedAt: 97_500, Leases: 3, Busy: 3, Free: 1,
			Devices: map[contract.DeviceState]int{contract.DeviceLeased: 3, contract.DeviceQuarantined: 1}},
		{Platform: contract.PlatformAndroid},
	}}
	m := New(Options{Version: "1.0", Mode: "worker", Now: func() time.Time { return now }, Read: func() Snapshot { return state }})
	want := map[string]float64{
		`simlock_queue_depth{platform="ios"}`:                     2,
		`simlock_queue_oldest_wait_seconds{platform="ios"}`:       2.5,
		`simlock_queue_oldest_wait_seconds{platform="android"}`:   0,
		`simlock_leases_active{platform="ios"}`:                   3,
		`simlock_devices{platform="ios",state="quarantined"}`:     1,
		`simlock_devices{platform="ios",state="ready"}`:           0,
		`simlock_capacity_slots{platform="ios",state="busy"}`:     3,
		`simlock_capacity_slots{platform="ios",state="free"}`:     1,
		`simlock_capacity_slots{platform="android",state="free"}`: 0,
	}
	got := samples(t, m)
	for k, v := range want {
		if g, ok := got[k]; !ok || g != v {
			t.Errorf("%s = %v (present %v), want %v", k, g, ok, v)
		}
	}
	if _, ok := got[`simlock_workers{connection="connected"}`]; ok {
		t.Errorf("a worker exports simlock_workers")
	}

	state = Snapshot{Platforms: []Platform{{Platform: contract.PlatformIOS, Leases: 4}}, Workers: map[contract.WorkerConnection]int{contract.WorkerConnected: 2}}
	got = samples(t, m)
	if got[`simlock_workers{connection="connected"}`] != 2 || got[`simlock_workers{connection="disconnected"}`] != 0 {
		t.Errorf("workers: %v, want connected 2 and disconnected 0", got)
	}
	if got[`simlock_leases_active{platform="ios"}`] != 4 {
		t.Errorf("a gateway's leases_active{ios} = %v, want the 4 its workers report", got[`simlock_leases_active{platform="ios"}`])
	}
}

// A gateway replica exports who leads: 1 or 0, the term, and since when
// in Unix seconds; no other daemon exports them.
func TestAReplicaExportsItsLeadership(t *testing.T) {
	state := Snapshot{}
	m := New(Options{Version: "1.0", Mode: "gateway", Read: func() Snapshot { return state }})
	if got := samples(t, m); hasKey(got, "simlock_gateway_leader{}") {
		t.Errorf("a gateway that is no replica exports simlock_gateway_leader: %v", got)
	}
	state.Replica = &Replica{Leader: true, Term: 3, Since: 1_700_000_000_500}
	got := samples(t, m)
	if got["simlock_gateway_leader{}"] != 1 || got["simlock_gateway_term{}"] != 3 || got["simlock_gateway_leader_since_seconds{}"] != 1_700_000_000.5 {
		t.Errorf("leading: %v; want leader 1, term 3, since 1700000000.5", got)
	}
	state.Replica = &Replica{Term: 4, Since: 1_700_000_100_000}
	got = samples(t, m)
	if v, ok := got["simlock_gateway_leader{}"]; !ok || v != 0 || got["simlock_gateway_term{}"] != 4 {
		t.Errorf("following: %v; want leader 0 (present), term 4", got)
	}
}

func hasKey(m map[string]float64, k string) bool {
	_, ok := m[k]
	return ok
}

// A scrape's cost does not grow with history: after ten or ten thousand
// leases granted and ended, it reads the state once and gathers the same
// series, and the fold keeps nothing of the ended leases.
func TestAScrapeCostsTheSameWhateverTheHistory(t *testing.T) {
	series := func(leases int) (n, reads, open int) {
		m := New(Options{Version: "1.0", Mode: "worker", Read: func() Snapshot {
			reads++
			return Snapshot{Platforms: []Platform{{Platform: contract.PlatformIOS}, {Platform: contract.PlatformAndroid}}}
		}})
		for i := range leases {
			id := strconv.Itoa(i)
			m.Fold(ev(contract.EvLeaseRequested, int64(i), map[string]any{"requestId": "req" + id, "requestSpec": spec("ios")}))
			m.Fold(ev(contract.EvLeaseGranted, int64(i), map[string]any{"requestId": "req" + id, "leaseId": "lse" + id, "deviceId": "dev", "source": "warm"}))
			m.Fold(ev(contract.EvLeaseReleased, int64(i), map[string]any{"leaseId": "lse" + id, "reason": "explicit"}))
		}
		mfs, err := m.reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			if len(mf.GetName()) > 8 && mf.GetName()[:8] == "simlock_" {
				n += len(mf.GetMetric())
			}
		}
		return n, reads, m.openEntries()
	}
	n10, reads10, open10 := series(10)
	n10k, reads10k, open10k := series(10_000)
	if n10 != n10k {
		t.Errorf("a scrape gathers %d simlock series after 10 leases and %d after 10000, want the same", n10, n10k)
	}
	if reads10 != 1 || reads10k != 1 {
		t.Errorf("a scrape read the state %d and %d times, want once", reads10, reads10k)
	}
	if open10 != 0 || open10k != 0 {
		t.Errorf("the fold keeps %d and %d entries after every lease ended, want none", open10, open10k)
	}
}

// samples gathers m as "name{labels}" -> value, for gauges.
func samples(t *testing.T, m *Metrics) map[string]float64 {
	t.Helper()
	mfs, err := m.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		for _, mt := range mf.GetMetric() {
			if mt.GetGauge() == nil {
				continue
			}
			k := mf.GetName() + "{"
			for i, l := range mt.GetLabel() {
				if i > 0 {
					k += ","
				}
				k += l.GetName() + `="` + l.GetValue() + `"`
			}
			out[k+"}"] = mt.GetGauge().GetValue()
		}
	}
	return out
}

func TestOneOfKeepsOnlyTheSet(t *testing.T) {
	for _, c := range []struct{ v, want string }{
		{"ios", "ios"}, {"android", "android"}, {"", other}, {"IOS", other}, {"ios ", other}, {"windows", other},
	} {
		if got := platformLabel(c.v); got != c.want {
			t.Errorf("platformLabel(%q) = %q, want %q", c.v, got, c.want)
		}
	}
	if got := oneOf("warm", grantSources); got != "warm" {
		t.Errorf("oneOf(warm) = %q", got)
	}
	if got := oneOf("cold", grantSources); got != other {
		t.Errorf("oneOf(cold) = %q", got)
	}
}

// downloads is the installs the fold counts running.
func (m *Metrics) downloads() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.f.downloads
}

// openEntries is how many things the fold remembers.
func (m *Metrics) openEntries() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.f.requests) + len(m.f.leases) + len(m.f.starts) + len(m.f.dispatched) + len(m.f.installs)
}

// A gateway that starts again counts a worker's relayed end of a lease it
// granted before (SeedGrant), by the platform its grant record keeps; the
// same lease id on another worker is another lease, and counts nothing.
func TestAGatewayCountsTheEndOfALeaseGrantedBeforeItStarted(t *testing.T) {
	m := New(Options{Version: "1.0", Mode: "gateway"})
	m.SeedGrant("ins_w1", "lse_w1", contract.PlatformAndroid)
	m.Fold(ev(contract.EvLeaseExpired, 2000, map[string]any{"leaseId": "lse_w1", "workerId": "ins_w2"}))
	if got := testutil.CollectAndCount(m.ends); got != 0 {
		t.Errorf("another worker's end of the same lease id made %d series, want 0", got)
	}
	m.Fold(ev(contract.EvLeaseExpired, 2000, map[string]any{"leaseId": "lse_w1", "workerId": "ins_w1"}))
	if got := testutil.ToFloat64(m.ends.WithLabelValues("android", "expired")); got != 1 {
		t.Errorf("ends{android,expired} = %v, want 1", got)
	}
}
