package contract

import (
	"encoding/json"
	"regexp"
	"strconv"
)

// Op names an operation of the daemon protocol.
type Op string

// The operations. Every frontend calls these through one dispatcher.
const (
	OpHello           Op = "hello"
	OpStatusGet       Op = "status.get"
	OpCatalogGet      Op = "catalog.get"
	OpLeaseRequest    Op = "lease.request"
	OpLeaseRenew      Op = "lease.renew"
	OpLeaseRelease    Op = "lease.release"
	OpLeaseReleaseAll Op = "lease.release-all"
	OpLeaseCancel     Op = "lease.cancel"
	OpLeaseList       Op = "lease.list"
	OpListGet         Op = "list.get"
	OpEventsReplay    Op = "events.replay"
	OpEventsSubscribe Op = "events.subscribe"
	OpConfigGet       Op = "config.get"
	OpDaemonStop      Op = "daemon.stop"
	OpPassthrough     Op = "device.passthrough"
	OpDoctorRun       Op = "doctor.run"

	// Lease requests as a resource: created without waiting, then read or
	// followed by id. The HTTP API is built on these.
	OpLeaseRequestCreate Op = "lease-request.create"
	OpLeaseRequestGet    Op = "lease-request.get"
	OpLeaseGet           Op = "lease.get"
	OpLeaseWatch         Op = "lease.watch"
	// OpLeaseBind ties a lease to a local process: the lease ends when the
	// process exits. Over the socket only (a pid names a process of the
	// daemon's machine).
	OpLeaseBind  Op = "lease.bind"
	OpDeviceExec Op = "device.exec"
	// OpDeviceRetry retries a quarantined device now, instead of at its
	// next backoff; OpLeaseRequestRetry makes a failed request again, as
	// it was stored, as a new request for the same requester.
	OpDeviceRetry       Op = "device.retry"
	OpLeaseRequestRetry Op = "lease-request.retry"
	OpTokenCreate       Op = "token.create"
	OpTokenList         Op = "token.list"
	OpTokenRevoke       Op = "token.revoke"
	// OpCallCancel tells the daemon that the caller of one of the
	// session's calls in flight has gone: the call's context ends, and an
	// operation that runs something for its caller (device.exec) stops it.
	// A gateway sends it to a worker when its own caller goes.
	OpCallCancel Op = "call.cancel"
)

// Role is what a session may do.
type Role string

// The roles of the daemon protocol.
const (
	RoleAgent Role = "agent"
	RoleAdmin Role = "admin"
)

// OpInfo describes how the dispatcher treats an operation.
type OpInfo struct {
	// AdminOnly operations answer FORBIDDEN to agents.
	AdminOnly bool
	// Early operations answer while the daemon is still starting; the rest
	// wait for startup to finish.
	Early bool
	// Cancellable operations stop what they run for their caller when the
	// call is cancelled (call.cancel); the typed client sends call.cancel
	// for these when a call's context ends before its answer.
	Cancellable bool
}

var ops = map[Op]OpInfo{
	OpHello:           {Early: true},
	OpStatusGet:       {Early: true},
	OpCatalogGet:      {},
	OpLeaseRequest:    {},
	OpLeaseRenew:      {},
	OpLeaseRelease:    {},
	OpLeaseReleaseAll: {AdminOnly: true},
	OpLeaseCancel:     {},
	OpLeaseList:       {},
	OpListGet:         {AdminOnly: true},
	OpEventsReplay:    {AdminOnly: true},
	OpEventsSubscribe: {AdminOnly: true},
	OpConfigGet:       {AdminOnly: true},
	OpDaemonStop:      {AdminOnly: true},
	OpPassthrough:     {},
	OpDoctorRun:       {},

	OpLeaseRequestCreate: {},
	OpLeaseRequestGet:    {},
	OpLeaseGet:           {},
	OpLeaseWatch:         {},
	OpLeaseBind:          {},
	OpDeviceExec:         {Cancellable: true},
	OpDeviceRetry:        {AdminOnly: true},
	OpLeaseRequestRetry:  {AdminOnly: true},
	OpTokenCreate:        {AdminOnly: true},
	OpTokenList:          {AdminOnly: true},
	OpTokenRevoke:        {AdminOnly: true},
	OpCallCancel:         {Early: true},
	OpPing:               {Early: true},

	OpComponentInstall: {AdminOnly: true},
	OpComponentList:    {},
	OpComponentRemove:  {AdminOnly: true},
	OpJobList:          {AdminOnly: true},
	OpUsageGet:         {AdminOnly: true},
	OpMetricsGet:       {AdminOnly: true},
	OpJobGet:           {AdminOnly: true},
	OpJobFollow:        {AdminOnly: true},
	OpDemoInject:       {AdminOnly: true},
	OpCleanupRun:       {AdminOnly: true},
	OpCleanupRules:     {},
	OpNuke:             {AdminOnly: true},

	OpWorkerList:    {AdminOnly: true},
	OpWorkerGet:     {AdminOnly: true},
	OpWorkerDrain:   {AdminOnly: true},
	OpWorkerUndrain: {AdminOnly: true},
	OpWorkerRemove:  {AdminOnly: true},

	OpFilesPut:       {},
	OpFilesGet:       {},
	OpAppsInstall:    {},
	OpScreenshot:     {},
	OpTransferWrite:  {},
	OpTransferRead:   {},
	OpTransferCommit: {},
	OpTransferAbort:  {},

	OpAppLaunch:     {},
	OpAppTerminate:  {},
	OpOpenURL:       {},
	OpDeviceLogs:    {},
	OpSetLocation:   {},
	OpSetAppearance: {},
}

