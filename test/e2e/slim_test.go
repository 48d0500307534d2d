package e2e

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/simlock/simlock/internal/shimtest"
)

// subcommandsFor lists, in order, the simctl subcommands from call index
// from on that name udid.
func subcommandsFor(t *testing.T, e shimtest.Env, udid string, from int) []string {
	t.Helper()
	var out []string
	calls := simctlCalls(t, e)
	for _, c := range calls[min(from, len(calls)):] {
		if slices.Contains(c.Args, udid) {
			out = append(out, subcommand(c))
		}
	}
	return out
}

func TestASlimLeaseDisablesServicesBootsAgainAndIsSlimmedAgainAfterItsClean(t *testing.T) {
	t.Parallel()
	e := shimtest.Build(t)
	// No re-warm: the released device stays shut down until the next lease
	// boots it, so that boot is the one that slims it again.
	h := newHome(t, "warmPool.rewarmReleased", "false", "capacity.strategy", "fixed", "capacity.config.maxRunning", "2")
	h.withShims(e, "ios")
	f := h.follow()

	first := h.leaseDetached("a", "ios", "--device", "iPhone 16", "--os", "18.6", "--mode", "slim")
	if first.Device.Mode != "slim" || first.Device.Spec.Mode != "slim" {
		t.Fatalf("grant device mode %q, spec mode %q; want slim and slim", first.Device.Mode, first.Device.Spec.Mode)
	}
	udid := first.Device.DriverDeviceID
	want := []string{"boot", "bootstatus", "spawn", "shutdown", "boot", "bootstatus"}
	if got := subcommandsFor(t, e, udid, 0); !containsInOrder(got, want) {
		t.Errorf("calls naming the device = %q, want %q in order", got, want)
	}
	slimmed := f.find("device.slimmed of the first boot", isEvent("device.slimmed", "deviceId", first.Device.ID))
	if n, _ := slimmed.Payload["labelCount"].(float64); n < 40 {
		t.Errorf("device.slimmed labelCount = %v, want the services of every category", slimmed.Payload["labelCount"])
	}
	if u, _ := slimmed.Payload["unknownLabels"].([]any); len(u) != 1 || u[0] != "com.apple.siriinferenced" {
		t.Errorf("device.slimmed unknownLabels = %v, want the one the runtime lacks", slimmed.Payload["unknownLabels"])
	}
	granted := f.find("the first grant", isEvent("lease.granted", "leaseId", first.Lease.ID))
	if granted.str("mode") != "slim" {
		t.Errorf("lease.granted mode = %q, want slim", granted.str("mode"))
	}

	before := len(simctlCalls(t, e))
	if r := h.run("release", first.Lease.ID); r.code != 0 {
		t.Fatalf("release\n%s", r)
	}
	f.find("the clean of the slim device", isEvent("device.reclaimed", "deviceId", first.Device.ID))
	second := h.leaseDetached("b", "ios", "--device", "iPhone 16", "--os", "18.6", "--mode", "slim")
	if second.Device.ID != first.Device.ID || second.Source != "booted" {
		t.Fatalf("the second slim lease got %s (%s), want the first device booted again", second.Device.ID, second.Source)
	}
	if got := subcommandsFor(t, e, udid, before); !containsInOrder(got, []string{"erase", "boot", "bootstatus", "spawn", "shutdown", "boot", "bootstatus"}) {
		t.Errorf("calls naming the device after the release = %q, want the erase, then the slim pass again", got)
	}
	if second.Device.Mode != "slim" {
		t.Errorf("second grant mode = %q, want slim", second.Device.Mode)
	}
	f.find("device.slimmed of the boot after the clean", func(ev event) bool {
		return isEvent("device.slimmed", "deviceId", first.Device.ID)(ev) && ev.Seq > slimmed.Seq
	})

	// Full is a guarantee: a full request never takes the slim device.
	full := h.leaseDetached("c", "ios", "--device", "iPhone 16", "--os", "18.6", "--mode", "full")
	if full.Device.ID == first.Device.ID || full.Device.Mode != "full" || full.Device.Spec.Mode != "" {
		t.Errorf("a full lease got device %s mode %q spec mode %q, want another device, full", full.Device.ID, full.Device.Mode, full.Device.Spec.Mode)
	}
	if got := subcommandsFor(t, e, full.Device.DriverDeviceID, 0); slices.Contains(got, "spawn") {
		t.Errorf("a full device ran %q, want no slim pass", got)
	}
}

