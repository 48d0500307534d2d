package contract

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// Platform is a device platform.
type Platform string

// The platforms simlock serves.
const (
	PlatformIOS     Platform = "ios"
	PlatformAndroid Platform = "android"
)

// Platforms lists every platform in a fixed order.
func Platforms() []Platform { return []Platform{PlatformIOS, PlatformAndroid} }

// NumPlatforms is how many platforms there are.
const NumPlatforms = 2

// Index is p's place in Platforms, or -1 for an unknown platform.
func (p Platform) Index() int {
	switch p {
	case PlatformIOS:
		return 0
	case PlatformAndroid:
		return 1
	}
	return -1
}

// Valid reports whether p is a known platform.
func (p Platform) Valid() bool { return p == PlatformIOS || p == PlatformAndroid }

// DeviceClass is a kind of device a request may ask for instead of a model.
type DeviceClass string

// The device classes.
const (
	ClassPhone   DeviceClass = "phone"
	ClassTablet  DeviceClass = "tablet"
	ClassWatch   DeviceClass = "watch"
	ClassTV      DeviceClass = "tv"
	ClassVision  DeviceClass = "vision"
	ClassAuto    DeviceClass = "auto"
	ClassDesktop DeviceClass = "desktop"
)

// Classes lists the device classes.
func Classes() []DeviceClass {
	return []DeviceClass{ClassPhone, ClassTablet, ClassWatch, ClassTV, ClassVision, ClassAuto, ClassDesktop}
}

// Valid reports whether c is a known class.
func (c DeviceClass) Valid() bool { return slices.Contains(Classes(), c) }

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

// Stage names a step of a lease request's wait.
type Stage string

// The stages a waiting requester sees, in the order they can happen.
const (
	StageQueued       Stage = "queued"
	StageDownloading  Stage = "downloading"
	StageReclaiming   Stage = "reclaiming"
	StageProvisioning Stage = "provisioning"
	StageBooting      Stage = "booting"
)

// Bounds of the downloading stage's fields.
const (
	MaxComponentLen = 64
	MaxPercent      = 100
)

// LeaseProgress is one step of a wait, pushed to the requester as it happens.
// Queued carries QueuePosition (from 1); downloading carries Component,
// Waiting (still behind another install) and, once the installer printed
// one, Percent; the other stages carry EtaMs.
type LeaseProgress struct {
	Stage         Stage
	QueuePosition int
	EtaMs         int64
	Component     string
	Waiting       bool
	// Percent is a whole number from 0 to 100, or nil while unknown.
	Percent *int
	// BytesDone and BytesTotal are a download's size so far and in all,
	// when the installer prints them (0 otherwise). They do not make a
	// step new by themselves (see Same): a step is sent once per percent.
	BytesDone, BytesTotal int64
	// Wait, on the queued step of the first in line, says what it waits
	// for; nil when the daemon does not know (and behind the first).
	Wait *QueueWait
	// Detail, on a booting step, says where the boot is, as the driver
	// sees it ("waiting for sys.boot_completed"); "" when it says nothing.
	Detail string
}

// MaxProgressDetailLen bounds a progress step's detail.
const MaxProgressDetailLen = 200

// QueueWait is what the first request in line waits for: a limit that is
// full, and the lease under it due to end soonest.
type QueueWait struct {
	// Limit is the full limit: WaitPlatformRunning, WaitMachineRunning,
	// WaitDevices or WaitRAM.
	Limit string `json:"limit"`
	// InUse and Max are the limit's use and size: devices running, or
	// kept; MiB for the RAM budget.
	InUse int `json:"inUse"`
	Max   int `json:"max"`
	// LeaseID, Holder (its requester id) and EndsAt (its TTL deadline, ms
	// since the epoch) name the lease under the limit that ends soonest
	// unless renewed; empty when no lease holds a slot of it.
	LeaseID string `json:"leaseId,omitempty"`
	Holder  string `json:"holder,omitempty"`
	EndsAt  int64  `json:"endsAt,omitempty"`
}

