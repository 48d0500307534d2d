// Package hostile is a worker that lies to its gateway, for tests only:
// nothing outside tests imports it. It dials a real gateway's uplink
// (uplink.Dial, with a join token and a worker id of the test's choosing)
// and serves the daemon protocol over it as a worker does, the gateway
// being the client, so what the gateway receives is exactly what a worker
// could send. What it says is the test's to decide: leases it was never
// granted (a victim's requester, owner and chosen id, under the gateway's
// requester prefix), a lease id or a device granted twice, room it offers
// and refuses, floods of events of any name (a fake lease.granted among
// them) stamped at any time, and views padded to any size; it records every
// call the gateway forwards to it, so a test can assert that a victim's
// renew or exec never arrived.
//
// A Worker's methods are safe for concurrent use. Join starts one
// goroutine, which ends when the uplink does (Close, or the gateway closing
// it); Done says when.
package hostile

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/uplink"
	"github.com/simlock/simlock/internal/wire"
)

// Model and Runtime are what the worker's catalog offers.
const (
	Model   = "iPhone 17"
	Runtime = "26.1"
)

// Options say how a Worker joins.
type Options struct {
	// URL is the gateway's address (http://host:port), Token a join
	// token's secret, WorkerID the id the worker claims, Label its label
	// (the id when empty).
	URL, Token, WorkerID, Label string
	// Platform is the one its catalog serves (ios when empty).
	Platform contract.Platform
	// MaxRunning is the running slots its status reports (0: none, so
	// no request is routed to it unless a test wants it to be).
	MaxRunning int
	// Pad is the devices its status reports beyond its own, from the
	// first read on (see Worker.Pad).
	Pad int
}

// Call is one call the gateway made of the worker.
type Call struct {
	Op    contract.Op
	Input json.RawMessage
}

// Worker is a worker that says what its test tells it to.
type Worker struct {
	opts Options
	conn *uplink.Conn
	w    *wire.Writer
	done chan struct{}

	mu sync.Mutex
	// mu guards the fields below.
	gatewayID   string // from the gateway's hello principal
	subscribed  bool
	seq         int64
	next        int
	leases      []contract.LeaseRecord
	devices     []contract.Device
	padding     int
	grantLease  string        // the lease id every grant names, when set
	grantDevice string        // the device every grant names, when set
	refuse      contract.Code // every lease.request's answer, when set
	calls       []Call
	arrived     chan struct{} // closed and replaced at each call
}

// Join dials the gateway's uplink as opts say and serves it until it
// ends. A refusal of the uplink is returned as uplink.Dial returns it (an
// *uplink.RefusedError with the gateway's code and message).
func Join(ctx context.Context, opts Options) (*Worker, error) {
	if opts.Label == "" {
		opts.Label = opts.WorkerID
	}
	if opts.Platform == "" {
		opts.Platform = contract.PlatformIOS
	}
	conn, err := uplink.Dial(ctx, opts.URL, opts.Token, opts.WorkerID, opts.Label, uplink.Options{})
	if err != nil {
		return nil, err
	}
	w := &Worker{opts: opts, conn: conn, w: wire.NewWriter(conn), done: make(chan struct{}), arrived: make(chan struct{}), padding: opts.Pad}
	go w.serve()
	return w, nil
}

// Close ends the uplink.
func (w *Worker) Close() {
	w.conn.Close()
	<-w.done
}

// Done is closed when the uplink ended.
func (w *Worker) Done() <-chan struct{} { return w.done }

// GatewayID is the instance id the gateway named itself with in its hello
// ("" before it did): what the gateway's requester prefix is made of.
func (w *Worker) GatewayID() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.gatewayID
}

// Prefix is the gateway's requester prefix, gw:<gatewayId>:, as the
// gateway puts it on the requests it forwards.
func (w *Worker) Prefix() string { return contract.GatewayRequesterPrefix + w.GatewayID() + ":" }

// Claim adds leases to what the worker's status reports, each with a
// device of its own, leased to it; and tells the gateway (a lease event)
// so that it reads the status again.
func (w *Worker) Claim(ctx context.Context, leases ...contract.LeaseRecord) error {
	w.mu.Lock()
	now := time.Now().UnixMilli()
	for _, l := range leases {
		if l.DeviceID == "" {
			l.DeviceID = "dev_claimed_" + l.ID
		}
		if l.GrantedAt == 0 {
			l.GrantedAt, l.LastRenewedAt, l.TTLMs, l.TTLDeadline = now, now, 3_600_000, now+3_600_000
		}
		w.leases = append(w.leases, l)
		w.devices = append(w.devices, w.device(l.DeviceID, l.ID))
	}
	w.mu.Unlock()
	return w.Relay(ctx, contract.EvLeaseRenewed, map[string]any{"leaseId": "refresh"})
}

