package daemon

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"runtime/metrics"
	"sync"

	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/leasing"
	"github.com/simlock/simlock/internal/store"
)

// session is one caller of the dispatcher: a socket connection once it has
// said hello, or one HTTP request acting for its bearer token. Its role and
// principal are fixed; it lives until ctx ends.
type session struct {
	d         *Daemon
	ctx       context.Context
	role      contract.Role
	principal string
	// push delivers a frame the session did not ask for; it must not block
	// for long (device.exec output is the exception: it may, which slows
	// the command's output down to the reader's pace).
	push func(contract.Push)
	// end closes the session, when it cannot keep up with its pushes.
	end func()

	// gateway: the session is the uplink of the gateway this worker's
	// config names, the one caller whose lease requests may name an owner.
	gateway bool
	// remote: the session acts for a caller that is not on this machine
	// (an HTTP request, a gateway's uplink) or said in its hello that it
	// must be treated as one (simlock mcp does): its device commands may
	// not name files of this machine, and it gets no passthrough command
	// to run here.
	remote bool

	mu      sync.Mutex
	subs    map[string]func()
	nextSub int
}

func newSession(d *Daemon, ctx context.Context, role contract.Role, principal string, push func(contract.Push), end func()) *session {
	if push == nil {
		push = func(contract.Push) {}
	}
	return &session{d: d, ctx: ctx, role: role, principal: principal, push: push, end: end, subs: map[string]func(){}}
}

