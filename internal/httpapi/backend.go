package httpapi

import (
	"context"
	"net/http"

	"github.com/simlock/simlock/internal/contract"
)

// Backend is the daemon as the HTTP API sees it: a token check and the one
// dispatcher every frontend shares. Each HTTP request runs its operations as
// one session acting for its token: an agent token with the agent role and
// the token id as principal, an operator token with the admin role.
type Backend interface {
	// Authenticate maps a bearer secret ("slk_...") to its token. It
	// answers UNAUTHENTICATED for an unknown or revoked secret, and another
	// code when it cannot tell (the daemon's store could not be opened). It
	// may wait for the daemon's store to open; ctx bounds that wait.
	Authenticate(ctx context.Context, secret string) (contract.TokenRecord, error)

	// Call runs op with input (marshalled to JSON, then decoded strictly by
	// the dispatcher, so unknown fields and bad values come back as
	// BAD_REQUEST naming the field) as tok's session. The session lives until
	// ctx ends: pushes for it (lease-lost after lease.watch, events after
	// events.subscribe, exec-started/exec-output during device.exec) are
	// passed to push, which must not block for long, from other goroutines,
	// possibly after Call returned. push may be nil for calls that push
	// nothing. Errors are *contract.Error (errors.As).
	Call(ctx context.Context, tok contract.TokenRecord, op contract.Op, input any, push func(contract.Push)) (any, error)

	// Uplink serves a worker's uplink (GET /v1/uplink, a WebSocket) opened
	// with worker token tok, until it ends. An error it returns before it
	// upgraded the request is written as the JSON error response.
	Uplink(w http.ResponseWriter, r *http.Request, tok contract.TokenRecord) error
	// UplinkRefused is told of an uplink refused before it reached Uplink
	// (no token, an unknown one, another role's).
	UplinkRefused(r *http.Request, err *contract.Error)
}
