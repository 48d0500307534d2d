package driver

import (
	"context"
	"strings"
	"time"

	"github.com/simlock/simlock/internal/contract"
)

// DeviceTools is what a driver offers when it can act on a running device
// for its lease holder: start and stop apps, open URLs, read the log, set
// the simulated location and appearance. The core calls it only for a
// device under an active lease, and cancels ctx when the lease ends.
//
// Inputs arrive checked by the contract (contract.CheckAppID,
// CheckOpenURL, CheckLogFilter, CheckCoordinates); a driver checks its own
// platform's app id form again (contract.CheckBundleID or
// CheckPackageName) and passes every value to its tool as one argument,
// never through a shell of the host.
type DeviceTools interface {
	// LaunchApp starts the installed app id with args. An app the device
	// does not have is *AppNotInstalledError.
	LaunchApp(ctx context.Context, dev Device, id string, args []string) (contract.AppLaunchResult, error)
	// TerminateApp stops the app id; one that is not running is no error.
	TerminateApp(ctx context.Context, dev Device, id string) error
	// OpenURL opens url on the device. A URL no installed app opens is
	// *NoAppForURLError.
	OpenURL(ctx context.Context, dev Device, url string) error
	// DeviceLogs reads the device's log, its lines oldest first, bounded
	// by contract.BoundLogLines.
	DeviceLogs(ctx context.Context, dev Device, q LogQuery) (contract.DeviceLogs, error)
	// SetLocation sets the device's simulated location.
	SetLocation(ctx context.Context, dev Device, lat, lon float64) error
	// SetAppearance sets light or dark mode.
	SetAppearance(ctx context.Context, dev Device, a contract.Appearance) error
}

// MaxLogOutput is how much of a log tool's output a driver keeps (its
// tail), while the tool writes it: room for the lines an answer may hold
// (contract.MaxLogBytes) four times over, whatever the window asked and
// however much a tenant's app logged in it.
const MaxLogOutput = 4 * contract.MaxLogBytes

// LogQuery is what DeviceLogs reads.
type LogQuery struct {
	// Lines is how many of the last lines to answer (at least 1).
	Lines int
	// Since, when not zero, reads only the lines of the last Since.
	Since time.Duration
	// Process keeps only the lines of that process (iOS) or tag
	// (Android), when not empty.
	Process string
}

// NoAppForURLError is an OpenURL of a URL no app on the device opens: a
// scheme nothing installed claims.
type NoAppForURLError struct {
	URL string
}

func (e *NoAppForURLError) Error() string {
	scheme, _, _ := strings.Cut(e.URL, ":")
	return "no app on the device opens " + scheme + ": URLs; install the app that handles them first"
}

// AppNotInstalledError is a launch of an app the device does not have.
type AppNotInstalledError struct {
	ID string
}

func (e *AppNotInstalledError) Error() string {
	return "no app " + e.ID + " is installed on the device"
}