// LookupOp reports how op is treated, and whether it exists.
func LookupOp(op Op) (OpInfo, bool) {
	info, ok := ops[op]
	return info, ok
}

// Ops lists every operation.
func Ops() []Op {
	out := make([]Op, 0, len(ops))
	for op := range ops {
		out = append(out, op)
	}
	return out
}

// Protocol versions this build speaks.
const (
	ProtocolMin = 1
	ProtocolMax = 1
)

// VersionRange is an inclusive range of protocol versions.
type VersionRange struct {
	Min int `json:"min"`
	Max int `json:"max"`
}

// HelloInput opens a session.
type HelloInput struct {
	Protocol VersionRange `json:"protocol"`
	// Client names the program, for logs.
	Client string `json:"client,omitempty"`
	// Principal is the session identity; requests default their requester to it.
	Principal string `json:"principal,omitempty"`
	// AdminToken proves the admin role.
	AdminToken string `json:"adminToken,omitempty"`
	// Remote confines the session as if its caller were not on the
	// daemon's machine: its device commands may not name files of this
	// machine (device.exec), and device.passthrough is refused. A client
	// that serves callers elsewhere (simlock mcp) sets it. It only
	// restricts, so the daemon takes it as said.
	Remote bool `json:"remote,omitempty"`
}

// Validate checks the input's fields.
func (in *HelloInput) Validate() error {
	if in.Protocol.Min < 1 || in.Protocol.Max < in.Protocol.Min {
		return BadRequest("protocol", "must be a range {min,max} with 1 <= min <= max")
	}
	if err := checkID("principal", in.Principal, false); err != nil {
		return err
	}
	return checkLen("client", in.Client, MaxNameLen)
}

// HelloResult says what the session got.
type HelloResult struct {
	Protocol      int          `json:"protocol"`
	Daemon        VersionRange `json:"daemonProtocol"`
	DaemonVersion string       `json:"daemonVersion"`
	Role          Role         `json:"role"`
	Principal     string       `json:"principal"`
	// Remote says the session is confined as remote (HelloInput.Remote,
	// or a gateway's uplink).
	Remote bool `json:"remote,omitempty"`
}

// Limits on input sizes.
const (
	MaxNameLen  = 256
	MaxIDLen    = 256
	MaxTTLMs    = 7 * 24 * 60 * 60 * 1000 // a hard ceiling above any config
	MaxWaitMs   = 24 * 60 * 60 * 1000
	MaxFrameLen = 1 << 20
)