// The limits a queued request may wait on.
const (
	WaitPlatformRunning = "platform-running"
	WaitMachineRunning  = "machine-running"
	WaitDevices         = "devices"
	WaitRAM             = "ram-budget"
)

// Words says, for a person, what the first in line waits for: the full
// limit and the lease under it due to end first, counted down to now
// ("1/1 running: lse_… held by holder2, expires in 14m"). The CLI's live
// line and the MCP progress message both say it so.
func (w QueueWait) Words(now time.Time) string {
	limit, holder, ends := w.WordParts(now)
	if holder == "" {
		return limit
	}
	return limit + ": " + holder + ", " + ends
}

// WordParts are Words in its three parts, for a line that has room for
// only some of them: the limit reached, the lease whose end frees it and
// who holds it, and when that lease ends ("" for the last two when no
// lease is named).
func (w QueueWait) WordParts(now time.Time) (limit, holder, ends string) {
	switch w.Limit {
	case WaitMachineRunning:
		limit = fmt.Sprintf("%d/%d running on this machine", w.InUse, w.Max)
	case WaitDevices:
		limit = fmt.Sprintf("%d/%d devices exist, the most allowed", w.InUse, w.Max)
	case WaitRAM:
		limit = fmt.Sprintf("RAM budget %d/%d MiB in use", w.InUse, w.Max)
	default:
		limit = fmt.Sprintf("%d/%d running", w.InUse, w.Max)
	}
	if w.LeaseID == "" {
		return limit, "", ""
	}
	holder = w.LeaseID + " held by " + w.Holder
	left := time.UnixMilli(w.EndsAt).Sub(now)
	switch {
	case left <= 0:
		ends = "due to expire unless renewed"
	case left < time.Minute:
		ends = fmt.Sprintf("expires in %ds", int((left+time.Second-1)/time.Second))
	case left < time.Hour:
		ends = fmt.Sprintf("expires in %dm", int((left+time.Minute-1)/time.Minute))
	default:
		h := (left + time.Minute - 1) / time.Minute
		ends = fmt.Sprintf("expires in %dh%02dm", int(h/60), int(h%60))
	}
	return limit, holder, ends
}

// MaxDownloadBytes bounds a download's size read from the wire (1 PB).
const MaxDownloadBytes = 1_000_000_000_000_000

// CheckBytes refuses download sizes no installer prints: negative, past
// MaxDownloadBytes, or done past the total.
func CheckBytes(done, total int64) error {
	switch {
	case done < 0 || total < 0 || total > MaxDownloadBytes:
	case total == 0 && done != 0:
	case done > total:
	default:
		return nil
	}
	return BadRequest("bytesDone", "must be from 0 to bytesTotal, which is at most %d; got %d of %d", int64(MaxDownloadBytes), done, total)
}

// Bytes is a size as installers print it: decimal units (a GB is 10^9
// bytes), one decimal from MB up.
func Bytes(n int64) string {
	switch {
	case n >= 1e12:
		return fmt.Sprintf("%.1f TB", float64(n)/1e12)
	case n >= 1e9:
		return fmt.Sprintf("%.1f GB", float64(n)/1e9)
	case n >= 1e6:
		return fmt.Sprintf("%.1f MB", float64(n)/1e6)
	case n >= 1e3:
		return fmt.Sprintf("%d kB", n/1e3)
	}
	return fmt.Sprintf("%d B", n)
}

// SizeWords says how far a download is, for a person ("3.6 GB of 8.9
// GB"), or "" when its total is unknown. The CLI's bar and the MCP
// progress message both say it so.
func SizeWords(done, total int64) string {
	if total <= 0 {
		return ""
	}
	return Bytes(done) + " of " + Bytes(total)
}

// maxWaitCount bounds InUse and Max when read from the wire.
const maxWaitCount = 1 << 20

