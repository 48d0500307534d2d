// Package howto says, in words, how to reach a leased device: through
// simlock's own simctl and adb, which check that the lease is the caller's,
// or through the platform's tools with the grant's environment. The MCP
// server's grants and the CLI's grant view say it from here, so the two
// never disagree.
package howto

import (
	"fmt"

	"github.com/simlock/simlock/internal/contract"
)

// Use is the sentence or two that tells a lease holder how to run commands
// on its device.
func Use(g contract.LeaseGrant) string {
	lease, addr := g.Lease.ID, g.Device.Address
	switch {
	case g.Environment[contract.EnvDemo] != "":
		return fmt.Sprintf("A simulated %s device (simlock's demo driver): no simulator or emulator runs behind it.", g.Device.Spec.Platform)
	case g.Device.Spec.Platform == contract.PlatformIOS:
		return fmt.Sprintf("iOS simulator %[1]s (%[2]s, iOS %[3]s). Run simctl on it with `simlock simctl --lease %[4]s <command> %[1]s …`, "+
			"for example `simlock simctl --lease %[4]s install %[1]s path/to/App.app`; or with Xcode's own: `xcrun simctl --set '%[5]s' <command> %[1]s …`.",
			addr, g.Device.Spec.Model, g.Device.Spec.OSVersion, lease, g.Environment[contract.EnvIOSDeviceSet])
	case g.Device.Spec.Platform == contract.PlatformAndroid:
		return fmt.Sprintf("Android emulator %[1]s (%[2]s, Android %[3]s). Run adb on it with `simlock adb --lease %[4]s <command>`, "+
			"for example `simlock adb --lease %[4]s install app.apk`; or with the SDK's own: `ANDROID_ADB_SERVER_PORT=%[5]s adb -s %[1]s <command>`.",
			addr, g.Device.Spec.Model, g.Device.Spec.OSVersion, lease, g.Environment[contract.EnvAndroidADBPort])
	}
	return "Device " + addr + "; its environment is in the grant."
}
