// Package simworker is a simulated worker: a cheap in-memory model of a
// worker daemon with D Android devices that speaks the daemon protocol, to
// a gateway over a real uplink (uplink.Dial, the gateway being the client,
// as with a worker daemon) and to agents on a unix socket of its own. It is
// what `simlock bench --fleet` runs a thousand of in one process, and what
// a gateway's tests can join as an honest worker without a daemon.
//
// What it answers is what a worker answers: hello (admin to the gateway,
// agent on its socket), events.subscribe and events.replay over a short
// log of its own, status.get, catalog.get, config.get (lease.maxTtlMs and
// downloads.policy), lease.request (a real grant of an idle ready device,
// with a new lease id and the lease.granted event's seq; NO_CAPACITY when
// none is idle, for it never queues; REQUESTER_ALREADY_LEASED for a
// requester that holds one), lease.renew, lease.get and lease.release, each
// committing the events a worker commits: a grant lease.granted and
// capacity.changed; a renewal lease.renewed; an end lease.released or
// lease.expired, then device.reclaimed (state ready) and capacity.changed.
// Its devices are always booted: a lease that ends leaves its device idle
// and ready at once (a worker cleans it first), so every grant is warm
// and, as a worker's warm grant, pushes no progress. End ends a lease on the worker's own, as an expiry
// does, and Emit commits events of any name a worker records, which is
// how a test or the bench makes a worker busy.
//
// A Worker's methods are safe for concurrent use. Each connection it
// serves is one goroutine (plus the uplink's own two); calls are answered
// in order on it, none waits.
package simworker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/uplink"
	"github.com/simlock/simlock/internal/wire"
)

// What the simulated worker's catalog offers: one Android phone on one
// runtime.
const (
	DeviceModel = "Pixel 9"
	Runtime     = "35"
	// Version is the daemon version it reports.
	Version = "simworker"
)

// logSize is how many of its latest events a Worker keeps for
// events.replay: a gateway that asks for older ones gets none, as from a
// worker whose log was pruned, and follows it from its present.
const logSize = 64

// maxTTLMs is the lease.maxTtlMs it reports.
const maxTTLMs = contract.MaxTTLMs

// defaultTTLMs is a lease's TTL when the request names none.
const defaultTTLMs = 900_000

// Options shape a Worker.
type Options struct {
	// ID is the worker id it joins as; Label its label (the id when "").
	ID, Label string
	// Devices is how many Android devices it has, all idle and ready at
	// first (1 when 0).
	Devices int
}

// Worker is one simulated worker.
type Worker struct {
	id, label string
	ids       []string // device ids, by index

	mu sync.Mutex
	// mu guards the fields below; events are committed and pushed under
	// it, so subscribers see them in seq order, with no gap.
	seq     int64
	log     []contract.Event // the last logSize events, oldest first
	devs    []device
	leases  map[string]int // lease id → device index
	next    int            // the last lease number handed out
	subs    map[*session]bool
	started int64 // epoch ms, the devices' creation

	statusReads atomic.Int64
}

// device is one device's lease, if any.
type device struct {
	lease                string
	num                  int // the lease's number, in the order granted
	requester, owner     string
	grantedAt, renewedAt int64
	ttlMs, lastUsedAt    int64
	requestID            string
}

// New makes a worker of opts.
func New(opts Options) *Worker {
	n := max(opts.Devices, 1)
	if opts.Label == "" {
		opts.Label = opts.ID
	}
	m := &Worker{id: opts.ID, label: opts.Label, ids: make([]string, n), devs: make([]device, n),
		leases: map[string]int{}, subs: map[*session]bool{}, started: time.Now().UnixMilli()}
	for i := range m.ids {
		m.ids[i] = "dev_sim_" + strconv.Itoa(i+1)
	}
	return m
}

// ID is the worker id it joins as.
func (m *Worker) ID() string { return m.id }

// Devices is how many devices it has.
func (m *Worker) Devices() int { return len(m.devs) }

// StatusReads is how many status.get calls it has answered.
func (m *Worker) StatusReads() int64 { return m.statusReads.Load() }

// Leased is how many of its devices are leased.
func (m *Worker) Leased() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.leases)
}

// Join dials the gateway at gatewayURL as this worker, with a join
// token's secret, and serves the uplink in a goroutine until it ends:
// the returned channel is closed then. ctx bounds the handshake only.
func (m *Worker) Join(ctx context.Context, gatewayURL, token string, opts uplink.Options) (*uplink.Conn, <-chan struct{}, error) {
	conn, err := uplink.Dial(ctx, gatewayURL, token, m.id, m.label, opts)
	if err != nil {
		return nil, nil, err
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		m.Serve(conn, true)
	}()
	return conn, done, nil
}