// check refuses a wait read from the wire that no daemon sends.
func (w *QueueWait) check() error {
	switch w.Limit {
	case WaitPlatformRunning, WaitMachineRunning, WaitDevices, WaitRAM:
	default:
		return BadRequest("wait.limit", "must be %s, %s, %s or %s", WaitPlatformRunning, WaitMachineRunning, WaitDevices, WaitRAM)
	}
	if w.InUse < 0 || w.InUse > maxWaitCount || w.Max < 0 || w.Max > maxWaitCount {
		return BadRequest("wait", "inUse and max must be from 0 to %d", maxWaitCount)
	}
	if len(w.LeaseID) > MaxIDLen || len(w.Holder) > MaxIDLen {
		return BadRequest("wait", "leaseId and holder must be at most %d characters", MaxIDLen)
	}
	// They are shown on terminals: no control characters (escapes).
	if strings.ContainsFunc(w.LeaseID+w.Holder, unicode.IsControl) {
		return BadRequest("wait", "leaseId and holder must be printable")
	}
	if w.EndsAt < 0 {
		return BadRequest("wait.endsAt", "must not be negative")
	}
	return nil
}

// MarshalJSON writes only the fields that belong to the stage.
func (p LeaseProgress) MarshalJSON() ([]byte, error) {
	switch p.Stage {
	case StageQueued:
		return json.Marshal(struct {
			Stage         Stage      `json:"stage"`
			QueuePosition int        `json:"queuePosition"`
			Wait          *QueueWait `json:"wait,omitempty"`
		}{p.Stage, p.QueuePosition, p.Wait})
	case StageDownloading:
		return json.Marshal(struct {
			Stage      Stage  `json:"stage"`
			Component  string `json:"component"`
			Waiting    bool   `json:"waiting"`
			Percent    *int   `json:"percent,omitempty"`
			BytesDone  int64  `json:"bytesDone,omitempty"`
			BytesTotal int64  `json:"bytesTotal,omitempty"`
		}{p.Stage, p.Component, p.Waiting, p.Percent, p.BytesDone, p.BytesTotal})
	}
	return json.Marshal(struct {
		Stage  Stage  `json:"stage"`
		EtaMs  int64  `json:"etaMs"`
		Detail string `json:"detail,omitempty"`
	}{p.Stage, p.EtaMs, p.Detail})
}

// UnmarshalJSON reads any stage, refusing a downloading step whose
// component or percent is out of bounds: a relayed push is checked before
// anyone acts on it.
func (p *LeaseProgress) UnmarshalJSON(b []byte) error {
	var w struct {
		Stage         Stage      `json:"stage"`
		QueuePosition int        `json:"queuePosition"`
		EtaMs         int64      `json:"etaMs"`
		Component     string     `json:"component"`
		Waiting       bool       `json:"waiting"`
		Percent       *int       `json:"percent"`
		Wait          *QueueWait `json:"wait"`
		BytesDone     int64      `json:"bytesDone"`
		BytesTotal    int64      `json:"bytesTotal"`
		Detail        string     `json:"detail"`
	}
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	if len(w.Detail) > MaxProgressDetailLen || !printable(w.Detail) {
		return BadRequest("detail", "must be at most %d printable characters", MaxProgressDetailLen)
	}
	if w.Wait != nil {
		if w.Stage != StageQueued {
			return BadRequest("wait", "belongs to the queued stage only")
		}
		if err := w.Wait.check(); err != nil {
			return err
		}
	}
	if w.Stage == StageDownloading {
		if w.Component == "" || len(w.Component) > MaxComponentLen {
			return BadRequest("component", "must be 1 to %d characters, got %d", MaxComponentLen, len(w.Component))
		}
		if w.Percent != nil && (*w.Percent < 0 || *w.Percent > MaxPercent) {
			return BadRequest("percent", "must be a whole number from 0 to %d, got %d", MaxPercent, *w.Percent)
		}
	}
	if err := CheckBytes(w.BytesDone, w.BytesTotal); err != nil {
		return err
	}
	*p = LeaseProgress{Stage: w.Stage, QueuePosition: w.QueuePosition, EtaMs: w.EtaMs, Component: w.Component, Waiting: w.Waiting, Percent: w.Percent,
		BytesDone: w.BytesDone, BytesTotal: w.BytesTotal, Wait: w.Wait, Detail: w.Detail}
	return nil
}

