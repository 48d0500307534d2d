package gateway

import (
	"context"

	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/queue"
)

// actsOn finds a gateway lease the caller may run a command on, or move
// files into and out of, by the rule a worker keeps too
// (queue.Caller.ActsOn), on the gateway's grant record.
func (l *Leasing) actsOn(c queue.Caller, id, requesterID string) (*indexed, error) {
	e, err := l.owned(c, id)
	if err != nil {
		return nil, err
	}
	if err := c.ActsOn(id, requesterID, e.requester, e.owner); err != nil {
		return nil, err
	}
	return e, nil
}

// Exec forwards device.exec to the lease's worker, checked first against
// the gateway's index (the caller owns the lease, or is an admin naming
// its requester, as on a worker) and again by the worker. started is told
// when the worker started the command, so a refusal before it stays a
// plain error; output is told each chunk until the call ends. ctx is the
// caller's call: when it ends (the caller went away), the forward is
// cancelled, which the client tells the worker (call.cancel), and the
// worker stops the command; so it does past the gateway's backstop
// (ExecTimeout, EXEC_TIMEOUT), and for a caller too far behind.
func (l *Leasing) Exec(ctx context.Context, c queue.Caller, in contract.ExecInput, started func(), output func(contract.ExecOutput)) (contract.ExecResult, error) {
	e, err := l.actsOn(c, in.LeaseID, in.RequesterID)
	if err != nil {
		return contract.ExecResult{}, err
	}
	cl := l.f.clientOf(e.workerID)
	if cl == nil {
		return contract.ExecResult{}, contract.Errorf(contract.CodeWorkerUnreachable, "worker %s is not connected", e.workerID).
			With("workerId", e.workerID).With("leaseId", e.id)
	}
	fwd := in
	fwd.LeaseID, fwd.RequesterID = e.workerLeaseID, l.idx.prefix+e.requester
	caller := ctx
	// Bounded by the worker's silence: a command that writes output runs
	// as long as the worker's exec.timeoutMs lets it.
	ctx, heard, cancel := withSilence(ctx, l.opts.ExecTimeout)
	defer cancel()
	relay := newExecRelay(started, output, cancel)
	res, err := cl.ExecStarted(ctx, fwd, func() {
		if ctx.Err() == nil {
			heard()
			relay.start()
		}
	}, func(o contract.ExecOutput) {
		if ctx.Err() == nil {
			heard()
			relay.add(o)
		}
	})
	relay.close()
	switch {
	case relay.overflowed():
		return contract.ExecResult{}, contract.Errorf(contract.CodeCancelled,
			"the caller fell more than %d MiB of output behind; the gateway stopped relaying the command on worker %s", maxExecBacklog>>20, e.workerID).
			With("leaseId", e.id)
	case err == nil:
		return res, nil
	case caller.Err() != nil:
		return contract.ExecResult{}, contract.Errorf(contract.CodeCancelled, "the caller went away; the command on worker %s was stopped", e.workerID).
			With("leaseId", e.id)
	case ctx.Err() != nil:
		return contract.ExecResult{}, contract.Errorf(contract.CodeExecTimeout, "worker %s sent nothing of the command for gateway.execTimeoutMs (%d)",
			e.workerID, l.opts.ExecTimeout.Milliseconds()).With("timeoutMs", l.opts.ExecTimeout.Milliseconds())
	}
	ce, refused := forwardError(ctx, e.workerID, "the command", err)
	if !refused {
		return contract.ExecResult{}, ce.With("leaseId", e.id)
	}
	ce = l.scrub(e.workerID, ce)
	if ce.Code == contract.CodeUnknownLease {
		ce = ce.With("leaseId", e.id)
	}
	return contract.ExecResult{}, ce
}
