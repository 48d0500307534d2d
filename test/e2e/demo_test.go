package e2e

import "testing"

// `demo inject` on a device id the daemon does not have is UNKNOWN_DEVICE,
// exit 1, as the exit-code table of docs/CLI.md says of an unknown device,
// with the command that lists the devices as its next step.
func TestDemoInjectOnAnUnknownDeviceExits1(t *testing.T) {
	t.Parallel()
	h := newHome(t, fastDemo...)
	e := expectFailure(t, h.run("demo", "inject", "dev_0000000000000000", "crash"), 1, "UNKNOWN_DEVICE")
	if e["deviceId"] != "dev_0000000000000000" || e["next"] != "simlock list --devices shows the devices" {
		t.Errorf("demo inject on an unknown device: %v, want its deviceId and the list as next step", e)
	}
}
