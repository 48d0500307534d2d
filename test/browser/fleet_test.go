package browser

import (
	"encoding/json"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/simlock/simlock/internal/bintest"
)

// A gateway and the workers joined to it, their demo steps quick: a, b
// and their ids are newFleet's two.
type fleet struct {
	gw      *home
	a, b    *home
	idA     string
	idB     string
	console string
}

// newFleet starts a gateway with worker-a (two running slots) and
// worker-b (three) joined to it.
func newFleet(t *testing.T) *fleet {
	t.Helper()
	f := newGateway(t)
	f.a, f.b = f.worker(t, "worker-a", 2), f.worker(t, "worker-b", 3)
	f.idA, f.idB = instanceID(t, f.a), instanceID(t, f.b)
	return f
}

// newGateway starts a gateway with its HTTP API on and no worker yet.
func newGateway(t *testing.T) *fleet {
	t.Helper()
	port, err := bintest.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	url := "http://127.0.0.1:" + strconv.Itoa(port)
	gw := newHome(t, "mode", "gateway", "http.enabled", "true", "http.port", strconv.Itoa(port), "gateway.heartbeatMs", "500")
	gw.startDaemon()
	return &fleet{gw: gw, console: url}
}

// worker starts a worker joined to the gateway as label, with a join
// token of its own (a join token joins one worker), running at most
// maxRunning devices, its demo steps quick, with settings (key, value
// pairs) of its own on top.
func (f *fleet) worker(t *testing.T, label string, maxRunning int, settings ...string) *home {
	t.Helper()
	_, join := f.gw.token("worker", label)
	w := newHome(t, append([]string{"capacity.strategy", "fixed", "capacity.config.maxRunning", strconv.Itoa(maxRunning),
		"gateway.url", f.console, "gateway.token", join, "gateway.label", label, "gateway.heartbeatMs", "500",
		"drivers.demo.provisionMs", "100", "drivers.demo.bootMs", "100", "drivers.demo.reclaimMs", "100"}, settings...)...)
	w.startDaemon()
	return w
}

// connected reports whether the gateway lists every id connected.
func (f *fleet) connected(t *testing.T, ids ...string) bool {
	t.Helper()
	r := f.gw.must("worker list", "worker", "list", "--json")
	var out struct {
		Workers []struct {
			ID         string `json:"id"`
			Connection string `json:"connection"`
		} `json:"workers"`
	}
	if json.Unmarshal([]byte(r.stdout), &out) != nil {
		t.Fatalf("worker list --json: %s", r)
	}
	up := map[string]bool{}
	for _, w := range out.Workers {
		up[w.ID] = w.Connection == "connected"
	}
	for _, id := range ids {
		if !up[id] {
			return false
		}
	}
	return true
}

// Pointed at a gateway, the console shows one card per worker with its
// connection, health and slots; a worker's page lists its devices and
// leases; a drained worker is listed under Attention.
func TestTheConsoleOnAGatewayShowsItsWorkersAndADrainedOneUnderAttention(t *testing.T) {
	f := newFleet(t)
	deadline := time.Now().Add(15 * time.Second)
	for !f.connected(t, f.idA, f.idB) {
		if time.Now().After(deadline) {
			t.Fatalf("the two workers did not connect to the gateway within 15s")
		}
		time.Sleep(pollEvery)
	}
	_, ops := f.gw.token("operator", "console")
	f.gw.must("a lease through the gateway", "lease", "--platform", "ios", "--agent-id", "via-gateway", "--detach", "--progress", "none")

	p := newPage(t, f.console)
	p.open("/workers")
	p.signIn(ops)
	card := func(id string) string {
		return fmt.Sprintf(`document.querySelector('.card-worker[data-worker-id=%q]')`, id)
	}
	for _, w := range []struct{ id, label string }{{f.idA, "worker-a"}, {f.idB, "worker-b"}} {
		p.waitFor("the card of "+w.label+", connected, with its health and slots", 15*time.Second,
			fmt.Sprintf(`(() => { const c = %s; return !!c && c.dataset.connection === 'connected' && c.querySelector('h3').textContent === %q && /Health\s*running/.test(c.innerText) && /Running\s*\d+\/\d/.test(c.innerText); })()`, card(w.id), w.label))
	}
	p.waitFor("the gateway's mode in the header", 5*time.Second, `document.querySelector('.mode').textContent.startsWith('gateway')`)
	p.screenshot("gateway-workers")

	p.tab("leases")
	p.waitFor("the lease made through the gateway, with its worker", 10*time.Second,
		`[...document.querySelectorAll('tr[data-lease-id]')].some(r => r.querySelector('.holder').textContent === 'via-gateway' && /worker-[ab]/.test(r.textContent))`)

	p.tab("workers")
	p.click("worker-b's page", fmt.Sprintf(`.card-worker[data-worker-id=%q] h3 a`, f.idB))
	p.waitFor("worker-b's page with its catalog", 10*time.Second,
		fmt.Sprintf(`location.pathname === '/workers/%s' && !!document.querySelector('.page-head[data-worker-id=%q]') && document.querySelectorAll('table.catalog tr').length > 1`, f.idB, f.idB))
	p.screenshot("gateway-worker")

	f.gw.must("drain worker-a", "worker", "drain", f.idA)
	p.tab("attention")
	p.waitFor("worker-a under Attention, drained", 10*time.Second,
		fmt.Sprintf(`!!document.querySelector('tr[data-kind="worker"][data-what="drained"][data-id=%q]')`, f.idA))
	p.waitFor("only worker-a drained", 5*time.Second,
		fmt.Sprintf(`!document.querySelector('tr[data-kind="worker"][data-id=%q]')`, f.idB))
	p.screenshot("gateway-attention")
	p.tab("workers")
	p.waitFor("worker-a's card marked drained", 5*time.Second, card(f.idA)+`.dataset.drained === 'true'`)
}