// dispatch runs one operation for the session: role check, parking until
// startup is done, strict input decoding, then the handler. Every frontend
// goes through here; this is the only place the rules live. call is the
// caller's id for the call, echoed on its pushes. ctx is the call's own:
// it ends with the session, or when the caller cancels the call
// (call.cancel); an operation that runs something for its caller
// (device.exec) stops it then.
func (s *session) dispatch(ctx context.Context, call json.RawMessage, op contract.Op, raw json.RawMessage) (any, error) {
	info, known := contract.LookupOp(op)
	if !known {
		return nil, contract.Errorf(contract.CodeUnknownRequest, "unknown operation %q", clip(string(op))).With("op", clip(string(op)))
	}
	if op == contract.OpHello {
		return nil, contract.Errorf(contract.CodeBadRequest, "hello was already sent on this connection")
	}
	role, principal := s.role, s.principal
	if info.AdminOnly && role != contract.RoleAdmin {
		return nil, contract.Errorf(contract.CodeForbidden, "%s needs the admin role", op).With("op", op)
	}
	if err := reservedRequesterIn(s.gateway, raw); err != nil {
		return nil, err
	}
	req := contract.Request{ID: call, Op: op, Input: raw}
	var e *leasing.Engine
	if !info.Early {
		if err := s.awaitStartup(); err != nil {
			return nil, err
		}
		// Safe to read once ready is closed: converge set it before.
		e = s.d.engine
	}
	caller := leasing.Caller{Principal: principal, Admin: role == contract.RoleAdmin}
	if !info.Early {
		// The mode's own operations; the rest are both modes' alike.
		if s.d.fleet != nil {
			if res, err, ok := s.gatewayOp(ctx, req, caller); ok {
				return res, err
			}
		} else if res, err, ok := s.workerOp(req); ok {
			return res, err
		}
	}
	switch req.Op {
	case contract.OpStatusGet:
		var in contract.StatusGetInput
		if err := contract.DecodeInput(req.Input, &in); err != nil {
			return nil, err
		}
		if in.WaitReady {
			if err := s.awaitStartup(); err != nil {
				return nil, err
			}
		}
		return s.d.status(s.ctx, caller, in), nil
	case contract.OpCatalogGet:
		var in contract.CatalogGetInput
		if err := contract.DecodeInput(req.Input, &in); err != nil {
			return nil, err
		}
		cats, err := e.Catalog(s.ctx, in.Platform)
		if err != nil {
			return nil, err
		}
		return contract.CatalogResult{Platforms: cats}, nil
	case contract.OpLeaseRequest:
		var in contract.LeaseRequestInput
		if err := contract.DecodeInput(req.Input, &in); err != nil {
			return nil, err
		}
		caller, err := s.onBehalf(caller, &in)
		if err != nil {
			return nil, err
		}
		id := req.ID
		grant, err := e.Acquire(s.ctx, caller, in, func(p contract.LeaseProgress) {
			s.push(contract.Push{Push: contract.PushProgress, ID: id, Progress: &p})
		})
		if err != nil {
			return nil, err
		}
		s.d.holds(s, grant.Lease.UniqueKey())
		return grant, nil
	case contract.OpLeaseRenew:
		var in contract.LeaseRenewInput
		if err := contract.DecodeInput(req.Input, &in); err != nil {
			return nil, err
		}
		l, err := e.Renew(caller, in)
		if err == nil {
			s.d.renewed(s, l)
		}
		return l, err
	case contract.OpLeaseRelease:
		var in contract.LeaseIDInput
		if err := contract.DecodeInput(req.Input, &in); err != nil {
			return nil, err
		}
		// A session ending its own lease needs no news of it; any other
		// session holding it hears lease-lost. Sessions hold leases by
		// key: the name resolves as the release will resolve it.
		if key, err := e.Resolve(caller, in.LeaseID); err == nil {
			s.d.unhold(s, key)
		}
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
		return e.Cancel(s.ctx, caller, in)
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
		if in.Kind == contract.ListFailedRequests {
			return s.d.failedRequests(s.ctx, in.Limit)
		}
		return s.d.list(in)
	case contract.OpEventsReplay:
		var in contract.EventsReplayInput
		if err := contract.DecodeInput(req.Input, &in); err != nil {
			return nil, err
		}
		evs, err := s.d.db.Events(s.ctx, store.EventQuery{SinceTs: in.SinceTs, AfterSeq: in.AfterSeq, Limit: in.Limit})
		if err != nil {
			return nil, contract.Errorf(contract.CodeInternal, "read events: %v", err)
		}
		if evs == nil {
			evs = []contract.Event{}
		}
		return contract.EventsReplayResult{Events: evs}, nil
	case contract.OpUsageGet:
		var in contract.UsageGetInput
		if err := contract.DecodeInput(req.Input, &in); err != nil {
			return nil, err
		}
		return s.d.usage(s.ctx, in)
	case contract.OpEventsSubscribe:
		var in contract.Empty
		if err := contract.DecodeInput(req.Input, &in); err != nil {
			return nil, err
		}
		return s.subscribe(), nil
	case contract.OpConfigGet:
		var in contract.ConfigGetInput
		if err := contract.DecodeInput(req.Input, &in); err != nil {
			return nil, err
		}
		cfg := s.d.opts.Config
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
		return s.d.passthrough(s, caller, in)
	case contract.OpDoctorRun:
		var in contract.DoctorInput
		if err := contract.DecodeInput(req.Input, &in); err != nil {
			return nil, err
		}
		if (in.Fix || in.PurgeOrphans) && !caller.Admin {
			return nil, contract.Errorf(contract.CodeForbidden, "doctor --fix and --purge-orphans need the admin role")
		}
		return s.d.doctor(s.ctx, in)
	case contract.OpDaemonStop:
		var in contract.Empty
		if err := contract.DecodeInput(req.Input, &in); err != nil {
			return nil, err
		}
		return stopResult{d: s.d}, nil
	case contract.OpLeaseRequestCreate:
		var in contract.LeaseRequestInput
		if err := contract.DecodeInput(req.Input, &in); err != nil {
			return nil, err
		}
		caller, err := s.onBehalf(caller, &in)
		if err != nil {
			return nil, err
		}
		return e.Submit(s.ctx, caller, in)
	case contract.OpLeaseRequestGet:
		var in contract.LeaseRequestGetInput
		if err := contract.DecodeInput(req.Input, &in); err != nil {
			return nil, err
		}
		return e.RequestStatus(s.ctx, caller, in)
	case contract.OpLeaseRequestRetry:
		var in contract.LeaseRequestRetryInput
		if err := contract.DecodeInput(req.Input, &in); err != nil {
			return nil, err
		}
		return e.RetryRequest(s.ctx, caller, in.RequestID)
	case contract.OpDeviceRetry:
		var in contract.DeviceIDInput
		if err := contract.DecodeInput(req.Input, &in); err != nil {
			return nil, err
		}
		d, err := e.Maintenance().RetryDevice(in.DeviceID)
		if err != nil {
			return nil, err
		}
		return contract.DeviceRetryResult{Device: d}, nil
	case contract.OpLeaseBind:
		var in contract.LeaseBindInput
		if err := contract.DecodeInput(req.Input, &in); err != nil {
			return nil, err
		}
		return e.Bind(caller, in)
	case contract.OpLeaseGet:
		var in contract.LeaseIDInput
		if err := contract.DecodeInput(req.Input, &in); err != nil {
			return nil, err
		}
		return e.Get(caller, in)
	case contract.OpLeaseWatch:
		var in contract.LeaseIDInput
		if err := contract.DecodeInput(req.Input, &in); err != nil {
			return nil, err
		}
		// Held by its key, registered before the check, so an end right
		// after it is heard.
		key, err := e.Resolve(caller, in.LeaseID)
		if err != nil {
			return nil, err
		}
		s.d.holds(s, key)
		l, err := e.Get(caller, contract.LeaseIDInput{LeaseID: key})
		if err != nil {
			s.d.unhold(s, key)
			return nil, err
		}
		return contract.LeaseWatchResult{Lease: l.Lease}, nil
	case contract.OpFilesPut, contract.OpFilesGet, contract.OpAppsInstall, contract.OpScreenshot,
		contract.OpTransferWrite, contract.OpTransferRead, contract.OpTransferCommit, contract.OpTransferAbort:
		return s.transferOp(req, caller)
	case contract.OpDeviceExec:
		var in contract.ExecInput
		if err := contract.DecodeInput(req.Input, &in); err != nil {
			return nil, err
		}
		return s.d.exec(ctx, s, caller, call, in)
	case contract.OpComponentInstall:
		var in contract.ComponentInstallInput
		if err := contract.DecodeInput(req.Input, &in); err != nil {
			return nil, err
		}
		return s.d.installComponent(s, call, in)
	case contract.OpJobList:
		var in contract.JobListInput
		if err := contract.DecodeInput(req.Input, &in); err != nil {
			return nil, err
		}
		list, err := s.d.jobs.List(s.ctx, in.State, in.Limit)
		if err != nil {
			return nil, err
		}
		return contract.JobListResult{Jobs: list}, nil
	case contract.OpJobGet:
		var in contract.JobIDInput
		if err := contract.DecodeInput(req.Input, &in); err != nil {
			return nil, err
		}
		return s.d.jobs.Get(s.ctx, in.JobID)
	case contract.OpJobFollow:
		var in contract.JobIDInput
		if err := contract.DecodeInput(req.Input, &in); err != nil {
			return nil, err
		}
		err := s.d.jobs.Follow(s.ctx, in.JobID, func(ev contract.JobEvent) {
			s.push(contract.Push{Push: contract.PushJob, ID: call, Job: &ev})
		})
		if err != nil {
			return nil, err
		}
		return s.d.jobs.Get(s.ctx, in.JobID)
	case contract.OpComponentList:
		var in contract.ComponentListInput
		if err := contract.DecodeInput(req.Input, &in); err != nil {
			return nil, err
		}
		return s.d.listComponents(s, in)
	case contract.OpComponentRemove:
		var in contract.ComponentRemoveInput
		if err := contract.DecodeInput(req.Input, &in); err != nil {
			return nil, err
		}
		return s.d.removeComponent(s, in)
	case contract.OpDemoInject:
		var in contract.DemoInjectInput
		if err := contract.DecodeInput(req.Input, &in); err != nil {
			return nil, err
		}
		return s.d.demoInject(in)
	case contract.OpNuke:
		var in contract.NukeInput
		if err := contract.DecodeInput(req.Input, &in); err != nil {
			return nil, err
		}
		return e.Maintenance().Nuke(s.ctx, in.DeleteDevices)
	case contract.OpCleanupRun:
		var in contract.CleanupRunInput
		if err := contract.DecodeInput(req.Input, &in); err != nil {
			return nil, err
		}
		return e.Maintenance().Cleanup(s.ctx, in, "command"), nil
	case contract.OpCleanupRules:
		var in contract.Empty
		if err := contract.DecodeInput(req.Input, &in); err != nil {
			return nil, err
		}
		return e.Maintenance().Rules(), nil
	case contract.OpTokenCreate:
		var in contract.TokenCreateInput
		if err := contract.DecodeInput(req.Input, &in); err != nil {
			return nil, err
		}
		if in.Role == contract.TokenWorker && s.d.fleet == nil {
			return nil, contract.Errorf(contract.CodeUnsupportedInWorkerMode,
				"a worker token joins a worker to a gateway: create it on the gateway (this daemon is a worker)").With("operation", req.Op)
		}
		res, err := s.d.tokens.create(s.ctx, in)
		if err == nil {
			s.d.Emit("token.created", tokenEvent(res.Token, principal))
		}
		return res, err
	case contract.OpTokenList:
		var in contract.Empty
		if err := contract.DecodeInput(req.Input, &in); err != nil {
			return nil, err
		}
		return contract.TokenListResult{Tokens: s.d.tokens.list()}, nil
	case contract.OpTokenRevoke:
		var in contract.TokenRevokeInput
		if err := contract.DecodeInput(req.Input, &in); err != nil {
			return nil, err
		}
		res, was, err := s.d.tokens.revoke(s.ctx, in.ID)
		if err != nil {
			return res, err
		}
		// What the token holds open ends now, not at its next request:
		// its HTTP streams, long polls and commands, and on a gateway the
		// uplinks it opened.
		if s.d.api != nil {
			s.d.api.EndToken(in.ID)
		}
		if s.d.fleet != nil {
			s.d.fleet.CloseToken(s.ctx, in.ID)
		}
		if res.Revoked {
			s.d.Emit("token.revoked", tokenEvent(was, principal))
		}
		return res, nil
	}
	return nil, contract.Errorf(contract.CodeUnknownRequest, "operation %q has no handler", req.Op)
}