// printable reports whether s is valid UTF-8 with no control characters.
func printable(s string) bool {
	if !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if unicode.IsControl(r) {
			return false
		}
	}
	return true
}

// Same reports whether two steps say the same thing.
func (p LeaseProgress) Same(q LeaseProgress) bool {
	if p.Percent != nil && q.Percent != nil {
		if *p.Percent != *q.Percent {
			return false
		}
	} else if (p.Percent == nil) != (q.Percent == nil) {
		return false
	}
	if (p.Wait == nil) != (q.Wait == nil) || (p.Wait != nil && *p.Wait != *q.Wait) {
		return false
	}
	return p.Stage == q.Stage && p.QueuePosition == q.QueuePosition && p.EtaMs == q.EtaMs &&
		p.Component == q.Component && p.Waiting == q.Waiting && p.Detail == q.Detail
}

// RequestState is where a lease request is. Granted, failed and cancelled are
// terminal.
type RequestState string

// The request states.
const (
	RequestQueued    RequestState = "queued"
	RequestStarting  RequestState = "starting"
	RequestGranted   RequestState = "granted"
	RequestFailed    RequestState = "failed"
	RequestCancelled RequestState = "cancelled"
)

// Terminal reports whether the request has settled.
func (s RequestState) Terminal() bool {
	return s == RequestGranted || s == RequestFailed || s == RequestCancelled
}

// LeaseRequestRecord is a stored lease request.
type LeaseRequestRecord struct {
	ID             string       `json:"id"`
	RequesterID    string       `json:"requesterId"`
	OwnerID        string       `json:"ownerId"`
	IdempotencyKey string       `json:"idempotencyKey,omitempty"`
	Spec           RequestSpec  `json:"requestSpec"`
	State          RequestState `json:"state"`
	Stage          Stage        `json:"stage,omitempty"`
	QueuePosition  int          `json:"queuePosition,omitempty"`
	CreatedAt      int64        `json:"createdAt"`
	SettledAt      int64        `json:"settledAt,omitempty"`
	LeaseID        string       `json:"leaseId,omitempty"`
	// ChosenLeaseID is the id the requester chose for its lease.
	ChosenLeaseID string      `json:"chosenLeaseId,omitempty"`
	Error         *Error      `json:"error,omitempty"`
	Grant         *LeaseGrant `json:"grant,omitempty"`
	Policy        WaitPolicy  `json:"waitPolicy"`
	// Refused marks a request settled in the decision that stored it (no
	// capacity with noWait, an unresolvable spec): the call that made it
	// was answered with its error, and so is a repeat of that call.
	Refused bool `json:"refused,omitempty"`
	// WorkerID names the worker the request was made on, in a gateway's
	// lists.
	WorkerID string `json:"workerId,omitempty"`
}

// RequestSpec is what a request asked for.
type RequestSpec struct {
	Platform  Platform    `json:"platform"`
	Model     string      `json:"model,omitempty"`
	Class     DeviceClass `json:"class,omitempty"`
	OSVersion string      `json:"osVersion,omitempty"`
	// ImageTag is the Android system image tag asked for; "" takes any.
	ImageTag string `json:"imageTag,omitempty"`
	// Mode is the mode asked for; "" takes the daemon's ios.defaultMode.
	Mode DeviceMode `json:"mode,omitempty"`
}

