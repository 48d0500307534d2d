package mcpserver

import (
	"strings"

	"github.com/simlock/simlock/internal/contract"
)

// leaseArg resolves the leaseId argument of a tool that acts on a device:
// the id given, any lease of the caller's (the daemon checks it is theirs),
// or, left out, the one lease this session holds. A session that holds
// none or several must name one: there is no "current device" to fall
// back on, so parallel agents, each in its own session, never act on each
// other's device by leaving the id out. Every device tool resolves its
// lease here.
func (s *server) leaseArg(id string) (string, error) {
	if id != "" {
		return id, nil
	}
	ids := s.heldIDs()
	switch len(ids) {
	case 0:
		return "", contract.BadRequest("leaseId", "this session holds no lease; name one (the lease.id of a grant) or get one with lease_simulator first")
	case 1:
		return ids[0], nil
	default:
		return "", contract.BadRequest("leaseId", "this session holds %d leases (%s); name one", len(ids), strings.Join(ids, ", "))
	}
}
