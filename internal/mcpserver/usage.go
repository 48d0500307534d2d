package mcpserver

import (
	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/howto"
)

// grantResult is what lease_simulator and wait_for_lease answer with a
// grant: the grant itself and, in words, how to use the device.
type grantResult struct {
	*contract.LeaseGrant
	Usage string `json:"usage"`
}

func withUsage(g *contract.LeaseGrant) grantResult {
	return grantResult{LeaseGrant: g, Usage: usage(*g)}
}

// usage tells an agent how to reach its device, and that this server keeps
// the lease alive for it.
func usage(g contract.LeaseGrant) string {
	return howto.Use(g) + " This server renews the lease while it runs; call release_simulator when you are done."
}
