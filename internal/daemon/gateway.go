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
	"github.com/simlock/simlock/internal/queue"
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
		Refresh:    d.opts.FleetRefresh,
		Retention:  time.Duration(cfg.Int("gateway.disconnectedRetentionMs")) * time.Millisecond,
		MaxWorkers: int(cfg.Int("gateway.maxWorkers")),
		Logger:     d.log.With("module", "gateway"),
	})
	if err := d.fleet.Start(ctx); err != nil {
		return err
	}
	d.leasing = gateway.NewLeasing(d.fleet, gateway.LeasingOptions{
		Store:          gatewayQueueStore{d},
		DefaultTTL:     time.Duration(cfg.Int("lease.defaultTtlMs")) * time.Millisecond,
		MaxTTL:         time.Duration(cfg.Int("lease.maxTtlMs")) * time.Millisecond,
		MinTTL:         time.Duration(cfg.Int("lease.minTtlMs")) * time.Millisecond,
		RequestTimeout: time.Duration(cfg.Int("gateway.leaseRequestTimeoutMs")) * time.Millisecond,
		ExecTimeout:    time.Duration(cfg.Int("gateway.execTimeoutMs")) * time.Millisecond,
		LeaseEnded:     d.leaseEnded,
		DeviceHealth:   d.deviceHealth,
		Logger:         d.log.With("module", "fleet-queue"),
	})
	if err := d.leasing.Load(ctx); err != nil {
		return err
	}
	snap, err := db.Load(ctx)
	if err != nil {
		return err
	}
	if err := d.leasing.Settle(snap.Requests); err != nil {
		return err
	}
	return d.emit(ctx, "daemon.started", map[string]any{"mode": contract.ModeGateway})
}

// gatewayQueueStore is the fleet queue's store: the gateway's request
// records, events and grant records, committed and published under the
// lock that orders the gateway's log with the relayed events.
type gatewayQueueStore struct{ d *Daemon }

func (s gatewayQueueStore) Commit(ctx context.Context, w queue.Writes, grants []store.Grant, ended []string) ([]contract.Event, error) {
	c, empty := leasingChange(w, grants, ended)
	if empty {
		return nil, nil
	}
	s.d.appendMu.Lock()
	defer s.d.appendMu.Unlock()
	evs, err := s.d.db.Commit(ctx, c)
	if err != nil {
		return nil, err
	}
	s.d.bus.Publish(evs...)
	return evs, nil
}

// leasingChange is one decision of the fleet queue as the store writes it.
func leasingChange(w queue.Writes, grants []store.Grant, ended []string) (c store.Change, empty bool) {
	if len(w.Requests)+len(w.Events)+len(grants)+len(ended) == 0 {
		return store.Change{}, true
	}
	c = store.Change{Requests: w.Requests, Events: make([]store.NewEvent, len(w.Events)), Grants: grants, EndedGrants: ended}
	for i, ev := range w.Events {
		c.Events[i] = store.NewEvent{ID: ev.ID, Timestamp: ev.Timestamp, Event: ev.Event, Payload: ev.Payload}
	}
	return c, false
}

// Reserve takes, for one decision of the fleet queue, the lock that orders
// the gateway's log with the relayed events and then the database's write
// lock, in the order emit and relay take them: a database another process
// locks is then met before anything is decided, and fails that call only
// (the queue's Try), never the queue.
func (s gatewayQueueStore) Reserve(ctx context.Context) (gateway.LeasingReservation, error) {
	s.d.appendMu.Lock()
	res, err := s.d.db.Reserve(ctx)
	if err != nil {
		s.d.appendMu.Unlock()
		return nil, err
	}
	return &gatewayReservation{d: s.d, res: res}, nil
}

var _ gateway.LeasingReserver = gatewayQueueStore{}

// gatewayReservation is a fleet queue decision's hold on the log's order
// and the database's write lock; it is used by one goroutine.
type gatewayReservation struct {
	d    *Daemon
	res  store.Reservation
	done bool
}

func (r *gatewayReservation) Commit(ctx context.Context, w queue.Writes, grants []store.Grant, ended []string) ([]contract.Event, error) {
	if r.done {
		return nil, errors.New("commit: the reservation has ended")
	}
	r.done = true
	defer r.d.appendMu.Unlock()
	c, _ := leasingChange(w, grants, ended)
	evs, err := r.res.Commit(ctx, c)
	if err != nil {
		return nil, err
	}
	r.d.bus.Publish(evs...)
	return evs, nil
}

func (r *gatewayReservation) Release() {
	if r.done {
		return
	}
	r.done = true
	r.res.Release()
	r.d.appendMu.Unlock()
}

func (s gatewayQueueStore) RequestByKey(ctx context.Context, requesterID, key string) (contract.LeaseRequestRecord, bool, error) {
	return s.d.db.RequestByKey(ctx, requesterID, key)
}