// onBehalf is the caller a lease request acts as: the owner it names,
// when the session is its gateway's uplink (the gateway authorized that
// owner itself); the session's own principal otherwise. An owner named by
// anyone else is FORBIDDEN, whatever their role. The owner is taken out of
// the input: the engine knows only the caller.
func (s *session) onBehalf(c leasing.Caller, in *contract.LeaseRequestInput) (leasing.Caller, error) {
	if in.Owner == "" {
		return c, nil
	}
	if !s.gateway {
		return c, contract.Errorf(contract.CodeForbidden, "owner is named only by a worker's gateway, over its uplink").With("field", "owner")
	}
	c.Principal, in.Owner = in.Owner, ""
	return c, nil
}

// awaitStartup parks the call until startup has converged, or the session
// ends. A failed startup is DAEMON_STARTUP_FAILED with its reason: every call
// that needs the engine gets it, and so does status.get with waitReady,
// whose caller asked for a daemon that is ready.
func (s *session) awaitStartup() error {
	select {
	case <-s.d.ready:
	case <-s.ctx.Done():
		return contract.Errorf(contract.CodeDaemonConnectionLost, "connection closed")
	}
	if s.d.startErr != nil {
		return contract.Errorf(contract.CodeDaemonStartupFailed, "daemon startup failed: %v", s.d.startErr)
	}
	return nil
}

