package ios

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/driver"
)

// disabledLabels is what the shim's launchctl disabled in the device's
// data: what a boot of it would run without.
func (h *harness) disabledLabels(t *testing.T, udid string) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(h.root, udid, "data", "launchd-disabled.txt"))
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return strings.Fields(string(b))
}

func (h *harness) resolveMode(t *testing.T, model, osVersion string, mode contract.DeviceMode) contract.DeviceSpec {
	t.Helper()
	spec, err := h.d.ResolveSpec(t.Context(), driver.Request{Platform: contract.PlatformIOS, Model: model, OSVersion: osVersion, Mode: mode})
	if err != nil {
		t.Fatalf("ResolveSpec(%s %s %s): %v", model, osVersion, mode, err)
	}
	return spec
}

func (h *harness) provisionSpec(t *testing.T, spec contract.DeviceSpec) driver.Device {
	t.Helper()
	dev, err := h.d.Provision(t.Context(), spec)
	if err != nil {
		t.Fatalf("Provision(%+v): %v", spec, err)
	}
	return dev
}

// every label the default categories disable, in order.
func allSlimLabels() []string {
	var out []string
	for _, c := range contract.SlimCategories() {
		out = append(out, slimLabels[c]...)
	}
	return out
}

func TestEverySlimCategoryDisablesSomeServices(t *testing.T) {
	for _, c := range contract.SlimCategories() {
		if len(slimLabels[c]) == 0 {
			t.Errorf("category %q disables nothing", c)
		}
	}
	if len(slimLabels) != len(contract.SlimCategories()) {
		t.Errorf("slimLabels has %d categories, contract.SlimCategories %d", len(slimLabels), len(contract.SlimCategories()))
	}
}

func TestASlimDeviceOn18_6RunsTheDisablesInChunksThenBootsAgain(t *testing.T) {
	h := newHarness(t)
	spec := h.resolveMode(t, "iPhone 16", "18.6", contract.DeviceModeSlim)
	if spec.Mode != contract.DeviceModeSlim {
		t.Fatalf("ResolveSpec(slim, 18.6).Mode = %q, want slim", spec.Mode)
	}
	dev := h.provisionSpec(t, spec)
	from := len(h.env.Calls(t))
	ready := h.boot(t, dev)

	got := subcommands(h.simctlCalls(t, from))
	labels := allSlimLabels()
	chunks := (len(labels) + slimChunk - 1) / slimChunk
	want := []string{"boot", "bootstatus"}
	for range chunks {
		want = append(want, "spawn")
	}
	want = append(want, "shutdown", "boot", "bootstatus")
	if !containsInOrder(got, want) || strings.Count(strings.Join(got, " "), "spawn") != chunks {
		t.Errorf("simctl calls = %q, want %q in order with %d spawns", got, want, chunks)
	}
	for _, c := range h.rec.commands() {
		if len(c.Args) > 4 && c.Args[3] == "spawn" {
			if c.Args[4] != dev.ID || c.Args[5] != "/bin/sh" || c.Args[6] != "-c" || c.Timeout != slimChunkTimeout {
				t.Errorf("spawn call = %q (timeout %s), want spawn <udid> /bin/sh -c <script> bounded by %s", c.Args, c.Timeout, slimChunkTimeout)
			}
		}
		if len(c.Args) > 4 && c.Args[3] == "bootstatus" && c.Timeout != bootstatusTimeout && c.Timeout != h.d.slimOpts.BootTimeout {
			t.Errorf("bootstatus bounded by %s", c.Timeout)
		}
	}
	var unknown []string
	for _, l := range labels {
		if !slices.Contains(iosMissingShimLabels, l) {
			continue
		}
		unknown = append(unknown, l)
	}
	out := ready.Slim
	if out == nil || !out.Slimmed || !out.Applied || out.Err != nil {
		t.Fatalf("Slim = %+v, want slimmed and applied without error", out)
	}
	if out.Labels != len(labels) || !slices.Equal(out.Categories, contract.SlimCategories()) || !slices.Equal(out.UnknownLabels, unknown) {
		t.Errorf("Slim = %+v, want %d labels, every category, unknown %q", out, len(labels), unknown)
	}
	if disabled := h.disabledLabels(t, dev.ID); len(disabled) != len(labels)-len(unknown) {
		t.Errorf("the device disabled %d services, want %d", len(disabled), len(labels)-len(unknown))
	}
	if h.states(t)[dev.ID] != driver.Running {
		t.Errorf("after the slim boot the device is %s, want running", h.states(t)[dev.ID])
	}
}

// iosMissingShimLabels are the labels the shim's runtimes lack (its
// iosMissingLabels).
var iosMissingShimLabels = []string{"com.apple.siriinferenced"}