// WaitPolicy is how long a request may wait and how long its lease lives.
type WaitPolicy struct {
	NoWait    bool  `json:"noWait"`
	TimeoutMs int64 `json:"timeoutMs,omitempty"`
	TTLMs     int64 `json:"ttlMs"`
	// AllowDownload is whether the request may download a missing runtime.
	AllowDownload bool `json:"allowDownload,omitempty"`
}

// Event is the envelope of one fact, minted once where it happened.
type Event struct {
	ID        string          `json:"id"`
	Seq       int64           `json:"seq"`
	Timestamp int64           `json:"timestamp"`
	Event     string          `json:"event"`
	Payload   json.RawMessage `json:"payload"`
}

// PlatformCapacity is one platform's line in status and capacity.changed.
type PlatformCapacity struct {
	Running    int `json:"running"`
	Reserved   int `json:"reserved"`
	MaxRunning int `json:"maxRunning"`
	Devices    int `json:"devices"`
	MaxDevices int `json:"maxDevices"`
	Warm       int `json:"warm"`
	// AtRAMBudget is set when the RAM budget (resource strategy) has no
	// room for one more device of the platform, however small its mode
	// makes it: a new one is made only by deleting an idle device first.
	AtRAMBudget bool `json:"atRamBudget,omitempty"`
}

// GlobalCapacity is the machine's line.
type GlobalCapacity struct {
	Running    int `json:"running"`
	Reserved   int `json:"reserved"`
	MaxRunning int `json:"maxRunning"`
	Warm       int `json:"warm"`
}

// RAMCapacity is the RAM budget's line (resource strategy only).
type RAMCapacity struct {
	LimitBytes int64 `json:"limitBytes"`
	UsedBytes  int64 `json:"usedBytes"`
	OverLimit  bool  `json:"overLimit"`
}

// Capacity is the capacity report.
type Capacity struct {
	Strategy  string                        `json:"strategy"`
	Global    GlobalCapacity                `json:"global"`
	Platforms map[Platform]PlatformCapacity `json:"platforms"`
	RAMBudget *RAMCapacity                  `json:"ramBudget,omitempty"`
}

// DaemonInfo is the daemon's line in status.
type DaemonInfo struct {
	// Mode is worker or gateway.
	Mode      string       `json:"mode"`
	Version   string       `json:"version"`
	PID       int          `json:"pid"`
	StartedAt int64        `json:"startedAt"`
	Health    string       `json:"health"`
	Home      string       `json:"home"`
	Protocol  VersionRange `json:"protocol"`
	// HTTPURL is where the HTTP API listens, when it is on.
	HTTPURL string `json:"httpUrl,omitempty"`
	// ConsoleURL is where the operator console opens in a browser, when
	// the HTTP API is on.
	ConsoleURL string `json:"consoleUrl,omitempty"`
	// HeapBytes is the daemon's live Go heap.
	HeapBytes int64 `json:"heapBytes,omitempty"`
	// Goroutines and OpenFiles are the daemon's goroutines and open file
	// descriptors (sockets included): with HeapBytes, what a soak watches
	// for growth.
	Goroutines int `json:"goroutines,omitempty"`
	OpenFiles  int `json:"openFiles,omitempty"`
}

// HostInfo describes the machine.
type HostInfo struct {
	OS       string `json:"os"`
	Arch     string `json:"arch"`
	CPUs     int    `json:"cpus"`
	RAMBytes int64  `json:"ramBytes"`
	// OSVersion names the operating system release ("macOS 15.5",
	// "debian 12.9"), when the host says.
	OSVersion string `json:"osVersion,omitempty"`
}

// ToolVersion is one platform tool's version, as its driver reads it.
type ToolVersion struct {
	Name    string `json:"name"`
	Version string `json:"version"`
	Build   string `json:"build,omitempty"`
}