// Listen serves the daemon protocol to agents on a unix socket at path
// until the listener is closed; each connection is served in a goroutine
// of its own.
func (m *Worker) Listen(path string) (net.Listener, error) {
	l, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("simworker: %w", err)
	}
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go m.Serve(c, false)
		}
	}()
	return l, nil
}

// session is one connection the Worker serves.
type session struct {
	w *wire.Writer
	// uplink: the gateway's session, which is admin and on whose behalf
	// lease owners are named.
	uplink    bool
	principal string
}

// Serve answers the daemon protocol on conn until it ends, and closes it.
// uplink says conn is a gateway's uplink (the session is admin) rather
// than an agent's connection.
func (m *Worker) Serve(conn net.Conn, uplink bool) {
	defer conn.Close()
	s := &session{w: wire.NewWriter(conn), uplink: uplink}
	defer func() {
		m.mu.Lock()
		delete(m.subs, s)
		m.mu.Unlock()
	}()
	r := wire.NewReader(conn, contract.MaxFrameLen)
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
		if req.Op == contract.OpEventsSubscribe {
			m.subscribe(s, req)
			continue
		}
		res, cerr := m.handle(s, req)
		if err := s.answer(req, res, cerr); err != nil {
			return
		}
	}
}

// answer writes one call's answer.
func (s *session) answer(req contract.Request, res any, cerr *contract.Error) error {
	resp := contract.Response{ID: req.ID, Error: cerr}
	if cerr == nil {
		b, err := json.Marshal(res)
		if err != nil {
			resp.Error = contract.Errorf(contract.CodeInternal, "simworker: %v", err)
		} else {
			resp.Result = b
		}
	}
	return s.w.Write(resp)
}

// subscribe answers events.subscribe and registers the session, under the
// lock: no event is pushed before the answer, none committed after the
// seq it names is missed.
func (m *Worker) subscribe(s *session, req contract.Request) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !s.uplink {
		_ = s.answer(req, nil, contract.Errorf(contract.CodeForbidden, "events.subscribe needs the admin role"))
		return
	}
	if s.answer(req, contract.EventsSubscribeResult{SubscriptionID: "sub_sim", LastSeq: m.seq}, nil) == nil {
		m.subs[s] = true
	}
}

func (m *Worker) handle(s *session, req contract.Request) (any, *contract.Error) {
	switch req.Op {
	case contract.OpHello:
		var in contract.HelloInput
		if json.Unmarshal(req.Input, &in) != nil {
			return nil, contract.BadRequest("input", "is not a hello")
		}
		s.principal = in.Principal
		role := contract.RoleAgent
		if s.uplink {
			role = contract.RoleAdmin
		}
		return contract.HelloResult{Protocol: contract.ProtocolMax, Daemon: contract.VersionRange{Min: contract.ProtocolMin, Max: contract.ProtocolMax},
			DaemonVersion: Version, Role: role, Principal: in.Principal, Remote: s.uplink}, nil
	case contract.OpEventsReplay:
		var in contract.EventsReplayInput
		_ = json.Unmarshal(req.Input, &in)
		return contract.EventsReplayResult{Events: m.replay(in.AfterSeq, in.Limit)}, nil
	case contract.OpStatusGet:
		m.statusReads.Add(1)
		return m.Status(), nil
	case contract.OpCatalogGet:
		return Catalog(), nil
	case contract.OpConfigGet:
		var in contract.ConfigGetInput
		_ = json.Unmarshal(req.Input, &in)
		switch in.Key {
		case "lease.maxTtlMs":
			return map[string]any{"key": in.Key, "value": maxTTLMs}, nil
		case "downloads.policy":
			return map[string]any{"key": in.Key, "value": "never"}, nil
		}
		return nil, contract.BadRequest("key", "the simulated worker has no config key %q", in.Key)
	case contract.OpLeaseRequest:
		var in contract.LeaseRequestInput
		if json.Unmarshal(req.Input, &in) != nil {
			return nil, contract.BadRequest("input", "is not a lease request")
		}
		return m.grant(s, in)
	case contract.OpLeaseRenew:
		var in contract.LeaseRenewInput
		_ = json.Unmarshal(req.Input, &in)
		return m.renew(in)
	case contract.OpLeaseGet:
		var in contract.LeaseIDInput
		_ = json.Unmarshal(req.Input, &in)
		return m.get(in.LeaseID)
	case contract.OpLeaseRelease:
		var in contract.LeaseIDInput
		_ = json.Unmarshal(req.Input, &in)
		return m.release(in.LeaseID)
	}
	return nil, contract.Errorf(contract.CodeUnknownRequest, "the simulated worker does not serve %s", req.Op)
}

