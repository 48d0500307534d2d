package gateway

import "github.com/simlock/simlock/internal/contract"

// rejectedReason is the lease.rejected reason of a request the fast-fail
// table (assess) refused: no-worker when no worker takes requests at all
// (its error says so in its details), else unresolvable-spec (no worker
// serves the platform, the model or a runtime for it).
func rejectedReason(cerr *contract.Error) contract.RejectReason {
	if r, _ := cerr.Details["reason"].(string); r == string(contract.RejectNoWorker) {
		return contract.RejectNoWorker
	}
	return contract.RejectUnresolvable
}
