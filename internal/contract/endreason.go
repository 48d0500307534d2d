package contract

// EndReason is why a lease ended: the reason of lease.released and of a
// lease-lost push, and a lease record's endReason. The wire carries the
// string; these constants are the only place the engine, a gateway and
// the frontends spell it.
type EndReason string

// Lease-end reasons.
const (
	// EndReleased: its holder (or another session of its owner) released
	// it.
	EndReleased EndReason = "explicit"
	// EndExpired: its TTL passed without a renewal.
	EndExpired EndReason = "expired"
	// EndKilled: an operator ended it (lease release-all, nuke).
	EndKilled EndReason = "killed"
	// EndDeviceLost: its device stopped and could not be booted again, or
	// vanished.
	EndDeviceLost EndReason = "device-lost"
	// EndBoundProcessExited: the process it was bound to exited
	// (lease.bind).
	EndBoundProcessExited EndReason = ReasonBoundProcessExited
)
