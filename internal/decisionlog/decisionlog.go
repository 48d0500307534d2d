// Package decisionlog writes the daemon's decisions into its log: one
// structured record for each event of a decision the daemon makes (a
// request queued, a lease granted or ended, a device quarantined, a worker
// joined, …), with the ids that name what it is about. It reads the
// events the daemon publishes after each commit (a tap on the event bus),
// so each fact is logged once, after it is durable, and the log and the
// event history tell the same story. One table, Entries, says which events
// are logged, at what level, with what message and which payload fields;
// an event not in it is not logged.
//
// Payloads carry no secret (a token's events carry its id, never its
// secret or hash), and only the fields the table names are copied.
//
// Record, the tap, only queues the event: one goroutine of the Log decodes
// it and writes its record, in publish order, so the daemon's decisions do
// not wait for the log's formatting and its write to the disk. Close
// writes what is queued and stops it.
//
// A Log is safe for concurrent use.
package decisionlog

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"sync"

	"github.com/simlock/simlock/internal/contract"
)

// Field is one payload field a record carries: From is its path in the
// payload (a dot goes into an object), As the attribute's name (From when
// empty).
type Field struct {
	From, As string
}

// Entry is how one event is logged.
type Entry struct {
	Event   string
	Level   slog.Level
	Message string
	Fields  []Field
	// Const are attributes the record carries whatever the payload says
	// (key, value pairs), such as the reason of an expiry, which its
	// event says by its name.
	Const []string
}

// f names payload fields that keep their names.
func f(names ...string) []Field {
	out := make([]Field, len(names))
	for i, n := range names {
		out[i] = Field{From: n}
	}
	return out
}

// as renames a payload field.
func as(from, to string) Field { return Field{From: from, As: to} }

// The attribute names shared by every record that carries the id: a lease's
// owner is its requester whichever name its event gives it.
const (
	attrRequester = "requester"
	attrWaitMs    = "waitMs"
)

