package leasing

import (
	"context"
	"slices"
	"sort"

	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/core"
	"github.com/simlock/simlock/internal/driver"
	"github.com/simlock/simlock/internal/queue"
)

// Snapshot is the engine's part of status.get, read in one pass under the
// decision lock, so its parts agree with each other.
type Snapshot struct {
	Capacity   contract.Capacity
	Counts     contract.StatusCounts
	QueueDepth int
	WarmPool   contract.WarmPoolStatus
	// EventSeq is the highest event seq the engine's decisions had
	// committed when the snapshot was read (queue.Queue.SeqLocked): it
	// shows each of them, and none after.
	EventSeq int64
	// The lists, oldest first; nil in a summary.
	Devices []contract.Device
	Leases  []contract.LeaseRecord
	Waiting []contract.WaitingRequest
}

// summaryLocked fills what a summary holds.
func (e *Engine) summaryLocked(s *Snapshot) {
	s.Capacity = core.Report(e.opts.Limits, e.reg.use, e.reg.warm)
	open, depth := e.q.CountsLocked()
	s.QueueDepth = depth
	s.Counts = contract.StatusCounts{Devices: e.reg.len(), DevicesByState: e.reg.byState(), Leases: len(e.leases), Waiting: open}
	s.WarmPool = e.warmPoolStatusLocked()
	s.EventSeq = e.q.SeqLocked()
}

// Snapshot reads capacity, counts, the queue depth and the warm pool, and
// unless summary the device, lease and waiting lists. A summary costs the
// same whatever the number of devices, leases and requests.
func (e *Engine) Snapshot(summary bool) Snapshot {
	var s Snapshot
	e.view(func() {
		e.summaryLocked(&s)
		if summary {
			return
		}
		s.Devices = make([]contract.Device, 0, e.reg.len())
		t := e.now()
		e.reg.each(func(d *dev) bool {
			s.Devices = append(s.Devices, e.withTransition(deviceView(d), d, t))
			return true
		})
		s.Leases = make([]contract.LeaseRecord, 0, len(e.leases))
		for el := e.leaseOrder.Front(); el != nil; el = el.Next() {
			s.Leases = append(s.Leases, el.Value.(*lease).LeaseRecord)
		}
		s.Waiting = e.q.WaitingLocked(Caller{Admin: true})
	})
	return s
}

// AppendLists appends `"devices":[…],"leases":[…]` to b, the device and
// lease lists as status.get carries them to c, and returns the rest of a
// full snapshot taken in the same look (its lists left out but for
// Waiting). Each record's encoding is kept until the record changes, so a
// status of thousands of them costs copying bytes, not encoding them.
//
// An agent sees every device but only its own leases and requests
// (queue.Caller.SeesLease, Sees): another agent's lease is not listed, nor
// named on the device it holds (the device is shown leased). The counts
// are of everything.
func (e *Engine) AppendLists(b []byte, c Caller) ([]byte, Snapshot) {
	var s Snapshot
	e.view(func() {
		e.summaryLocked(&s)
		b = slices.Grow(b, e.reg.len()*360+len(e.leases)*260+32)
		b = append(b, `"devices":[`...)
		first := true
		t := e.now()
		e.reg.each(func(d *dev) bool {
			if !first {
				b = append(b, ',')
			}
			first = false
			l := e.leases[d.lease]
			hide := d.lease != "" && !c.SeesLease(ownerOf(l), l != nil)
			if hide || transitioning(d.State) {
				// Not the kept encoding: it names the lease, or the
				// transition's age has moved on since it was made.
				v := e.withTransition(deviceView(d), d, t)
				if hide {
					v.LeaseID, v.LeaseKey = "", ""
				}
				b = v.AppendJSON(b)
				return true
			}
			b = append(b, d.viewJSON()...)
			return true
		})
		b = append(b, `],"leases":[`...)
		first = true
		for el := e.leaseOrder.Front(); el != nil; el = el.Next() {
			l := el.Value.(*lease)
			if !c.SeesLease(l.OwnerID, true) {
				continue
			}
			if !first {
				b = append(b, ',')
			}
			first = false
			b = append(b, l.viewJSON()...)
		}
		b = append(b, ']')
		s.Waiting = e.q.WaitingLocked(c)
	})
	return b, s
}

