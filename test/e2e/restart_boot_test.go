package e2e

import (
	"encoding/json"
	"strings"
	"syscall"
	"testing"
)

// A daemon killed with SIGKILL while a device boots, and started again,
// leaves that device ready, not failed: the boot went on without it (as a
// simulator's does), and the start waits for it instead of destroying the
// half-made device.
func TestADeviceBootingWhenTheDaemonIsKilledIsReadyAfterTheRestart(t *testing.T) {
	t.Parallel()
	h := newHome(t, "drivers.demo.provisionMs", "60", "drivers.demo.bootMs", "3000", "drivers.demo.reclaimMs", "60",
		"capacity.strategy", "fixed", "capacity.config.maxRunning", "2")
	h.startDaemon()
	p := h.start("lease", "--platform", "ios", "--agent-id", "booting", "--progress", "json")
	p.waitLine(p.stderr, "the booting step", func(s string) bool { return strings.Contains(s, `"stage":"booting"`) })
	var st struct {
		Waiting []struct {
			DeviceID string `json:"deviceId"`
		} `json:"waiting"`
	}
	if r := h.run("status", "--json"); r.code != 0 || json.Unmarshal([]byte(r.stdout), &st) != nil || len(st.Waiting) != 1 || st.Waiting[0].DeviceID == "" {
		t.Fatalf("status while the device boots: want one waiting request naming its device\n%s", r)
	}
	id := st.Waiting[0].DeviceID
	if err := syscall.Kill(lockPID(h.Dir), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	p.wait()
	h.startDaemon()
	f := h.follow()
	ready := f.next("the device ready after the restart", func(ev event) bool {
		return ev.str("deviceId") == id && (ev.Event == "device.ready" || ev.Event == "device.deleted" || ev.Event == "device.quarantined")
	})
	if ready.Event != "device.ready" || ready.str("initiator") != "startup" {
		t.Fatalf("after the restart the booting device got %s %v, want device.ready (initiator startup)", ready.Event, ready.Payload)
	}
	// It serves: a lease now is a warm grant of that very device.
	g := h.leaseDetached("after", "ios")
	if g.Device.ID != id {
		t.Errorf("a lease after the restart got %s, want the device whose boot went on, %s", g.Device.ID, id)
	}
}
