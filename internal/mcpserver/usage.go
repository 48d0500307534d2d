package mcpserver

import (
	"fmt"

	"github.com/simlock/simlock/internal/contract"
)

// grantResult is what lease_simulator and wait_for_lease answer with a
// grant: the grant itself and, in words, how to use the device.
type grantResult struct {
	*contract.LeaseGrant
	Usage string `json:"usage"`
}

func withUsage(g *contract.LeaseGrant) grantResult {
	return grantResult{LeaseGrant: g, Usage: usage(*g)}
}

// usage tells an agent how to reach its device: through simlock's scoped
// simctl/adb (which checks the lease is theirs), or the platform tool with
// the grant's environment.
func usage(g contract.LeaseGrant) string {
	lease, addr := g.Lease.ID, g.Device.Address
	keep := " This server renews the lease while it runs; call release_simulator when you are done."
	switch {
	case g.Environment["SIMLOCK_DEMO"] != "":
		return fmt.Sprintf("A simulated %s device (simlock's demo driver): no simulator or emulator runs behind it.", g.Device.Spec.Platform) + keep
	case g.Device.Spec.Platform == contract.PlatformIOS:
		set := g.Environment["SIMLOCK_IOS_DEVICE_SET"]
		return fmt.Sprintf("iOS simulator %[1]s (%[2]s, iOS %[3]s). Run simctl on it with `simlock simctl --lease %[4]s <command> %[1]s …`, "+
			"for example `simlock simctl --lease %[4]s install %[1]s path/to/App.app`; or with Xcode's own: `xcrun simctl --set '%[5]s' <command> %[1]s …`.",
			addr, g.Device.Spec.Model, g.Device.Spec.OSVersion, lease, set) + keep
	case g.Device.Spec.Platform == contract.PlatformAndroid:
		port := g.Environment["ANDROID_ADB_SERVER_PORT"]
		return fmt.Sprintf("Android emulator %[1]s (%[2]s, Android %[3]s). Run adb on it with `simlock adb --lease %[4]s <command>`, "+
			"for example `simlock adb --lease %[4]s install app.apk`; or with the SDK's own: `ANDROID_ADB_SERVER_PORT=%[5]s adb -s %[1]s <command>`.",
			addr, g.Device.Spec.Model, g.Device.Spec.OSVersion, lease, port) + keep
	}
	return "Device " + addr + "; its environment is in the grant." + keep
}
