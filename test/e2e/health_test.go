package e2e

import (
	"encoding/json"
	"os"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/simlock/simlock/internal/shimtest"
)

// healthHome checks leased devices every 200 ms and retries quickly.
func healthHome(t *testing.T, settings ...string) *home {
	t.Helper()
	base := append([]string{
		"health.probeIntervalMs", "200", "health.stableObservations", "2",
		"health.recoveryBackoffMs", "100", "health.maxRecoveryAttempts", "2",
		"warmPool.quarantine.retryBackoffMs", "200", "warmPool.quarantine.maxRetries", "2",
	}, fastDemo...)
	return newHome(t, append(base, settings...)...)
}

func inject(t *testing.T, h *home, deviceID, fault string) {
	t.Helper()
	if r := h.run("demo", "inject", deviceID, fault); r.code != 0 || !strings.Contains(r.stdout, `"injected":true`) {
		t.Fatalf("demo inject %s %s\n%s", deviceID, fault, r)
	}
}

// A held lease whose device crashes hears device-unhealthy, then
// device-recovered, and keeps its lease.
func TestCrashedDeviceRecoversUnderTheHeldLease(t *testing.T) {
	t.Parallel()
	h := healthHome(t)
	p, g := h.hold("holder", "ios")
	inject(t, h, g.Device.ID, "crash")
	p.waitLine(p.stderr, "device-unhealthy", func(s string) bool { return strings.Contains(s, `"push":"device-unhealthy"`) })
	l := p.waitLine(p.stderr, "device-recovered", func(s string) bool { return strings.Contains(s, `"push":"device-recovered"`) })
	if !strings.Contains(l.text, g.Lease.ID) || !strings.Contains(l.text, `"attempts":1`) {
		t.Errorf("recovered line = %s", l.text)
	}
	if _, ok := h.leases()[g.Lease.ID]; !ok || !p.running() {
		t.Errorf("the lease or its holder is gone after a recovery\n%s", p.dump())
	}
}

// A device that cannot be booted again, or that vanished, ends its lease as
// device-lost: the holder prints lease-lost and exits 14.
func TestLostDeviceEndsTheHeldLease(t *testing.T) {
	t.Parallel()
	h := healthHome(t)
	p, g := h.hold("holder", "ios")
	inject(t, h, g.Device.ID, "boot-fail")
	inject(t, h, g.Device.ID, "boot-fail")
	inject(t, h, g.Device.ID, "crash")
	l := p.waitLine(p.stderr, "lease-lost", func(s string) bool { return strings.Contains(s, `"push":"lease-lost"`) })
	if !strings.Contains(l.text, `"reason":"device-lost"`) {
		t.Errorf("lease-lost line = %s", l.text)
	}
	if code := p.wait(); code != 14 {
		t.Errorf("holder exited %d, want 14", code)
	}

	q, g2 := h.hold("second", "android")
	inject(t, h, g2.Device.ID, "vanish")
	l = q.waitLine(q.stderr, "lease-lost", func(s string) bool { return strings.Contains(s, `"push":"lease-lost"`) })
	if !strings.Contains(l.text, `"reason":"device-lost"`) {
		t.Errorf("lease-lost line after vanish = %s", l.text)
	}
	if code := q.wait(); code != 14 {
		t.Errorf("holder of the vanished device exited %d, want 14", code)
	}
}

