package e2e

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// surfDownloads offers one downloadable iOS runtime per surface, so each
// surface's request really downloads on each home it is run against.
var surfDownloads = []string{
	"drivers.demo.downloadableRuntimes", `{"ios":["26.4","26.5","27.0"],"android":[]}`,
	"drivers.demo.downloadMs", "1000",
	"capacity.strategy", "fixed", "capacity.config.maxRunning", "4",
}

// surfStep is one stage a requester saw, with what a downloading stage
// said: the components it named and whether a percentage came with it.
type surfStep struct {
	stage      string
	components []string
	percent    bool
}

// surfTrace is the stages a requester saw in order, consecutive repeats
// folded into one.
type surfTrace []surfStep

// add appends a stage, folding it into the last one when it repeats.
func (tr *surfTrace) add(stage, component string, percent bool) {
	if n := len(*tr); n == 0 || (*tr)[n-1].stage != stage {
		*tr = append(*tr, surfStep{stage: stage})
	}
	last := &(*tr)[len(*tr)-1]
	if component != "" && !slices.Contains(last.components, component) {
		last.components = append(last.components, component)
	}
	last.percent = last.percent || percent
}

func (tr surfTrace) String() string {
	var parts []string
	for _, s := range tr {
		p := s.stage
		if s.stage == "downloading" {
			comp := "no component"
			if len(s.components) > 0 {
				comp = "component " + strings.Join(s.components, ",")
			}
			pct := "no percentages"
			if s.percent {
				pct = "percentages"
			}
			p += "(" + comp + ", " + pct + ")"
		}
		parts = append(parts, p)
	}
	return strings.Join(parts, " → ")
}

// downloaded reports whether the trace has a downloading stage naming
// component.
func (tr surfTrace) downloaded(component string) bool {
	for _, s := range tr {
		if s.stage == "downloading" && slices.Contains(s.components, component) {
			return true
		}
	}
	return false
}

// surfCLI leases with `simlock lease --progress json` on h and returns the
// stages its progress lines showed, ending granted when it printed a grant.
func surfCLI(t *testing.T, h *home, agent, osVersion string) surfTrace {
	t.Helper()
	r := h.run("lease", "--platform", "ios", "--os", osVersion, "--allow-download", "--agent-id", agent, "--detach", "--progress", "json")
	var tr surfTrace
	for _, p := range stderrSteps(t, r.stderr) {
		tr.add(p.Stage, p.Component, p.Percent != nil)
	}
	if r.code != 0 {
		t.Errorf("the CLI lease for %s failed\n%s", agent, r)
		tr.add(fmt.Sprintf("exit %d", r.code), "", false)
		return tr
	}
	if g := parseGrant(t, strings.TrimSpace(r.stdout)); g.Device.Spec.OSVersion == osVersion {
		tr.add("granted", "", false)
	}
	return tr
}

// surfHTTP creates a lease request over HTTP and follows its event stream
// to its end: the stages are the created resource's state, then each
// event's.
func surfHTTP(t *testing.T, a *api, secret, osVersion string) surfTrace {
	t.Helper()
	r := a.do("POST", "/v1/lease-requests", secret, `{"platform":"ios","os":"`+osVersion+`","allowDownload":true}`)
	if r.status != 201 {
		t.Fatalf("POST /v1/lease-requests on %s: %d %s", a.base, r.status, r.raw)
	}
	req := requestOf(t, r)
	var tr surfTrace
	surfAddView(&tr, req)
	s := a.stream("/v1/lease-requests/"+req["id"].(string)+"/events", secret)
	for {
		ev, ok := s.next(t)
		if !ok {
			break
		}
		m := ev.json(t)
		if ev.name == "error" {
			e, _ := m["error"].(map[string]any)
			tr.add(fmt.Sprintf("error %v", e["code"]), "", false)
			continue
		}
		if ev.name != m["state"] {
			t.Errorf("event %q carries state %v", ev.name, m["state"])
		}
		surfAddView(&tr, m)
	}
	return tr
}

func surfAddView(tr *surfTrace, v map[string]any) {
	state, _ := v["state"].(string)
	comp, _ := v["component"].(string)
	tr.add(state, comp, v["percent"] != nil)
}

// surfPercent finds the percentage in an MCP downloading message.
var surfPercent = regexp.MustCompile(`\(\d+%`)

// surfMCPStage reads the stage, and for downloading the component, off
// an MCP progress message (internal/mcpserver/progress.go words them).
func surfMCPStage(msg string) (stage, component string) {
	for _, c := range []struct{ prefix, stage string }{
		{"Preparing the request", "queued"},
		{"First in line", "queued"},
		{"Queued behind", "queued"},
		{"Waiting for another download", "downloading"},
		{"Downloading runtime", "downloading"},
		{"Waiting for a released", "reclaiming"},
		{"Creating", "provisioning"},
		{"Booting", "booting"},
		{"Leased", "granted"},
	} {
		if strings.HasPrefix(msg, c.prefix) {
			stage = c.stage
			break
		}
	}
	if stage == "" {
		return "unrecognised message " + fmt.Sprintf("%q", msg), ""
	}
	if stage == "downloading" {
		_, after, _ := strings.Cut(msg, "runtime ")
		component, _, _ = strings.Cut(after, " ")
	}
	return stage, component
}

