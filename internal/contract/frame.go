package contract

import "encoding/json"

// A frame is one JSON object on one line. Clients send requests; the daemon
// answers each with one response and may send pushes in between.

// Request is a client's call of one operation. ID is chosen by the client and
// echoed on the response and on progress pushes for that call.
type Request struct {
	ID    json.RawMessage `json:"id"`
	Op    Op              `json:"op"`
	Input json.RawMessage `json:"input,omitempty"`
}

// Response answers one request: Result or Error.
type Response struct {
	ID     json.RawMessage `json:"id"`
	Result json.RawMessage `json:"result,omitempty"`
	Error  *Error          `json:"error,omitempty"`
}

// Push kinds.
const (
	PushProgress  = "progress"
	PushEvent     = "event"
	PushLeaseLost = "lease-lost"
	// PushDeviceUnhealthy and PushDeviceRecovered tell the sessions holding
	// a lease that its device crashed and is being booted again, and that
	// it runs again (with Attempts).
	PushDeviceUnhealthy = "device-unhealthy"
	PushDeviceRecovered = "device-recovered"
	// PushExecStarted tells a device.exec caller that every check passed
	// and the command runs; output pushes follow.
	PushExecStarted = "exec-started"
	PushExecOutput  = "exec-output"
	// PushDaemonStopping tells every session, just before the daemon
	// closes it, that the daemon is stopping (Reason: "requested" by
	// daemon.stop, or "signal"), so a holder knows the connection's end is
	// a stop and not a crash. Leases are kept: they survive the restart.
	PushDaemonStopping = "daemon-stopping"
)

// Push is a frame the daemon sends unasked: progress for a request in flight,
// an event for a subscription, or news about a lease the session holds.
type Push struct {
	Push           string          `json:"push"`
	ID             json.RawMessage `json:"id,omitempty"`
	Progress       *LeaseProgress  `json:"progress,omitempty"`
	SubscriptionID string          `json:"subscriptionId,omitempty"`
	Event          *Event          `json:"event,omitempty"`
	LeaseID        string          `json:"leaseId,omitempty"`
	DeviceID       string          `json:"deviceId,omitempty"`
	Reason         string          `json:"reason,omitempty"`
	Output         *ExecOutput     `json:"output,omitempty"`
	Job            *JobEvent       `json:"job,omitempty"`
	Attempts       int             `json:"attempts,omitempty"`
}

// Inbound is any frame a client reads: a response or a push.
type Inbound struct {
	Push string `json:"push,omitempty"`
	Response
	Progress       *LeaseProgress `json:"progress,omitempty"`
	SubscriptionID string         `json:"subscriptionId,omitempty"`
	Event          *Event         `json:"event,omitempty"`
	LeaseID        string         `json:"leaseId,omitempty"`
	DeviceID       string         `json:"deviceId,omitempty"`
	Reason         string         `json:"reason,omitempty"`
	Output         *ExecOutput    `json:"output,omitempty"`
	Job            *JobEvent      `json:"job,omitempty"`
	Attempts       int            `json:"attempts,omitempty"`
}
