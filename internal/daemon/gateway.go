package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/gateway"
	"github.com/simlock/simlock/internal/leasing"
	"github.com/simlock/simlock/internal/ownership"
	"github.com/simlock/simlock/internal/store"
	"github.com/simlock/simlock/internal/store/sqlite"
)

// startGateway is a gateway's startup after the store opened: no drivers
// and no engine, but the fleet of workers that dial in.
func (d *Daemon) startGateway(ctx context.Context, db *sqlite.DB) error {
	cfg := d.opts.Config
	if !cfg.Bool("http.enabled") {
		return errors.New("a gateway needs the HTTP API, where workers and clients reach it: simlock config set http.enabled true")
	}
	in, err := ownership.LoadInstance(d.opts.Home)
	if err != nil {
		return err
	}
	d.fleet = gateway.New(gateway.Options{
		Store: db, InstanceID: in.ID, Version: d.opts.Version,
		Emit: d.emit, Relay: d.relay,
		Refresh:   d.opts.FleetRefresh,
		Retention: time.Duration(cfg.Int("gateway.disconnectedRetentionMs")) * time.Millisecond,
		Logger:    d.log.With("module", "gateway"),
	})
	if err := d.fleet.Start(ctx); err != nil {
		return err
	}
	return d.emit(ctx, "daemon.started", map[string]any{"mode": contract.ModeGateway})
}

// emit commits one of the daemon's own events and publishes it.
func (d *Daemon) emit(ctx context.Context, event string, payload map[string]any) error {
	b, err := json.Marshal(payload)
	if err != nil {
		return err
	}
	d.appendMu.Lock()
	defer d.appendMu.Unlock()
	evs, err := d.db.Commit(ctx, store.Change{Events: []store.NewEvent{{ID: "evt_" + randHex(8), Timestamp: time.Now().UnixMilli(), Event: event, Payload: b}}})
	if err != nil {
		return fmt.Errorf("record %s: %w", event, err)
	}
	d.bus.Publish(evs...)
	return nil
}

// relay commits a worker's events and publishes those appended, under the
// same lock as emit: subscribers hear events in the log's order.
func (d *Daemon) relay(ctx context.Context, workerID string, evs []contract.Event, lastSeq int64) error {
	d.appendMu.Lock()
	defer d.appendMu.Unlock()
	appended, err := d.db.RelayEvents(ctx, workerID, evs, lastSeq)
	if err != nil {
		return err
	}
	d.bus.Publish(appended...)
	return nil
}

// gatewayRefuses names the operations a gateway does not have, with why.
var gatewayRefuses = map[contract.Op]string{
	contract.OpLeaseRequest:       "leasing through a gateway is not in this version; lease on a worker",
	contract.OpLeaseRequestCreate: "leasing through a gateway is not in this version; lease on a worker",
	contract.OpLeaseRequestGet:    "leasing through a gateway is not in this version; lease on a worker",
	contract.OpLeaseRenew:         "a gateway holds no leases in this version; renew on the worker",
	contract.OpLeaseRelease:       "a gateway holds no leases in this version; release on the worker",
	contract.OpLeaseReleaseAll:    "a gateway holds no leases in this version; release on the worker",
	contract.OpLeaseCancel:        "a gateway queues no requests in this version",
	contract.OpLeaseBind:          "a pid names a process of one machine; bind on the worker",
	contract.OpLeaseGet:           "a gateway holds no leases in this version; read it on the worker",
	contract.OpLeaseWatch:         "a gateway holds no leases in this version; watch it on the worker",
	contract.OpDeviceExec:         "exec through a gateway is not in this version; run it on the worker",
	contract.OpPassthrough:        "a gateway has no devices of its own to run simctl or adb against",
	contract.OpDoctorRun:          "doctor checks one machine's devices and tools; run it on each worker",
	contract.OpNuke:               "nuke stops one machine's devices; run it on each worker",
	contract.OpCleanupRun:         "cleanup runs one machine's idle rules; run it on each worker",
	contract.OpCleanupRules:       "a gateway has no idle rules of its own",
	contract.OpComponentInstall:   "a gateway has no runtimes of its own; install on the workers",
	contract.OpComponentList:      "a gateway has no runtimes of its own; list them on the workers",
	contract.OpComponentRemove:    "a gateway has no runtimes of its own; remove them on the workers",
	contract.OpDemoInject:         "a gateway has no simulated devices",
}