// Catalog is what every simulated worker's catalog.get answers.
func Catalog() contract.CatalogResult {
	return contract.CatalogResult{Platforms: []contract.Catalog{{Platform: contract.PlatformAndroid,
		Models: []string{DeviceModel}, Runtimes: []string{Runtime}, DefaultRuntime: Runtime,
		ModelRuntimes: map[string][]string{DeviceModel: {Runtime}}, ModelAliases: map[string][]string{},
		ModelClasses:  map[string]contract.DeviceClass{DeviceModel: "phone"},
		ClassDefaults: map[contract.DeviceClass][]string{"phone": {DeviceModel}}}}}
}

// fits reports whether a request asks what the worker's devices are.
func fits(in contract.LeaseRequestInput) *contract.Error {
	if in.Platform != contract.PlatformAndroid {
		return contract.Errorf(contract.CodeNoDriver, "the simulated worker has no %s devices", in.Platform)
	}
	if in.Model != "" && in.Model != DeviceModel {
		return contract.Errorf(contract.CodeUnknownModel, "the simulated worker has no model %q", in.Model)
	}
	if in.Class != "" && in.Class != "phone" {
		return contract.Errorf(contract.CodeUnknownModel, "the simulated worker has no %s", in.Class)
	}
	if in.OSVersion != "" {
		os, err := contract.ParseOSVersion(in.OSVersion)
		if err != nil {
			return contract.BadRequest("osVersion", "%v", err)
		}
		if !os.Matches(Runtime) {
			return contract.Errorf(contract.CodeRuntimeMissing, "the simulated worker has runtime %s only", Runtime)
		}
	}
	return nil
}

