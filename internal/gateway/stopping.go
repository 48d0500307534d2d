package gateway

import "github.com/simlock/simlock/internal/contract"

// workerStopping is what a requester hears when the worker that was
// readying its device answered DAEMON_STOPPING: the worker is named, and
// the code is not DAEMON_STOPPING, which would read as the gateway
// stopping. (Before any progress the request is not ended but placed
// again, on another worker: see dispatch.)
func workerStopping(workerID string) *contract.Error {
	return contract.Errorf(contract.CodeWorkerUnreachable, "worker %s is stopping and gave up the request it was readying a device for; ask again", workerID).
		With("workerId", workerID).With("reason", string(contract.RejectWorkerStopping))
}
