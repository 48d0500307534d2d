package daemon

import (
	"encoding/json"
	"strings"

	"github.com/simlock/simlock/internal/contract"
)

// reservedRequester is the one rule for the requester ids under
// contract.GatewayRequesterPrefix: only the uplink session of the gateway a
// worker's config names asks for leases under it
// (gw:<gatewayInstanceId>:<requester>), so a lease there is one a gateway
// asked for. Anyone else naming such an id, as the principal of a hello or
// as the requesterId of any operation, admin included, is FORBIDDEN: a
// local user running `simlock lease --agent-id gw:…` must not pass for the
// gateway, whose index would then take the lease for one of its agents'.
func reservedRequester(gatewaySession bool, field, id string) error {
	if gatewaySession || !strings.HasPrefix(id, contract.GatewayRequesterPrefix) {
		return nil
	}
	return contract.Errorf(contract.CodeForbidden,
		"%s %q: requester ids starting with %s are reserved for the requests a gateway forwards over its uplink", field, contract.Clip(id), contract.GatewayRequesterPrefix).
		With("field", field)
}

// reservedPrincipal is the rule for a hello's principal: the gateway's
// own (contract.GatewayPrincipalPrefix) and the requester ids it forwards
// (reservedRequester) are its uplink session's alone. A local user saying
// hello as gateway:<id> would otherwise resolve names as the gateway does:
// its own chosen lease id equal to the key of a lease the gateway holds
// there (lse_…) would take the gateway's renew, get and release.
func reservedPrincipal(gatewaySession bool, principal string) error {
	if !gatewaySession && strings.HasPrefix(principal, contract.GatewayPrincipalPrefix) {
		return contract.Errorf(contract.CodeForbidden,
			"principal %q: principals starting with %s are reserved for a gateway's uplink", contract.Clip(principal), contract.GatewayPrincipalPrefix).
			With("field", "principal")
	}
	return reservedRequester(gatewaySession, "principal", principal)
}

// reservedRequesterIn applies reservedRequester to the requesterId of an
// operation's input, whichever operation it is: every input that names a
// requester names it requesterId. Input that is not a JSON object is left
// to the operation's own decoding, which refuses it.
func reservedRequesterIn(gatewaySession bool, raw json.RawMessage) error {
	if gatewaySession || len(raw) == 0 {
		return nil
	}
	var in struct {
		RequesterID string `json:"requesterId"`
	}
	if json.Unmarshal(raw, &in) != nil {
		return nil
	}
	return reservedRequester(false, "requesterId", in.RequesterID)
}
