package postgres

import "github.com/simlock/simlock/internal/store"

// A gateway may keep its state here: the PostgreSQL backend is all a
// gateway calls on its store.
var _ store.GatewayStore = (*DB)(nil)