// LeaseRequestInput asks for a device.
type LeaseRequestInput struct {
	Platform  Platform    `json:"platform"`
	Model     string      `json:"model,omitempty"`
	Class     DeviceClass `json:"class,omitempty"`
	OSVersion string      `json:"osVersion,omitempty"`
	// ImageTag picks the Android system image by its tag (google_apis,
	// google_apis_playstore, …): 1 to MaxImageTagLen of [A-Za-z0-9_-].
	// "" takes any installed image. Android only.
	ImageTag string `json:"imageTag,omitempty"`
	// Mode is slim or full; "" takes the daemon's ios.defaultMode. Full is
	// a guarantee; slim is best effort (iOS 18.5 and later), and the
	// grant's device.mode says which was served. Android is always full.
	Mode DeviceMode `json:"mode,omitempty"`
	// TTLMs is the lease's lifetime between renewals; 0 means the default.
	TTLMs int64 `json:"ttlMs,omitempty"`
	// TimeoutMs bounds the wait in the queue; 0 means wait until cancelled.
	TimeoutMs int64 `json:"timeoutMs,omitempty"`
	// NoWait refuses with NO_CAPACITY instead of queueing.
	NoWait bool `json:"noWait,omitempty"`
	// AllowDownload lets a missing runtime be downloaded (within
	// downloads.policy); the wait then shows the downloading stage.
	AllowDownload bool `json:"allowDownload,omitempty"`
	// RequesterID attributes the request; it defaults to the session principal.
	RequesterID    string `json:"requesterId,omitempty"`
	IdempotencyKey string `json:"idempotencyKey,omitempty"`
	// LeaseID is the id the lease is to have, chosen by the requester:
	// ASCII, 1 to MaxChosenLeaseIDLen of [A-Za-z0-9_-], starting with a
	// letter or digit, so it never looks like a gateway's
	// <worker>.<lease> id. LEASE_ID_TAKEN while an active lease or a
	// waiting request holds it.
	LeaseID string `json:"leaseId,omitempty"`
	// Owner is whom a gateway asks on behalf of: the principal its own
	// caller was authorized as, who will own the lease. A worker honours it
	// only on the uplink session of the gateway its config names; from
	// anyone else, admin included, it is FORBIDDEN.
	Owner string `json:"owner,omitempty"`
}

// Validate checks the input's fields. TTL bounds from config are checked by
// the engine.
func (in *LeaseRequestInput) Validate() error {
	if in.Platform == "" {
		return BadRequest("platform", "is required (ios or android)")
	}
	if !in.Platform.Valid() {
		return BadRequest("platform", "must be ios or android, got %q", clip(string(in.Platform)))
	}
	if in.Model != "" && in.Class != "" {
		return BadRequest("class", "give a model or a class, not both")
	}
	if err := checkLen("model", in.Model, MaxNameLen); err != nil {
		return err
	}
	if in.Class != "" && !in.Class.Valid() {
		return BadRequest("class", "must be one of phone, tablet, watch, tv, vision, auto, desktop; got %q", clip(string(in.Class)))
	}
	if err := checkLen("osVersion", in.OSVersion, 64); err != nil {
		return err
	}
	if spec, err := ParseOSVersion(in.OSVersion); err != nil {
		return err
	} else if err := spec.CheckFor(in.Platform); err != nil {
		return err
	}
	if err := CheckImageTag(in.Platform, in.ImageTag); err != nil {
		return err
	}
	if err := CheckDeviceMode(in.Mode); err != nil {
		return err
	}
	if err := checkTTLMs(in.TTLMs); err != nil {
		return err
	}
	if in.TimeoutMs < 0 || in.TimeoutMs > MaxWaitMs {
		return BadRequest("timeoutMs", "must be between 0 and %d milliseconds, got %d", MaxWaitMs, in.TimeoutMs)
	}
	if err := checkID("requesterId", in.RequesterID, false); err != nil {
		return err
	}
	if err := checkID("owner", in.Owner, false); err != nil {
		return err
	}
	if err := CheckChosenLeaseID(in.LeaseID); err != nil {
		return err
	}
	return checkID("idempotencyKey", in.IdempotencyKey, false)
}

// MaxImageTagLen bounds an Android system image tag.
const MaxImageTagLen = 64

var imageTag = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

// CheckImageTag checks a request's imageTag ("" is any): Android only,
// 1 to MaxImageTagLen of ASCII letters, digits, _ and -, since it names a
// directory of the SDK and a part of an sdkmanager package.
func CheckImageTag(p Platform, tag string) error {
	if tag == "" {
		return nil
	}
	if p != PlatformAndroid {
		return BadRequest("imageTag", "is for android only; %s has no system image tags", p)
	}
	if len(tag) > MaxImageTagLen {
		return BadRequest("imageTag", "must be at most %d characters, got %d", MaxImageTagLen, len(tag))
	}
	if !imageTag.MatchString(tag) {
		return BadRequest("imageTag", "must use only ASCII letters, digits, _ and -, got %q", clip(tag))
	}
	return nil
}

// MaxChosenLeaseIDLen bounds a lease id a requester chooses.
const MaxChosenLeaseIDLen = 64

