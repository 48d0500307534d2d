package daemon

import (
	"context"

	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/gateway"
	"github.com/simlock/simlock/internal/leasing"
	"github.com/simlock/simlock/internal/queue"
)

// LeasePort is the front desk of leasing as both modes serve it: a worker's
// engine answers from its own devices, a gateway's fleet queue from its
// workers'. The daemon holds one, set at startup, and the lease operations
// both modes answer alike (ops_leases.go, ops_requests.go) are written once
// against it. What really differs by mode (catalog, lists, exec, transfers,
// installs, the worker.* operations, status) has a handler per mode in the
// operation table instead (table.go).
type LeasePort interface {
	// Acquire asks for a lease and waits for it, telling progress as the
	// request moves.
	Acquire(ctx context.Context, c queue.Caller, in contract.LeaseRequestInput, progress func(contract.LeaseProgress)) (contract.LeaseGrant, error)
	// Submit asks for a lease without waiting for it.
	Submit(ctx context.Context, c queue.Caller, in contract.LeaseRequestInput) (contract.LeaseRequestStatus, error)
	RequestStatus(ctx context.Context, c queue.Caller, in contract.LeaseRequestGetInput) (contract.LeaseRequestStatus, error)
	RetryRequest(ctx context.Context, c queue.Caller, id string) (contract.LeaseRequestStatus, error)
	Cancel(ctx context.Context, c queue.Caller, in contract.LeaseCancelInput) (contract.LeaseCancelResult, error)
	// Resolve is the unique key of the lease c names name, as the
	// operations on it resolve it: sessions hold leases by key.
	Resolve(c queue.Caller, name string) (string, error)
	Renew(c queue.Caller, in contract.LeaseRenewInput) (contract.LeaseRecord, error)
	Release(c queue.Caller, in contract.LeaseIDInput) (contract.ReleaseResult, error)
	ReleaseAll() (contract.ReleaseAllResult, error)
	Get(c queue.Caller, in contract.LeaseIDInput) (contract.LeaseGetResult, error)
	// Watch reads the lease whose unique key is key, for lease.watch.
	Watch(c queue.Caller, key string) (contract.LeaseWatchResult, error)
}

var (
	_ LeasePort = (*gateway.Leasing)(nil)
	_ LeasePort = (*leasing.Engine)(nil)
)
