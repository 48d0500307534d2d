package driver

import (
	"context"
	"fmt"

	"github.com/simlock/simlock/internal/contract"
)

// Installer is what a driver offers when it can download, list and remove
// runtimes (components): an iOS simulator runtime, an Android system image.
// Only the core's component installer calls it; it serialises installs per
// platform, so a driver never runs two installs at once.
type Installer interface {
	// FindComponent reports whether component is installed, and as what.
	// A component is a version ("26.4"), a bare major ("26"), "latest"
	// (iOS), or an API level ("36", Android): the string a
	// *RuntimeMissingError names, carried unread by the core.
	FindComponent(ctx context.Context, component string) (ComponentInfo, bool, error)
	// InstallComponent downloads and installs component. progress is called
	// with each percentage (0-100, possibly fractional, possibly repeated)
	// the installer prints, and the sizes when it prints them, from one
	// goroutine at a time. It returns once a fresh read of the platform
	// shows the component installed; when it was installed before the run,
	// AlreadyInstalled is set. Ending ctx stops the installer process.
	InstallComponent(ctx context.Context, component string, progress func(InstallProgress)) (InstallResult, error)
	// RemoveComponent deletes an installed component, then checks it is
	// gone.
	RemoveComponent(ctx context.Context, c ComponentInfo) error
	// ListComponents lists the installed components, with how many devices
	// outside simlock's root use each.
	ListComponents(ctx context.Context) ([]ComponentInfo, error)
	// ComponentFootprint is the free disk space an install of component
	// needs, in bytes.
	ComponentFootprint(component string) int64
	// ComponentDir is a directory on the volume installs write to, for the
	// free-space check ("" when the driver writes nothing to disk).
	ComponentDir() string
}

// ComponentInfo is an installed component.
type ComponentInfo struct {
	Platform contract.Platform `json:"platform"`
	// Version is the installed runtime's OS version ("26.4") or API level
	// ("36"): what device specs name.
	Version string `json:"version"`
	// Name is the platform's name for it ("iOS 26.4 (23E244)",
	// "system-images;android-36;google_apis;arm64-v8a").
	Name string `json:"name"`
	// Receipt identifies this very install (a runtime identifier and
	// build, a package and its stamp), so a record of an install matches
	// only it and not a later reinstall by someone else.
	Receipt   string `json:"receipt"`
	SizeBytes int64  `json:"sizeBytes,omitempty"`
	// ForeignDevices counts devices outside simlock's root that use it.
	ForeignDevices int `json:"foreignDevices"`
}

// InstallResult is what InstallComponent did.
type InstallResult struct {
	ComponentInfo
	AlreadyInstalled bool
}

// LicenseNotAcceptedError: the Android SDK refused to install a package
// whose license has not been accepted, and simlock was not allowed to
// accept it (downloads.acceptAndroidLicenses).
type LicenseNotAcceptedError struct {
	Platform      contract.Platform
	ComponentName string
}

func (e *LicenseNotAcceptedError) Error() string {
	return fmt.Sprintf("the license of %s has not been accepted; accept it with sdkmanager --licenses, or set downloads.acceptAndroidLicenses", e.ComponentName)
}

// NotDownloadableError: the platform cannot download this component (an
// iOS version below the download floor, a build Apple does not offer).
type NotDownloadableError struct {
	Platform  contract.Platform
	Component string
	Reason    string
	// Offered are the components the driver can download instead, when it
	// knows them; the refusal's next step names them.
	Offered []string
}

func (e *NotDownloadableError) Error() string {
	return fmt.Sprintf("%s component %s cannot be downloaded: %s", e.Platform, e.Component, e.Reason)
}

// InstallStep says what an InstallProgress reports.
type InstallStep int

const (
	// InstallFigures: how far the download is (Percent, and the sizes
	// when the installer printed them).
	InstallFigures InstallStep = iota
	// InstallLine: a line the installer printed with no figure on it.
	InstallLine
	// InstallVerify: the installer is done, and the driver reads the
	// platform afresh to see the component installed.
	InstallVerify
)

// InstallProgress is one step of an install as the installer printed it.
type InstallProgress struct {
	Step InstallStep
	// Percent is from 0 to 100, possibly fractional.
	Percent float64
	// Bytes and Total are what is downloaded and the whole, when the
	// installer prints them; 0 when it does not.
	Bytes, Total int64
	// Line is the installer's line the step was read from ("" for
	// InstallVerify), and Stream where it printed it: stdout or stderr.
	Line, Stream string
}
