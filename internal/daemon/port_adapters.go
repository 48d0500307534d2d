package daemon

// This file maps the engine's method names of today onto LeasePort; it
// goes once leasing.Engine serves the port natively.

import (
	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/leasing"
	"github.com/simlock/simlock/internal/queue"
)

// enginePort is a worker's engine as the lease port: the engine has every
// method but Get and Watch under the port's names already.
type enginePort struct{ *leasing.Engine }

func (p enginePort) Get(c queue.Caller, in contract.LeaseIDInput) (contract.LeaseGetResult, error) {
	return p.Engine.Lease(c, in.LeaseID)
}

func (p enginePort) Watch(c queue.Caller, key string) (contract.LeaseWatchResult, error) {
	l, err := p.Engine.Lease(c, key)
	if err != nil {
		return contract.LeaseWatchResult{}, err
	}
	return contract.LeaseWatchResult{Lease: l.Lease}, nil
}