// gatewayOp answers an operation on a gateway that differs from a
// worker's, or refuses one it does not have; handled is false for the
// operations both modes answer the same way.
func (s *session) gatewayOp(req contract.Request, caller leasing.Caller) (res any, err error, handled bool) {
	f := s.d.fleet
	if why, refused := gatewayRefuses[req.Op]; refused {
		return nil, contract.Errorf(contract.CodeUnsupportedInGatewayMode, "%s: %s", req.Op, why).With("operation", req.Op), true
	}
	switch req.Op {
	case contract.OpCatalogGet:
		var in contract.CatalogGetInput
		if err := contract.DecodeInput(req.Input, &in); err != nil {
			return nil, err, true
		}
		return f.Catalog(in.Platform), nil, true
	case contract.OpLeaseList:
		var in contract.Empty
		if err := contract.DecodeInput(req.Input, &in); err != nil {
			return nil, err, true
		}
		snap := f.Snapshot()
		var out []contract.LeaseRecord
		for _, l := range snap.Leases {
			if caller.Admin || l.OwnerID == caller.Principal {
				out = append(out, l)
			}
		}
		return contract.LeaseListResult{Leases: nonNilLeases(out)}, nil, true
	case contract.OpListGet:
		var in contract.ListGetInput
		if err := contract.DecodeInput(req.Input, &in); err != nil {
			return nil, err, true
		}
		if in.Limit > 0 || in.After != "" {
			return nil, contract.BadRequest("limit", "a gateway's lists are not paged in this version; ask without limit and after"), true
		}
		snap := f.Snapshot()
		switch in.Kind {
		case contract.ListLeases:
			return contract.ListGetResult{Leases: nonNilLeases(snap.Leases)}, nil, true
		case contract.ListRequests:
			rs, err := f.Requests(s.ctx)
			if err != nil {
				return nil, err, true
			}
			return contract.ListGetResult{Requests: rs}, nil, true
		default:
			return contract.ListGetResult{Devices: snap.Devices}, nil, true
		}
	}
	if r, err, ok := s.workerOp(req); ok {
		return r, err, true
	}
	return nil, nil, false
}

func nonNilLeases(ls []contract.LeaseRecord) []contract.LeaseRecord {
	if ls == nil {
		return []contract.LeaseRecord{}
	}
	return ls
}

// workerOp answers the worker.* operations: on a gateway, from its fleet;
// on a worker, worker.list as a fleet of one and the rest refused.
func (s *session) workerOp(req contract.Request) (res any, err error, handled bool) {
	f := s.d.fleet
	switch req.Op {
	case contract.OpWorkerList:
		var in contract.Empty
		if err := contract.DecodeInput(req.Input, &in); err != nil {
			return nil, err, true
		}
		if f == nil {
			return contract.WorkerListResult{Mode: contract.ModeWorker, Workers: []contract.WorkerSummary{s.d.selfSummary()}}, nil, true
		}
		return contract.WorkerListResult{Mode: contract.ModeGateway, Workers: f.Summaries()}, nil, true
	case contract.OpWorkerGet, contract.OpWorkerDrain, contract.OpWorkerUndrain, contract.OpWorkerRemove:
		var in contract.WorkerIDInput
		if err := contract.DecodeInput(req.Input, &in); err != nil {
			return nil, err, true
		}
		if f == nil {
			return nil, contract.Errorf(contract.CodeUnsupportedInWorkerMode, "%s: this daemon is a worker; point at its gateway", req.Op).With("operation", req.Op), true
		}
		var sum contract.WorkerSummary
		var err error
		switch req.Op {
		case contract.OpWorkerGet:
			v, err := f.View(in.WorkerID)
			return v, err, true
		case contract.OpWorkerDrain:
			sum, err = f.Drain(s.ctx, in.WorkerID)
		case contract.OpWorkerUndrain:
			sum, err = f.Undrain(s.ctx, in.WorkerID)
		default:
			sum, err = f.Remove(s.ctx, in.WorkerID)
		}
		if err != nil {
			return nil, err, true
		}
		return contract.WorkerResult{Worker: sum}, nil, true
	}
	return nil, nil, false
}

// selfSummary is a worker's line of its fleet of one.
func (d *Daemon) selfSummary() contract.WorkerSummary {
	in, _ := ownership.LoadInstance(d.opts.Home)
	snap := d.engine.Snapshot(true)
	return contract.WorkerSummary{ID: in.ID, Label: d.labelOf(d.opts.Config), Connection: contract.WorkerConnected,
		LastSeenAt: time.Now().UnixMilli(), Version: d.opts.Version, Running: snap.Capacity.Global.Running,
		MaxRunning: snap.Capacity.Global.MaxRunning, Leases: snap.Counts.Leases, QueueDepth: snap.QueueDepth}
}

// gatewayStatus fills a gateway's status from its fleet.
func (d *Daemon) gatewayStatus(s *contract.Status, summary bool) {
	snap := d.fleet.Snapshot()
	s.Fleet, s.Capacity, s.QueueDepth, s.Counts = &snap.Fleet, &snap.Capacity, snap.QueueDepth, &snap.Counts
	s.Installs = snap.Installs
	if !summary {
		s.Devices, s.Leases, s.Waiting = snap.Devices, nonNilLeases(snap.Leases), snap.Waiting
	}
}
