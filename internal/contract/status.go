package contract

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
	// Leadership is, on a gateway replica (gateway.store PostgreSQL), who
	// leads and this replica's role.
	Leadership *Leadership `json:"leadership,omitempty"`
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
