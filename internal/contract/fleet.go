package contract

// Daemon modes (config `mode`): a worker serves its own machine's devices;
// a gateway owns none and fronts the workers that joined it.
const (
	ModeWorker  = "worker"
	ModeGateway = "gateway"
)

// The fleet operations. worker.list answers on a worker too (a fleet of
// one); the others are a gateway's.
const (
	OpWorkerList    Op = "worker.list"
	OpWorkerGet     Op = "worker.get"
	OpWorkerDrain   Op = "worker.drain"
	OpWorkerUndrain Op = "worker.undrain"
	OpWorkerRemove  Op = "worker.remove"
)

// The fleet's error codes.
const (
	CodeUnsupportedInGatewayMode Code = "UNSUPPORTED_IN_GATEWAY_MODE"
	CodeUnsupportedInWorkerMode  Code = "UNSUPPORTED_IN_WORKER_MODE"
	CodeUnknownWorker            Code = "UNKNOWN_WORKER"
	CodeWorkerConnected          Code = "WORKER_CONNECTED"
	CodeWorkerUnreachable        Code = "WORKER_UNREACHABLE"
	// CodeTooManyWorkers refuses the uplink of a worker id a gateway does
	// not know once it knows gateway.maxWorkers workers.
	CodeTooManyWorkers Code = "TOO_MANY_WORKERS"
	// CodeNotLeader is a gateway replica's refusal of what only the
	// leader serves (an uplink, an operation on the socket): details
	// leaderUrl (the leader's gateway.advertiseUrl, "" while none leads)
	// and term.
	CodeNotLeader Code = "NOT_LEADER"
)

// Leadership is who leads a gateway's replicas, as one replica sees it
// (status.leadership; set only on a gateway whose gateway.store is
// PostgreSQL).
type Leadership struct {
	// Role is this replica's: leader or follower.
	Role string `json:"role"`
	// Term counts the takeovers; each leader's writes are fenced by its
	// term. 0 while no replica has led yet.
	Term int64 `json:"term"`
	// LeaderURL is the leader's gateway.advertiseUrl ("" while none leads).
	LeaderURL string `json:"leaderUrl"`
	// Since is when the leader took over (epoch ms; 0 while none leads).
	Since int64 `json:"since,omitempty"`
	// Self is this replica's own gateway.advertiseUrl.
	Self string `json:"self"`
}

// The replica roles.
const (
	RoleLeader   = "leader"
	RoleFollower = "follower"
)

// TokenWorker is a join token: it opens a worker's uplink to a gateway and
// nothing else.
const TokenWorker TokenRole = "worker"

// WorkerConnection is how a gateway is connected to a worker.
type WorkerConnection string

// The connection states.
const (
	WorkerConnected    WorkerConnection = "connected"
	WorkerDisconnected WorkerConnection = "disconnected"
	// WorkerIncompatible: the uplink is up but the two protocol ranges do
	// not overlap; the gateway asks such a worker for nothing.
	WorkerIncompatible WorkerConnection = "incompatible"
)

// WorkerView is what a gateway knows of one worker: read from it over the
// uplink, checked, and never persisted (but for Drained).
type WorkerView struct {
	ID         string           `json:"id"`
	Label      string           `json:"label"`
	Connection WorkerConnection `json:"connection"`
	Drained    bool             `json:"drained"`
	// Reason says why the worker is disconnected or incompatible, when
	// the gateway knows.
	Reason string `json:"reason,omitempty"`
	// ReasonCode is the code behind Reason, when there is one
	// (DAEMON_CONNECTION_LOST, DAEMON_STOPPING): Reason is for people.
	ReasonCode  Code  `json:"reasonCode,omitempty"`
	ConnectedAt int64 `json:"connectedAt,omitempty"`
	// LastSeenAt is when the gateway last heard from the worker (epoch
	// ms).
	LastSeenAt int64  `json:"lastSeenAt,omitempty"`
	Version    string `json:"version,omitempty"`
	Health     string `json:"health,omitempty"`
	// Protocol is the version the uplink speaks; for an incompatible
	// worker, WorkerProtocol and GatewayProtocol are the two ranges.
	Protocol        int           `json:"protocol,omitempty"`
	WorkerProtocol  *VersionRange `json:"workerProtocol,omitempty"`
	GatewayProtocol *VersionRange `json:"gatewayProtocol,omitempty"`
	Host            *HostInfo     `json:"host,omitempty"`
	Capacity        *Capacity     `json:"capacity,omitempty"`
	QueueDepth      int           `json:"queueDepth"`
	Devices         []Device      `json:"devices"`
	Leases          []LeaseRecord `json:"leases"`
	// Waiting are the worker's open requests.
	Waiting  []WaitingRequest `json:"waiting"`
	Installs []InstallStatus  `json:"installs,omitempty"`
	Catalog  []Catalog        `json:"catalog,omitempty"`
	// MaxTTLMs is the worker's lease.maxTtlMs.
	MaxTTLMs int64 `json:"maxTtlMs,omitempty"`
	// DownloadPolicy is the worker's downloads.policy: never, on-request
	// or always.
	DownloadPolicy string `json:"downloadPolicy,omitempty"`
	// Findings counts what the gateway did not believe or keep of the
	// worker's reports, since the gateway started; absent while there is
	// nothing.
	Findings *WorkerFindings `json:"findings,omitempty"`
}

