package gateway

import (
	"encoding/json"
	"slices"

	"github.com/simlock/simlock/internal/contract"
)

// A worker's view is kept from the events it relays where an event says
// exactly what it changed (foldEvent), and read from its status only when
// one does not: a fleet whose every lease end, grant and renewal made the
// gateway decode the worker's whole status spent half its time doing so.
// The status read stays the check: every refresh, and after any event the
// view cannot take, the read replaces the view, and the events folded
// since that are newer than the read are folded again on top of it
// (refold), so that neither undoes the other whatever order they come in.

// foldOutcome is what folding one event did to a view.
type foldOutcome int

const (
	// foldNone: the event changes nothing the view shows.
	foldNone foldOutcome = iota
	// foldChanged: the view took the event.
	foldChanged
	// foldNeedsRead: the view cannot take the event (it names what the
	// view does not hold, lacks what its fold needs, or is one no fold
	// knows): the status is read instead. The view is unchanged.
	foldNeedsRead
)

// maxFolds bounds the events a worker's view keeps folded since its last
// applied status read: over it, the kept events are dropped and the status
// is read.
const maxFolds = 256

// foldFields are the payload fields the folds read; a pointer is a field
// whose absence (an older worker's payload) means the fold cannot be made.
type foldFields struct {
	LeaseID       string               `json:"leaseId"`
	ChosenLeaseID string               `json:"chosenLeaseId"`
	DeviceID      string               `json:"deviceId"`
	Requester     string               `json:"requester"`
	RequestID     string               `json:"requestId"`
	OwnerID       *string              `json:"ownerId"`
	TTLMs         *int64               `json:"ttlMs"`
	TTLDeadline   *int64               `json:"ttlDeadline"`
	State         contract.DeviceState `json:"state"`
	Depth         *int                 `json:"depth"`
}

// foldEvent folds one relayed event into v, as the worker's next status
// would show it. It never writes to v's slices or capacity in place (views
// are copied by value elsewhere, sharing them): what it changes it
// replaces. It checks what it takes as checkStatus checks a status, and
// never makes v hold what a status could not (a lease of a device it does
// not list, more than maxRecords leases).
func foldEvent(v *contract.WorkerView, ev contract.Event) foldOutcome {
	switch ev.Event {
	case contract.EvLeaseRequested:
		return foldNone
	case contract.EvCapacityChanged:
		// A report names its global counts and its platforms; a payload
		// without them is not one (it would read as no capacity at all).
		var c contract.Capacity
		var has struct {
			Global    json.RawMessage `json:"global"`
			Platforms json.RawMessage `json:"platforms"`
		}
		if json.Unmarshal(ev.Payload, &c) != nil || json.Unmarshal(ev.Payload, &has) != nil ||
			!isObject(has.Global) || !isObject(has.Platforms) || checkCapacity(c) != nil {
			return foldNeedsRead
		}
		v.Capacity = &c
		return foldChanged
	}
	if !refreshOn(ev.Event) && ev.Event != contract.EvQueueChanged {
		return foldNone
	}
	var p foldFields
	if json.Unmarshal(ev.Payload, &p) != nil {
		return foldNeedsRead
	}
	switch ev.Event {
	case contract.EvQueueChanged:
		if p.Depth == nil || checkCount("queueDepth", *p.Depth) != nil {
			return foldNeedsRead
		}
		v.QueueDepth = *p.Depth
		return foldChanged
	case contract.EvLeaseRejected:
		if i := waitingIndex(v.Waiting, p.RequestID); i >= 0 {
			v.Waiting = slices.Delete(slices.Clone(v.Waiting), i, i+1)
			return foldChanged
		}
		return foldNone
	case contract.EvLeaseGranted:
		return foldGranted(v, ev, p)
	case contract.EvLeaseRenewed:
		return foldRenewed(v, ev, p)
	case contract.EvLeaseReleased, contract.EvLeaseExpired:
		return foldEnded(v, p)
	case contract.EvDeviceReclaimed:
		return foldReclaimed(v, ev, p)
	}
	return foldNeedsRead
}

// foldGranted: the lease joins the view's leases, its device is leased by
// it, and the request it was granted for no longer waits.
func foldGranted(v *contract.WorkerView, ev contract.Event, p foldFields) foldOutcome {
	if p.OwnerID == nil || p.TTLMs == nil || p.TTLDeadline == nil || p.LeaseID == "" {
		return foldNeedsRead
	}
	rec := contract.LeaseRecord{ID: p.LeaseID, DeviceID: p.DeviceID, RequesterID: p.Requester, OwnerID: *p.OwnerID,
		GrantedAt: ev.Timestamp, TTLMs: *p.TTLMs, LastRenewedAt: ev.Timestamp, TTLDeadline: *p.TTLDeadline, WorkerID: v.ID}
	if p.ChosenLeaseID != "" {
		rec.ID, rec.Key, rec.IDChosenByRequester = p.ChosenLeaseID, p.LeaseID, true
	}
	if checkLease("lease.granted", rec) != nil {
		return foldNeedsRead
	}
	// The device is free, or held by this very lease (the grant told
	// again); a lease the view holds stays on its device. Leases are
	// matched by their unique keys: two owners may choose one id.
	d := deviceIndex(v.Devices, p.DeviceID)
	if d < 0 {
		return foldNeedsRead
	}
	if held := deviceLeaseKey(v.Devices[d]); held != "" && held != p.LeaseID {
		return foldNeedsRead
	}
	leases := slices.Clone(v.Leases)
	if i := leaseAt(leases, p.LeaseID); i >= 0 {
		if leases[i].DeviceID != rec.DeviceID {
			return foldNeedsRead
		}
		leases[i] = rec
	} else {
		if len(leases) >= maxRecords {
			return foldNeedsRead
		}
		leases = append(leases, rec)
	}
	devices := slices.Clone(v.Devices)
	dev := &devices[d]
	dev.State, dev.LeaseID, dev.LeaseKey, dev.StateSince, dev.LastUsedAt = contract.DeviceLeased, rec.ID, rec.Key, ev.Timestamp, ev.Timestamp
	v.Leases, v.Devices = leases, devices
	if i := waitingIndex(v.Waiting, p.RequestID); i >= 0 {
		v.Waiting = slices.Delete(slices.Clone(v.Waiting), i, i+1)
	}
	return foldChanged
}

