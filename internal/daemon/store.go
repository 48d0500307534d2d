package daemon

import (
	"context"

	"github.com/simlock/simlock/internal/store"
)

// daemonStore is what the daemon calls on its store in either mode: all a
// gateway calls, and the clock reading a worker stores outside a decision.
// A worker's other needs (devices, components) are met by the
// *sqlite.DB that startup hands its parts.
type daemonStore interface {
	store.GatewayStore
	Clock(ctx context.Context) (store.Clock, bool, error)
	PutClock(ctx context.Context, c store.Clock) error
}