// EventLogStatus is the event log's size and how it is kept bounded.
type EventLogStatus struct {
	// Events is how many events the log holds, OldestSeq and OldestTs the
	// oldest of them (0 when empty), LastSeq the newest seq ever given.
	Events    int64 `json:"events"`
	OldestSeq int64 `json:"oldestSeq,omitempty"`
	OldestTs  int64 `json:"oldestTs,omitempty"`
	LastSeq   int64 `json:"lastSeq"`
	// RetentionDays and MaxEvents are the limits (eventLog.*).
	RetentionDays int64 `json:"retentionDays"`
	MaxEvents     int64 `json:"maxEvents"`
	// LastPruneAt is when the daemon last pruned (0: not yet this run),
	// LastPruned how many events that deleted, and PrunedTotal how many
	// it has deleted since it started.
	LastPruneAt int64 `json:"lastPruneAt,omitempty"`
	LastPruned  int64 `json:"lastPruned"`
	PrunedTotal int64 `json:"prunedTotal"`
}

// DriverStatus says which driver serves a platform, if any.
type DriverStatus struct {
	Platform Platform `json:"platform"`
	Driver   string   `json:"driver,omitempty"`
	Enabled  bool     `json:"enabled"`
	Root     string   `json:"root,omitempty"`
	Reason   string   `json:"reason,omitempty"`
	// RootRejected is set when the platform is off because its device root
	// failed the ownership check.
	RootRejected *RootRejection `json:"rootRejected,omitempty"`
	// Tools are the versions of the platform tools the driver uses, once
	// read (a moment after start).
	Tools []ToolVersion `json:"tools,omitempty"`
}

// RootRejection says why a device root was refused.
type RootRejection struct {
	Path   string `json:"path"`
	Reason string `json:"reason"`
	Detail string `json:"detail,omitempty"`
}

// WaitingRequest is one open request as status shows it.
type WaitingRequest struct {
	RequestID     string      `json:"requestId"`
	RequesterID   string      `json:"requesterId"`
	Spec          RequestSpec `json:"requestSpec"`
	Stage         string      `json:"stage"`
	QueuePosition int         `json:"queuePosition,omitempty"`
	WaitingMs     int64       `json:"waitingMs"`
	// WorkerID names the worker the request waits on, in a gateway's
	// lists.
	WorkerID string `json:"workerId,omitempty"`
	// Progress is the last step the requester was told (a download's
	// component and percent, the boot under way), when it was told one.
	Progress *LeaseProgress `json:"progress,omitempty"`
	// DeviceID names the device being readied for the request, once one
	// is.
	DeviceID string `json:"deviceId,omitempty"`
}

// Status answers status.get. While the daemon starts, only Daemon and Host
// are set.
type Status struct {
	Daemon     DaemonInfo       `json:"daemon"`
	Host       HostInfo         `json:"host"`
	Drivers    []DriverStatus   `json:"drivers,omitempty"`
	Capacity   *Capacity        `json:"capacity,omitempty"`
	Devices    []Device         `json:"devices,omitempty"`
	Leases     []LeaseRecord    `json:"leases,omitempty"`
	Waiting    []WaitingRequest `json:"waiting,omitempty"`
	QueueDepth int              `json:"queueDepth"`
	// Counts are the sizes of the lists, set whether or not the lists are.
	Counts *StatusCounts `json:"counts,omitempty"`
	// Installs are the component installs running or waiting, oldest
	// first (at most 16).
	Installs []InstallStatus `json:"installs,omitempty"`
	// WarmPool is the warm pool's settings and how each target fares.
	WarmPool *WarmPoolStatus `json:"warmPool,omitempty"`
	// EventLog is the event log's size and pruning.
	EventLog *EventLogStatus `json:"eventLog,omitempty"`
	// Fleet is a gateway's workers: how many in each connection state,
	// and each one's line.
	Fleet *FleetStatus `json:"fleet,omitempty"`
	// EventSeq is, on a worker, the seq of its event log that its lists
	// reflect, read in the same look as them: every lease change whose
	// event is at or below it is in the lists, and none above. A gateway
	// orders a worker's snapshots by it (0 when not known).
	EventSeq int64 `json:"eventSeq,omitempty"`
}