func TestASlimmedDeviceIsOnlyBootedAgainUntilAnEraseThenSlimmedAgain(t *testing.T) {
	h := newHarness(t)
	dev := h.provisionSpec(t, h.resolveMode(t, "iPhone 16", "18.6", contract.DeviceModeSlim))
	ready := h.boot(t, dev)
	if err := h.d.Shutdown(t.Context(), ready); err != nil {
		t.Fatal(err)
	}

	from := len(h.env.Calls(t))
	again := h.boot(t, ready)
	if got := subcommands(h.simctlCalls(t, from)); slices.Contains(got, "spawn") || slices.Equal(got, nil) {
		t.Errorf("a boot of a device slimmed to the current signature ran %q, want no spawn", got)
	}
	if again.Slim == nil || !again.Slim.Slimmed || again.Slim.Applied {
		t.Errorf("Slim = %+v, want slimmed, not applied again", again.Slim)
	}

	if _, err := h.d.Reclaim(t.Context(), again); err != nil {
		t.Fatalf("Reclaim: %v", err)
	}
	if got := h.disabledLabels(t, dev.ID); len(got) != 0 {
		t.Fatalf("after the erase %d services are still disabled", len(got))
	}
	from = len(h.env.Calls(t))
	third := h.boot(t, again)
	if got := subcommands(h.simctlCalls(t, from)); !slices.Contains(got, "spawn") {
		t.Errorf("the first boot after an erase ran %q, want the slim pass again", got)
	}
	if third.Slim == nil || !third.Slim.Applied {
		t.Errorf("Slim = %+v, want applied again after the erase", third.Slim)
	}
}

func TestRecoverNeverRunsTheSlimPass(t *testing.T) {
	h := newHarness(t)
	dev := h.provisionSpec(t, h.resolveMode(t, "iPhone 16", "18.6", contract.DeviceModeSlim))
	from := len(h.env.Calls(t))
	got, err := h.d.Recover(t.Context(), dev)
	if err != nil {
		t.Fatalf("Recover: %v", err)
	}
	if calls := subcommands(h.simctlCalls(t, from)); slices.Contains(calls, "spawn") {
		t.Errorf("Recover ran %q, want no slim pass", calls)
	}
	if got.Slim == nil || got.Slim.Slimmed {
		t.Errorf("Slim = %+v, want reported, not slimmed", got.Slim)
	}
}

func TestASlimRequestOnARuntimeBefore18_5IsAFullSpecAndTheCatalogSaysWhichCanSlim(t *testing.T) {
	h := newHarness(t)
	if spec := h.resolveMode(t, "iPhone 15", "17.5", contract.DeviceModeSlim); spec.Mode != "" {
		t.Errorf("ResolveSpec(slim, 17.5).Mode = %q, want full (\"\")", spec.Mode)
	}
	if spec := h.resolveMode(t, "iPhone 16", "18.6", contract.DeviceModeFull); spec.Mode != "" {
		t.Errorf("ResolveSpec(full, 18.6).Mode = %q, want full (\"\")", spec.Mode)
	}
	cat, err := h.d.ListCatalog(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(cat.SlimRuntimes, "18.6") || !slices.Contains(cat.SlimRuntimes, "26.1") || slices.Contains(cat.SlimRuntimes, "17.5") {
		t.Errorf("SlimRuntimes = %q, want 18.6 and 26.1, not 17.5", cat.SlimRuntimes)
	}
	dev := h.provisionSpec(t, h.resolveMode(t, "iPhone 15", "17.5", contract.DeviceModeSlim))
	from := len(h.env.Calls(t))
	ready := h.boot(t, dev)
	if calls := subcommands(h.simctlCalls(t, from)); slices.Contains(calls, "spawn") {
		t.Errorf("a 17.5 device ran %q, want no slim pass", calls)
	}
	if ready.Slim != nil {
		t.Errorf("Slim = %+v on a full device, want nil", ready.Slim)
	}
}

func TestAFailedSlimPassLeavesTheDeviceRunningFull(t *testing.T) {
	h := newHarness(t)
	dev := h.provisionSpec(t, h.resolveMode(t, "iPhone 16", "18.6", contract.DeviceModeSlim))
	h.env.FailNext(t, "xcrun", "spawn", 1, "launchd refused\n")
	ready, err := h.d.MakeReady(t.Context(), dev)
	if err != nil {
		t.Fatalf("MakeReady after a failed pass: %v, want the device served", err)
	}
	if ready.Slim == nil || ready.Slim.Slimmed || ready.Slim.Err == nil {
		t.Errorf("Slim = %+v, want not slimmed with the error", ready.Slim)
	}
	if h.states(t)[dev.ID] != driver.Running {
		t.Errorf("the device is %s, want running", h.states(t)[dev.ID])
	}
}

func TestTheSlimSignatureFollowsTheCategoriesNotTheirOrder(t *testing.T) {
	a := SlimOptions{Categories: []string{"siri", "widgets"}}.withDefaults()
	b := SlimOptions{Categories: []string{"widgets", "siri"}}.withDefaults()
	all := SlimOptions{}.withDefaults()
	if a.signature(runtime186) != b.signature(runtime186) {
		t.Errorf("the order of the categories changed the signature")
	}
	if a.signature(runtime186) == all.signature(runtime186) {
		t.Errorf("two categories and all of them have one signature")
	}
	if all.signature(runtime186) == all.signature("com.apple.CoreSimulator.SimRuntime.iOS-26-1") {
		t.Errorf("two runtimes have one signature")
	}
}
