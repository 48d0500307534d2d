package e2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// logRecord is one JSON line of the daemon log.
type logRecord map[string]any

func (r logRecord) str(k string) string { s, _ := r[k].(string); return s }

// daemonLog reads the home's daemon log.
func daemonLog(t *testing.T, h *home) []logRecord {
	t.Helper()
	f, err := os.Open(h.path("daemon.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []logRecord
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		var r logRecord
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("a daemon log line is not JSON: %v: %s", err, sc.Bytes())
		}
		out = append(out, r)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// 40 leases granted and released write exactly 40 grant lines and 40 end
// lines at info, each with its lease, request, device and requester, and
// each lease's end names the request its grant named.
func TestFortyLeasesWriteFortyGrantAndFortyEndLines(t *testing.T) {
	t.Parallel()
	h := newHome(t, fastDemo...)
	type lease struct{ request, device, agent string }
	granted := map[string]lease{}
	for i := range 40 {
		agent := fmt.Sprintf("agent-%02d", i)
		g := h.leaseDetached(agent, "ios")
		granted[g.Lease.ID] = lease{device: g.Device.ID, agent: agent}
		if r := h.run("release", g.Lease.ID); r.code != 0 {
			t.Fatalf("release %s\n%s", g.Lease.ID, r)
		}
	}
	if r := h.run("daemon", "stop"); r.code != 0 {
		t.Fatalf("daemon stop\n%s", r)
	}
	grants, ends := map[string]logRecord{}, map[string]logRecord{}
	for _, r := range daemonLog(t, h) {
		var into map[string]logRecord
		switch r.str("msg") {
		case "lease granted":
			into = grants
		case "lease ended":
			into = ends
		default:
			continue
		}
		if r.str("level") != "INFO" {
			t.Errorf("%s line at %s, want INFO: %v", r.str("msg"), r.str("level"), r)
		}
		id := r.str("leaseId")
		if _, dup := into[id]; dup {
			t.Errorf("a second %q line for lease %q: %v", r.str("msg"), id, r)
		}
		into[id] = r
	}
	if len(grants) != 40 || len(ends) != 40 {
		t.Fatalf("the log has %d grant and %d end lines, want 40 and 40", len(grants), len(ends))
	}
	// With the daemon stopped, daemon logs reads the same lines.
	r := h.run("daemon", "logs", "--since", "1h")
	if n := strings.Count(r.stdout, `"msg":"lease granted"`); r.code != 0 || n != 40 {
		t.Errorf("daemon logs --since 1h printed %d grant lines, want 40\n%s", n, r.stderr)
	}
	for id, l := range granted {
		g, e := grants[id], ends[id]
		if g == nil || e == nil {
			t.Errorf("lease %s: grant line %v, end line %v", id, g, e)
			continue
		}
		if g.str("deviceId") != l.device || g.str("requester") != l.agent || !strings.HasPrefix(g.str("requestId"), "req_") || g.str("source") == "" {
			t.Errorf("lease %s (device %s, agent %s): grant line %v", id, l.device, l.agent, g)
		}
		if _, ok := g["waitMs"].(float64); !ok {
			t.Errorf("lease %s: grant line has no waitMs: %v", id, g)
		}
		if e.str("deviceId") != l.device || e.str("requester") != l.agent || e.str("requestId") != g.str("requestId") || e.str("reason") != "explicit" {
			t.Errorf("lease %s: end line %v, want device %s, requester %s, request %s, reason explicit", id, e, l.device, l.agent, g.str("requestId"))
		}
	}
}

// The secrets of tokens, and the admin tokens, used over HTTP, over the
// socket and over a worker's uplink (with the logs at debug) appear in no
// file of the homes but those that hold them: admin.token, and the
// worker's config.json with its join token.
func TestNoSecretReachesTheLogs(t *testing.T) {
	t.Parallel()
	h, a := httpHome(t, "log.level", "debug")
	_, agent := h.token("agent", "agent-token")
	operatorID, operator := h.token("operator", "operator-token")
	secrets := map[string]string{"agent": agent, "operator": operator, "admin": h.adminToken()}

	a.do("GET", "/v1/status", agent, "")
	a.do("GET", "/v1/devices", operator, "")
	a.do("GET", "/v1/devices", agent, "")                     // refused: an operator route
	a.do("GET", "/v1/status", agent+"x", "")                  // refused: unknown
	a.do("GET", "/v1/status", "", "", "Authorization", agent) // refused: malformed
	a.do("POST", "/v1/lease-requests", agent, `{"platform":"ios","noWait":true}`)
	rc := h.dial()
	rc.call("1", "hello", helloInput("log-test", secrets["admin"]))
	rc2 := h.dial()
	rc2.call("1", "hello", helloInput("log-test", secrets["admin"]+"0"))
	if r := h.run("token", "revoke", operatorID); r.code != 0 {
		t.Fatalf("token revoke\n%s", r)
	}
	a.do("GET", "/v1/devices", operator, "") // refused: revoked

	f := newFleet(t, "log.level", "debug")
	w := f.worker("worker-a", 1, "log.level", "debug")
	f.await("worker A connected", 10*time.Second, connected(instanceID(t, w)))
	f.api.do("GET", "/v1/uplink", f.joinSecret("worker-a"), "") // refused: not an upgrade
	secrets["worker join"] = f.joinSecret("worker-a")
	secrets["gateway admin"] = f.gw.adminToken()
	secrets["worker admin"] = w.adminToken()

	for _, d := range []*home{h, f.gw, w} {
		if r := d.run("daemon", "stop"); r.code != 0 {
			t.Fatalf("daemon stop\n%s", r)
		}
	}
	var scanned int
	for _, d := range []*home{h, f.gw, w} {
		err := filepath.WalkDir(d.Dir, func(path string, e fs.DirEntry, err error) error {
			if err != nil || e.IsDir() || !e.Type().IsRegular() || e.Name() == "admin.token" || (d == w && e.Name() == "config.json") {
				return err
			}
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			scanned++
			for role, s := range secrets {
				if strings.Contains(string(b), s) {
					rel, _ := filepath.Rel(d.Dir, path)
					t.Errorf("%s holds the %s secret", rel, role)
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	var created int
	for _, r := range daemonLog(t, h) {
		if r.str("msg") == "token created" {
			created++
		}
	}
	if created != 2 {
		t.Errorf("the log has %d token created lines, want 2", created)
	}
	var joined int
	for _, r := range daemonLog(t, f.gw) {
		if r.str("msg") == "worker joined" && r.str("workerId") == instanceID(t, w) {
			joined++
		}
	}
	if joined != 1 {
		t.Errorf("the gateway's log has %d worker joined lines for the worker, want 1", joined)
	}
	t.Logf("scanned %d files", scanned)
}

// A lease through a gateway is logged once on each side: the gateway logs
// its dispatch and the grant it recorded, the worker its own grant and
// end; the gateway leaves out the worker's events it relays.
func TestAGatewayLogsItsOwnDecisionsAndNotItsWorkers(t *testing.T) {
	t.Parallel()
	f := newFleet(t)
	w := f.worker("worker-a", 1)
	id := instanceID(t, w)
	f.await("worker A connected", 10*time.Second, connected(id))
	g := f.gw.leaseDetached("agent-g", "ios")
	if r := f.gw.run("release", g.Lease.ID); r.code != 0 {
		t.Fatalf("release through the gateway\n%s", r)
	}
	// The worker's lease.released reaches the gateway's log by the relay.
	follow := f.gw.follow()
	follow.find("the worker's lease.released relayed", isEvent("lease.released", "workerId", id))
	for _, h := range []*home{f.gw, w} {
		if r := h.run("daemon", "stop"); r.code != 0 {
			t.Fatalf("daemon stop\n%s", r)
		}
	}
	count := func(h *home) map[string]int {
		n := map[string]int{}
		for _, r := range daemonLog(t, h) {
			if r.str("module") == "decisions" {
				n[r.str("event")]++
				if r.str("event") == "grant.recorded" && (r.str("requester") != "agent-g" || r.str("workerId") != id || r.str("leaseId") != g.Lease.ID) {
					t.Errorf("the gateway's grant line %v, want requester agent-g, worker %s, lease %s", r, id, g.Lease.ID)
				}
			}
		}
		return n
	}
	gw, wk := count(f.gw), count(w)
	if gw["request.dispatched"] != 1 || gw["grant.recorded"] != 1 || gw["lease.requested"] != 1 || gw["worker.connected"] != 1 {
		t.Errorf("the gateway logged %v, want one lease.requested, request.dispatched, grant.recorded and worker.connected", gw)
	}
	if gw["lease.granted"] != 0 || gw["lease.released"] != 0 {
		t.Errorf("the gateway logged its worker's relayed events: %v", gw)
	}
	if wk["lease.granted"] != 1 || wk["lease.released"] != 1 {
		t.Errorf("the worker logged %v, want one lease.granted and one lease.released", wk)
	}
}
