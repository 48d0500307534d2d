package e2e

import (
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/simlock/simlock/internal/contract"
)

// A worker whose gateway.urls lists an address nothing answers first and
// its gateway second joins the gateway, and says in its readiness which
// one it is connected to.
func TestAWorkerDialsItsGatewayURLsInOrderPastADeadOne(t *testing.T) {
	t.Parallel()
	f := newFleet(t)
	dead := "http://127.0.0.1:" + freePort(t)
	// gateway.url, which gateway.urls replaces, names a dead address too.
	w := f.worker("worker-a", 1, "gateway.url", "http://127.0.0.1:"+freePort(t), "gateway.urls", dead+","+f.url, "http.enabled", "true", "http.port", "0")
	id := instanceID(t, w)
	f.await("worker A connected through its second URL", 20*time.Second, connected(id))
	wa := &api{t: t, base: httpURL(t, w)}
	rep := wa.awaitProbe("uplink up", "/readyz?verbose", http.StatusOK, 10*time.Second)
	if c := checksOf(rep)[contract.HealthUplink]; !c.OK || c.Detail != "connected to "+f.url {
		t.Errorf("the worker's uplink check %+v, want ok, connected to %s", c, f.url)
	}
}

// An agent whose SIMLOCK_URL lists an address nothing answers first and
// the gateway second leases, holds (renewing) and releases through the
// gateway.
func TestARemoteProfileWithAURLListLeasesPastADeadReplica(t *testing.T) {
	t.Parallel()
	f := newFleet(t)
	w := f.worker("remote-list-w", 1)
	f.await("the worker connected", 10*time.Second, connected(instanceID(t, w)))
	_, agent := f.gw.token("agent", "remote-list-cli")
	rem := remoteHome(t, "http://127.0.0.1:"+freePort(t)+","+f.url, agent)

	p := rem.start("lease", "--platform", "ios", "--ttl", "10s")
	g := parseGrant(t, p.waitLine(p.stdout, "the grant", func(s string) bool { return strings.Contains(s, `"lease"`) }).text)
	if g.Lease.ID == "" {
		t.Fatalf("the grant over HTTP through a URL list: %+v", g)
	}
	leaseRenewedAfter(t, rem, g.Lease.ID, time.UnixMilli(g.Lease.GrantedAt), 10*time.Second)
	p.signal(syscall.SIGINT)
	if code := p.wait(); code != 0 {
		t.Fatalf("the holder exited %d on SIGINT, want 0\n%s", code, p.dump())
	}
	if r := rem.run("list", "--leases"); strings.Contains(r.stdout, g.Lease.ID) {
		t.Fatalf("lease %s is still listed after SIGINT: %s", g.Lease.ID, r)
	}
}
