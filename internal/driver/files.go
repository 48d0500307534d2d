package driver

import (
	"context"
	"fmt"

	"github.com/simlock/simlock/internal/appbundle"
	"github.com/simlock/simlock/internal/contract"
)

// Files is what a driver offers when it can move files and apps into and
// out of its devices, and take screenshots, for a lease holder that names
// no host path: the daemon stages every byte in files it owns (under
// SIMLOCK_HOME) and hands the driver those, never a path a caller chose.
// The core calls it only for a device under an active lease, never at the
// same time as another operation on that device, and cancels ctx when the
// lease ends.
//
// Device paths are contract device paths, already checked by
// contract.CheckDevicePath; a driver refuses with *PathRefusedError what
// its platform's model does not allow (the form it does not serve, a path
// that leaves the device's tree once symlinks are followed, simlock's own
// marks), before it touches anything.
type Files interface {
	// PushFile copies the staged file src to path on dev, making the
	// directories it needs.
	PushFile(ctx context.Context, dev Device, src, path string) error
	// PullFile copies path on dev to dst, a file that does not exist yet
	// in a directory the daemon owns, writing at most about max bytes
	// there: a file larger than max (or one with no end, such as a
	// device's /dev/zero) is *FileTooLargeError, with dst deleted. A path
	// that is not there is *FileMissingError.
	PullFile(ctx context.Context, dev Device, path, dst string, max int64) error
	// InstallApp installs the app in up on dev. up.App says what it is,
	// and is of the driver's platform. A refusal of the platform's
	// installer is *InstallFailedError.
	InstallApp(ctx context.Context, dev Device, up AppUpload) (contract.InstalledApp, error)
	// Screenshot writes a PNG of dev's screen to dst, a file that does not
	// exist yet in a directory the daemon owns.
	Screenshot(ctx context.Context, dev Device, dst string) error
}

// AppUpload is an app staged for InstallApp.
type AppUpload struct {
	appbundle.App
	// Path is the staged upload.
	Path string
	// Scratch is an empty directory the daemon owns (and deletes after),
	// for what the driver unpacks.
	Scratch string
	// MaxBytes bounds what the driver unpacks (exec.maxUploadBytes).
	MaxBytes int64
}

// PathRefusedError is a device path a driver will not read or write.
type PathRefusedError struct {
	Path   string
	Reason string
}

func (e *PathRefusedError) Error() string {
	return fmt.Sprintf("device path %s refused: %s", e.Path, e.Reason)
}

// FileMissingError is a pull of a device path that is not there.
type FileMissingError struct {
	Path string
}

func (e *FileMissingError) Error() string { return "no file " + e.Path + " on the device" }

// FileTooLargeError is a pull of a device file larger than the bound the
// daemon set (exec.maxUploadBytes).
type FileTooLargeError struct {
	Path string
	Max  int64
}

func (e *FileTooLargeError) Error() string {
	return fmt.Sprintf("device file %s is larger than exec.maxUploadBytes (%d bytes)", e.Path, e.Max)
}

// InstallFailedError is an app the platform's installer refused.
type InstallFailedError struct {
	// Detail is what the installer said.
	Detail string
}

func (e *InstallFailedError) Error() string { return "the app was not installed: " + e.Detail }