// Entries is the table of logged decisions, in docs/OPERATIONS.md's order.
var Entries = []Entry{
	// Requests and leases.
	{contract.EvLeaseRequested, slog.LevelInfo, "lease requested", append(f("requestId", "requester"), as("requestSpec.platform", "platform"), as("requestSpec.model", "model")), nil},
	{contract.EvLeaseQueued, slog.LevelInfo, "request queued", f("requestId", "queuePosition"), nil},
	{contract.EvLeaseGranted, slog.LevelInfo, "lease granted", f("leaseId", "chosenLeaseId", "requestId", "deviceId", "requester", "source", "mode"), nil},
	{contract.EvLeaseRejected, slog.LevelInfo, "request refused", append(f("requestId", "requester", "code", "reason"), as("requestSpec.platform", "platform")), nil},
	{contract.EvLeaseRenewed, slog.LevelDebug, "lease renewed", f("leaseId", "chosenLeaseId", "ttlMs", "ttlDeadline"), nil},
	{contract.EvLeaseBound, slog.LevelInfo, "lease bound to a process", f("leaseId", "chosenLeaseId", "deviceId", "pid"), nil},
	{contract.EvLeaseReleased, slog.LevelInfo, "lease ended", append(f("leaseId", "chosenLeaseId", "deviceId"), as("ownerId", attrRequester), Field{From: "reason"}), nil},
	{contract.EvLeaseExpired, slog.LevelInfo, "lease ended", append(f("leaseId", "chosenLeaseId", "deviceId"), as("ownerId", attrRequester)), []string{"reason", "expired"}},

	// Devices.
	{contract.EvDeviceProvisioned, slog.LevelInfo, "device created", append(f("deviceId"), as("spec.platform", "platform"), as("spec.model", "model"), as("spec.osVersion", "osVersion"), as("duration", "durationMs")), nil},
	{contract.EvDeviceReclaimed, slog.LevelInfo, "device cleaned", append(f("deviceId", "strategy"), as("duration", "durationMs")), nil},
	{contract.EvDevicePurgeFailed, slog.LevelWarn, "device clean failed", f("deviceId", "error"), nil},
	{contract.EvDeviceQuarantined, slog.LevelWarn, "device quarantined", f("deviceId", "reason", "detail", "error"), nil},
	{contract.EvDeviceRetryRequested, slog.LevelInfo, "quarantine retry requested", f("deviceId", "attempt"), nil},
	{contract.EvDeviceQuarantineRetryFailed, slog.LevelWarn, "quarantine retry failed", f("deviceId", "attempt", "error", "nextRetryAt"), nil},
	{contract.EvDeviceQuarantineRecovered, slog.LevelInfo, "device recovered from quarantine", f("deviceId", "attempts", "state"), nil},
	{contract.EvDeviceQuarantineAbandoned, slog.LevelWarn, "device quarantine abandoned", f("deviceId", "attempts", "deleted", "error"), nil},
	{contract.EvDeviceCrashDetected, slog.LevelWarn, "leased device crashed", f("deviceId", "leaseId"), nil},
	{contract.EvDeviceRecovered, slog.LevelInfo, "leased device recovered", f("deviceId", "leaseId", "attempts"), nil},
	{contract.EvDeviceRecoveryFailed, slog.LevelWarn, "leased device lost", f("deviceId", "leaseId", "attempts", "reason", "detail", "error"), nil},
	{contract.EvDeviceStalledTransitionDetected, slog.LevelWarn, "device transition stalled", f("deviceId", "platform", "state", "transitionAgeMs", "thresholdMs"), nil},
	{contract.EvDeviceShutdown, slog.LevelInfo, "device shut down", f("deviceId", "initiator"), nil},
	{contract.EvDeviceDeleted, slog.LevelInfo, "device deleted", f("deviceId", "initiator"), nil},

	// Runtimes.
	{contract.EvComponentInstallStarted, slog.LevelInfo, "install started", f("platform", "component"), nil},
	{contract.EvComponentInstalled, slog.LevelInfo, "install ended", append(f("platform", "component", "version"), as("duration", "durationMs")), []string{"outcome", "installed"}},
	{contract.EvComponentInstallFailed, slog.LevelWarn, "install ended", f("platform", "component", "code", "message"), []string{"outcome", "failed"}},
	{contract.EvComponentRemoved, slog.LevelInfo, "runtime removed", f("platform", "component", "version"), nil},

	// The daemon and its operators.
	{contract.EvMaintenanceStarted, slog.LevelInfo, "maintenance started", f("deleteDevices"), nil},
	{contract.EvMaintenanceEnded, slog.LevelInfo, "maintenance ended", f("released", "cancelled", "deleted"), nil},
	{contract.EvClockJumped, slog.LevelWarn, "wall clock jumped", f("skewMs", "at", "leases", "devices"), nil},
	{contract.EvDaemonStopping, slog.LevelInfo, "daemon stopping", f("reason"), nil},
	{contract.EvTokenCreated, slog.LevelInfo, "token created", f("tokenId", "role", "label", "by"), nil},
	{contract.EvTokenRevoked, slog.LevelInfo, "token revoked", f("tokenId", "role", "label", "by"), nil},

	// A gateway's own.
	{contract.EvWorkerConnected, slog.LevelInfo, "worker joined", f("workerId", "label", "version"), nil},
	{contract.EvWorkerDisconnected, slog.LevelWarn, "worker left", f("workerId", "label", "reason"), nil},
	{contract.EvWorkerDrained, slog.LevelInfo, "worker drained", f("workerId", "label"), nil},
	{contract.EvWorkerUndrained, slog.LevelInfo, "worker undrained", f("workerId", "label"), nil},
	{contract.EvWorkerRemoved, slog.LevelInfo, "worker removed", f("workerId", "label", "reason"), nil},
	{contract.EvRequestDispatched, slog.LevelInfo, "request dispatched", append(f("requestId", "workerId"), as("requesterId", attrRequester), Field{From: "platform"}, Field{From: "model"}, Field{From: "reason"}, Field{From: "queuedMs"}), nil},
	{contract.EvGrantRecorded, slog.LevelInfo, "lease granted", append(f("leaseId", "requestId", "workerId", "workerLeaseId", "deviceId"), as("requesterId", attrRequester), Field{From: "source"}, Field{From: "platform"}, Field{From: attrWaitMs}), nil},
	{contract.EvWorkerRejected, slog.LevelWarn, "uplink refused", f("status", "code", "reason", "remote", "attempts", "workerId"), nil},
}

// gatewayOwn are the events only a gateway records (docs/EVENTS.md's Fleet
// section): a gateway logs these even though they name a worker.
var gatewayOwn = map[string]bool{
	contract.EvWorkerConnected: true, contract.EvWorkerDisconnected: true, contract.EvWorkerDrained: true, contract.EvWorkerUndrained: true,
	contract.EvWorkerRemoved: true, contract.EvRequestDispatched: true, contract.EvGrantRecorded: true, contract.EvWorkerRejected: true,
}

// queued is how many events wait for the writer at most: past it Record
// waits, as a synchronous log would, rather than drop a decision.
const queued = 4096

// maxTracked bounds each of the joins a Log keeps (open requests, live
// leases): past it, a new one is not tracked and its later lines lack
// what the join would have added.
const maxTracked = 1 << 16

// Log writes the decision records of one daemon.
type Log struct {
	log     *slog.Logger
	gateway bool
	byName  map[string]*Entry

	// queue carries the events Record took to the writer; done is
	// closed when the writer has written them all, after Close.
	queue chan contract.Event
	done  chan struct{}
	// sendMu is held shared by each Record's send and exclusively by
	// Close, so no send meets a closed queue; closed is under it.
	sendMu sync.RWMutex
	closed bool

	// The joins, used by the writer alone: when each open request was
	// made (for a grant's waitMs), and each live lease's request and
	// requester (for its end, whose event names neither).
	requested map[string]int64
	leases    map[string]leaseOf
}

type leaseOf struct{ requestID, requester string }

