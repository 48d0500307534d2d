package daemon

import "github.com/simlock/simlock/internal/contract"

// pingOps answer ping where the call lands, in either mode: a gateway
// never forwards it, and it touches neither the decision lock nor the
// store, so its round trip is the protocol's cost alone.
func pingOps() []opEntry {
	return []opEntry{
		{op: contract.OpPing, both: handle(func(*call, contract.Empty) (contract.Empty, error) {
			return contract.Empty{}, nil
		})},
	}
}