// surfMCP leases with lease_simulator over `simlock mcp` on h, with a
// progress token, and returns the stages its notifications showed.
func surfMCP(t *testing.T, h *home, agent, osVersion string) surfTrace {
	t.Helper()
	m := h.mcpConnect(agent)
	res, grant := m.call("lease_simulator", map[string]any{"platform": "ios", "osVersion": osVersion, "allowDownload": true}, agent)
	if res.IsError {
		t.Fatalf("lease_simulator for %s: %v", agent, grant)
	}
	m.awaitHeard("the notification that the lease is granted", func() bool {
		return slices.ContainsFunc(m.progress, func(p *mcp.ProgressNotificationParams) bool { return strings.HasPrefix(p.Message, "Leased") })
	})
	m.mu.Lock()
	defer m.mu.Unlock()
	var tr surfTrace
	for _, p := range m.progress {
		stage, comp := surfMCPStage(p.Message)
		tr.add(stage, comp, stage == "downloading" && surfPercent.MatchString(p.Message))
	}
	return tr
}

// The CLI's progress lines, MCP progress notifications and the HTTP
// lease-request stream show the same stages through a gateway as on a lone
// worker, downloading included: a request allowed to download goes to the
// one worker of the fleet that can download its runtime, and the same
// request on a worker configured like it, alone, is the reference.
func TestEverySurfaceShowsTheSameStagesThroughTheGatewayAsOnAWorkerDownloadingIncluded(t *testing.T) {
	t.Parallel()
	f := newFleet(t)
	joined := func(label string) []string {
		return []string{"gateway.url", f.url, "gateway.token", f.joinSecret(label), "gateway.label", label, "gateway.heartbeatMs", fleetHeartbeat}
	}
	none := newHome(t, slices.Concat(joined("no-downloads"), []string{"drivers.demo.downloadableRuntimes", `{"ios":[],"android":[]}`}, fastDemo)...)
	none.startDaemon()
	can := newHome(t, slices.Concat(joined("downloads"), surfDownloads, fastDemo)...)
	can.startDaemon()
	idCan := instanceID(t, can)
	f.await("both workers connected", 5*time.Second, connected(instanceID(t, none), idCan))
	lone, loneAPI := httpHome(t, surfDownloads...)
	_, gwAgent := f.gw.token("agent", "surfaces-gw")
	_, loneAgent := lone.token("agent", "surfaces-lone")

	for _, c := range []struct {
		surface, component string
		run                func(viaGateway bool) surfTrace
	}{
		{"the CLI's progress lines", "26.4", func(gw bool) surfTrace {
			if gw {
				return surfCLI(t, f.gw, "cli-via-gateway", "26.4")
			}
			return surfCLI(t, lone, "cli-on-worker", "26.4")
		}},
		{"the HTTP lease-request stream's events", "26.5", func(gw bool) surfTrace {
			if gw {
				return surfHTTP(t, f.api, gwAgent, "26.5")
			}
			return surfHTTP(t, loneAPI, loneAgent, "26.5")
		}},
		{"the MCP progress notifications", "27.0", func(gw bool) surfTrace {
			if gw {
				return surfMCP(t, f.gw, "mcp-via-gateway", "27.0")
			}
			return surfMCP(t, lone, "mcp-on-worker", "27.0")
		}},
	} {
		viaGateway, onWorker := c.run(true), c.run(false)
		t.Logf("%s through the gateway: %s", c.surface, viaGateway)
		t.Logf("%s on a lone worker:     %s", c.surface, onWorker)
		if viaGateway.String() != onWorker.String() {
			t.Errorf("%s through the gateway differ from those on a lone worker:\n  through the gateway: %s\n  on a lone worker:    %s",
				c.surface, viaGateway, onWorker)
		}
		for _, side := range []struct {
			name string
			tr   surfTrace
		}{{"through the gateway", viaGateway}, {"on a lone worker", onWorker}} {
			if !side.tr.downloaded(c.component) {
				t.Errorf("%s %s show no downloading stage naming runtime %s: %s", c.surface, side.name, c.component, side.tr)
			}
			if n := len(side.tr); n == 0 || side.tr[n-1].stage != "granted" {
				t.Errorf("%s %s do not end granted: %s", c.surface, side.name, side.tr)
			}
		}
	}
	// Each request through the gateway was served by the worker that could
	// download its runtime.
	if ls := none.leases(); len(ls) != 0 {
		t.Errorf("the worker that cannot download holds %+v, want nothing", ls)
	}
	ls := f.gw.leases()
	for id := range ls {
		if !strings.HasPrefix(id, idCan+".") {
			t.Errorf("the gateway's lease %s is not on the worker that could download (%s)", id, idCan)
		}
	}
	if len(ls) != 3 {
		t.Errorf("the gateway lists %d leases, want the three surfaces' requests: %+v", len(ls), ls)
	}
}
