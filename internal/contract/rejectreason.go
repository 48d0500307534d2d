package contract

// RejectReason is why a stored lease request ended without a lease: the
// reason of lease.rejected (docs/EVENTS.md has the table, with the code each
// comes with). The wire carries the string; these constants are the only
// place the queue, the engine, a gateway and the usage figures spell it.
type RejectReason string

// Request-end reasons.
const (
	// RejectUnresolvable: no driver serves the platform, or no model or
	// OS version matches.
	RejectUnresolvable RejectReason = "unresolvable-spec"
	// RejectNoWait: noWait was set and the request could not be served at
	// once.
	RejectNoWait RejectReason = "no-wait"
	// RejectTimeout: its timeoutMs passed while it was queued.
	RejectTimeout RejectReason = "timeout"
	// RejectCancelled: the requester stopped waiting, or cancelled it.
	RejectCancelled RejectReason = "cancelled"
	// RejectKilled: an operator cancelled it (lease release-all, nuke).
	RejectKilled RejectReason = "killed"
	// RejectProvisionFailed: the driver failed to create its device.
	RejectProvisionFailed RejectReason = "provision-failed"
	// RejectBootFailed: the driver failed to boot its device.
	RejectBootFailed RejectReason = "boot-failed"
	// RejectBootTimeout: its device did not become ready in time.
	RejectBootTimeout RejectReason = "boot-timeout"
	// RejectDownloadFailed: the runtime it needed could not be installed.
	RejectDownloadFailed RejectReason = "download-failed"
	// RejectDaemonRestarted: it was open when the previous run of the
	// daemon ended.
	RejectDaemonRestarted RejectReason = "daemon-restarted"
	// RejectGatewayRestarted: the same on a gateway.
	RejectGatewayRestarted RejectReason = "gateway-restarted"
	// RejectNoWorker: (gateway) no worker takes requests now.
	RejectNoWorker RejectReason = "no-worker"
	// RejectWorkerUnreachable: (gateway) the worker it was sent to did
	// not answer.
	RejectWorkerUnreachable RejectReason = "worker-unreachable"
	// RejectWorkerStopping: (gateway) the worker stopped after it had
	// reported progress for it.
	RejectWorkerStopping RejectReason = "worker-stopping"
	// RejectWorkerRefused: (gateway) the worker answered with an error
	// that ends it.
	RejectWorkerRefused RejectReason = "worker-refused"
	// RejectWorkerAnswerInvalid: (gateway) the worker's answer was not a
	// valid grant.
	RejectWorkerAnswerInvalid RejectReason = "worker-answer-invalid"
)

// RejectReasons lists every request-end reason, in docs/EVENTS.md's order.
func RejectReasons() []RejectReason {
	return []RejectReason{RejectUnresolvable, RejectNoWait, RejectTimeout, RejectCancelled, RejectKilled,
		RejectProvisionFailed, RejectBootFailed, RejectBootTimeout, RejectDownloadFailed,
		RejectDaemonRestarted, RejectGatewayRestarted, RejectNoWorker, RejectWorkerUnreachable,
		RejectWorkerStopping, RejectWorkerAnswerInvalid, RejectWorkerRefused}
}
