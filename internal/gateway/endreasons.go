package gateway

import (
	"errors"
	"net"

	"github.com/simlock/simlock/internal/client"
	"github.com/simlock/simlock/internal/contract"
)

// Why a worker's uplink ended, as worker list, status and the console show
// it: words for people. The code behind each, when there is one, is the
// view's reasonCode.
const (
	// reasonConnectionLost: the connection ended without the worker
	// saying it stops (killed, crashed, the network), whichever call saw
	// it first.
	reasonConnectionLost = "connection lost"
	// reasonStopped: the worker said it was stopping.
	reasonStopped = "stopped"
)

// reasonCode is the code behind a reason the gateway gives, or "".
func reasonCode(reason string) contract.Code {
	switch reason {
	case reasonConnectionLost:
		return contract.CodeDaemonConnectionLost
	case reasonStopped:
		return contract.CodeDaemonStopping
	}
	return ""
}

// callFailed is why the uplink ends after a call to the worker (what)
// over c (nil before the session was made) failed with err: a lost
// connection is reasonStopped when the worker said it was stopping, else
// reasonConnectionLost, whichever call noticed it, never the code's text;
// anything else names the call and its error.
func callFailed(c *client.Client, what string, err error) string {
	if contract.AsError(err).Code == contract.CodeDaemonConnectionLost {
		if c != nil {
			return endReason(c)
		}
		return reasonConnectionLost
	}
	return what + " failed: " + err.Error()
}

// endReason says why the uplink under c ended: what the worker sent that
// broke it (a bad frame, one over the limit), else reasonStopped when it
// said it was stopping, else reasonConnectionLost (the connection closed
// or failed under it).
func endReason(c *client.Client) string {
	var netErr *net.OpError
	if err := c.Err(); err != nil && !errors.As(err, &netErr) {
		return "the uplink failed: " + err.Error()
	}
	if _, ok := c.Stopping(); ok {
		return reasonStopped
	}
	return reasonConnectionLost
}
