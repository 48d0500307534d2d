package contract

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
	// Arrival is the request's place in the arrival order of the queue
	// that holds it, given when it first joins the line (0 before): a
	// gateway that takes over the queue puts its waiting requests back in
	// this order.
	Arrival uint64 `json:"arrival,omitempty"`
	// DeadlineAt is when its timeoutMs runs out (epoch ms), fixed when it
	// first joins the line; 0 for none.
	DeadlineAt int64 `json:"deadlineAt,omitempty"`
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
