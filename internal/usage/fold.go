package usage

import (
	"encoding/json"
	"maps"
	"slices"

	"github.com/simlock/simlock/internal/contract"
)

// Cell names one cell of the rollup: a minute (epoch ms, whole) of one
// source's events for one platform. Worker is "" for the daemon's own
// events and the worker's id for those a gateway relayed; Platform is ""
// when the fold could not tell it (a grant whose request it never saw).
type Cell struct {
	Minute           int64
	Worker, Platform string
}

// Kinds of open entries.
const (
	KindRequest = "request"
	KindLease   = "lease"
)

// OpenKey names a request or a lease the fold waits on: ids are unique
// only within one daemon's events, so the worker is part of the key.
type OpenKey struct {
	Worker, Kind, ID string
}

// Open is a request (from lease.requested) or a lease (from
// lease.granted) whose end is still to come.
type Open struct {
	// At is when it opened: the request's or the grant's time.
	At int64
	// Requested is a lease's request time; 0 when its request was not
	// open when it was granted.
	Requested int64
	Platform  string
	// Dispatched marks, on a gateway, its own request handed to a worker:
	// counted from then on for DispatchedTo, the worker it went to ("" for
	// an entry stored before the fold kept it, which is then counted
	// nowhere more).
	Dispatched   bool
	DispatchedTo string
}

// Append is records to append to a cell.
type Append struct {
	Cell    Cell
	Records []byte
}

// OpenWrite is an open entry's state after a batch: Open to store, or,
// with Closed, gone.
type OpenWrite struct {
	Key    OpenKey
	Open   Open
	Closed bool
}

// Changes is what a batch does to the rollup, for the store to write: the
// records to append, each cell once, in the order of the cells' first
// events; and the open entries to store or delete, in the order of their
// last change.
type Changes struct {
	Appends []Append
	Opens   []OpenWrite
}

// kind is the fold's name for a lease event.
type kind uint8

const (
	requested kind = iota + 1
	dispatched
	granted
	rejected
	ended
)

// kinds are the events the fold reads, by name. grant.recorded is a
// gateway's own record of a grant it forwarded: on a gateway the grants
// are counted from it, never from a worker's relayed lease.granted.
var kinds = map[string]kind{
	contract.EvLeaseRequested:    requested,
	contract.EvRequestDispatched: dispatched,
	contract.EvLeaseGranted:      granted,
	contract.EvGrantRecorded:     granted,
	contract.EvLeaseRejected:     rejected,
	contract.EvLeaseReleased:     ended,
	contract.EvLeaseExpired:      ended,
}

// EventNames are the names of the events the fold reads, sorted: a store
// folding its log may skip every other event.
func EventNames() []string { return slices.Sorted(maps.Keys(kinds)) }

// leaseEvent is an event the fold reads, with the payload fields it uses.
type leaseEvent struct {
	kind                         kind
	at                           int64
	worker                       string
	requestID, leaseID, platform string
	source, reason               string
	// recorded marks a gateway's grant.recorded: the grant on worker,
	// its wait measured by the gateway (waitMs) and its lease's time on
	// the worker's clock (grantedAt).
	recorded          bool
	waitMs, grantedAt int64
}

// payload holds the fields the fold reads of a lease.* or
// request.dispatched payload.
type payload struct {
	RequestID   string `json:"requestId"`
	LeaseID     string `json:"leaseId"`
	Source      string `json:"source"`
	Reason      string `json:"reason"`
	WorkerID    string `json:"workerId"`
	RequestSpec struct {
		Platform string `json:"platform"`
	} `json:"requestSpec"`
	// grant.recorded's.
	WorkerLeaseID string `json:"workerLeaseId"`
	Platform      string `json:"platform"`
	WaitMs        int64  `json:"waitMs"`
	GrantedAt     int64  `json:"grantedAt"`
}

