package daemon

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/queue"
)

// The operation table: every operation of contract's list declared once,
// with the handler each mode answers it with, or the reason a mode refuses
// it. The roles an operation needs and whether it answers during startup
// are contract's (contract.LookupOp); the dispatcher (dispatch.go) checks
// those, then hands the call to the entry. One file per resource fills the
// table: ops_leases.go, ops_requests.go, ops_devices.go, ops_devicetools.go, ops_events.go,
// ops_workers.go, ops_jobs.go, ops_tokens.go, ops_admin.go, ops_ping.go.

// call is one operation as its handler sees it: the session it came on,
// the call's own context and id, and the caller it acts for.
type call struct {
	s *session
	d *Daemon
	// ctx is the call's own: it ends with the session, or when the caller
	// cancels the call (call.cancel). Most handlers wait under the
	// session's context (s.ctx); one that runs something for its caller
	// (device.exec) stops it when ctx ends.
	ctx context.Context
	// id is the caller's id for the call, echoed on its pushes.
	id     json.RawMessage
	op     contract.Op
	caller queue.Caller
}

// handler answers one operation from its raw input.
type handler interface {
	// serve decodes raw strictly and runs the operation.
	serve(c *call, raw json.RawMessage) (any, error)
	// decode only decodes raw, strictly: a refusal that reads the input
	// first answers its error ahead of the refusal.
	decode(raw json.RawMessage) error
	// inputType is the operation's input type, for the table's tests.
	inputType() any
}

// op is an operation's handler typed by its input and result: the one
// place an input is decoded (contract.DecodeInput), so no operation
// decodes by hand.
type op[In any, P input[In], Out any] func(c *call, in In) (Out, error)

// input is what contract.DecodeInput decodes into: a pointer to an
// operation's input type, which validates itself.
type input[In any] interface {
	*In
	contract.Validator
}

func (f op[In, P, Out]) serve(c *call, raw json.RawMessage) (any, error) {
	var in In
	if err := contract.DecodeInput(raw, P(&in)); err != nil {
		return nil, err
	}
	out, err := f(c, in)
	if err != nil {
		return nil, err
	}
	return out, nil
}

func (f op[In, P, Out]) decode(raw json.RawMessage) error {
	var in In
	return contract.DecodeInput(raw, P(&in))
}

func (op[In, P, Out]) inputType() any {
	var in In
	return in
}

// handle makes a handler of f, its types inferred.
func handle[In any, P input[In], Out any](f func(c *call, in In) (Out, error)) handler {
	return op[In, P, Out](f)
}

// opEntry is one operation of the table.
type opEntry struct {
	op contract.Op
	// both answers the operation in either mode; worker and gateway, set
	// instead, answer it in their mode.
	both, worker, gateway handler
	// gatewayRefuses is why a gateway has no such operation: it answers
	// UNSUPPORTED_IN_GATEWAY_MODE, before reading the input.
	gatewayRefuses string
	// workerRefuses marks the operations of a gateway's fleet a worker has
	// not: it reads the input (as the gateway's handler does), then
	// answers UNSUPPORTED_IN_WORKER_MODE.
	workerRefuses bool
	// conn marks the operations the connection answers itself (hello,
	// call.cancel), before a session dispatches anything.
	conn bool
}

// handler is the entry's handler in mode m, nil when it has none there.
func (e opEntry) handler(m string) handler {
	switch {
	case e.both != nil:
		return e.both
	case m == contract.ModeGateway:
		return e.gateway
	default:
		return e.worker
	}
}

// refusal is the error a daemon in mode m answers the operation with, nil
// when m serves it. readsInput: the input is decoded first, and its error
// answered ahead of the refusal.
func (e opEntry) refusal(m string) (err *contract.Error, readsInput bool) {
	switch {
	case m == contract.ModeGateway && e.gatewayRefuses != "":
		return contract.Errorf(contract.CodeUnsupportedInGatewayMode, "%s: %s", e.op, e.gatewayRefuses).With("operation", e.op), false
	case m == contract.ModeWorker && e.workerRefuses:
		return contract.Errorf(contract.CodeUnsupportedInWorkerMode, "%s: this daemon is a worker; point at its gateway", e.op).With("operation", e.op), true
	}
	return nil, false
}

// run answers the call in mode m: the mode's refusal, or its handler.
func (e opEntry) run(c *call, m string, raw json.RawMessage) (any, error) {
	if refused, readsInput := e.refusal(m); refused != nil {
		if readsInput {
			if err := e.gateway.decode(raw); err != nil {
				return nil, err
			}
		}
		return nil, refused
	}
	h := e.handler(m)
	if h == nil {
		return nil, contract.Errorf(contract.CodeUnknownRequest, "operation %q has no handler", e.op)
	}
	return h.serve(c, raw)
}

// opTable is the table, built from each resource's entries.
type opTable map[contract.Op]opEntry

// newOpTable builds the table. An operation declared twice is a mistake
// in the code, met at the first start of any daemon (and in its tests).
func newOpTable() opTable {
	t := opTable{}
	for _, part := range [][]opEntry{leaseOps(), requestOps(), deviceOps(), fileOps(), deviceToolOps(), eventOps(), workerOps(), jobOps(), tokenOps(), adminOps(), metricsOps(), pingOps()} {
		for _, e := range part {
			if _, dup := t[e.op]; dup {
				panic(fmt.Sprintf("operation %s is declared twice in the operation table", e.op))
			}
			t[e.op] = e
		}
	}
	return t
}