// Pad makes the worker's status report n more devices than it has, each
// with a long model name: a view as large as the gateway allows.
func (w *Worker) Pad(n int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.padding = n
}

// GrantAs makes every grant from now on name leaseID and deviceID (either
// "" for a new one each time): a worker that grants one lease id or one
// device twice.
func (w *Worker) GrantAs(leaseID, deviceID string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.grantLease, w.grantDevice = leaseID, deviceID
}

// Refuse makes every lease.request from now on answered with code ("" to
// grant again): with NO_CAPACITY, a worker whose status offers room it
// never gives.
func (w *Worker) Refuse(code contract.Code) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.refuse = code
}

// Relay pushes one event, as the worker's event subscription would.
func (w *Worker) Relay(ctx context.Context, name string, payload any) error {
	return w.Flood(ctx, name, payload, 1)
}

// RelayAt pushes one event stamped at (epoch ms): a worker's clock that
// says what it likes.
func (w *Worker) RelayAt(ctx context.Context, name string, payload any, at int64) error {
	return w.push(ctx, name, payload, 1, at)
}

// Flood pushes n events named name with payload, as fast as the uplink
// takes them.
func (w *Worker) Flood(ctx context.Context, name string, payload any, n int) error {
	return w.push(ctx, name, payload, n, 0)
}

// push pushes n events stamped at (the worker's clock when 0).
func (w *Worker) push(ctx context.Context, name string, payload any, n int, at int64) error {
	b, err := json.Marshal(payload)
	if err != nil {
		return err
	}
	for range n {
		if err := ctx.Err(); err != nil {
			return err
		}
		w.mu.Lock()
		if !w.subscribed {
			w.mu.Unlock()
			return errors.New("hostile: the gateway has not subscribed to the worker's events")
		}
		w.seq++
		ts := at
		if ts == 0 {
			ts = time.Now().UnixMilli()
		}
		ev := contract.Event{ID: fmt.Sprintf("evt_hostile_%d", w.seq), Seq: w.seq, Timestamp: ts, Event: name, Payload: b}
		w.mu.Unlock()
		if err := w.w.Write(contract.Push{Push: contract.PushEvent, SubscriptionID: "sub_hostile", Event: &ev}); err != nil {
			return err
		}
	}
	return nil
}

// Calls lists the calls the gateway made of the worker with op ("" for
// all), in order.
func (w *Worker) Calls(op contract.Op) []Call {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []Call
	for _, c := range w.calls {
		if op == "" || c.Op == op {
			out = append(out, c)
		}
	}
	return out
}

// Await waits, within ctx, until the gateway made n calls with op, and
// returns them.
func (w *Worker) Await(ctx context.Context, op contract.Op, n int) ([]Call, error) {
	for {
		w.mu.Lock()
		arrived := w.arrived
		w.mu.Unlock()
		if cs := w.Calls(op); len(cs) >= n {
			return cs, nil
		}
		select {
		case <-arrived:
		case <-w.done:
			return nil, fmt.Errorf("hostile: the uplink ended before %d %s calls", n, op)
		case <-ctx.Done():
			return nil, fmt.Errorf("hostile: %d %s calls, want %d: %w", len(w.Calls(op)), op, n, ctx.Err())
		}
	}
}