// List reads one kind of record (list.get), as an admin sees them,
// oldest first: whole, or with a limit above 0 at most limit records after
// the cursor, and the next page's cursor (Next) when there is one. Devices
// are every device not deleted; requests the open ones, in arrival order.
func (e *Engine) List(kind contract.ListKind, after *contract.ListCursor, limit int) contract.ListGetResult {
	var res contract.ListGetResult
	switch kind {
	case contract.ListLeases:
		res.Leases, res.Next = e.leasesPage(Caller{Admin: true}, after, limit)
	case contract.ListRequests:
		res.Requests, res.Next = e.q.Records(after, limit)
	default:
		res.Devices, res.Next = e.devicesPage(after, limit)
	}
	return res
}

// Leases lists active leases the caller may see, oldest first: an agent its
// own, an admin all of them.
func (e *Engine) Leases(c Caller) []contract.LeaseRecord {
	out, _ := e.leasesPage(c, nil, 0)
	return out
}

// leasesPage is Leases, one page: with a limit above 0, at most limit
// leases after the cursor, and the next page's cursor when there is one.
func (e *Engine) leasesPage(c Caller, after *contract.ListCursor, limit int) ([]contract.LeaseRecord, string) {
	out := []contract.LeaseRecord{}
	next := ""
	e.view(func() {
		el := e.leaseOrder.Front()
		if after != nil {
			if l, ok := e.leases[after.ID]; ok && l.GrantedAt == after.At {
				el = l.at.Next()
			}
		}
		for ; el != nil; el = el.Next() {
			l := el.Value.(*lease)
			if (after != nil && after.Passed(l.GrantedAt, l.UniqueKey())) || !c.SeesLease(l.OwnerID, true) {
				continue
			}
			if limit > 0 && len(out) == limit {
				last := out[len(out)-1]
				next = contract.ListCursor{At: last.GrantedAt, ID: last.UniqueKey()}.String()
				return
			}
			out = append(out, l.LeaseRecord)
		}
	})
	return out, next
}

// devices lists every device that is not deleted, oldest first.
func (e *Engine) devices() []contract.Device {
	out, _ := e.devicesPage(nil, 0)
	return out
}

// devicesPage is devices, one page, as leasesPage.
func (e *Engine) devicesPage(after *contract.ListCursor, limit int) ([]contract.Device, string) {
	out := []contract.Device{}
	next := ""
	e.view(func() {
		el := e.reg.order.Front()
		if after != nil {
			if d, ok := e.reg.get(after.ID); ok && d.CreatedAt == after.At {
				el = d.at.Next()
			}
		}
		for ; el != nil; el = el.Next() {
			d := el.Value.(*dev)
			if after != nil && after.Passed(d.CreatedAt, d.ID) {
				continue
			}
			if limit > 0 && len(out) == limit {
				last := out[len(out)-1]
				next = contract.ListCursor{At: last.CreatedAt, ID: last.ID}.String()
				return
			}
			out = append(out, deviceView(d))
		}
	})
	return out, next
}

// requests lists open requests in arrival order.
func (e *Engine) requests() []contract.LeaseRequestRecord {
	out, _ := e.q.Records(nil, 0)
	return out
}

// waitingList lists open requests as status shows them.
func (e *Engine) waitingList() []contract.WaitingRequest { return e.q.Waiting(Caller{Admin: true}) }

func deviceView(d *dev) contract.Device {
	return contract.Device{
		ID: d.ID, DriverDeviceID: d.DriverDeviceID, Driver: d.Driver, Spec: d.spec(), State: d.State,
		Address: d.Address, LeaseID: d.leaseID, LeaseKey: keyIfChosen(d.leaseID, d.lease), CreatedAt: d.CreatedAt, StateSince: d.StateSince,
		LastUsedAt: d.LastUsedAt, Slimmed: d.Slimmed,
	}
}