// stopResult answers daemon.stop, then starts the stop.
type stopResult struct{ d *Daemon }

func (s stopResult) MarshalJSON() ([]byte, error) {
	return json.Marshal(contract.DaemonStopResult{Stopping: true})
}
func (s stopResult) afterSend() { s.d.requestStop() }

// subscription answers events.subscribe and starts pushing once sent.
type subscription struct {
	s   *session
	res contract.EventsSubscribeResult
	run func()
}

func (s subscription) MarshalJSON() ([]byte, error) { return json.Marshal(s.res) }
func (s subscription) afterSend()                   { go s.run() }

func (s *session) subscribe() any {
	sub, last := s.d.bus.Subscribe(4096)
	s.mu.Lock()
	s.nextSub++
	id := fmt.Sprintf("sub_%d", s.nextSub)
	s.subs[id] = sub.Close
	s.mu.Unlock()
	run := func() {
		defer sub.Close()
		for {
			select {
			case <-s.ctx.Done():
				return
			case ev, ok := <-sub.C():
				if !ok {
					if sub.Lagged() {
						s.d.log.Warn("event subscriber fell behind; ending its session")
						s.end()
					}
					return
				}
				s.push(contract.Push{Push: contract.PushEvent, SubscriptionID: id, Event: &ev})
			}
		}
	}
	return subscription{s: s, res: contract.EventsSubscribeResult{SubscriptionID: id, LastSeq: last}, run: run}
}