// A device whose clean fails is quarantined and retried: once more failing,
// it ends destroyed; the events come in order.
func TestFailedCleanIsQuarantinedRetriedThenResolved(t *testing.T) {
	t.Parallel()
	h := healthHome(t)
	f := h.follow()
	g := h.leaseDetached("a", "ios")
	inject(t, h, g.Device.ID, "reclaim-fail")
	if r := h.run("release", g.Lease.ID, "--agent-id", "a"); r.code != 0 {
		t.Fatalf("release\n%s", r)
	}
	for _, want := range []string{"device.purge-failed", "device.quarantined", "device.quarantine-recovered"} {
		f.next(want, func(ev event) bool { return ev.Event == want && ev.str("deviceId") == g.Device.ID })
	}

	g2 := h.leaseDetached("b", "ios")
	inject(t, h, g2.Device.ID, "reclaim-fail")
	inject(t, h, g2.Device.ID, "reclaim-fail")
	inject(t, h, g2.Device.ID, "reclaim-fail")
	if r := h.run("release", g2.Lease.ID, "--agent-id", "b"); r.code != 0 {
		t.Fatalf("release\n%s", r)
	}
	for _, want := range []string{"device.purge-failed", "device.quarantined", "device.quarantine-retry-failed", "device.quarantine-abandoned", "device.deleted"} {
		f.next(want, func(ev event) bool { return ev.Event == want && ev.str("deviceId") == g2.Device.ID })
	}
}

// Idle tiers: an idle device is shut down, then deleted; a leased one is
// not touched. (The exact ages, the dry run and disk pressure are timed in
// the engine's tests, under a fake clock; this runs the real daemon
// through the tiers with short ages.)
func TestIdleDevicesAreShutDownThenDeleted(t *testing.T) {
	t.Parallel()
	h := newHome(t, append([]string{"idle.shutdownAfterMs", "500", "idle.deleteAfterMs", "1000",
		"capacity.strategy", "fixed", "capacity.config.maxRunning", "2"}, fastDemo...)...)
	f := h.follow()
	idle := h.leaseDetached("a", "android") // Android cleans leave it ready
	held := h.leaseDetached("b", "android")
	if r := h.run("release", idle.Lease.ID, "--agent-id", "a"); r.code != 0 {
		t.Fatalf("release\n%s", r)
	}
	f.next("device.reclaimed", func(ev event) bool { return ev.Event == "device.reclaimed" && ev.str("deviceId") == idle.Device.ID })
	sd := f.next("device.shutdown", func(ev event) bool { return ev.Event == "device.shutdown" && ev.str("deviceId") == idle.Device.ID })
	if sd.str("initiator") != "rule" {
		t.Errorf("device.shutdown initiator = %q, want rule", sd.str("initiator"))
	}
	f.next("device.deleted", func(ev event) bool { return ev.Event == "device.deleted" && ev.str("deviceId") == idle.Device.ID })
	for _, ev := range f.events {
		if ev.str("deviceId") == held.Device.ID && (ev.Event == "device.shutdown" || ev.Event == "device.deleted") {
			t.Errorf("the leased device was touched: %+v", ev)
		}
	}
	if r := h.run("cleanup", "--dry-run"); r.code != 0 || !strings.Contains(r.stdout, `"actions":[]`) {
		t.Errorf("cleanup --dry-run proposes something with the idle device gone and the other leased\n%s", r)
	}
	if r := h.run("list", "--rules"); r.code != 0 || !strings.Contains(r.stdout, `"idle-shutdown"`) || !strings.Contains(r.stdout, `"afterMs":500`) {
		t.Errorf("list --rules\n%s", r)
	}
}

// A warm-pool target of 2 keeps two ready devices; leasing one brings the
// pool back to two.
func TestWarmPoolKeepsTwoReady(t *testing.T) {
	t.Parallel()
	h := newHome(t, append([]string{
		"warmPool.targets", `[{"platform":"ios","model":"iPhone 17","count":2}]`,
		"warmPool.maxConcurrentBoots", "2",
		"capacity.strategy", "fixed", "capacity.config.maxRunning", "4",
	}, fastDemo...)...)
	f := h.follow()
	ready := map[string]bool{}
	for len(ready) < 2 {
		ev := f.next("a warm device ready", func(ev event) bool { return ev.Event == "device.ready" })
		ready[ev.str("deviceId")] = true
	}
	g := h.leaseDetached("a", "ios", "--device", "iPhone 17")
	if !ready[g.Device.ID] || g.Source != "warm" {
		t.Errorf("the lease got %s (%s), want one of the warm devices", g.Device.ID, g.Source)
	}
	ev := f.next("the pool refilled", func(ev event) bool { return ev.Event == "device.ready" && !ready[ev.str("deviceId")] })
	_ = ev
	if st := h.run("status"); !strings.Contains(st.stdout, "ios iPhone 17: 2/2 ready") {
		t.Errorf("status does not show the full pool\n%s", st.stdout)
	}
}