func TestASlimLeaseOnARuntimeBefore18_5IsServedFullWithADoctorAdvisory(t *testing.T) {
	t.Parallel()
	e := shimtest.Build(t)
	h := newHome(t)
	h.withShims(e, "ios")
	g := h.leaseDetached("a", "ios", "--device", "iPhone 15", "--os", "17.5", "--mode", "slim")
	if g.Device.Mode != "full" || g.Device.Spec.Mode != "" {
		t.Errorf("grant mode %q, spec mode %q; want full, and no slim spec", g.Device.Mode, g.Device.Spec.Mode)
	}
	if got := subcommandsFor(t, e, g.Device.DriverDeviceID, 0); slices.Contains(got, "spawn") {
		t.Errorf("a 17.5 device ran %q, want no slim pass", got)
	}
	r := h.run("doctor", "--json")
	var res struct {
		Findings []struct {
			Kind, Platform, Reason, Message string
		} `json:"findings"`
	}
	if err := json.Unmarshal([]byte(strings.TrimSpace(r.stdout)), &res); err != nil {
		t.Fatalf("doctor --json: %v\n%s", err, r)
	}
	found := false
	for _, f := range res.Findings {
		if f.Kind == "driver-advisory" && f.Reason == "slim-runtime-unsupported" && f.Platform == "ios" && strings.Contains(f.Message, "17.5") {
			found = true
		}
	}
	if !found {
		t.Errorf("doctor findings %+v lack a slim-runtime-unsupported advisory naming 17.5", res.Findings)
	}
}

// Over HTTP a slim request is served slim on a runtime that can be
// slimmed, and its lease says so; a request whose slim pass fails is served
// full, says so, and its device records device.slim-failed; a mode that is
// neither is refused.
func TestASlimLeaseOverHTTPSaysItsModeAndAFailedPassIsServedFull(t *testing.T) {
	t.Parallel()
	h, a := httpHome(t)
	_, agent := h.token("agent", "slim")
	r := a.do("POST", "/v1/lease-requests", agent, `{"platform":"ios","os":"26.1","mode":"slim"}`)
	if r.status != 201 {
		t.Fatalf("create: %d %s", r.status, r.raw)
	}
	req := a.awaitState(agent, requestOf(t, r)["id"].(string), "granted", "failed")
	lease, _ := req["lease"].(map[string]any)
	if req["state"] != "granted" || lease["mode"] != "slim" {
		t.Errorf("slim request = %v, want granted with lease mode slim", req)
	}
	if spec, _ := req["spec"].(map[string]any); spec["mode"] != "slim" {
		t.Errorf("request spec = %v, want the mode asked", req["spec"])
	}
	if r := a.do("POST", "/v1/lease-requests", agent, `{"platform":"ios","mode":"thin"}`); r.status != 400 || r.errCode() != "BAD_REQUEST" {
		t.Errorf("mode thin: %d %s, want 400 BAD_REQUEST", r.status, r.raw)
	}

	failing := newHome(t, append(slices.Clone(fastDemo), "drivers.demo.fail", `["slim"]`)...)
	f := failing.follow()
	g := failing.leaseDetached("b", "ios", "--os", "26.1", "--mode", "slim")
	if g.Device.Mode != "full" || g.Device.Spec.Mode != "slim" {
		t.Errorf("with the pass failing: grant mode %q, spec mode %q; want full on a slim device", g.Device.Mode, g.Device.Spec.Mode)
	}
	f.find("device.slim-failed", isEvent("device.slim-failed", "deviceId", g.Device.ID))
}