// parse reads e as the fold does; ok is false for an event the rollup does
// not count. A lease.* event whose payload carries a workerId is one a
// gateway relayed from that worker (a daemon's own lease events never have
// one): of those, only an end counts, and only for a lease the gateway's
// own grant.recorded opened. Everything else a gateway counts is its own:
// its fleet queue's lease.requested and lease.rejected, its
// request.dispatched and its grant.recorded, whose workerId names the
// worker they are counted for. So a worker's relayed events, whatever they
// claim, add no request, grant or refusal to a gateway's figures.
func parse(e contract.Event) (leaseEvent, bool) {
	k, ok := kinds[e.Event]
	if !ok {
		return leaseEvent{}, false
	}
	var p payload
	if json.Unmarshal(e.Payload, &p) != nil {
		return leaseEvent{}, false
	}
	le := leaseEvent{kind: k, at: e.Timestamp, worker: p.WorkerID, requestID: p.RequestID, leaseID: p.LeaseID,
		platform: p.RequestSpec.Platform, source: p.Source, reason: p.Reason}
	switch {
	case k == dispatched:
		// The worker it went to, which the fold counts it for.
		le.worker, le.leaseID = "", p.WorkerID
	case e.Event == contract.EvGrantRecorded:
		if p.WorkerID == "" || p.WorkerLeaseID == "" {
			return leaseEvent{}, false
		}
		le.recorded, le.leaseID, le.platform, le.waitMs, le.grantedAt = true, p.WorkerLeaseID, p.Platform, max(p.WaitMs, 0), p.GrantedAt
	case le.worker != "" && k != ended:
		return leaseEvent{}, false // relayed: the gateway counts its own
	}
	return le, true
}

// opens is the open entry an event of its kind ends or updates: a
// grant.recorded ends the gateway's own request.
func (e leaseEvent) opens() OpenKey {
	switch {
	case e.kind == ended:
		return OpenKey{e.worker, KindLease, e.leaseID}
	case e.recorded:
		return OpenKey{"", KindRequest, e.requestID}
	}
	return OpenKey{e.worker, KindRequest, e.requestID}
}

// A Batch is the events of one commit, in seq order, as the fold reads
// them.
type Batch struct {
	evs []leaseEvent
}

// NewBatch reads evs, the events of one commit in seq order; the events
// the rollup does not count are dropped.
func NewBatch(evs []contract.Event) Batch {
	var b Batch
	for _, e := range evs {
		if le, ok := parse(e); ok {
			b.evs = append(b.evs, le)
		}
	}
	return b
}

// Empty reports whether the batch changes nothing.
func (b *Batch) Empty() bool { return len(b.evs) == 0 }

// Needs lists the open entries the batch's events end or update that the
// batch did not open itself: those the store must look up for Fold.
func (b *Batch) Needs() []OpenKey {
	opened := map[OpenKey]bool{}
	seen := map[OpenKey]bool{}
	var out []OpenKey
	for _, e := range b.evs {
		if e.kind != requested {
			if k := e.opens(); !opened[k] && !seen[k] {
				seen[k] = true
				out = append(out, k)
			}
		}
		switch {
		case e.kind == requested:
			opened[e.opens()] = true
		case e.kind == granted:
			opened[OpenKey{e.worker, KindLease, e.leaseID}] = true
		}
	}
	return out
}

// Fold is the rule from events to the rollup. known holds the open entries
// Needs listed that the store has (a key it does not have is absent). It
// returns what to write:
//
//   - lease.requested: a request in the cell of its minute, worker and
//     platform; the request is open.
//   - request.dispatched (a gateway's): the open request is handed to the
//     worker it names, so it moves there: -1 request in the cell it was
//     counted in, +1 in that worker's cell of the same minute and
//     platform; it stays open, marked with the worker. A request a worker
//     bounced (no room after all; the gateway asks again) was never
//     dispatched, so it counts once, where it ends.
//   - lease.granted: a grant by source, in the cell of its minute and of
//     its request's platform; with the open request, its wait (and time to
//     device unless warm). The request closes and the lease is open.
//   - grant.recorded (a gateway's): a grant by source in the cell of its
//     minute, the worker it names and its platform, with the wait the
//     gateway measured (and time to device unless warm). The gateway's
//     request closes; the worker's lease is open from its grant on the
//     worker's clock, its request waitMs before that.
//   - lease.rejected: a refusal in the cell of its minute and platform, by
//     reason: cancelled and killed count as cancelled, timeout as timed
//     out; for a request a gateway dispatched, in the cell of the worker
//     it went to. The request closes.
//   - lease.released, lease.expired (a worker's, relayed, on a gateway):
//     with the open lease, its hold and (when its request was known)
//     turnaround, neither below 0, in the cell of the end's minute and
//     the lease's platform. The lease closes. Without it, nothing: its
//     grant is not in the history, or the gateway never recorded it.
func (b *Batch) Fold(known map[OpenKey]Open) Changes {
	f := folder{open: map[OpenKey]*entry{}, cells: map[Cell]int{}}
	for k, o := range known {
		f.open[k] = &entry{Open: o, stored: true, live: true}
	}
	for _, e := range b.evs {
		f.fold(e)
	}
	return f.changes()
}

// entry is an open entry as the batch leaves it.
type entry struct {
	Open
	stored  bool // the store has it
	live    bool // open now
	changed bool
}