// ownerOf is l's owner, "" for none.
func ownerOf(l *lease) string {
	if l == nil {
		return ""
	}
	return l.OwnerID
}

// keyIfChosen is a lease's key when it differs from its id (the id was
// chosen), "" otherwise.
func keyIfChosen(id, key string) string {
	if key == id {
		return ""
	}
	return key
}

// Get reads an active lease and its device (lease.get).
func (e *Engine) Get(c Caller, in contract.LeaseIDInput) (contract.LeaseGetResult, error) {
	id := in.LeaseID
	var res contract.LeaseGetResult
	var cerr *contract.Error
	e.view(func() {
		var l *lease
		if l, cerr = e.findLocked(c, id); cerr != nil {
			return
		}
		res = contract.LeaseGetResult{Lease: l.LeaseRecord, RequestID: l.RequestID}
		if d, ok := e.reg.get(l.DeviceID); ok {
			res.Device = deviceView(d)
		}
	})
	if cerr != nil {
		return contract.LeaseGetResult{}, cerr
	}
	return res, nil
}

// Watch checks that the caller may watch lease key and returns it
// (lease.watch); the caller's session, which holds it by key, then hears
// lease-lost when it ends.
func (e *Engine) Watch(c Caller, key string) (contract.LeaseWatchResult, error) {
	r, err := e.Get(c, contract.LeaseIDInput{LeaseID: key})
	if err != nil {
		return contract.LeaseWatchResult{}, err
	}
	return contract.LeaseWatchResult{Lease: r.Lease}, nil
}

// Catalog lists what each platform's driver offers, in platform order.
func (e *Engine) Catalog(ctx context.Context, only contract.Platform) ([]driver.Catalog, error) {
	out := []driver.Catalog{}
	for _, p := range contract.Platforms() {
		if only != "" && p != only {
			continue
		}
		d, ok := e.opts.Drivers[p]
		if !ok {
			continue
		}
		cat, err := e.listCatalog(ctx, d)
		if err != nil {
			return nil, driver.ContractError(err)
		}
		out = append(out, cat)
	}
	return out, nil
}

// Vanished lists registry devices that their driver's root no longer holds.
// Devices with work in flight are left out: their state is about to change.
func (m *Maintenance) Vanished(ctx context.Context) ([]contract.Device, error) {
	e := m.e
	var out []contract.Device
	for _, p := range contract.Platforms() {
		d, ok := e.opts.Drivers[p]
		if !ok || d.Root() == "" {
			continue // a driver with no root (demo) holds nothing that can vanish
		}
		reality, err := d.ListManaged(ctx)
		if err != nil {
			return nil, driver.ContractError(err)
		}
		present := map[string]bool{}
		for _, o := range reality.Devices {
			present[o.ID] = true
		}
		e.view(func() {
			e.reg.each(func(dv *dev) bool {
				if dv.Platform == p && dv.claim == claimNone && dv.DriverDeviceID != "" && dv.State != contract.DeviceProvisioning && !present[dv.DriverDeviceID] {
					out = append(out, deviceView(dv))
				}
				return true
			})
		})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

// MarkMissing records that a device is gone from its root: it becomes
// deleted (device.deleted, initiator doctor). A leased or busy device is
// never touched.
func (m *Maintenance) MarkMissing(id string) error {
	e := m.e
	return e.try(func(tx *queue.Txn) error {
		d, ok := e.reg.get(id)
		if !ok || !d.idle() {
			return nil
		}
		switch d.State {
		case contract.DeviceReady, contract.DeviceShutdown, contract.DeviceQuarantined:
		default:
			return nil // mid-transition: the next look decides
		}
		if d.State == contract.DeviceReady {
			e.setState(tx, d, contract.DeviceShutdown)
		}
		e.setState(tx, d, contract.DeviceDeleted)
		tx.Event(contract.EvDeviceDeleted, map[string]any{"deviceId": id, "initiator": "doctor"})
		return nil
	})
}