// heapBytes reads the live heap without stopping the world.
// openFiles counts the process's open file descriptors, or 0 where they
// cannot be listed. /dev/fd lists them on Linux and macOS alike; reading it
// opens one more, which is not counted.
func openFiles() int {
	fds, err := os.ReadDir("/dev/fd")
	if err != nil || len(fds) == 0 {
		return 0
	}
	return len(fds) - 1
}

func heapBytes() int64 {
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(sample)
	if sample[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return int64(sample[0].Value.Uint64())
}

// statusAnswer is status.get's result: the device and lease lists, by the
// thousand in a large fleet, go through their own encoders.
type statusAnswer struct {
	s contract.Status
	// full asks the engine for the lists when the answer is encoded, straight
	// into the frame: a status of 10,000 leases is megabytes, copied once.
	full   bool
	engine *leasing.Engine
	// caller is whom the lists are for: an agent sees its own leases and
	// requests only.
	caller leasing.Caller
}

func (a statusAnswer) MarshalJSON() ([]byte, error) { return a.appendResult(nil) }

// appendResult appends the answer as JSON: for a full status, the engine's
// lists first (from each record's kept encoding), then the rest.
func (a statusAnswer) appendResult(b []byte) ([]byte, error) {
	if !a.full {
		head, err := json.Marshal(a.s)
		return append(b, head...), err
	}
	b = append(b, '{')
	b, snap := a.engine.AppendLists(b, a.caller)
	a.s.Capacity, a.s.Counts, a.s.QueueDepth, a.s.WarmPool = &snap.Capacity, &snap.Counts, snap.QueueDepth, &snap.WarmPool
	a.s.Waiting = snap.Waiting
	a.s.EventSeq = eventSeq(a.s, snap)
	head, err := json.Marshal(a.s)
	if err != nil {
		return nil, err
	}
	b = append(b, ',')
	return append(b, head[1:]...), nil // the rest, its opening brace dropped
}

// status answers status.get: the engine's part read in one snapshot, and
// in a summary without the lists.
func (d *Daemon) status(ctx context.Context, c leasing.Caller, in contract.StatusGetInput) statusAnswer {
	select {
	case <-d.ready:
	default:
		return statusAnswer{s: contract.Status{Daemon: d.info("starting"), Host: d.host()}}
	}
	health := "running"
	if d.startErr != nil || (d.engine != nil && d.engine.Err() != nil) {
		health = "failed"
	}
	d.mu.Lock()
	if d.stopping {
		health = "stopping"
	}
	d.mu.Unlock()
	s := contract.Status{Daemon: d.info(health), Host: d.host()}
	if d.fleet != nil {
		d.gatewayStatus(&s, c, in.Summary)
		if log, err := d.eventLogStatus(ctx); err == nil {
			s.EventLog = log
		}
		return statusAnswer{s: s}
	}
	for _, p := range contract.Platforms() {
		ds := contract.DriverStatus{Platform: p}
		if drv, ok := d.opts.Drivers[p]; ok {
			ds.Driver, ds.Enabled, ds.Root, ds.Tools = drv.Name(), true, drv.Root(), d.toolVersions(p)
		} else {
			ds.Reason = d.opts.DriverNotes[p]
			if r, ok := d.opts.Rejections[p]; ok {
				ds.RootRejected = &r
			}
		}
		s.Drivers = append(s.Drivers, ds)
	}
	if d.engine == nil {
		return statusAnswer{s: s}
	}
	if d.installer != nil {
		s.Installs = d.installer.Installs()
	}
	// An unreadable event log leaves its part out: status is what an
	// operator reads when something is wrong, so it answers with the rest.
	if log, err := d.eventLogStatus(ctx); err == nil {
		s.EventLog = log
	} else {
		d.log.Warn("status: event log unreadable", "err", err)
	}
	if !in.Summary {
		return statusAnswer{s: s, full: true, engine: d.engine, caller: c}
	}
	snap := d.engine.Snapshot(true)
	s.Capacity, s.Counts, s.QueueDepth, s.WarmPool = &snap.Capacity, &snap.Counts, snap.QueueDepth, &snap.WarmPool
	s.EventSeq = eventSeq(s, snap)
	return statusAnswer{s: s}
}

// eventSeq is the seq of the event log a worker's status reflects: the
// log's last seq read before the engine's snapshot (s.EventLog), or the
// last the engine's decisions committed when the snapshot was read,
// whichever is higher. Every lease change commits its events under the
// decision lock the snapshot is read under, so a change whose event is at
// or below it is in the snapshot, and one above is not: a gateway orders
// the worker's snapshots, and its grants against them, by it.
func eventSeq(s contract.Status, snap leasing.Snapshot) int64 {
	seq := snap.EventSeq
	if s.EventLog != nil {
		seq = max(seq, s.EventLog.LastSeq)
	}
	return seq
}

// failedRequests are the requests that failed lately, newest first, at
// most limit (DefaultFailedRequests for 0), read from the store: worker and
// gateway alike keep their settled requests there.
func (d *Daemon) failedRequests(ctx context.Context, limit int) (contract.ListGetResult, error) {
	if limit <= 0 {
		limit = contract.DefaultFailedRequests
	}
	// Read ten times as many of the newest, of every state: pruning keeps
	// the table small (lease.maxRequestRecords), and a failure further
	// back than that is history, not attention.
	recs, err := d.db.Requests(ctx, min(10*limit, contract.MaxListPage))
	if err != nil {
		return contract.ListGetResult{}, contract.Errorf(contract.CodeInternal, "read requests: %v", err)
	}
	// A failure its requester has asked again since (a retry, or a new
	// request) is no longer anyone's to act on: only each requester's
	// newest request counts.
	out := []contract.LeaseRequestRecord{}
	newer := map[string]bool{}
	for _, r := range recs { // newest first
		if r.State == contract.RequestFailed && !newer[r.RequesterID] && len(out) < limit {
			out = append(out, r)
		}
		newer[r.RequesterID] = true
	}
	return contract.ListGetResult{Requests: out}, nil
}

// list answers list.get: one kind of record, whole or one page.
func (d *Daemon) list(in contract.ListGetInput) (contract.ListGetResult, error) {
	var after *contract.ListCursor
	if in.After != "" {
		c, err := contract.ParseListCursor(in.After)
		if err != nil {
			return contract.ListGetResult{}, err
		}
		after = &c
	}
	res := d.engine.List(in.Kind, after, in.Limit)
	// The kind read is in the answer, empty or not (see its MarshalJSON).
	switch {
	case in.Kind == contract.ListLeases && res.Leases == nil:
		res.Leases = []contract.LeaseRecord{}
	case in.Kind == contract.ListRequests && res.Requests == nil:
		res.Requests = []contract.LeaseRequestRecord{}
	case in.Kind != contract.ListLeases && in.Kind != contract.ListRequests && res.Devices == nil:
		res.Devices = []contract.Device{}
	}
	return res, nil
}

func clip(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}