type folder struct {
	open  map[OpenKey]*entry
	order []OpenKey // of the entries' first change
	cells map[Cell]int
	out   Changes
}

func (f *folder) add(c Cell, d Delta) {
	i, ok := f.cells[c]
	if !ok {
		i = len(f.out.Appends)
		f.cells[c] = i
		f.out.Appends = append(f.out.Appends, Append{Cell: c})
	}
	f.out.Appends[i].Records = AppendDelta(f.out.Appends[i].Records, d)
}

func (f *folder) get(k OpenKey) (Open, bool) {
	e, ok := f.open[k]
	if !ok || !e.live {
		return Open{}, false
	}
	return e.Open, true
}

func (f *folder) set(k OpenKey, o Open, live bool) {
	e, ok := f.open[k]
	if !ok {
		e = &entry{}
		f.open[k] = e
	}
	if !e.changed {
		e.changed = true
		f.order = append(f.order, k)
	}
	e.Open, e.live = o, live
}

func (f *folder) fold(e leaseEvent) {
	minute := contract.UsageMinute(e.at)
	switch e.kind {
	case requested:
		f.add(Cell{minute, e.worker, e.platform}, Delta{Requests: 1})
		f.set(e.opens(), Open{At: e.at, Platform: e.platform}, true)
	case dispatched:
		k := e.opens()
		r, ok := f.get(k)
		if !ok || r.Dispatched {
			return
		}
		f.add(Cell{contract.UsageMinute(r.At), k.Worker, r.Platform}, Delta{Requests: -1})
		f.add(Cell{contract.UsageMinute(r.At), e.leaseID, r.Platform}, Delta{Requests: 1})
		r.Dispatched, r.DispatchedTo = true, e.leaseID
		f.set(k, r, true)
	case granted:
		if e.recorded {
			if k := e.opens(); e.requestID != "" {
				if _, ok := f.get(k); ok {
					f.set(k, Open{}, false) // the gateway's request: granted
				}
			}
			d := Delta{Granted: e.source, Wait: e.waitMs, Has: HasWait}
			if e.source != string(contract.SourceWarm) {
				d.Has |= HasToDevice
			}
			f.add(Cell{minute, e.worker, e.platform}, d)
			f.set(OpenKey{e.worker, KindLease, e.leaseID}, Open{At: e.grantedAt, Requested: e.grantedAt - e.waitMs, Platform: e.platform}, true)
			return
		}
		k := e.opens()
		r, asked := f.get(k)
		if asked {
			f.set(k, Open{}, false)
		}
		d := Delta{Granted: e.source}
		l := Open{At: e.at, Platform: r.Platform}
		if asked {
			d.Wait, d.Has = e.at-r.At, HasWait
			if e.source != string(contract.SourceWarm) {
				d.Has |= HasToDevice
			}
			l.Requested = r.At
		}
		f.add(Cell{minute, e.worker, r.Platform}, d)
		f.set(OpenKey{e.worker, KindLease, e.leaseID}, l, true)
	case rejected:
		k := e.opens()
		r, ok := f.get(k)
		worker := e.worker
		if ok {
			f.set(k, Open{}, false)
			if r.Dispatched {
				if r.DispatchedTo == "" {
					return // dispatched before the fold kept where to
				}
				worker = r.DispatchedTo
			}
		}
		var d Delta
		switch e.reason {
		case string(contract.RejectCancelled), string(contract.RejectKilled):
			d.Cancelled = true
		case string(contract.RejectTimeout):
			d.TimedOut = true
		default:
			d.Rejected = e.reason
		}
		f.add(Cell{minute, worker, e.platform}, d)
	case ended:
		k := e.opens()
		l, ok := f.get(k)
		if !ok {
			return
		}
		f.set(k, Open{}, false)
		// Never negative: on a gateway the end is a worker's time and
		// the grant the gateway's record, and a worker's clock that
		// stepped back, or lies, takes nothing from the figures.
		d := Delta{Hold: max(e.at-l.At, 0), Has: HasHold}
		if l.Requested != 0 {
			d.Turnaround, d.Has = max(e.at-l.Requested, 0), d.Has|HasTurnaround
		}
		f.add(Cell{minute, e.worker, l.Platform}, d)
	}
}

func (f *folder) changes() Changes {
	for _, k := range f.order {
		e := f.open[k]
		switch {
		case e.live:
			f.out.Opens = append(f.out.Opens, OpenWrite{Key: k, Open: e.Open})
		case e.stored:
			f.out.Opens = append(f.out.Opens, OpenWrite{Key: k, Closed: true})
		}
	}
	return f.out
}