// WorkerFindings counts a worker's claims that its gateway refused: each
// was logged (a warn line with the worker id and what it claimed) and
// otherwise ignored, while the worker stays connected.
type WorkerFindings struct {
	// UngrantedLeases: leases the worker reported under the gateway's
	// requester prefix that the gateway never granted, or that contradict
	// its grant record (another device, requester or owner). They are
	// never the gateway's: no owner, renew, exec or release reaches them.
	UngrantedLeases int64 `json:"ungrantedLeases,omitempty"`
	// DoubleGrants: grants that named a lease id or a device the gateway
	// already holds a lease of on that worker; refused, and given back
	// where that cannot touch the first lease.
	DoubleGrants int64 `json:"doubleGrants,omitempty"`
	// EventsRefused: relayed events whose name is none a worker records,
	// or whose payload is larger than a gateway relays; EventsDropped: relayed events over the worker's rate. Neither
	// reached the gateway's log.
	EventsRefused int64 `json:"eventsRefused,omitempty"`
	EventsDropped int64 `json:"eventsDropped,omitempty"`
	// Last says what the latest finding was, and LastAt when (epoch ms).
	Last   string `json:"last,omitempty"`
	LastAt int64  `json:"lastAt,omitempty"`
}

// Total is how many findings there are of every kind.
func (f *WorkerFindings) Total() int64 {
	if f == nil {
		return 0
	}
	return f.UngrantedLeases + f.DoubleGrants + f.EventsRefused + f.EventsDropped
}

// WorkerSummary is one worker as status and worker.list show it.
type WorkerSummary struct {
	ID         string           `json:"id"`
	Label      string           `json:"label"`
	Connection WorkerConnection `json:"connection"`
	Drained    bool             `json:"drained"`
	Reason     string           `json:"reason,omitempty"`
	ReasonCode Code             `json:"reasonCode,omitempty"`
	LastSeenAt int64            `json:"lastSeenAt,omitempty"`
	Version    string           `json:"version,omitempty"`
	Running    int              `json:"running"`
	MaxRunning int              `json:"maxRunning"`
	Leases     int              `json:"leases"`
	QueueDepth int              `json:"queueDepth"`
	// Findings is how many of the worker's claims the gateway refused
	// (WorkerView.Findings has them by kind).
	Findings int64 `json:"findings,omitempty"`
}

// Summary is v as a line of the fleet.
func (v WorkerView) Summary() WorkerSummary {
	s := WorkerSummary{ID: v.ID, Label: v.Label, Connection: v.Connection, Drained: v.Drained, Reason: v.Reason, ReasonCode: v.ReasonCode,
		LastSeenAt: v.LastSeenAt, Version: v.Version, Leases: len(v.Leases), QueueDepth: v.QueueDepth, Findings: v.Findings.Total()}
	if v.Capacity != nil {
		s.Running, s.MaxRunning = v.Capacity.Global.Running, v.Capacity.Global.MaxRunning
	}
	return s
}

// FleetStatus is a gateway's status of its fleet: how many workers are in
// each connection state and each one's line.
type FleetStatus struct {
	Connected    int             `json:"connected"`
	Disconnected int             `json:"disconnected"`
	Incompatible int             `json:"incompatible"`
	Drained      int             `json:"drained"`
	Workers      []WorkerSummary `json:"workers"`
}

// WorkerListResult answers worker.list, workers by id.
type WorkerListResult struct {
	Mode    string          `json:"mode"`
	Workers []WorkerSummary `json:"workers"`
}

// WorkerIDInput names one worker.
type WorkerIDInput struct {
	WorkerID string `json:"workerId"`
}

// MaxWorkerIDLen bounds a worker id (an instance id, "ins_" and 32 hex
// digits, fits with room).
const MaxWorkerIDLen = 64

// Validate checks the input's fields.
func (in *WorkerIDInput) Validate() error { return CheckWorkerID("workerId", in.WorkerID) }

// CheckWorkerID checks a worker id: 1 to MaxWorkerIDLen characters of
// [A-Za-z0-9._:-], so it is safe in a path, a table and a lease id.
func CheckWorkerID(field, id string) error {
	if id == "" {
		return BadRequest(field, "is required")
	}
	if len(id) > MaxWorkerIDLen {
		return BadRequest(field, "must be at most %d characters, got %d", MaxWorkerIDLen, len(id))
	}
	for _, r := range id {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == ':' || r == '-') {
			return BadRequest(field, "must use only letters, digits and ._:-, got %q", clip(id))
		}
	}
	return nil
}

// WorkerResult answers worker.drain, worker.undrain and worker.remove.
type WorkerResult struct {
	Worker WorkerSummary `json:"worker"`
}
