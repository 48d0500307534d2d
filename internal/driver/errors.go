package driver

import (
	"errors"
	"fmt"

	"github.com/simlock/simlock/internal/contract"
)

// UnknownModelError: the platform has no such model.
type UnknownModelError struct {
	Platform contract.Platform
	Model    string
}

func (e *UnknownModelError) Error() string {
	return fmt.Sprintf("unknown %s model: %s", e.Platform, e.Model)
}

// RuntimeMissingError: no installed runtime serves the request.
type RuntimeMissingError struct {
	Platform  contract.Platform
	OSVersion string
	// ImageTag is the system image tag asked for, if any.
	ImageTag string
	// Downloadable says a download of Component would help.
	Downloadable bool
	Component    string
}

func (e *RuntimeMissingError) Error() string {
	if e.ImageTag != "" {
		return fmt.Sprintf("no %s runtime %s with image tag %s is installed", e.Platform, e.OSVersion, e.ImageTag)
	}
	return fmt.Sprintf("no %s runtime %s is installed", e.Platform, e.OSVersion)
}

// BootTimeoutError: the device did not become ready in time.
type BootTimeoutError struct {
	DeviceID string
	After    string
}

func (e *BootTimeoutError) Error() string {
	return fmt.Sprintf("device %s did not become ready within %s", e.DeviceID, e.After)
}

// CrashError: a platform tool failed or timed out.
type CrashError struct {
	Op  string
	Err error
}

func (e *CrashError) Error() string { return e.Op + ": " + e.Err.Error() }
func (e *CrashError) Unwrap() error { return e.Err }

// PassthroughRefusedError: a passthrough command simlock will not run,
// because it would reach outside the caller's lease or simlock's root.
type PassthroughRefusedError struct {
	Tool    string
	Message string
}

func (e *PassthroughRefusedError) Error() string { return "simlock " + e.Tool + ": " + e.Message }

// ContractError maps a driver error to the contract error a caller sees.
// Errors that already carry a code keep it; unknown failures are INTERNAL.
func ContractError(err error) *contract.Error {
	var (
		refused *PassthroughRefusedError
		license *LicenseNotAcceptedError
		nodl    *NotDownloadableError
		unknown *UnknownModelError
		missing *RuntimeMissingError
		boot    *BootTimeoutError
		cerr    *contract.Error
		pathNo  *PathRefusedError
		nofile  *FileMissingError
		instNo  *InstallFailedError
		tooBig  *FileTooLargeError
		noApp   *AppNotInstalledError
		noOpen  *NoAppForURLError
	)
	switch {
	case errors.As(err, &cerr):
		return cerr
	case errors.As(err, &unknown):
		return contract.Errorf(contract.CodeUnknownModel, "%s", err.Error()).
			With("platform", unknown.Platform).With("model", unknown.Model)
	case errors.As(err, &missing):
		e := contract.Errorf(contract.CodeRuntimeMissing, "%s", err.Error()).
			With("platform", missing.Platform).With("osVersion", missing.OSVersion).
			With("downloadable", missing.Downloadable)
		if missing.ImageTag != "" {
			e = e.With("imageTag", missing.ImageTag)
		}
		if missing.Component != "" {
			e = e.With("component", missing.Component)
		}
		return e
	case errors.As(err, &license):
		return contract.Errorf(contract.CodeLicenseNotAccepted, "%s", err.Error()).
			With("platform", license.Platform).With("componentName", license.ComponentName)
	case errors.As(err, &nodl):
		e := contract.Errorf(contract.CodeRuntimeMissing, "%s", err.Error()).
			With("platform", nodl.Platform).With("component", nodl.Component).With("downloadable", false)
		if len(nodl.Offered) > 0 {
			e = e.With("offered", nodl.Offered)
		}
		return e
	case errors.As(err, &refused):
		return contract.Errorf(contract.CodePassthroughRefused, "%s", refused.Error()).With("tool", refused.Tool)
	case errors.As(err, &boot):
		return contract.Errorf(contract.CodeInternal, "%s", boot.Error()).With("reason", string(contract.RejectBootTimeout))
	case errors.As(err, &pathNo):
		return contract.Errorf(contract.CodeDevicePathRefused, "%s", pathNo.Error()).With("path", pathNo.Path)
	case errors.As(err, &nofile):
		return contract.Errorf(contract.CodeDeviceFileMissing, "%s", nofile.Error()).With("path", nofile.Path)
	case errors.As(err, &instNo):
		return contract.Errorf(contract.CodeAppInstallFailed, "%s", instNo.Error())
	case errors.As(err, &noApp):
		return contract.Errorf(contract.CodeAppNotInstalled, "%s", noApp.Error()).With("appId", noApp.ID)
	case errors.As(err, &noOpen):
		return contract.Errorf(contract.CodeAppNotInstalled, "%s", noOpen.Error()).With("url", contract.Clip(noOpen.URL))
	case errors.As(err, &tooBig):
		return contract.Errorf(contract.CodeBodyTooLarge, "%s", tooBig.Error()).With("path", tooBig.Path).With("maxBytes", tooBig.Max)
	}
	return contract.Errorf(contract.CodeInternal, "%s", err.Error())
}