func (s gatewayQueueStore) Request(ctx context.Context, id string) (contract.LeaseRequestRecord, bool, error) {
	return s.d.db.Request(ctx, id)
}

// Emit commits one of the daemon's own events outside any other decision
// and publishes it, in order with the rest of the log: through the engine
// on a worker (which publishes under its decision lock), through emit on a
// gateway. A failure is logged: the fact it records has happened anyway.
// It is for operations, which run once startup has converged.
func (d *Daemon) Emit(name string, payload map[string]any) {
	switch {
	case d.fleet != nil:
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := d.emit(ctx, name, payload); err != nil {
			d.log.Error("could not record an event", "event", name, "err", err)
		}
	case d.engine != nil:
		d.engine.Emit(name, payload)
	}
}

func (s gatewayQueueStore) Grants(ctx context.Context) ([]store.Grant, error) {
	return s.d.db.Grants(ctx)
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
	contract.OpLeaseBind:       "a pid names a process of one machine; bind on the worker",
	contract.OpPassthrough:     "a gateway has no devices of its own to run simctl or adb against",
	contract.OpDoctorRun:       "doctor checks one machine's devices and tools; run it on each worker",
	contract.OpNuke:            "nuke stops one machine's devices; run it on each worker",
	contract.OpCleanupRun:      "cleanup runs one machine's idle rules; run it on each worker",
	contract.OpCleanupRules:    "a gateway has no idle rules of its own",
	contract.OpComponentList:   "a gateway has no runtimes of its own; list them on the workers",
	contract.OpComponentRemove: "a gateway has no runtimes of its own; remove them on the workers",
	contract.OpDemoInject:      "a gateway has no simulated devices",
}

