package e2e

import (
	"net/http"
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
