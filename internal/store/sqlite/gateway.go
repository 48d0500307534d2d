package sqlite

import "github.com/simlock/simlock/internal/store"

// A gateway's store may be this backend.
var _ store.GatewayStore = (*DB)(nil)