// nuke --delete-devices ends every lease as killed, fails the waiting
// request, and leaves no simlock device; a simulator outside simlock's root
// is untouched.
func TestNukeDeletesEverythingSimlockMadeAndNothingElse(t *testing.T) {
	t.Parallel()
	e := shimtest.Build(t)
	h := newHome(t, "capacity.strategy", "fixed", "capacity.config.maxRunning", "1")
	h.withShims(e, "ios")
	theirs := shim(t, e, "xcrun", "simctl", "create", "My iPhone", "com.apple.CoreSimulator.SimDeviceType.iPhone-16", "com.apple.CoreSimulator.SimRuntime.iOS-18-6")
	shim(t, e, "xcrun", "simctl", "boot", theirs)
	f := h.follow()
	g := h.leaseDetached("a", "ios", "--device", "iPhone 16")
	waiter := h.start("lease", "--platform", "ios", "--device", "iPhone 16", "--agent-id", "b", "--detach")
	waiter.waitLine(waiter.stderr, "queued", func(s string) bool { return strings.Contains(s, `"stage":"queued"`) })

	expectFailure(t, h.run("nuke"), 2, "USAGE") // no terminal, no --yes
	r := h.run("nuke", "--yes", "--delete-devices")
	if r.code != 0 || !strings.Contains(r.stdout, g.Lease.ID) {
		t.Fatalf("nuke\n%s", r)
	}
	f.next("lease.released killed", func(ev event) bool {
		return ev.Event == "lease.released" && ev.str("leaseId") == g.Lease.ID && ev.str("reason") == "killed"
	})
	if code := waiter.wait(); code == 0 {
		t.Errorf("the waiting request was granted during a nuke\n%s", waiter.dump())
	}
	var devices struct {
		Devices []map[string]any `json:"devices"`
	}
	if l := h.run("list", "--devices"); json.Unmarshal([]byte(l.stdout), &devices) != nil || len(devices.Devices) != 0 {
		t.Errorf("devices after nuke --delete-devices\n%s", l)
	}
	if list := shim(t, e, "xcrun", "simctl", "list", "devices"); !strings.Contains(list, theirs+") (Booted)") {
		t.Errorf("the foreign simulator was touched:\n%s", list)
	}
	// Acquisition is open again.
	if r := h.run("lease", "--platform", "ios", "--device", "iPhone 16", "--agent-id", "c", "--detach"); r.code != 0 {
		t.Errorf("lease after nuke\n%s", r)
	}
}

