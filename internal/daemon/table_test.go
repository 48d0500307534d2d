package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/simlock/simlock/internal/config"
	"github.com/simlock/simlock/internal/contract"
)

var modes = []string{contract.ModeWorker, contract.ModeGateway}

// refusalCode is the code a mode refuses the other mode's operations with.
var refusalCode = map[string]contract.Code{
	contract.ModeWorker:  contract.CodeUnsupportedInWorkerMode,
	contract.ModeGateway: contract.CodeUnsupportedInGatewayMode,
}

// tableGaps lists what is wrong with table t for the operations ops, in
// each mode: an operation with no entry, an entry with neither a handler
// nor a refusal in a mode, or a refusal that is not the mode's code naming
// the operation.
func tableGaps(ops []contract.Op, t opTable) []string {
	var gaps []string
	for _, op := range ops {
		e, ok := t[op]
		if !ok {
			gaps = append(gaps, fmt.Sprintf("%s: no entry in the operation table", op))
			continue
		}
		if e.op != op {
			gaps = append(gaps, fmt.Sprintf("%s: its entry names %q", op, e.op))
		}
		if e.conn {
			// hello and call.cancel: the connection answers them, in
			// both modes, before any session dispatches.
			continue
		}
		for _, m := range modes {
			refused, _ := e.refusal(m)
			switch {
			case refused != nil && e.handler(m) != nil:
				gaps = append(gaps, fmt.Sprintf("%s in %s mode: both handled and refused", op, m))
			case refused != nil && (refused.Code != refusalCode[m] || refused.Details["operation"] != op):
				gaps = append(gaps, fmt.Sprintf("%s in %s mode: refused with %s %v, want %s naming it", op, m, refused.Code, refused.Details, refusalCode[m]))
			case refused == nil && e.handler(m) == nil:
				gaps = append(gaps, fmt.Sprintf("%s in %s mode: neither handled nor refused", op, m))
			}
		}
		// A worker reads the input of the fleet's operations it refuses
		// as a gateway's handler reads it.
		if e.workerRefuses && e.gateway == nil {
			gaps = append(gaps, fmt.Sprintf("%s: a worker refuses it, and a gateway has no handler for it", op))
		}
	}
	for op := range t {
		if _, known := contract.LookupOp(op); !known && !slices.Contains(ops, op) {
			gaps = append(gaps, fmt.Sprintf("%s: in the table, not in contract's operations", op))
		}
	}
	return gaps
}

func TestEveryOperationIsHandledOrRefusedInEachMode(t *testing.T) {
	for _, gap := range tableGaps(contract.Ops(), newOpTable()) {
		t.Error(gap)
	}
}

func TestTheCompletenessCheckFindsAnOperationMissingFromAMode(t *testing.T) {
	// An operation contract lists and the table does not.
	ops := append(contract.Ops(), contract.Op("widget.frob"))
	if gaps := tableGaps(ops, newOpTable()); !slices.Contains(gaps, "widget.frob: no entry in the operation table") {
		t.Errorf("an operation without an entry: gaps %q, want it named", gaps)
	}
	// An operation one mode lost: its handler there, or its refusal.
	for _, c := range []struct {
		op   contract.Op
		drop func(*opEntry)
		want string
	}{
		{contract.OpCatalogGet, func(e *opEntry) { e.gateway = nil }, "catalog.get in gateway mode: neither handled nor refused"},
		{contract.OpCatalogGet, func(e *opEntry) { e.worker = nil }, "catalog.get in worker mode: neither handled nor refused"},
		{contract.OpLeaseRenew, func(e *opEntry) { e.both = nil }, "lease.renew in worker mode: neither handled nor refused"},
		{contract.OpNuke, func(e *opEntry) { e.gatewayRefuses = "" }, "nuke in gateway mode: neither handled nor refused"},
		{contract.OpWorkerDrain, func(e *opEntry) { e.workerRefuses = false }, "worker.drain in worker mode: neither handled nor refused"},
	} {
		tbl := newOpTable()
		e := tbl[c.op]
		c.drop(&e)
		tbl[c.op] = e
		if gaps := tableGaps(contract.Ops(), tbl); !slices.Contains(gaps, c.want) {
			t.Errorf("%s dropped: gaps %q, want %q", c.op, gaps, c.want)
		}
	}
}

// TestEachModesDispatcherReachesEveryOperation sends every operation to an
// in-process daemon of each mode, as admin, with an input no operation
// accepts: one a mode refuses before reading its input answers the mode's
// refusal; every other is decoded by its handler's strict decoding, which
// names the unknown field. An operation that reached no handler answers
// neither.
func TestEachModesDispatcherReachesEveryOperation(t *testing.T) {
	gcfg, err := config.Parse([]byte(`{"mode":"gateway","http":{"enabled":true,"port":0}}`))
	if err != nil {
		t.Fatal(err)
	}
	_, gwHome := startDaemonOpts(t, Options{Config: gcfg})
	_, wHome := startDaemon(t, nil)
	tbl := newOpTable()
	const field = "noOperationTakesThisField"
	raw := json.RawMessage(`{"` + field + `":1}`)
	for m, home := range map[string]string{contract.ModeGateway: gwHome, contract.ModeWorker: wHome} {
		cl := dial(t, home, "ops", true)
		if _, err := cl.StatusWith(context.Background(), contract.StatusGetInput{WaitReady: true}); err != nil {
			t.Fatalf("%s: %v", m, err)
		}
		for _, op := range contract.Ops() {
			if op == contract.OpHello {
				continue // the connection's, said once
			}
			err := cl.Call(context.Background(), op, raw, nil)
			var ce *contract.Error
			if !errors.As(err, &ce) {
				t.Errorf("%s on a %s: %v, want a typed error", op, m, err)
				continue
			}
			if refused, readsInput := tbl[op].refusal(m); refused != nil && !readsInput {
				if ce.Code != refusalCode[m] {
					t.Errorf("%s on a %s = %s %q, want %s", op, m, ce.Code, ce.Message, refusalCode[m])
				}
				continue
			}
			if ce.Code != contract.CodeBadRequest || !strings.Contains(ce.Message, field) {
				t.Errorf("%s on a %s = %s %q, want its handler's BAD_REQUEST naming %s", op, m, ce.Code, ce.Message, field)
			}
		}
	}
}