// New returns the decision log of a daemon that logs to log; gateway says
// it is a gateway, whose log leaves out the events it relays from its
// workers (each is in its own worker's log).
//
// It starts the Log's writer, which Close stops.
func New(log *slog.Logger, gateway bool) *Log {
	l := &Log{log: log, gateway: gateway, byName: map[string]*Entry{}, requested: map[string]int64{}, leases: map[string]leaseOf{},
		queue: make(chan contract.Event, queued), done: make(chan struct{})}
	for i := range Entries {
		l.byName[Entries[i].Event] = &Entries[i]
	}
	go l.write()
	return l
}

// Record queues ev for its record when the table names it. It is the
// event bus's tap: it sees every event once, in publish order, and must
// be quick. After Close it does nothing.
func (l *Log) Record(ev contract.Event) {
	e, ok := l.byName[ev.Event]
	if !ok || !l.log.Enabled(context.Background(), e.Level) && !l.tracks(ev.Event) {
		return
	}
	l.sendMu.RLock()
	defer l.sendMu.RUnlock()
	if !l.closed {
		l.queue <- ev
	}
}

// Close writes the records of the events queued so far and stops the
// writer. The daemon calls it once nothing publishes any more; it is safe
// to call more than once.
func (l *Log) Close() {
	l.sendMu.Lock()
	if !l.closed {
		l.closed = true
		close(l.queue)
	}
	l.sendMu.Unlock()
	<-l.done
}

// write writes the record of each queued event, in order, until Close.
func (l *Log) write() {
	defer close(l.done)
	for ev := range l.queue {
		l.record(l.byName[ev.Event], ev)
	}
}

// record writes ev's record, as e says.
func (l *Log) record(e *Entry, ev contract.Event) {
	var payload map[string]any
	dec := json.NewDecoder(bytes.NewReader(ev.Payload))
	dec.UseNumber()
	if err := dec.Decode(&payload); err != nil {
		payload = map[string]any{}
	}
	if l.gateway && !gatewayOwn[ev.Event] {
		if _, relayed := payload["workerId"]; relayed {
			return // a worker's event, relayed: its worker logged it
		}
	}
	attrs := make([]slog.Attr, 0, len(e.Fields)+6)
	attrs = append(attrs, slog.String("event", ev.Event), slog.Int64("seq", ev.Seq))
	have := map[string]bool{}
	for _, fd := range e.Fields {
		v, ok := lookup(payload, fd.From)
		if !ok {
			continue
		}
		name := fd.As
		if name == "" {
			name = fd.From
		}
		have[name] = true
		attrs = append(attrs, slog.Any(name, v))
	}
	for i := 0; i+1 < len(e.Const); i += 2 {
		attrs = append(attrs, slog.String(e.Const[i], e.Const[i+1]))
		have[e.Const[i]] = true
	}
	attrs = append(attrs, l.join(ev, payload, have)...)
	l.log.LogAttrs(context.Background(), e.Level, e.Message, attrs...)
}

// tracks reports whether events of this name feed a join, and so are read
// even when their own level is not logged.
func (l *Log) tracks(name string) bool {
	switch name {
	case contract.EvLeaseRequested, contract.EvLeaseGranted, contract.EvLeaseRejected, contract.EvGrantRecorded,
		contract.EvLeaseReleased, contract.EvLeaseExpired:
		return true
	}
	return false
}

// join keeps what later records need and adds what earlier events told:
// a grant's wait since its request, a lease end's request and requester.
// have are the attributes the record has already.
func (l *Log) join(ev contract.Event, payload map[string]any, have map[string]bool) []slog.Attr {
	str := func(k string) string { s, _ := payload[k].(string); return s }
	var out []slog.Attr
	switch ev.Event {
	case contract.EvLeaseRequested:
		if id := str("requestId"); id != "" && len(l.requested) < maxTracked {
			l.requested[id] = ev.Timestamp
		}
	case contract.EvLeaseGranted, contract.EvGrantRecorded:
		id := str("requestId")
		if at, ok := l.requested[id]; ok && !have[attrWaitMs] {
			out = append(out, slog.Int64(attrWaitMs, max(ev.Timestamp-at, 0)))
		}
		delete(l.requested, id)
		if ev.Event == contract.EvLeaseGranted && len(l.leases) < maxTracked {
			l.leases[str("leaseId")] = leaseOf{requestID: id, requester: str("requester")}
		}
	case contract.EvLeaseRejected:
		delete(l.requested, str("requestId"))
	case contract.EvLeaseReleased, contract.EvLeaseExpired:
		key := str("leaseId")
		if lo, ok := l.leases[key]; ok {
			out = append(out, slog.String("requestId", lo.requestID))
			if !have[attrRequester] {
				out = append(out, slog.String(attrRequester, lo.requester))
			}
		}
		delete(l.leases, key)
	}
	return out
}

// lookup finds the value at path (dots go into objects) in payload.
func lookup(payload map[string]any, path string) (any, bool) {
	var v any = payload
	for part := range strings.SplitSeq(path, ".") {
		m, ok := v.(map[string]any)
		if !ok {
			return nil, false
		}
		if v, ok = m[part]; !ok {
			return nil, false
		}
	}
	if s, ok := v.(string); ok && s == "" {
		return nil, false
	}
	return v, true
}
