package contract

// LeaseRecord is a held lease. Times are epoch milliseconds.
//
// ID is the lease's id as its owner names it: the one its request chose
// (leaseId, unique only among its owner's leases), or else the daemon's
// own, unique key. Key is that unique key when the id was chosen, so an
// operator can name one of two owners' leases of the same chosen id;
// UniqueKey is the key either way, what the store, the events and the
// usage figures name the lease by.
type LeaseRecord struct {
	ID            string `json:"id"`
	Key           string `json:"key,omitempty"`
	DeviceID      string `json:"deviceId"`
	RequesterID   string `json:"requesterId"`
	OwnerID       string `json:"ownerId"`
	GrantedAt     int64  `json:"grantedAt"`
	TTLMs         int64  `json:"ttlMs"`
	LastRenewedAt int64  `json:"lastRenewedAt"`
	TTLDeadline   int64  `json:"ttlDeadline"`
	// BoundPID is the local process whose exit ends the lease (lease.bind,
	// simlock lease --bind-pid), if any.
	BoundPID int `json:"boundPid,omitempty"`
	// IDChosenByRequester: the id is the one the request chose
	// (lease.request's leaseId), not one the daemon made.
	IDChosenByRequester bool `json:"idChosenByRequester,omitempty"`
	// WorkerID names the worker the lease is on, in a gateway's lists.
	WorkerID string `json:"workerId,omitempty"`
	// Worker names the worker the lease is on, by id and label, in every
	// lease record a gateway answers (WorkerID is kept beside it).
	Worker *WorkerRef `json:"worker,omitempty"`
	// Unreachable marks, in a gateway's lists, a lease whose worker is not
	// connected: the gateway keeps it (it ends with its TTL on the worker)
	// and calls on it answer WORKER_UNREACHABLE until the worker is back.
	Unreachable bool `json:"unreachable,omitempty"`
}

// WorkerRef names a gateway's worker: its id and its label.
type WorkerRef struct {
	ID    string `json:"id"`
	Label string `json:"label"`
}

// UniqueKey is the lease's unique key on the daemon that granted it: Key
// when its id was chosen, its id otherwise.
func (l LeaseRecord) UniqueKey() string {
	if l.Key != "" {
		return l.Key
	}
	return l.ID
}

// GrantDevice is the device part of a grant.
type GrantDevice struct {
	ID             string     `json:"id"`
	DriverDeviceID string     `json:"driverDeviceId"`
	Spec           DeviceSpec `json:"spec"`
	Address        string     `json:"address,omitempty"`
	// Mode is how the device runs now: slim only when its slim pass is in
	// effect, full otherwise (a slim request on a runtime that cannot be
	// slimmed, or whose pass failed, is served full).
	Mode DeviceMode `json:"mode"`
	// WorkerID names the worker the device is on, in a gateway's grant.
	WorkerID string `json:"workerId,omitempty"`
}

// Timing carries the driver's estimates for the granted device, in ms.
type Timing struct {
	EstimatedProvisionMs int64 `json:"estimatedProvisionMs"`
	EstimatedBootMs      int64 `json:"estimatedBootMs"`
	EstimatedReclaimMs   int64 `json:"estimatedReclaimMs"`
	EstimatedReadyMs     int64 `json:"estimatedReadyMs"`
}

// LeaseGrant is what a requester gets: the device, the lease and timings.
type LeaseGrant struct {
	Device      GrantDevice       `json:"device"`
	Lease       LeaseRecord       `json:"lease"`
	Timing      Timing            `json:"timing"`
	Environment map[string]string `json:"environment"`
	RequestID   string            `json:"requestId"`
	Source      GrantSource       `json:"source"`
	// EventSeq is the seq of the last event of the decision that granted
	// the lease, on the daemon that answers: a status.get whose EventSeq is
	// at least this was read after the grant. Set on the answer to the
	// request that waited for it (0 when read back from a stored request).
	EventSeq int64 `json:"eventSeq,omitempty"`
}

// The variables a grant's Environment may hold, set by the driver that
// made the device.
const (
	// EnvIOSDeviceSet names the iOS device set, so a holder's own `xcrun
	// simctl --set "$SIMLOCK_IOS_DEVICE_SET" …` finds the leased simulator.
	EnvIOSDeviceSet = "SIMLOCK_IOS_DEVICE_SET"
	// EnvAndroidADBPort is the port of the adb server simlock runs, for
	// the SDK's own adb.
	EnvAndroidADBPort = "ANDROID_ADB_SERVER_PORT"
	// EnvDemo marks a device of the demo driver: nothing runs behind it.
	EnvDemo = "SIMLOCK_DEMO"
)

// GrantSource says how a grant's device came to be ready.
type GrantSource string

// The grant sources.
const (
	SourceWarm        GrantSource = "warm"
	SourceBooted      GrantSource = "booted"
	SourceProvisioned GrantSource = "provisioned"
)
