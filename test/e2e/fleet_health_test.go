package e2e

import (
	"strings"
	"testing"
	"time"
)

// healthWorker is a worker joined to f whose health monitor probes and
// recovers quickly (healthHome's settings).
func (f *fleet) healthWorker(label string) *home {
	f.t.Helper()
	w := healthHome(f.t, "gateway.url", f.url, "gateway.token", f.joinSecret(label), "gateway.label", label, "gateway.heartbeatMs", fleetHeartbeat)
	w.startDaemon()
	f.await(label+" connected", 10*time.Second, connected(instanceID(f.t, w)))
	return w
}

// A holder of a gateway lease hears what a holder on the worker hears when
// the device crashes and is booted again, under the gateway's lease id; and
// when the device is lost, lease-lost with device-lost, after which the
// gateway has forgotten the lease and the requester may lease again.
func TestAGatewayLeaseHolderHearsItsDeviceCrashRecoverAndGetLost(t *testing.T) {
	t.Parallel()
	f := newFleet(t)
	w := f.healthWorker("health")

	p, g := f.gw.hold("crash-holder", "ios")
	if !strings.Contains(g.Lease.ID, ".") {
		t.Fatalf("grant through the gateway has lease id %q, want <workerId>.<leaseId>", g.Lease.ID)
	}
	inject(t, w, g.Device.ID, "crash")
	l := p.waitLine(p.stderr, "device-unhealthy", func(s string) bool { return strings.Contains(s, `"push":"device-unhealthy"`) })
	if !strings.Contains(l.text, `"leaseId":"`+g.Lease.ID+`"`) {
		t.Errorf("device-unhealthy through the gateway = %s, want the gateway lease id %s", l.text, g.Lease.ID)
	}
	l = p.waitLine(p.stderr, "device-recovered", func(s string) bool { return strings.Contains(s, `"push":"device-recovered"`) })
	if !strings.Contains(l.text, `"leaseId":"`+g.Lease.ID+`"`) || !strings.Contains(l.text, `"attempts":1`) {
		t.Errorf("device-recovered through the gateway = %s, want the gateway lease id %s and attempts 1", l.text, g.Lease.ID)
	}
	if _, ok := f.gw.leases()[g.Lease.ID]; !ok || !p.running() {
		t.Errorf("after the recovery the gateway lease or its holder is gone\n%s", p.dump())
	}

	q, g2 := f.gw.hold("lost-holder", "android")
	inject(t, w, g2.Device.ID, "vanish")
	l = q.waitLine(q.stderr, "lease-lost", func(s string) bool { return strings.Contains(s, `"push":"lease-lost"`) })
	if !strings.Contains(l.text, `"reason":"device-lost"`) || !strings.Contains(l.text, `"leaseId":"`+g2.Lease.ID+`"`) {
		t.Errorf("lease-lost through the gateway = %s, want reason device-lost under %s", l.text, g2.Lease.ID)
	}
	if code := q.wait(); code != 14 {
		t.Errorf("the holder of the vanished device exited %d, want 14", code)
	}
	if r := f.gw.run("lease", "--platform", "android", "--agent-id", "lost-holder", "--detach"); r.code != 0 {
		t.Errorf("the requester whose lease was lost cannot lease again through the gateway\n%s", r)
	}
}