// gatewayOp answers an operation on a gateway that differs from a
// worker's, or refuses one it does not have; handled is false for the
// operations both modes answer the same way.
func (s *session) gatewayOp(ctx context.Context, req contract.Request, caller leasing.Caller) (res any, err error, handled bool) {
	f := s.d.fleet
	if why, refused := gatewayRefuses[req.Op]; refused {
		return nil, contract.Errorf(contract.CodeUnsupportedInGatewayMode, "%s: %s", req.Op, why).With("operation", req.Op), true
	}
	l := s.d.leasing
	switch req.Op {
	case contract.OpComponentInstall:
		var in contract.ComponentInstallInput
		if err := contract.DecodeInput(req.Input, &in); err != nil {
			return nil, err, true
		}
		id := req.ID
		cfg := s.d.opts.Config
		pol := gateway.InstallPolicy{
			Retries: int(cfg.Int("gateway.installRetries")),
			Silence: time.Duration(cfg.Int("downloads.timeoutMs"))*time.Millisecond + time.Minute,
		}
		// The job is the fleet's, not the caller's: a caller that goes
		// away leaves it running (job show and its event stream follow
		// it); the gateway stopping ends it.
		done, err := f.Install(s.d.life, s.d.jobs, pol, in, func(ev contract.JobEvent) {
			s.push(contract.Push{Push: contract.PushJob, ID: id, Job: &ev})
		})
		if err != nil {
			return nil, err, true
		}
		return done, nil, true
	case contract.OpLeaseRequest:
		var in contract.LeaseRequestInput
		if err := contract.DecodeInput(req.Input, &in); err != nil {
			return nil, err, true
		}
		caller, err := s.onBehalf(caller, &in)
		if err != nil {
			return nil, err, true
		}
		id := req.ID
		g, err := l.Acquire(s.ctx, caller, in, func(p contract.LeaseProgress) {
			s.push(contract.Push{Push: contract.PushProgress, ID: id, Progress: &p})
		})
		if err != nil {
			return nil, err, true
		}
		s.d.holds(s, g.Lease.UniqueKey())
		return g, nil, true
	case contract.OpLeaseRequestCreate:
		var in contract.LeaseRequestInput
		if err := contract.DecodeInput(req.Input, &in); err != nil {
			return nil, err, true
		}
		caller, err := s.onBehalf(caller, &in)
		if err != nil {
			return nil, err, true
		}
		r, err := l.Submit(s.ctx, caller, in)
		return r, err, true
	case contract.OpLeaseRequestGet:
		var in contract.LeaseRequestGetInput
		if err := contract.DecodeInput(req.Input, &in); err != nil {
			return nil, err, true
		}
		r, err := l.RequestStatus(s.ctx, caller, in)
		return r, err, true
	case contract.OpLeaseRequestRetry:
		var in contract.LeaseRequestRetryInput
		if err := contract.DecodeInput(req.Input, &in); err != nil {
			return nil, err, true
		}
		r, err := l.RetryRequest(s.ctx, caller, in.RequestID)
		return r, err, true
	case contract.OpDeviceRetry:
		var in contract.DeviceIDInput
		if err := contract.DecodeInput(req.Input, &in); err != nil {
			return nil, err, true
		}
		d, err := f.RetryDevice(s.ctx, in.DeviceID)
		if err != nil {
			return nil, err, true
		}
		return contract.DeviceRetryResult{Device: d}, nil, true
	case contract.OpLeaseCancel:
		var in contract.LeaseCancelInput
		if err := contract.DecodeInput(req.Input, &in); err != nil {
			return nil, err, true
		}
		r, err := l.Cancel(s.ctx, caller, in)
		return r, err, true
	case contract.OpLeaseRenew:
		var in contract.LeaseRenewInput
		if err := contract.DecodeInput(req.Input, &in); err != nil {
			return nil, err, true
		}
		r, err := l.Renew(caller, in)
		if err == nil {
			s.d.renewed(s, r)
		}
		return r, err, true
	case contract.OpLeaseRelease:
		var in contract.LeaseIDInput
		if err := contract.DecodeInput(req.Input, &in); err != nil {
			return nil, err, true
		}
		// Sessions hold leases by key: the name resolves as the release
		// will resolve it.
		if key, err := l.Resolve(caller, in.LeaseID); err == nil {
			s.d.unhold(s, key)
		}
		r, err := l.Release(caller, in)
		return r, err, true
	case contract.OpLeaseGet:
		var in contract.LeaseIDInput
		if err := contract.DecodeInput(req.Input, &in); err != nil {
			return nil, err, true
		}
		r, err := l.Get(caller, in)
		return r, err, true
	case contract.OpLeaseWatch:
		var in contract.LeaseIDInput
		if err := contract.DecodeInput(req.Input, &in); err != nil {
			return nil, err, true
		}
		// Held by its key, registered before the check, so an end right
		// after it is heard.
		key, err := l.Resolve(caller, in.LeaseID)
		if err != nil {
			return nil, err, true
		}
		s.d.holds(s, key)
		r, err := l.Watch(caller, key)
		if err != nil {
			s.d.unhold(s, key)
		}
		return r, err, true
	case contract.OpLeaseReleaseAll:
		var in contract.Empty
		if err := contract.DecodeInput(req.Input, &in); err != nil {
			return nil, err, true
		}
		r, err := l.ReleaseAll()
		return r, err, true
	case contract.OpDeviceExec:
		var in contract.ExecInput
		if err := contract.DecodeInput(req.Input, &in); err != nil {
			return nil, err, true
		}
		call := req.ID
		// The call's context: a caller that goes ends the worker's
		// command too (the forward is cancelled over the uplink).
		r, err := l.Exec(ctx, caller, in, func() {
			s.push(contract.Push{Push: contract.PushExecStarted, ID: call})
		}, func(o contract.ExecOutput) {
			s.push(contract.Push{Push: contract.PushExecOutput, ID: call, Output: &o})
		})
		return r, err, true
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
		return contract.LeaseListResult{Leases: l.Leases(caller, f.Snapshot().Leases)}, nil, true
	case contract.OpListGet:
		var in contract.ListGetInput
		if err := contract.DecodeInput(req.Input, &in); err != nil {
			return nil, err, true
		}
		if in.Kind == contract.ListFailedRequests {
			r, err := s.d.failedRequests(s.ctx, in.Limit)
			return r, err, true
		}
		if in.Limit > 0 || in.After != "" {
			return nil, contract.BadRequest("limit", "a gateway's lists are not paged in this version; ask without limit and after"), true
		}
		snap := f.Snapshot()
		switch in.Kind {
		case contract.ListLeases:
			return contract.ListGetResult{Leases: l.Leases(caller, snap.Leases)}, nil, true
		case contract.ListRequests:
			rs, err := f.Requests(s.ctx)
			if err != nil {
				return nil, err, true
			}
			return contract.ListGetResult{Requests: rs}, nil, true
		default:
			return contract.ListGetResult{Devices: l.ProjectDevices(caller, snap.Devices)}, nil, true
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

// gatewayStatus fills a gateway's status from its fleet and its queue: the
// requests waiting in the fleet queue come first, then those waiting on
// each worker.
func (d *Daemon) gatewayStatus(s *contract.Status, c leasing.Caller, summary bool) {
	snap := d.fleet.Snapshot()
	fleetWaiting, depth := d.leasing.Waiting(c)
	snap.Counts.Waiting += len(fleetWaiting)
	s.Fleet, s.Capacity, s.QueueDepth, s.Counts = &snap.Fleet, &snap.Capacity, snap.QueueDepth+depth, &snap.Counts
	s.Installs = snap.Installs
	if summary {
		return
	}
	// An agent sees its own leases and requests, and every device, another
	// agent's shown leased without naming the lease; the counts are of
	// everything (as on a worker). What is its own is the grant records'
	// say, never a worker's.
	s.Devices, s.Leases = d.leasing.ProjectDevices(c, snap.Devices), nonNilLeases(d.leasing.Leases(c, snap.Leases))
	s.Waiting = append(fleetWaiting, snap.Waiting...)
	if !c.Admin {
		s.Waiting = fleetWaiting
	}
}
