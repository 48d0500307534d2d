package daemon

import (
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/leasing"
	"github.com/simlock/simlock/internal/store"
)

// dispatch runs one operation for the session: handshake check, role check,
// parking until startup is done, strict input decoding, then the handler.
// Every frontend goes through the same rules; this is the only place they
// live for the socket.
func (c *conn) dispatch(req contract.Request) (any, error) {
	info, known := contract.LookupOp(req.Op)
	c.mu.Lock()
	hello, role, principal := c.hello, c.role, c.principal
	c.mu.Unlock()
	if !known {
		return nil, contract.Errorf(contract.CodeUnknownRequest, "unknown operation %q", clip(string(req.Op))).With("op", clip(string(req.Op)))
	}
	if req.Op == contract.OpHello {
		return c.doHello(req.Input)
	}
	if !hello {
		return nil, contract.Errorf(contract.CodeHandshakeRequired, "send hello before %s", req.Op)
	}
	if info.AdminOnly && role != contract.RoleAdmin {
		return nil, contract.Errorf(contract.CodeForbidden, "%s needs the admin role", req.Op).With("op", req.Op)
	}
	var e *leasing.Engine
	if !info.Early {
		select {
		case <-c.d.ready:
		case <-c.ctx.Done():
			return nil, contract.Errorf(contract.CodeDaemonConnectionLost, "connection closed")
		}
		if c.d.startErr != nil {
			return nil, contract.Errorf(contract.CodeDaemonStartupFailed, "daemon startup failed: %v", c.d.startErr)
		}
		// Safe to read once ready is closed: converge set it before.
		e = c.d.engine
	}
	caller := leasing.Caller{Principal: principal, Admin: role == contract.RoleAdmin}
	switch req.Op {
	case contract.OpStatusGet:
		var in contract.Empty
		if err := contract.DecodeInput(req.Input, &in); err != nil {
			return nil, err
		}
		return c.d.status(), nil
	case contract.OpCatalogGet:
		var in contract.CatalogGetInput
		if err := contract.DecodeInput(req.Input, &in); err != nil {
			return nil, err
		}
		cats, err := e.Catalog(c.ctx, in.Platform)
		if err != nil {
			return nil, err
		}
		return contract.CatalogResult{Platforms: cats}, nil
	case contract.OpLeaseRequest:
		var in contract.LeaseRequestInput
		if err := contract.DecodeInput(req.Input, &in); err != nil {
			return nil, err
		}
		id := req.ID
		grant, err := e.Acquire(c.ctx, caller, in, func(p contract.LeaseProgress) {
			c.push(contract.Push{Push: contract.PushProgress, ID: id, Progress: &p})
		})
		if err != nil {
			return nil, err
		}
		c.d.holds(c, grant.Lease.ID)
		return grant, nil
	case contract.OpLeaseRenew:
		var in contract.LeaseRenewInput
		if err := contract.DecodeInput(req.Input, &in); err != nil {
			return nil, err
		}
		return e.Renew(caller, in)
	case contract.OpLeaseRelease:
		var in contract.LeaseIDInput
		if err := contract.DecodeInput(req.Input, &in); err != nil {
			return nil, err
		}
		// A session ending its own lease needs no news of it; any other
		// session holding it hears lease-lost.
		c.d.unhold(c, in.LeaseID)
		return e.Release(caller, in)
	case contract.OpLeaseReleaseAll:
		var in contract.Empty
		if err := contract.DecodeInput(req.Input, &in); err != nil {
			return nil, err
		}
		return e.ReleaseAll()
	case contract.OpLeaseCancel:
		var in contract.LeaseCancelInput
		if err := contract.DecodeInput(req.Input, &in); err != nil {
			return nil, err
		}
		return e.Cancel(caller, in)
	case contract.OpLeaseList:
		var in contract.Empty
		if err := contract.DecodeInput(req.Input, &in); err != nil {
			return nil, err
		}
		return contract.LeaseListResult{Leases: e.Leases(caller)}, nil
	case contract.OpListGet:
		var in contract.ListGetInput
		if err := contract.DecodeInput(req.Input, &in); err != nil {
			return nil, err
		}
		return c.d.list(in.Kind)
	case contract.OpEventsReplay:
		var in contract.EventsReplayInput
		if err := contract.DecodeInput(req.Input, &in); err != nil {
			return nil, err
		}
		evs, err := c.d.db.Events(c.ctx, store.EventQuery{SinceTs: in.SinceTs, AfterSeq: in.AfterSeq, Limit: in.Limit})
		if err != nil {
			return nil, contract.Errorf(contract.CodeInternal, "read events: %v", err)
		}
		if evs == nil {
			evs = []contract.Event{}
		}
		return contract.EventsReplayResult{Events: evs}, nil
	case contract.OpEventsSubscribe:
		var in contract.Empty
		if err := contract.DecodeInput(req.Input, &in); err != nil {
			return nil, err
		}
		return c.subscribe(), nil
	case contract.OpConfigGet:
		var in contract.ConfigGetInput
		if err := contract.DecodeInput(req.Input, &in); err != nil {
			return nil, err
		}
		cfg := c.d.opts.Config
		if in.Key == "" {
			return map[string]any{"config": cfg.Nested()}, nil
		}
		v, ok := cfg.Get(in.Key)
		if !ok {
			return nil, contract.BadRequest("key", "unknown config key %q", clip(in.Key))
		}
		return map[string]any{"key": in.Key, "value": v}, nil
	case contract.OpPassthrough:
		var in contract.PassthroughInput
		if err := contract.DecodeInput(req.Input, &in); err != nil {
			return nil, err
		}
		return c.d.passthrough(caller, in)
	case contract.OpDoctorRun:
		var in contract.DoctorInput
		if err := contract.DecodeInput(req.Input, &in); err != nil {
			return nil, err
		}
		if in.Fix && !caller.Admin {
			return nil, contract.Errorf(contract.CodeForbidden, "doctor --fix needs the admin role")
		}
		return c.d.doctor(c.ctx, in.Fix)
	case contract.OpDaemonStop:
		var in contract.Empty
		if err := contract.DecodeInput(req.Input, &in); err != nil {
			return nil, err
		}
		return stopResult{d: c.d}, nil
	}
	return nil, contract.Errorf(contract.CodeUnknownRequest, "operation %q has no handler", req.Op)
}

