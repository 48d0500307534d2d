package e2e

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/simlock/simlock/internal/contract"
)

// probe is GET path (a probe: no token) as status and report.
func (a *api) probe(path string) (int, contract.HealthReport) {
	a.t.Helper()
	r := a.do("GET", path, "", "")
	var rep contract.HealthReport
	if err := json.Unmarshal([]byte(r.raw), &rep); err != nil {
		a.t.Fatalf("GET %s answered %d %q, not a health report", path, r.status, r.raw)
	}
	return r.status, rep
}

// awaitProbe polls GET path until it answers status, for at most bound.
func (a *api) awaitProbe(what, path string, status int, bound time.Duration) contract.HealthReport {
	a.t.Helper()
	deadline := time.Now().Add(bound)
	for {
		got, rep := a.probe(path)
		if got == status {
			return rep
		}
		if time.Now().After(deadline) {
			a.t.Fatalf("within %s %s did not answer %d (%s): it answers %d %+v", bound, path, status, what, got, rep)
		}
		time.Sleep(pollEvery)
	}
}

// checksOf is a report's checks by name.
func checksOf(rep contract.HealthReport) map[string]contract.HealthCheck {
	m := map[string]contract.HealthCheck{}
	for _, c := range rep.Checks {
		m[c.Name] = c
	}
	return m
}

// A daemon on its own is live and ready once started, with no token; the
// verbose answers list the checks, and a worker with no gateway has no
// uplink check.
func TestADaemonIsLiveAndReadyAfterStartupAndVerboseListsTheChecks(t *testing.T) {
	t.Parallel()
	_, a := httpHome(t)
	status, rep := a.probe("/readyz")
	if status != http.StatusOK || !rep.OK || rep.Checks != nil {
		t.Errorf("GET /readyz = %d %+v, want 200 {ok:true} without checks", status, rep)
	}
	status, rep = a.probe("/readyz?verbose")
	cs := checksOf(rep)
	if status != http.StatusOK || len(rep.Checks) != 2 || !cs[contract.HealthStartup].OK || !cs[contract.HealthStore].OK {
		t.Errorf("GET /readyz?verbose = %d %+v, want 200 with startup and store passed, no uplink", status, rep)
	}
	status, rep = a.probe("/livez?verbose")
	if status != http.StatusOK || len(rep.Checks) != 1 || rep.Checks[0] != (contract.HealthCheck{Name: contract.HealthServing, OK: true}) {
		t.Errorf("GET /livez?verbose = %d %+v, want 200 with serving passed", status, rep)
	}
}

// A worker whose gateway stops is not ready, saying so in its uplink
// check, while staying live; it is ready again once the gateway is back
// and the uplink up. The gateway is ready while its store answers.
func TestAWorkerIsNotReadyWhileItsUplinkIsDown(t *testing.T) {
	t.Parallel()
	f := newFleet(t)
	gwStatus, gwRep := f.api.probe("/readyz?verbose")
	if gwStatus != http.StatusOK || len(gwRep.Checks) != 2 {
		t.Errorf("the gateway's GET /readyz?verbose = %d %+v, want 200 with startup and store", gwStatus, gwRep)
	}
	w := f.worker("worker-a", 1, "http.enabled", "true", "http.port", "0")
	id := instanceID(t, w)
	f.await("worker A connected", 10*time.Second, connected(id))
	wa := &api{t: t, base: httpURL(t, w)}
	rep := wa.awaitProbe("uplink up", "/readyz?verbose", http.StatusOK, 10*time.Second)
	if c := checksOf(rep)[contract.HealthUplink]; !c.OK || c.Detail != "connected to "+f.url {
		t.Errorf("connected worker's uplink check %+v, want ok, connected to %s", c, f.url)
	}

	if r := f.gw.run("daemon", "stop"); r.code != 0 {
		t.Fatalf("daemon stop on the gateway\n%s", r)
	}
	rep = wa.awaitProbe("gateway stopped", "/readyz?verbose", http.StatusServiceUnavailable, 10*time.Second)
	cs := checksOf(rep)
	if c := cs[contract.HealthUplink]; c.OK || !strings.HasPrefix(c.Detail, "not connected to the gateway since ") {
		t.Errorf("with the gateway stopped, the uplink check is %+v, want failed since a time", c)
	}
	if since := strings.TrimPrefix(cs[contract.HealthUplink].Detail, "not connected to the gateway since "); !validRFC3339(since) {
		t.Errorf("the uplink check's time %q is not RFC 3339", since)
	}
	if !cs[contract.HealthStartup].OK || !cs[contract.HealthStore].OK {
		t.Errorf("with the gateway stopped, the worker's other checks are %+v, want passed", rep.Checks)
	}
	if status, _ := wa.probe("/livez"); status != http.StatusOK {
		t.Errorf("with the gateway stopped, the worker's /livez = %d, want 200", status)
	}

	f.gw.startDaemon()
	wa.awaitProbe("gateway back", "/readyz", http.StatusOK, 15*time.Second)
}

func validRFC3339(s string) bool {
	_, err := time.Parse(time.RFC3339, s)
	return err == nil
}
