package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/gateway"
	"github.com/simlock/simlock/internal/ids"
	"github.com/simlock/simlock/internal/leader"
	"github.com/simlock/simlock/internal/ownership"
	"github.com/simlock/simlock/internal/queue"
	"github.com/simlock/simlock/internal/store"
)

// startGateway is a gateway's startup after the store opened: no drivers
// and no engine, but the fleet of workers that dial in.
func (d *Daemon) startGateway(ctx context.Context, db store.GatewayStore) error {
	cfg := d.opts.Config
	if !cfg.Bool("http.enabled") {
		return errors.New("a gateway needs the HTTP API, where workers and clients reach it: simlock config set http.enabled true")
	}
	in, err := ownership.LoadInstance(d.opts.Home)
	if err != nil {
		return err
	}
	// The fleet is named alike whichever replica leads, and across
	// restarts: by the first gateway's instance id, kept in the store.
	fleetID, err := db.FleetID(ctx, in.ID)
	if err != nil {
		return err
	}
	d.relays = &relayGroup{store: db, lock: &d.appendMu, publish: d.bus.Publish}
	d.fleet = gateway.New(gateway.Options{
		Store: db, InstanceID: fleetID, Version: d.opts.Version,
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
		Fatal:          d.gatewayQueueFailed,
		Refused:        d.refusedCommit,
	})
	d.leases = d.leasing
	if err := d.leasing.Load(ctx); err != nil {
		return err
	}
	// The metrics count the end of a lease granted before this start by
	// its platform, as a worker's do (SeedLease).
	grants, err := db.Grants(ctx)
	if err != nil {
		return err
	}
	for _, g := range grants {
		d.metrics.SeedGrant(g.WorkerID, g.WorkerLeaseID, g.Platform)
	}
	snap, err := db.Load(ctx)
	if err != nil {
		return err
	}
	if err := d.leasing.Restore(ctx, snap.Requests); err != nil {
		return err
	}
	return d.emit(ctx, contract.EvDaemonStarted, map[string]any{"mode": contract.ModeGateway})
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
	evs, err := d.db.Commit(ctx, store.Change{Events: []store.NewEvent{{ID: ids.New("evt_", ids.Short), Timestamp: time.Now().UnixMilli(), Event: event, Payload: b}}})
	if err != nil {
		return fmt.Errorf("record %s: %w", event, err)
	}
	d.bus.Publish(evs...)
	return nil
}

// relay commits a worker's events and publishes those appended, under the
// same lock as emit: subscribers hear events in the log's order. Relays
// that arrive together share one commit (relayGroup).
func (d *Daemon) relay(ctx context.Context, workerID string, evs []contract.Event, lastSeq int64) error {
	return d.relays.relay(ctx, store.RelayBatch{WorkerID: workerID, Events: evs, LastSeq: lastSeq})
}

// gatewayQueueFailed is told that the fleet queue could not save a
// decision and stopped deciding: memory is ahead of the database, so the
// gateway stops as a daemon does, and the next start converges from what
// was saved. A replica steps down instead: it runs itself again as a
// follower, and whichever replica leads next starts from the database.
func (d *Daemon) gatewayQueueFailed(err error) {
	if d.replica.enabled() {
		d.deposed(d.replica.won.Load(), "the fleet queue could not save a decision: "+err.Error())
		return
	}
	d.log.Error("could not save a decision; stopping", "err", err)
	d.requestStop()
}

// refusedCommit answers the waiters of a decision a replica's store could
// not save NOT_LEADER rather than INTERNAL: the replica steps down for it
// (gatewayQueueFailed), the requests' records wait in the database for the
// next leader, and a client is to ask that one (a request asked again
// with its idempotency key gets what was saved, if the commit landed). Any
// other gateway's waiters hear the queue's INTERNAL, as it stops.
func (d *Daemon) refusedCommit(err error) *contract.Error {
	if !d.replica.enabled() && !errors.Is(err, leader.ErrDeposed) {
		return nil
	}
	return contract.Errorf(contract.CodeNotLeader, "this gateway replica could not save the decision and steps down: ask the leader")
}
