package daemon

import (
	"context"
	"errors"

	"github.com/simlock/simlock/internal/store"
	"github.com/simlock/simlock/internal/store/postgres"
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

// pgStore is a gateway's PostgreSQL store. Usage rollups on PostgreSQL
// come with the backend's own UsageRows; until it has one, usage.get
// there says so rather than answering from nothing.
type pgStore struct{ *postgres.DB }

func (s pgStore) UsageRows(ctx context.Context, from, to int64, sink store.UsageSink) error {
	if u, ok := any(s.DB).(interface {
		UsageRows(ctx context.Context, from, to int64, sink store.UsageSink) error
	}); ok {
		return u.UsageRows(ctx, from, to, sink)
	}
	return errUsageNotKept
}

var errUsageNotKept = errors.New("this store keeps no usage rollups")