// grant leases the first idle device to the request, and commits
// lease.granted.
func (m *Worker) grant(s *session, in contract.LeaseRequestInput) (any, *contract.Error) {
	if ce := fits(in); ce != nil {
		return nil, ce
	}
	requester, owner := in.RequesterID, in.Owner
	if requester == "" {
		requester = s.principal
	}
	if owner == "" || !s.uplink {
		owner = s.principal
	}
	if requester == "" || owner == "" {
		return nil, contract.BadRequest("requesterId", "is required of a session that named no principal")
	}
	ttl := in.TTLMs
	if ttl == 0 {
		ttl = defaultTTLMs
	}
	if ttl < 0 || ttl > maxTTLMs {
		return nil, contract.BadRequest("ttlMs", "must be from 1 to %d", maxTTLMs)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	idle := -1
	for i := range m.devs {
		d := &m.devs[i]
		if d.lease != "" && d.requester == requester {
			return nil, contract.Errorf(contract.CodeRequesterAlreadyLeased, "requester %s holds lease %s", requester, d.lease).
				With("leaseId", d.lease)
		}
		if d.lease == "" && idle < 0 {
			idle = i
		}
	}
	if idle < 0 {
		return nil, contract.Errorf(contract.CodeNoCapacity, "all %d devices of the simulated worker are leased", len(m.devs))
	}
	m.next++
	now := time.Now().UnixMilli()
	d := &m.devs[idle]
	*d = device{lease: "lse_sim_" + strconv.Itoa(m.next), num: m.next, requester: requester, owner: owner, grantedAt: now, renewedAt: now,
		ttlMs: ttl, lastUsedAt: now, requestID: "req_sim_" + strconv.Itoa(m.next)}
	m.leases[d.lease] = idle
	seq := m.granted(idle)
	return contract.LeaseGrant{
		Device:      contract.GrantDevice{ID: m.ids[idle], DriverDeviceID: m.driverID(idle), Spec: m.spec(), Mode: contract.DeviceModeFull},
		Lease:       m.record(idle),
		Environment: map[string]string{},
		RequestID:   d.requestID,
		Source:      contract.SourceWarm,
		EventSeq:    seq,
	}, nil
}

func (m *Worker) renew(in contract.LeaseRenewInput) (any, *contract.Error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	i, ok := m.leases[in.LeaseID]
	if !ok {
		return nil, unknownLease(in.LeaseID)
	}
	d := &m.devs[i]
	if in.TTLMs > 0 && in.TTLMs <= maxTTLMs {
		d.ttlMs = in.TTLMs
	}
	d.renewedAt = time.Now().UnixMilli()
	m.emit(contract.EvLeaseRenewed, map[string]any{"leaseId": d.lease, "ttlDeadline": d.renewedAt + d.ttlMs, "ttlMs": d.ttlMs})
	return m.record(i), nil
}

func (m *Worker) get(id string) (any, *contract.Error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	i, ok := m.leases[id]
	if !ok {
		return nil, unknownLease(id)
	}
	return contract.LeaseGetResult{Lease: m.record(i), Device: m.device(i)}, nil
}

func (m *Worker) release(id string) (any, *contract.Error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	i, ok := m.leases[id]
	if !ok {
		return nil, unknownLease(id)
	}
	m.end(i, contract.EvLeaseReleased, "explicit")
	return contract.ReleaseResult{LeaseID: id, DeviceID: m.ids[i], Released: true}, nil
}

func unknownLease(id string) *contract.Error {
	return contract.Errorf(contract.CodeUnknownLease, "no active lease %s", id).With("leaseId", id)
}

// granted commits what a worker's warm grant of device i commits:
// lease.granted, and capacity.changed (one fewer warm device); it returns
// lease.granted's seq. The lock must be held.
func (m *Worker) granted(i int) int64 {
	d := &m.devs[i]
	seq := m.emit(contract.EvLeaseGranted, map[string]any{"leaseId": d.lease, "deviceId": m.ids[i], "requester": d.requester,
		"requestId": d.requestID, "source": contract.SourceWarm, "mode": "full", "ownerId": d.owner, "ttlMs": d.ttlMs,
		"ttlDeadline": d.renewedAt + d.ttlMs})
	m.emit(contract.EvCapacityChanged, m.capacity())
	return seq
}

// end ends device i's lease with event, and leaves the device idle and
// ready, committing what a worker commits for the end and for the clean
// that follows it: event, device.reclaimed with the device's state, and
// capacity.changed (one more warm device). The lock must be held.
func (m *Worker) end(i int, event, reason string) {
	d := &m.devs[i]
	payload := map[string]any{"leaseId": d.lease, "deviceId": m.ids[i], "ownerId": d.owner}
	if reason != "" {
		payload["reason"] = reason
	}
	delete(m.leases, d.lease)
	*d = device{lastUsedAt: time.Now().UnixMilli()}
	m.emit(event, payload)
	m.emit(contract.EvDeviceReclaimed, map[string]any{"deviceId": m.ids[i], "strategy": "snapshot", "duration": 0, "state": contract.DeviceReady})
	m.emit(contract.EvCapacityChanged, m.capacity())
}

// capacity is the worker's capacity report. The lock must be held.
func (m *Worker) capacity() *contract.Capacity {
	n := len(m.devs)
	warm := n - len(m.leases)
	return &contract.Capacity{Strategy: "fixed", Global: contract.GlobalCapacity{Running: n, MaxRunning: n, Warm: warm},
		Platforms: map[contract.Platform]contract.PlatformCapacity{contract.PlatformAndroid: {Running: n, MaxRunning: n, Devices: n, MaxDevices: n, Warm: warm}}}
}

// Occupy leases every idle device to a requester on the worker's own
// machine (local/<n>, owner local), as its own agents would, not through
// the gateway; it returns how many it leased.
func (m *Worker) Occupy() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for i := range m.devs {
		if m.devs[i].lease != "" {
			continue
		}
		m.next++
		now := time.Now().UnixMilli()
		d := &m.devs[i]
		*d = device{lease: "lse_sim_" + strconv.Itoa(m.next), num: m.next, requester: "local/" + strconv.Itoa(m.next), owner: "local", grantedAt: now,
			renewedAt: now, ttlMs: maxTTLMs, lastUsedAt: now, requestID: "req_sim_" + strconv.Itoa(m.next)}
		m.leases[d.lease] = i
		m.granted(i)
		n++
	}
	return n
}

// End ends up to n of the worker's leases on its own, as their expiry
// would (lease.expired, pushed to the gateway), the oldest granted first,
// and returns how many it ended. Oldest first, as leases of one TTL
// expire: a lease is not ended the moment it was granted while older ones
// live on, which no expiry does.
func (m *Worker) End(n int) int { return m.EndOlder(n, 0) }

