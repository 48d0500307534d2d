package leasing

import (
	"time"

	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/queue"
)

// Processes reads the machine's process table for lease.bind.
type Processes interface {
	// StartedAt is when process pid started, in epoch ms, or an error when
	// no such process runs. A pid is reused; a pid with its start time
	// names one process.
	StartedAt(pid int) (int64, error)
}

// BindPolicy is how bound leases are watched: their processes are checked
// every Interval (a second when 0). With no Processes, lease.bind is
// refused.
type BindPolicy struct {
	Processes Processes
	Interval  time.Duration
}

// Bind ties lease in.LeaseID to process in.PID: when the process exits, the
// lease ends (lease.released, reason bound-process-exited). Binding again
// replaces the process. It needs the same ownership as a renewal.
func (e *Engine) Bind(c Caller, in contract.LeaseBindInput) (contract.LeaseRecord, error) {
	procs := e.opts.Bind.Processes
	if procs == nil {
		return contract.LeaseRecord{}, contract.BadRequest("pid", "this daemon cannot watch processes, so it cannot bind a lease to one")
	}
	// Read before the decision: the process table is a system call, and a
	// process that exits between here and the commit is caught by the
	// first check, as any later exit is.
	started, err := procs.StartedAt(in.PID)
	if err != nil {
		return contract.LeaseRecord{}, contract.BadRequest("pid", "no process %d is running: %v", in.PID, err)
	}
	var out contract.LeaseRecord
	err = e.try(func(tx *queue.Txn) error {
		l, cerr := e.findLocked(c, in.LeaseID)
		if cerr != nil {
			return cerr
		}
		nl := l.Lease
		nl.BoundPID, nl.BoundPIDStartedAt = in.PID, started
		e.putLease(tx, nl)
		tx.Event(contract.EvLeaseBound, leaseEvent(nl, map[string]any{"deviceId": nl.DeviceID, "pid": in.PID}))
		out = nl.LeaseRecord
		return nil
	})
	return out, err
}

// watchBound ends each bound lease whose process has exited, checking
// every BindPolicy.Interval until the engine closes.
func (e *Engine) watchBound() {
	t := time.NewTicker(e.opts.Bind.Interval)
	defer t.Stop()
	for {
		select {
		case <-e.ctx.Done():
			return
		case <-t.C:
		}
		e.checkBound()
	}
}

// binding is one bound lease as watchBound checks it.
type binding struct {
	leaseID string
	pid     int
	started int64
}

// checkBound checks the bound leases' processes once, outside the decision
// lock, and ends those whose process is gone in one decision.
func (e *Engine) checkBound() {
	var bs []binding
	e.view(func() {
		for id, l := range e.bound {
			bs = append(bs, binding{id, l.BoundPID, l.BoundPIDStartedAt})
		}
	})
	var gone []binding
	for _, b := range bs {
		if started, err := e.opts.Bind.Processes.StartedAt(b.pid); err != nil || started != b.started {
			gone = append(gone, b)
		}
	}
	if len(gone) == 0 {
		return
	}
	_ = e.do(func(tx *queue.Txn) error {
		for _, b := range gone {
			// Bound again, or ended, since it was read: not this one's to end.
			if l, ok := e.bound[b.leaseID]; ok && l.BoundPID == b.pid && l.BoundPIDStartedAt == b.started {
				e.endLocked(tx, b.leaseID, contract.EndBoundProcessExited)
			}
		}
		return nil
	})
}

// fileBound keeps e.bound in step with l, an active lease just added or
// changed.
func (e *Engine) fileBound(l *lease) {
	if l.BoundPID != 0 {
		e.bound[l.UniqueKey()] = l
	} else {
		delete(e.bound, l.UniqueKey())
	}
}
