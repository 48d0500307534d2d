package contract

// The codes of `simlock service`, which runs the daemon under the host's
// service manager. They never come from the daemon: the CLI makes them.
const (
	// CodeServiceUnsupported: this system has no service manager simlock
	// writes for (launchd on macOS, systemd on Linux), or not in the way
	// asked (a system unit on macOS).
	CodeServiceUnsupported Code = "SERVICE_UNSUPPORTED"
	// CodeServiceManagerFailed: launchctl or systemctl refused, or could
	// not be reached (no user systemd instance); the message says how to
	// fix it.
	CodeServiceManagerFailed Code = "SERVICE_MANAGER_FAILED"
)