// EndOlder is End of the leases granted at least age ago: a lease's
// expiry comes at its TTL, not as it is granted, and a fleet that frees
// devices at a steady rate frees the ones its agents have had a while.
func (m *Worker) EndOlder(n int, age time.Duration) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	before := time.Now().Add(-age).UnixMilli()
	ended := 0
	for ; ended < n; ended++ {
		oldest := -1
		for i := range m.devs {
			d := &m.devs[i]
			if d.lease != "" && d.grantedAt <= before && (oldest < 0 || d.num < m.devs[oldest].num) {
				oldest = i
			}
		}
		if oldest < 0 {
			break
		}
		m.end(oldest, contract.EvLeaseExpired, "")
	}
	return ended
}

// Emit commits n events named name with payload (a JSON object) and
// pushes them to the gateway, as the worker's log would.
func (m *Worker) Emit(name string, payload map[string]any, n int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for range n {
		m.emit(name, payload)
	}
}

// emit commits one event and pushes it to the subscribed sessions; it
// returns its seq. The lock must be held. A session whose push fails is
// dropped: its connection has ended.
func (m *Worker) emit(name string, payload any) int64 {
	b, _ := json.Marshal(payload)
	m.seq++
	ev := contract.Event{ID: "evt_sim_" + strconv.FormatInt(m.seq, 10), Seq: m.seq, Timestamp: time.Now().UnixMilli(), Event: name, Payload: b}
	if len(m.log) == logSize {
		copy(m.log, m.log[1:])
		m.log = m.log[:logSize-1]
	}
	m.log = append(m.log, ev)
	for s := range m.subs {
		if s.w.Write(contract.Push{Push: contract.PushEvent, SubscriptionID: "sub_sim", Event: &ev}) != nil {
			delete(m.subs, s)
		}
	}
	return m.seq
}

// replay is the log's events after seq after, at most limit (1000 when
// 0); none when after is older than the log keeps, as from a pruned log.
func (m *Worker) replay(after int64, limit int) []contract.Event {
	if limit <= 0 {
		limit = 1000
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	out := []contract.Event{}
	if len(m.log) == 0 || after < m.log[0].Seq-1 {
		return out
	}
	for _, ev := range m.log {
		if ev.Seq > after && len(out) < limit {
			out = append(out, ev)
		}
	}
	return out
}

func (m *Worker) spec() contract.DeviceSpec {
	return contract.DeviceSpec{Platform: contract.PlatformAndroid, Model: DeviceModel, OSVersion: Runtime}
}

func (m *Worker) driverID(i int) string { return "emulator-" + strconv.Itoa(5554+2*i) }

// record is device i's lease. The lock must be held.
func (m *Worker) record(i int) contract.LeaseRecord {
	d := m.devs[i]
	return contract.LeaseRecord{ID: d.lease, DeviceID: m.ids[i], RequesterID: d.requester, OwnerID: d.owner, GrantedAt: d.grantedAt,
		TTLMs: d.ttlMs, LastRenewedAt: d.renewedAt, TTLDeadline: d.renewedAt + d.ttlMs}
}

// device is device i as a status lists it. The lock must be held.
func (m *Worker) device(i int) contract.Device {
	d := m.devs[i]
	st := contract.DeviceReady
	if d.lease != "" {
		st = contract.DeviceLeased
	}
	return contract.Device{ID: m.ids[i], DriverDeviceID: m.driverID(i), Driver: "sim", Spec: m.spec(), LeaseID: d.lease,
		State: st, CreatedAt: m.started, StateSince: d.lastUsedAt, LastUsedAt: d.lastUsedAt}
}

// Status is the worker's status.get answer.
func (m *Worker) Status() contract.Status {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := len(m.devs)
	devices := make([]contract.Device, n)
	leases := make([]contract.LeaseRecord, 0, len(m.leases))
	for i := range m.devs {
		devices[i] = m.device(i)
		if m.devs[i].lease != "" {
			leases = append(leases, m.record(i))
		}
	}
	return contract.Status{
		Daemon:   contract.DaemonInfo{Version: Version, Health: "running", Mode: contract.ModeWorker},
		Host:     contract.HostInfo{OS: "linux", Arch: "amd64", CPUs: 8, RAMBytes: 64 << 30},
		Capacity: m.capacity(),
		Devices:  devices, Leases: leases, Waiting: []contract.WaitingRequest{},
		EventSeq: m.seq,
	}
}