// foldRenewed: the lease's deadline and width, renewed at the event's
// time.
func foldRenewed(v *contract.WorkerView, ev contract.Event, p foldFields) foldOutcome {
	i := leaseAt(v.Leases, p.LeaseID)
	if i < 0 || p.TTLMs == nil || p.TTLDeadline == nil {
		return foldNeedsRead
	}
	rec := v.Leases[i]
	rec.TTLMs, rec.TTLDeadline, rec.LastRenewedAt = *p.TTLMs, *p.TTLDeadline, ev.Timestamp
	if checkLease("lease.renewed", rec) != nil {
		return foldNeedsRead
	}
	leases := slices.Clone(v.Leases)
	leases[i] = rec
	v.Leases = leases
	return foldChanged
}

// foldEnded: the lease leaves, and its device, leased by it, is being
// cleaned (reclaiming), as the engine's end makes it.
func foldEnded(v *contract.WorkerView, p foldFields) foldOutcome {
	i := leaseAt(v.Leases, p.LeaseID)
	if i < 0 {
		return foldNeedsRead
	}
	rec := v.Leases[i]
	d := deviceIndex(v.Devices, rec.DeviceID)
	if d < 0 {
		return foldNeedsRead
	}
	v.Leases = slices.Delete(slices.Clone(v.Leases), i, i+1)
	if dev := v.Devices[d]; dev.State == contract.DeviceLeased && dev.LeaseID == rec.ID {
		devices := slices.Clone(v.Devices)
		devices[d].State, devices[d].LeaseID, devices[d].LeaseKey = contract.DeviceReclaiming, "", ""
		v.Devices = devices
	}
	return foldChanged
}

// foldReclaimed: a device being cleaned is clean, ready or shut down as
// the event's state says.
func foldReclaimed(v *contract.WorkerView, ev contract.Event, p foldFields) foldOutcome {
	if p.State != contract.DeviceReady && p.State != contract.DeviceShutdown {
		return foldNeedsRead
	}
	d := deviceIndex(v.Devices, p.DeviceID)
	if d < 0 || v.Devices[d].State != contract.DeviceReclaiming {
		return foldNeedsRead
	}
	devices := slices.Clone(v.Devices)
	devices[d].State, devices[d].StateSince, devices[d].Slimmed = p.State, ev.Timestamp, false
	devices[d].TransitionAgeMs, devices[d].Stalled, devices[d].LastUsedAt = 0, false, ev.Timestamp
	if p.State == contract.DeviceShutdown {
		devices[d].Address = ""
	}
	v.Devices = devices
	return foldChanged
}

// refold folds again on top of a view just read the kept events newer than
// the read's seq, and gives back those it keeps and whether one of them
// could not be folded any more (a status read is then needed).
func refold(v *contract.WorkerView, kept []contract.Event, seq int64) (left []contract.Event, needsRead bool) {
	for _, ev := range kept {
		if ev.Seq <= seq {
			continue // the read shows it
		}
		switch foldEvent(v, ev) {
		case foldChanged:
			left = append(left, ev)
		case foldNeedsRead:
			needsRead = true
		}
	}
	return left, needsRead
}

// isObject reports whether raw is a JSON object.
func isObject(raw json.RawMessage) bool { return len(raw) > 0 && raw[0] == '{' }

func deviceIndex(ds []contract.Device, id string) int {
	if id == "" {
		return -1
	}
	return slices.IndexFunc(ds, func(d contract.Device) bool { return d.ID == id })
}

// deviceLeaseKey is the unique key of the lease a device is leased by
// ("" for none): its LeaseKey where the holder chose the lease's id, else
// its LeaseID.
func deviceLeaseKey(d contract.Device) string {
	if d.LeaseKey != "" {
		return d.LeaseKey
	}
	return d.LeaseID
}

// leaseAt finds a lease by the id its events name it by (its unique
// key).
func leaseAt(ls []contract.LeaseRecord, key string) int {
	if key == "" {
		return -1
	}
	return slices.IndexFunc(ls, func(l contract.LeaseRecord) bool { return l.UniqueKey() == key })
}

func waitingIndex(ws []contract.WaitingRequest, id string) int {
	if id == "" {
		return -1
	}
	return slices.IndexFunc(ws, func(w contract.WaitingRequest) bool { return w.RequestID == id })
}