// stopResult answers daemon.stop, then starts the stop.
type stopResult struct{ d *Daemon }

func (s stopResult) MarshalJSON() ([]byte, error) {
	return json.Marshal(contract.DaemonStopResult{Stopping: true})
}
func (s stopResult) afterSend() { s.d.requestStop() }

func (c *conn) doHello(raw json.RawMessage) (any, error) {
	var in contract.HelloInput
	if err := contract.DecodeInput(raw, &in); err != nil {
		return nil, err
	}
	if in.Protocol.Max < contract.ProtocolMin || in.Protocol.Min > contract.ProtocolMax {
		return nil, contract.Errorf(contract.CodeProtocolVersionUnsupported,
			"client speaks protocol %d-%d, this daemon %d-%d", in.Protocol.Min, in.Protocol.Max, contract.ProtocolMin, contract.ProtocolMax).
			With("client", in.Protocol).
			With("daemon", contract.VersionRange{Min: contract.ProtocolMin, Max: contract.ProtocolMax}).
			With("daemonVersion", c.d.opts.Version)
	}
	role := contract.RoleAgent
	if in.AdminToken != "" {
		if !c.d.checkAdmin(in.AdminToken) {
			return nil, contract.Errorf(contract.CodeAdminAuthenticationFailed, "the admin token does not match this daemon's")
		}
		role = contract.RoleAdmin
	}
	principal := in.Principal
	if principal == "" {
		principal = "anonymous-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.hello {
		return nil, contract.Errorf(contract.CodeBadRequest, "hello was already sent on this connection")
	}
	c.hello, c.role, c.principal = true, role, principal
	return contract.HelloResult{
		Protocol:      min(in.Protocol.Max, contract.ProtocolMax),
		Daemon:        contract.VersionRange{Min: contract.ProtocolMin, Max: contract.ProtocolMax},
		DaemonVersion: c.d.opts.Version,
		Role:          role,
		Principal:     principal,
	}, nil
}

// subscription answers events.subscribe and starts pushing once sent.
type subscription struct {
	c   *conn
	res contract.EventsSubscribeResult
	run func()
}

func (s subscription) MarshalJSON() ([]byte, error) { return json.Marshal(s.res) }
func (s subscription) afterSend()                   { go s.run() }

func (c *conn) subscribe() any {
	sub, last := c.d.bus.Subscribe(4096)
	c.mu.Lock()
	c.nextSub++
	id := fmt.Sprintf("sub_%d", c.nextSub)
	c.subs[id] = sub.Close
	c.mu.Unlock()
	run := func() {
		defer sub.Close()
		for {
			select {
			case <-c.ctx.Done():
				return
			case ev, ok := <-sub.C():
				if !ok {
					if sub.Lagged() {
						c.d.log.Warn("event subscriber fell behind; ending its session")
						c.close()
					}
					return
				}
				c.push(contract.Push{Push: contract.PushEvent, SubscriptionID: id, Event: &ev})
			}
		}
	}
	return subscription{c: c, res: contract.EventsSubscribeResult{SubscriptionID: id, LastSeq: last}, run: run}
}

func (d *Daemon) status() contract.Status {
	select {
	case <-d.ready:
	default:
		return contract.Status{Daemon: d.info("starting"), Host: d.host()}
	}
	health := "running"
	if d.startErr != nil {
		health = "failed"
	}
	d.mu.Lock()
	if d.stopping {
		health = "stopping"
	}
	d.mu.Unlock()
	s := contract.Status{Daemon: d.info(health), Host: d.host()}
	for _, p := range contract.Platforms() {
		ds := contract.DriverStatus{Platform: p}
		if drv, ok := d.opts.Drivers[p]; ok {
			ds.Driver, ds.Enabled, ds.Root = drv.Name(), true, drv.Root()
		} else {
			ds.Reason = d.opts.DriverNotes[p]
			if r, ok := d.opts.Rejections[p]; ok {
				ds.RootRejected = &r
			}
		}
		s.Drivers = append(s.Drivers, ds)
	}
	if d.engine == nil {
		return s
	}
	capacity := d.engine.Capacity()
	s.Capacity = &capacity
	s.Devices = d.engine.Devices()
	s.Leases = d.engine.Leases(leasing.Caller{Admin: true})
	s.Waiting = d.engine.WaitingList()
	for _, w := range s.Waiting {
		if w.Stage == "queued" {
			s.QueueDepth++
		}
	}
	return s
}

func (d *Daemon) list(kind contract.ListKind) (contract.ListGetResult, error) {
	switch kind {
	case contract.ListLeases:
		return contract.ListGetResult{Leases: d.engine.Leases(leasing.Caller{Admin: true})}, nil
	case contract.ListRequests:
		return contract.ListGetResult{Requests: d.engine.Requests()}, nil
	}
	return contract.ListGetResult{Devices: d.engine.Devices()}, nil
}

func clip(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}
