package contract

// DeviceState is where a virtual device is in its life.
type DeviceState string

// The device states. See core.DeviceTransitions for the allowed moves.
const (
	DeviceProvisioning DeviceState = "provisioning"
	DeviceReady        DeviceState = "ready"
	DeviceLeased       DeviceState = "leased"
	DeviceReclaiming   DeviceState = "reclaiming"
	DeviceShutdown     DeviceState = "shutdown"
	DeviceQuarantined  DeviceState = "quarantined"
	DeviceDeleted      DeviceState = "deleted"
)

// DeviceSpec is what a device is: platform, model and OS version, on
// Android the system image's tag (google_apis, google_apis_playstore, …),
// and on iOS whether it is made to run slim.
type DeviceSpec struct {
	Platform  Platform `json:"platform"`
	Model     string   `json:"model"`
	OSVersion string   `json:"osVersion"`
	ImageTag  string   `json:"imageTag,omitempty"`
	// Mode is DeviceModeSlim for a device made to run with background
	// services disabled; "" is a full device. Only a slim request is
	// served by a slim device, and a full one (or one with no mode, when
	// the default is full) only by a full device.
	Mode DeviceMode `json:"mode,omitempty"`
}

// DeviceMode is how much of the platform a device runs: full, or slim (iOS
// only: the background services of ios.slim.categories disabled, so it
// boots faster and takes less memory).
type DeviceMode string

// The device modes. Full is a guarantee; slim is best effort: a device
// whose runtime cannot be slimmed, or whose slim pass failed, is served
// full, and the grant says so.
const (
	DeviceModeFull DeviceMode = "full"
	DeviceModeSlim DeviceMode = "slim"
)

// SlimCategories names the groups of iOS background services a slim device
// can run without (ios.slim.categories), in the order they are listed.
func SlimCategories() []string {
	return []string{"widgets", "siri", "search", "icloud", "store", "pim", "web", "family", "health", "photos",
		"apps", "messaging", "connectivity", "telemetry", "other"}
}

// CheckDeviceMode checks a request's mode ("" is the daemon's default).
func CheckDeviceMode(m DeviceMode) error {
	switch m {
	case "", DeviceModeFull, DeviceModeSlim:
		return nil
	}
	return BadRequest("mode", "must be slim or full, got %q", clip(string(m)))
}

// Device is a device record as callers see it.
type Device struct {
	ID             string      `json:"id"`
	DriverDeviceID string      `json:"driverDeviceId"`
	Driver         string      `json:"driver"`
	Spec           DeviceSpec  `json:"spec"`
	State          DeviceState `json:"state"`
	Address        string      `json:"address,omitempty"`
	LeaseID        string      `json:"leaseId,omitempty"`
	// LeaseKey is the unique key of the lease that holds the device, when
	// its id was chosen (see LeaseRecord.Key).
	LeaseKey   string `json:"leaseKey,omitempty"`
	CreatedAt  int64  `json:"createdAt"`
	StateSince int64  `json:"stateSince"`
	LastUsedAt int64  `json:"lastUsedAt,omitempty"`
	// Slimmed is set while a slim device's slim pass is in effect: from
	// the boot that applied it until a clean erases it.
	Slimmed bool `json:"slimmed,omitempty"`
	// TransitionAgeMs is how long a provisioning or reclaiming device has
	// been so, and Stalled whether that is past the stall threshold
	// (stalledTransition.*). Status sets them; other views leave them out.
	TransitionAgeMs int64 `json:"transitionAgeMs,omitempty"`
	Stalled         bool  `json:"stalled,omitempty"`
	// WorkerID names the worker the device is on, in a gateway's lists.
	WorkerID string `json:"workerId,omitempty"`
}