var chosenLeaseID = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_-]*$`)

// CheckChosenLeaseID checks a lease id a requester chose ("" is none).
func CheckChosenLeaseID(id string) error {
	if id == "" {
		return nil
	}
	if len(id) > MaxChosenLeaseIDLen {
		return BadRequest("leaseId", "must be at most %d characters, got %d", MaxChosenLeaseIDLen, len(id))
	}
	if !chosenLeaseID.MatchString(id) {
		return BadRequest("leaseId", "must start with a letter or digit and use only ASCII letters, digits, _ and -, got %q", clip(id))
	}
	return nil
}

// LeaseRenewInput extends a lease.
type LeaseRenewInput struct {
	LeaseID string `json:"leaseId"`
	// TTLMs, when set, becomes the lease's stored width.
	TTLMs int64 `json:"ttlMs,omitempty"`
}

// Validate checks the input's fields.
func (in *LeaseRenewInput) Validate() error {
	if err := checkID("leaseId", in.LeaseID, true); err != nil {
		return err
	}
	return checkTTLMs(in.TTLMs)
}

// MaxPID is the largest process id lease.bind accepts (Linux's pid_max
// ceiling; macOS stays far below it).
const MaxPID = 1 << 22

// ReasonBoundProcessExited is the end reason (lease.released, lease-lost)
// of a bound lease whose process exited.
const ReasonBoundProcessExited = "bound-process-exited"

// LeaseBindInput asks that a lease end when process PID exits.
type LeaseBindInput struct {
	LeaseID string `json:"leaseId"`
	PID     int    `json:"pid"`
}

// Validate checks the input's fields.
func (in *LeaseBindInput) Validate() error {
	if err := checkID("leaseId", in.LeaseID, true); err != nil {
		return err
	}
	return CheckPID(in.PID)
}

// CheckPID checks a process id to bind a lease to. Process 1 is refused: it
// never exits, so a lease bound to it would only look bound.
func CheckPID(pid int) error {
	if pid < 2 || pid > MaxPID {
		return BadRequest("pid", "must be a process id from 2 to %d, got %d", MaxPID, pid)
	}
	return nil
}

// LeaseIDInput names one lease.
type LeaseIDInput struct {
	LeaseID string `json:"leaseId"`
}

// Validate checks the input's fields.
func (in *LeaseIDInput) Validate() error { return checkID("leaseId", in.LeaseID, true) }

// DeviceIDInput names one device (device.retry).
type DeviceIDInput struct {
	DeviceID string `json:"deviceId"`
}

// Validate checks the input's fields.
func (in *DeviceIDInput) Validate() error { return checkID("deviceId", in.DeviceID, true) }

// DeviceRetryResult answers device.retry: the device as the retry found
// it (the clean runs on; its end is device.quarantine-recovered or
// device.quarantine-retry-failed).
type DeviceRetryResult struct {
	Device Device `json:"device"`
}

// LeaseRequestRetryInput names the failed request to make again.
type LeaseRequestRetryInput struct {
	RequestID string `json:"requestId"`
}

// Validate checks the input's fields.
func (in *LeaseRequestRetryInput) Validate() error { return checkID("requestId", in.RequestID, true) }

// CallCancelInput names the call of the session's to cancel: its id, as
// the request frame gave it.
type CallCancelInput struct {
	ID json.RawMessage `json:"id"`
}

// Validate checks the input's fields: the id is one a request may carry,
// a string (at most 128 characters) or an integer.
func (in *CallCancelInput) Validate() error {
	if len(in.ID) == 0 || len(in.ID) > 130 {
		return BadRequest("id", "is required: the id of a call of this session, a string or an integer")
	}
	var s string
	if json.Unmarshal(in.ID, &s) == nil {
		return nil
	}
	if _, err := strconv.ParseInt(string(in.ID), 10, 64); err != nil {
		return BadRequest("id", "must be the id of a call of this session, a string or an integer")
	}
	return nil
}

// CallCancelResult answers call.cancel: whether a call with that id was
// in flight (and is now cancelled).
type CallCancelResult struct {
	Cancelled bool `json:"cancelled"`
}

// ReleaseResult answers lease.release.
type ReleaseResult struct {
	LeaseID  string `json:"leaseId"`
	DeviceID string `json:"deviceId"`
	Released bool   `json:"released"`
}

// ReleaseAllResult answers lease.release-all.
type ReleaseAllResult struct {
	Released  []string `json:"released"`
	Cancelled []string `json:"cancelled"`
	// Skipped are the leases a gateway lists but does not release: a
	// worker's own (made on that worker, not through the gateway), each
	// with why and where it can be released.
	Skipped []SkippedLease `json:"skipped,omitempty"`
}

// SkippedLease is a lease release-all left as it was, and why.
type SkippedLease struct {
	LeaseID  string `json:"leaseId"`
	WorkerID string `json:"workerId,omitempty"`
	// Reason is ReasonWorkerOwnLease.
	Reason  string `json:"reason"`
	Message string `json:"message"`
}

// ReasonWorkerOwnLease: a lease a gateway lists but did not grant (it was
// made on its worker directly), which only that worker releases.
const ReasonWorkerOwnLease = "worker-own-lease"

// LeaseCancelInput withdraws a requester's waiting request.
type LeaseCancelInput struct {
	RequesterID string `json:"requesterId,omitempty"`
	RequestID   string `json:"requestId,omitempty"`
}

// Validate checks the input's fields.
func (in *LeaseCancelInput) Validate() error {
	if err := checkID("requesterId", in.RequesterID, false); err != nil {
		return err
	}
	return checkID("requestId", in.RequestID, false)
}

// CancelOutcome says what lease.cancel did.
type CancelOutcome string

// The cancel outcomes.
const (
	CancelCancelled      CancelOutcome = "cancelled"
	CancelNotFound       CancelOutcome = "not-found"
	CancelNotCancellable CancelOutcome = "not-cancellable"
)

// LeaseCancelResult answers lease.cancel.
type LeaseCancelResult struct {
	Outcome   CancelOutcome `json:"outcome"`
	RequestID string        `json:"requestId,omitempty"`
	// LeaseID names the lease a granted (so not cancellable) request made.
	LeaseID string `json:"leaseId,omitempty"`
}

// StatusGetInput asks for the daemon's status.
type StatusGetInput struct {
	// Summary leaves out the device, lease and waiting lists: daemon,
	// drivers, capacity, counts, queue depth, installs and the warm pool
	// only, at a cost that does not grow with the lists.
	Summary bool `json:"summary,omitempty"`
	// WaitReady answers only once startup has converged (or failed),
	// instead of at once with health "starting".
	WaitReady bool `json:"waitReady,omitempty"`
}

// Validate accepts any StatusGetInput.
func (*StatusGetInput) Validate() error { return nil }

// EventsReplayInput asks for stored events.
type EventsReplayInput struct {
	// SinceTs, epoch ms, returns events at or after it; 0 returns the newest.
	SinceTs int64 `json:"sinceTs,omitempty"`
	// AfterSeq returns events with a larger seq.
	AfterSeq int64 `json:"afterSeq,omitempty"`
	// Limit caps the count: 0 means 1000, at most 10000.
	Limit int `json:"limit,omitempty"`
}

// Validate checks the input's fields.
func (in *EventsReplayInput) Validate() error {
	if in.SinceTs < 0 {
		return BadRequest("sinceTs", "must not be negative")
	}
	if in.AfterSeq < 0 {
		return BadRequest("afterSeq", "must not be negative")
	}
	if in.Limit < 0 || in.Limit > 10000 {
		return BadRequest("limit", "must be between 0 and 10000")
	}
	return nil
}

// EventsReplayResult answers events.replay, oldest first.
type EventsReplayResult struct {
	Events []Event `json:"events"`
}

// EventsSubscribeResult names the subscription whose pushes follow.
type EventsSubscribeResult struct {
	SubscriptionID string `json:"subscriptionId"`
	// LastSeq is the newest seq at the moment of subscribing; pushes carry
	// larger ones.
	LastSeq int64 `json:"lastSeq"`
}

// ConfigGetInput asks for the effective config, or one key of it.
type ConfigGetInput struct {
	Key string `json:"key,omitempty"`
}

// Validate checks the input's fields.
func (in *ConfigGetInput) Validate() error { return checkLen("key", in.Key, MaxNameLen) }

// DaemonStopResult answers daemon.stop.
type DaemonStopResult struct {
	Stopping bool `json:"stopping"`
}

// Empty is the input of operations that take none.
type Empty struct{}

// Validate accepts anything Empty decodes to.
func (*Empty) Validate() error { return nil }

// bounds, lease.minTtlMs and lease.maxTtlMs, are the engine's (queue.TTLFor).
func checkTTLMs(ms int64) error {
	if ms < 0 {
		return BadRequest("ttlMs", "must not be negative (0 or none is the default), got %d", ms)
	}
	if ms > MaxTTLMs {
		return BadRequest("ttlMs", "must be at most %d milliseconds (7 days, the protocol's ceiling; lease.maxTtlMs may set less), got %d", int64(MaxTTLMs), ms)
	}
	return nil
}