// doctor finds a device in simlock's root that no record names, and
// --purge-orphans deletes it only when confirmed; a simulator outside the
// root is never listed or touched.
func TestDoctorFindsAndPurgesOrphans(t *testing.T) {
	t.Parallel()
	e := shimtest.Build(t)
	h := newHome(t)
	h.withShims(e, "ios")
	theirs := shim(t, e, "xcrun", "simctl", "create", "My iPhone", "com.apple.CoreSimulator.SimDeviceType.iPhone-16", "com.apple.CoreSimulator.SimRuntime.iOS-18-6")
	h.startDaemon()
	root := h.path("devices/ios")
	orphan := shim(t, e, "xcrun", "simctl", "--set", root, "create", "stray", "com.apple.CoreSimulator.SimDeviceType.iPhone-16", "com.apple.CoreSimulator.SimRuntime.iOS-18-6")
	r := h.run("doctor")
	if !strings.Contains(r.stdout, `"kind":"orphan"`) || !strings.Contains(r.stdout, orphan) || strings.Contains(r.stdout, theirs) {
		t.Fatalf("doctor does not report the orphan alone\n%s", r)
	}
	expectFailure(t, h.run("doctor", "--purge-orphans"), 2, "USAGE")
	if r := h.run("doctor", "--purge-orphans", "--yes"); r.code != 0 || !strings.Contains(r.stdout, `"fixed":true`) {
		t.Fatalf("purge\n%s", r)
	}
	list := shim(t, e, "xcrun", "simctl", "--set", root, "list", "devices")
	if strings.Contains(list, orphan) {
		t.Errorf("the orphan is still in the root:\n%s", list)
	}
	if all := shim(t, e, "xcrun", "simctl", "list", "devices"); !strings.Contains(all, theirs) {
		t.Errorf("the foreign simulator is gone:\n%s", all)
	}
}

// kill -9, with a held lease's device stopped: the next start ends that
// lease as device-lost, keeps the other, and leaves no device reclaiming.
func TestStartAfterKillEndsTheLeaseOfAStoppedDevice(t *testing.T) {
	t.Parallel()
	h := newHome(t, append([]string{"health.enabled", "false",
		"capacity.strategy", "fixed", "capacity.config.maxRunning", "2"}, fastDemo...)...)
	lost := h.leaseDetached("a", "ios", "--ttl", "10m")
	kept := h.leaseDetached("b", "ios", "--ttl", "10m")
	inject(t, h, lost.Device.ID, "crash") // no health monitor: nobody notices yet
	pid := lockPID(h.Dir)
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if !waitLockFree(h.Dir, waitBound) {
		t.Fatal("the killed daemon still holds its lock")
	}
	after := h.leases() // a new daemon starts and converges
	if _, ok := after[lost.Lease.ID]; ok {
		t.Errorf("the lease of the stopped device survived the restart")
	}
	if _, ok := after[kept.Lease.ID]; !ok {
		t.Errorf("the lease of the running device did not survive: %+v", after)
	}
	r := h.run("events", "--since", "1m")
	if !strings.Contains(r.stdout, `"reason":"device-lost"`) || !strings.Contains(r.stdout, lost.Lease.ID) {
		t.Errorf("no device-lost end for %s in the events\n%s", lost.Lease.ID, r.stdout)
	}
	// Its clean runs in the background; follow the events until it is done
	// (events --follow replays history first, so one already done is seen).
	f := h.follow()
	isClean := func(ev event) bool { return ev.Event == "device.reclaimed" && ev.str("deviceId") == lost.Device.ID }
	if !slices.ContainsFunc(f.events, isClean) {
		f.next("the stopped device cleaned", isClean)
	}
	if st := h.run("status"); strings.Contains(st.stdout, "reclaiming") {
		t.Errorf("a device is stuck reclaiming\n%s", st.stdout)
	}
}

// A damaged demo state file turns its platform off, with the reason in
// status; the other platform still leases.
func TestDamagedDemoStateFileDisablesOnlyItsPlatform(t *testing.T) {
	t.Parallel()
	h := newHome(t, fastDemo...)
	if err := os.WriteFile(h.path("demo-devices.ios.json"), []byte("{not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	st := h.run("status")
	if !strings.Contains(st.stdout, "demo-devices.ios.json") {
		t.Errorf("status does not name the damaged file\n%s", st.stdout)
	}
	if r := h.run("lease", "--platform", "android", "--agent-id", "a", "--detach"); r.code != 0 {
		t.Errorf("android lease with the iOS state file damaged\n%s", r)
	}
	expectFailure(t, h.run("lease", "--platform", "ios", "--agent-id", "b", "--detach"), 12, "NO_DRIVER")
}
