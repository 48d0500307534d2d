package e2e

import (
	"strings"
	"testing"
	"time"
)

// request.dispatched is recorded when the worker takes the request on (its
// first progress push), not when a long start ends: while the worker still
// boots the device, the gateway's log already has it, once, naming the
// worker, and no grant yet; the grant adds no second one.
func TestRequestDispatchedIsRecordedAtTheWorkersFirstProgressAndOnlyOnce(t *testing.T) {
	t.Parallel()
	f := newFleet(t)
	w := newHome(t, "capacity.strategy", "fixed", "capacity.config.maxRunning", "2",
		"gateway.url", f.url, "gateway.token", f.joinSecret("slow"), "gateway.label", "slow", "gateway.heartbeatMs", fleetHeartbeat,
		"drivers.demo.provisionMs", "60", "drivers.demo.bootMs", "4000", "drivers.demo.reclaimMs", "60")
	w.startDaemon()
	id := instanceID(t, w)
	f.await("the slow worker connected", 10*time.Second, connected(id))

	p := f.gw.start("lease", "--platform", "ios", "--agent-id", "dispatched", "--progress", "json")
	p.waitLine(p.stderr, "the worker's booting step", func(s string) bool { return strings.Contains(s, `"stage":"booting"`) })
	count := func() (dispatched int, payload event, granted bool) {
		for _, ev := range events(t, f.gw) {
			switch {
			case ev.Event == "request.dispatched" && ev.str("requesterId") == "dispatched":
				dispatched++
				payload = ev
			case ev.Event == "lease.granted" && strings.HasSuffix(ev.str("requesterId"), ":dispatched"):
				granted = true
			}
		}
		return
	}
	n, ev, granted := count()
	if granted {
		t.Fatal("the worker granted before the check: its bootMs is too short for this test")
	}
	if n != 1 {
		t.Fatalf("while the worker boots the device, the gateway recorded request.dispatched %d times, want once", n)
	}
	if ev.str("workerId") != id || ev.str("platform") != "ios" || ev.str("reason") != "free-capacity" || ev.str("requestId") == "" {
		t.Errorf("request.dispatched = %+v, want worker %s, platform ios, reason free-capacity and the request id", ev, id)
	}
	if q, ok := ev.Payload["queuedMs"].(float64); !ok || q < 0 {
		t.Errorf("request.dispatched queuedMs = %v, want a number of ms >= 0", ev.Payload["queuedMs"])
	}
	l := p.waitLine(p.stdout, "the grant", func(string) bool { return true })
	g := parseGrant(t, l.text)
	if n, _, _ := count(); n != 1 {
		t.Errorf("after the grant of %s the gateway has request.dispatched %d times, want once", g.Lease.ID, n)
	}
}

// A lease request the gateway gave up on (gateway.leaseRequestTimeoutMs)
// fails WORKER_UNREACHABLE; the worker, which went on, grants it a moment
// later to nobody: the gateway gives that lease back instead of listing
// it, and the requester may lease again (not REQUESTER_ALREADY_LEASED).
func TestALeaseGrantedAfterTheGatewayGaveUpIsGivenBack(t *testing.T) {
	t.Parallel()
	f := newFleet(t, "gateway.leaseRequestTimeoutMs", "1000")
	w := newHome(t, "capacity.strategy", "fixed", "capacity.config.maxRunning", "2",
		"gateway.url", f.url, "gateway.token", f.joinSecret("late"), "gateway.label", "late", "gateway.heartbeatMs", fleetHeartbeat,
		"drivers.demo.provisionMs", "2500", "drivers.demo.bootMs", "60", "drivers.demo.reclaimMs", "60")
	w.startDaemon()
	f.await("the late worker connected", 10*time.Second, connected(instanceID(t, w)))
	onWorker := w.follow()

	r := f.gw.run("lease", "--platform", "ios", "--agent-id", "late", "--detach")
	expectFailure(t, r, 1, "WORKER_UNREACHABLE")
	granted := onWorker.next("the worker's late grant", func(ev event) bool {
		return ev.Event == "lease.granted" && strings.HasSuffix(ev.str("requester"), ":late")
	})
	released := onWorker.next("the late grant given back", isEvent("lease.released", "leaseId", granted.str("leaseId")))
	if released.str("reason") != "explicit" {
		t.Errorf("the late grant ended %q on the worker, want explicit (given back by the gateway)", released.str("reason"))
	}
	for id := range f.gw.leases() {
		if strings.HasSuffix(id, "."+granted.str("leaseId")) {
			t.Errorf("the gateway lists %s, a lease nobody holds", id)
		}
	}
	// Once the given-back device is clean, it serves at once, within the
	// gateway's bound.
	onWorker.next("the device cleaned", isEvent("device.reclaimed", "deviceId", granted.str("deviceId")))
	if r := f.gw.run("lease", "--platform", "ios", "--agent-id", "late", "--detach"); r.code != 0 {
		t.Errorf("the requester cannot lease again through the gateway\n%s", r)
	}
}
