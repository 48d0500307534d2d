package daemon

import (
	"github.com/simlock/simlock/internal/contract"
)

// tokenOps are the operations on HTTP bearer tokens, the same in both
// modes but for worker tokens, which only a gateway makes.
func tokenOps() []opEntry {
	return []opEntry{
		{op: contract.OpTokenCreate, both: handle(tokenCreate)},
		{op: contract.OpTokenList, both: handle(func(c *call, _ contract.Empty) (contract.TokenListResult, error) {
			return contract.TokenListResult{Tokens: c.d.tokens.list()}, nil
		})},
		{op: contract.OpTokenRevoke, both: handle(tokenRevoke)},
	}
}

func tokenCreate(c *call, in contract.TokenCreateInput) (contract.TokenCreateResult, error) {
	d := c.d
	if in.Role == contract.TokenWorker && d.fleet == nil {
		return contract.TokenCreateResult{}, contract.Errorf(contract.CodeUnsupportedInWorkerMode,
			"a worker token joins a worker to a gateway: create it on the gateway (this daemon is a worker)").With("operation", c.op)
	}
	res, err := d.tokens.create(c.s.ctx, in)
	if err == nil {
		d.Emit(contract.EvTokenCreated, tokenEvent(res.Token, c.caller.Principal))
	}
	return res, err
}

func tokenRevoke(c *call, in contract.TokenRevokeInput) (contract.TokenRevokeResult, error) {
	d, ctx := c.d, c.s.ctx
	res, was, err := d.tokens.revoke(ctx, in.ID)
	if err != nil {
		return res, err
	}
	// What the token holds open ends now, not at its next request: its
	// HTTP streams, long polls and commands, and on a gateway the uplinks
	// it opened.
	if d.api != nil {
		d.api.EndToken(in.ID)
	}
	if d.fleet != nil {
		d.fleet.CloseToken(ctx, in.ID)
	}
	if res.Revoked {
		d.Emit(contract.EvTokenRevoked, tokenEvent(was, c.caller.Principal))
	}
	return res, nil
}