// StatusCounts are how many devices (by state), leases and open requests
// the daemon holds.
type StatusCounts struct {
	Devices        int                 `json:"devices"`
	DevicesByState map[DeviceState]int `json:"devicesByState"`
	Leases         int                 `json:"leases"`
	// Waiting counts open requests: queued, downloading or starting.
	Waiting int `json:"waiting"`
}

// Catalog is what a platform offers.
type Catalog struct {
	Platform       Platform                 `json:"platform"`
	Models         []string                 `json:"models"`
	Runtimes       []string                 `json:"runtimes"`
	DefaultRuntime string                   `json:"defaultRuntime,omitempty"`
	ModelRuntimes  map[string][]string      `json:"modelRuntimes"`
	ModelAliases   map[string][]string      `json:"modelAliases"`
	ModelClasses   map[string]DeviceClass   `json:"modelClasses"`
	ClassDefaults  map[DeviceClass][]string `json:"classDefaults"`
	// Downloadable lists runtimes known to be downloadable but not
	// installed (a lease with allowDownload may fetch one), when the
	// driver knows them.
	Downloadable []string `json:"downloadable,omitempty"`
	// Images lists the installed system images (Android), each a runtime
	// with its tag and ABI, newest runtime first.
	Images []CatalogImage `json:"images,omitempty"`
	// SlimRuntimes lists the installed runtimes a device can be slimmed on
	// (iOS 18.5 and later); a slim request for any other runtime is served
	// full.
	SlimRuntimes []string `json:"slimRuntimes,omitempty"`
	// DefaultMode is the mode a request that names none gets (iOS:
	// ios.defaultMode; full elsewhere).
	DefaultMode DeviceMode `json:"defaultMode,omitempty"`
	// ModelWorkers and RuntimeWorkers say, on a gateway, which workers
	// have each model and runtime.
	ModelWorkers   map[string][]string `json:"modelWorkers,omitempty"`
	RuntimeWorkers map[string][]string `json:"runtimeWorkers,omitempty"`
}

// CatalogImage is one installed system image: the runtime (API level) it
// serves, its tag (google_apis, google_apis_playstore, …) and its ABI.
type CatalogImage struct {
	Runtime string `json:"runtime"`
	Tag     string `json:"tag"`
	ABI     string `json:"abi"`
}

// Mode is the mode a request asking want gets of this platform: want, or,
// when it names none, the platform's default (full where there is none).
func (c Catalog) Mode(want DeviceMode) DeviceMode {
	switch {
	case want != "":
		return want
	case c.DefaultMode != "":
		return c.DefaultMode
	}
	return DeviceModeFull
}

// ModeOn is the mode a device for a request asking want (after the
// default) has on runtime: slim only when slim is asked and the runtime can
// be slimmed. It is "" (full) or DeviceModeSlim, as DeviceSpec.Mode is.
func (c Catalog) ModeOn(want DeviceMode, runtime string) DeviceMode {
	if c.Mode(want) == DeviceModeSlim && slices.Contains(c.SlimRuntimes, runtime) {
		return DeviceModeSlim
	}
	return ""
}

// HasImage reports whether an image of tag is installed for runtime.
func (c Catalog) HasImage(runtime, tag string) bool {
	for _, im := range c.Images {
		if im.Runtime == runtime && im.Tag == tag {
			return true
		}
	}
	return false
}

// CatalogResult answers catalog.get.
type CatalogResult struct {
	Platforms []Catalog `json:"platforms"`
}

// EmulatorGPUModes are the Android emulator's -gpu modes, the values of
// android.emulator.gpu; "auto" lets the emulator choose.
func EmulatorGPUModes() []string {
	return []string{"auto", "host", "swiftshader_indirect", "angle_indirect", "guest"}
}