// Subscribed waits, within ctx, until the gateway subscribed to the
// worker's events: from then on it reads the worker as connected.
func (w *Worker) Subscribed(ctx context.Context) error {
	for {
		w.mu.Lock()
		ok, arrived := w.subscribed, w.arrived
		w.mu.Unlock()
		if ok {
			return nil
		}
		select {
		case <-arrived:
		case <-w.done:
			return errors.New("hostile: the uplink ended before the gateway subscribed")
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func (w *Worker) serve() {
	defer close(w.done)
	defer w.conn.Close()
	r := wire.NewReader(w.conn, contract.MaxFrameLen)
	for {
		frame, err := r.Next()
		if errors.Is(err, wire.ErrFrameTooLarge) {
			continue
		}
		if err != nil {
			return
		}
		var req contract.Request
		if json.Unmarshal(frame, &req) != nil || req.Op == "" {
			continue
		}
		w.mu.Lock()
		w.calls = append(w.calls, Call{Op: req.Op, Input: req.Input})
		w.mu.Unlock()
		// A call may wait (an exec's started push comes first): each is
		// answered on its own, so the reads of the uplink go on.
		go w.answer(req)
	}
}

// answer answers one call of the gateway's, then tells Await.
func (w *Worker) answer(req contract.Request) {
	res, cerr := w.handle(req)
	resp := contract.Response{ID: req.ID, Error: cerr}
	if cerr == nil {
		b, err := json.Marshal(res)
		if err != nil {
			resp.Error = contract.Errorf(contract.CodeInternal, "hostile: %v", err)
		} else {
			resp.Result = b
		}
	}
	_ = w.w.Write(resp)
	w.mu.Lock()
	if req.Op == contract.OpEventsSubscribe {
		// Pushes go only after the answer, as a worker's do.
		w.subscribed = true
	}
	close(w.arrived)
	w.arrived = make(chan struct{})
	w.mu.Unlock()
}

func (w *Worker) handle(req contract.Request) (any, *contract.Error) {
	switch req.Op {
	case contract.OpHello:
		var in contract.HelloInput
		_ = json.Unmarshal(req.Input, &in)
		w.mu.Lock()
		w.gatewayID = strings.TrimPrefix(in.Principal, contract.GatewayPrincipalPrefix)
		w.mu.Unlock()
		return contract.HelloResult{Protocol: contract.ProtocolMax, Daemon: contract.VersionRange{Min: contract.ProtocolMin, Max: contract.ProtocolMax},
			DaemonVersion: "hostile", Role: contract.RoleAdmin, Principal: in.Principal}, nil
	case contract.OpEventsSubscribe:
		w.mu.Lock()
		defer w.mu.Unlock()
		return contract.EventsSubscribeResult{SubscriptionID: "sub_hostile", LastSeq: w.seq}, nil
	case contract.OpEventsReplay:
		return contract.EventsReplayResult{Events: []contract.Event{}}, nil
	case contract.OpStatusGet:
		return w.status(), nil
	case contract.OpCatalogGet:
		return contract.CatalogResult{Platforms: []contract.Catalog{{Platform: w.opts.Platform, Models: []string{Model}, Runtimes: []string{Runtime},
			DefaultRuntime: Runtime, ModelRuntimes: map[string][]string{Model: {Runtime}}, ModelAliases: map[string][]string{},
			ModelClasses: map[string]contract.DeviceClass{Model: "phone"}, ClassDefaults: map[contract.DeviceClass][]string{"phone": {Model}}}}}, nil
	case contract.OpConfigGet:
		var in contract.ConfigGetInput
		_ = json.Unmarshal(req.Input, &in)
		switch in.Key {
		case "lease.maxTtlMs":
			return map[string]any{"key": in.Key, "value": contract.MaxTTLMs}, nil
		case "downloads.policy":
			return map[string]any{"key": in.Key, "value": "never"}, nil
		}
		return nil, contract.BadRequest("key", "hostile: no config key %q", in.Key)
	case contract.OpLeaseRequest:
		var in contract.LeaseRequestInput
		_ = json.Unmarshal(req.Input, &in)
		w.mu.Lock()
		refuse := w.refuse
		w.mu.Unlock()
		if refuse != "" {
			return nil, contract.Errorf(refuse, "hostile: refused")
		}
		return w.grant(in), nil
	case contract.OpLeaseRenew, contract.OpLeaseGet:
		var in contract.LeaseIDInput
		_ = json.Unmarshal(req.Input, &in)
		l, ok := w.lease(in.LeaseID)
		if !ok {
			return nil, contract.Errorf(contract.CodeUnknownLease, "no active lease %s", in.LeaseID).With("leaseId", in.LeaseID)
		}
		if req.Op == contract.OpLeaseGet {
			return contract.LeaseGetResult{Lease: l, Device: w.device(l.DeviceID, l.ID)}, nil
		}
		return l, nil
	case contract.OpLeaseRelease:
		var in contract.LeaseIDInput
		_ = json.Unmarshal(req.Input, &in)
		l, ok := w.lease(in.LeaseID)
		if !ok {
			return nil, contract.Errorf(contract.CodeUnknownLease, "no active lease %s", in.LeaseID).With("leaseId", in.LeaseID)
		}
		w.mu.Lock()
		w.leases = slices.DeleteFunc(w.leases, func(x contract.LeaseRecord) bool { return x.ID == l.ID })
		w.devices = slices.DeleteFunc(w.devices, func(d contract.Device) bool { return d.LeaseID == l.ID })
		w.mu.Unlock()
		return contract.ReleaseResult{LeaseID: l.ID, DeviceID: l.DeviceID, Released: true}, nil
	case contract.OpDeviceExec:
		_ = w.w.Write(contract.Push{Push: contract.PushExecStarted, ID: req.ID})
		return contract.ExecResult{ExitCode: 0}, nil
	}
	return nil, contract.Errorf(contract.CodeUnknownRequest, "hostile: no answer to %s", req.Op)
}

// grant grants a forwarded lease.request: a new lease on a new device,
// unless GrantAs says which to name again. The lease is in the status
// from now on.
func (w *Worker) grant(in contract.LeaseRequestInput) contract.LeaseGrant {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.next++
	leaseID, deviceID := w.grantLease, w.grantDevice
	if leaseID == "" {
		leaseID = fmt.Sprintf("lse_hostile_%d", w.next)
	}
	if deviceID == "" {
		deviceID = fmt.Sprintf("dev_hostile_%d", w.next)
	}
	now := time.Now().UnixMilli()
	ttl := in.TTLMs
	if ttl == 0 {
		ttl = 900_000
	}
	l := contract.LeaseRecord{ID: leaseID, DeviceID: deviceID, RequesterID: in.RequesterID, OwnerID: in.Owner, GrantedAt: now,
		TTLMs: ttl, LastRenewedAt: now, TTLDeadline: now + ttl}
	w.leases = append(w.leases, l)
	d := w.device(deviceID, leaseID)
	w.devices = append(w.devices, d)
	return contract.LeaseGrant{
		Device:      contract.GrantDevice{ID: d.ID, DriverDeviceID: d.DriverDeviceID, Spec: d.Spec, Mode: contract.DeviceModeFull},
		Lease:       l,
		Environment: map[string]string{},
		RequestID:   fmt.Sprintf("req_hostile_%d", w.next),
		Source:      contract.SourceWarm,
	}
}

func (w *Worker) lease(id string) (contract.LeaseRecord, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, l := range w.leases {
		if l.ID == id {
			return l, true
		}
	}
	return contract.LeaseRecord{}, false
}

// device is a device of the worker's, leased under leaseID.
func (w *Worker) device(id, leaseID string) contract.Device {
	now := time.Now().UnixMilli()
	return contract.Device{ID: id, DriverDeviceID: "UDID-" + id, Driver: "hostile", LeaseID: leaseID,
		Spec:  contract.DeviceSpec{Platform: w.opts.Platform, Model: Model, OSVersion: Runtime},
		State: contract.DeviceLeased, CreatedAt: now, StateSince: now}
}

// status is the worker's status as it claims it.
func (w *Worker) status() contract.Status {
	w.mu.Lock()
	defer w.mu.Unlock()
	running := min(len(w.leases), w.opts.MaxRunning)
	p := contract.PlatformCapacity{Running: running, MaxRunning: w.opts.MaxRunning, Devices: len(w.devices), MaxDevices: max(w.opts.MaxRunning, len(w.devices))}
	s := contract.Status{
		Daemon: contract.DaemonInfo{Version: "hostile", Health: "running", Mode: contract.ModeWorker},
		Host:   contract.HostInfo{OS: "linux", Arch: "amd64", CPUs: 4},
		Capacity: &contract.Capacity{Strategy: "fixed", Global: contract.GlobalCapacity{Running: running, MaxRunning: w.opts.MaxRunning},
			Platforms: map[contract.Platform]contract.PlatformCapacity{w.opts.Platform: p}},
		Devices: slices.Clone(w.devices), Leases: slices.Clone(w.leases), Waiting: []contract.WaitingRequest{},
	}
	long := strings.Repeat("m", 200)
	for i := range w.padding {
		d := w.device(fmt.Sprintf("dev_pad_%d", i), "")
		d.State, d.Spec.Model = contract.DeviceShutdown, long
		s.Devices = append(s.Devices, d)
	}
	return s
}
