package leasing

import (
	"container/list"
	"sort"

	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/core"
	"github.com/simlock/simlock/internal/driver"
	"github.com/simlock/simlock/internal/store"
)

// claim is the driver work in flight on a device. A claimed device is never
// picked for anything else.
type claim uint8

// The claims.
const (
	claimNone     claim = iota
	claimBoot           // booting or being created (a request's or the warm pool's): holds a running slot
	claimEviction       // being shut down to free its running slot for a request
	claimDestroy        // being deleted to free its slots for a request, or after a failed start
	claimReclaim        // being cleaned after its lease, lease-end participants included
	claimCleanup        // an idle rule is acting on it
	claimNuke           // a nuke is deleting it
	claimRetry          // a quarantine retry is cleaning it
)

var claimNames = [...]string{"", "boot", "eviction", "destroy", "reclaim", "cleanup", "nuke", "quarantine-retry"}

func (c claim) String() string { return claimNames[c] }

// releasing reports whether a device under this claim has promised its
// slot to a request: it no longer counts against the limits.
func (c claim) releasing() bool { return c == claimEviction || c == claimDestroy }

// dev is a device the engine knows: its record, and what the engine holds
// of it in memory.
type dev struct {
	store.Device
	claim claim
	lease string // the active lease on it, if any, by its unique key
	// leaseID is that lease's id as its owner names it (its chosen id,
	// or its key).
	leaseID string
	// stuck devices failed to stop or delete: never chosen to make room
	// again until the daemon restarts.
	stuck bool
	// rewarmedAt is StateSince as a re-warm left it ready and idle (see
	// rewarm.go). While StateSince still equals it the device has stayed
	// ready since, and the idle rule counts from its last use, not from
	// that boot; any later move makes it stale by itself.
	rewarmedAt int64
	// rewarmFailed is LastUsedAt when a re-warm boot of it failed: it is
	// not re-warmed again until it has been used again.
	rewarmFailed int64
	// at is its place in the registry's (createdAt, id) order.
	at *list.Element
	// view is the device as status shows it, encoded, kept until the device
	// changes: a full status of thousands of devices copies these.
	view []byte
}

// viewJSON is d as status shows it, as JSON.
func (d *dev) viewJSON() []byte {
	if d.view == nil {
		d.view = deviceView(d).AppendJSON(nil)
	}
	return d.view
}

func (d *dev) spec() contract.DeviceSpec {
	return contract.DeviceSpec{Platform: d.Platform, Model: d.Model, OSVersion: d.OSVersion, ImageTag: d.ImageTag, Mode: d.Mode}
}

func (d *dev) driverDevice() driver.Device {
	return driver.Device{ID: d.DriverDeviceID, Address: d.Address, Data: d.DriverData}
}

func (d *dev) slot() core.Slot {
	return core.Slot{
		Platform:  d.Platform,
		State:     d.State,
		Reserved:  d.claim == claimBoot || d.State == contract.DeviceProvisioning,
		Releasing: d.claim.releasing(),
		Slim:      d.Mode == contract.DeviceModeSlim,
	}
}

// idle: not leased, not claimed.
func (d *dev) idle() bool { return d.claim == claimNone && d.lease == "" }

// registry holds every device that is not deleted, with what the decisions
// ask of them kept ready: capacity usage as counters, idle devices indexed
// by what requests ask for (platform, model, OS) and ordered by last use,
// idle devices that may make room ordered least recently used first. Every
// change of a device goes through update, which takes the device out of
// every count and index and puts it back, so they never drift; a test
// recounts them from scratch after random changes. The engine's decision
// lock guards it.
type registry struct {
	limits core.Limits
	byID   map[string]*dev
	order  list.List // of *dev, oldest first
	use    core.Usage
	warm   core.PerPlatform // ready and unclaimed
	states map[contract.DeviceState]int
	// platStates counts devices per platform and state, for a metrics
	// scrape; a platform this build does not know is counted nowhere.
	platStates [contract.NumPlatforms]map[contract.DeviceState]int
	// fits indexes idle ready and shut-down devices, and devices being
	// cleaned, by spec; per platform, so a lookup walks only the specs
	// (models × OS versions) that exist, never the devices.
	fits [contract.NumPlatforms]map[fitKey]*fitBucket
	// victims are idle, unstuck devices that may be deleted or shut down
	// to make room, per state and platform, least recently used first.
	victims map[victimKey]*useOrder
}

type fitKey struct {
	model, osVersion, imageTag string
	mode                       contract.DeviceMode
}

type fitBucket struct {
	spec       contract.DeviceSpec
	ready      useOrder // idle ready, least recently used first
	shutdown   useOrder // idle shut down
	reclaiming useOrder // being cleaned, ordered by when the clean began
}

func (b *fitBucket) empty() bool {
	return b.ready.len() == 0 && b.shutdown.len() == 0 && b.reclaiming.len() == 0
}

type victimKey struct {
	state    contract.DeviceState
	platform contract.Platform
}

func newRegistry(limits core.Limits) *registry {
	r := &registry{limits: limits, byID: map[string]*dev{}, victims: map[victimKey]*useOrder{}, states: map[contract.DeviceState]int{}}
	r.order.Init()
	for i := range r.fits {
		r.fits[i] = map[fitKey]*fitBucket{}
		r.platStates[i] = map[contract.DeviceState]int{}
	}
	return r
}

func (r *registry) get(id string) (*dev, bool) {
	d, ok := r.byID[id]
	return d, ok
}

func (r *registry) len() int { return len(r.byID) }

// add registers a device that is not deleted.
func (r *registry) add(rec store.Device) *dev {
	d := &dev{Device: rec}
	r.byID[d.ID] = d
	// Devices are made in time order: a new one goes last, after a walk
	// back over the rare ones made in the same millisecond.
	after := r.order.Back()
	for after != nil {
		a := after.Value.(*dev)
		if a.CreatedAt < d.CreatedAt || (a.CreatedAt == d.CreatedAt && a.ID < d.ID) {
			break
		}
		after = after.Prev()
	}
	if after == nil {
		d.at = r.order.PushFront(d)
	} else {
		d.at = r.order.InsertAfter(d, after)
	}
	r.index(d, 1)
	return d
}

// update changes d through f, keeping every count and index true.
func (r *registry) update(d *dev, f func(d *dev)) {
	r.index(d, -1)
	f(d)
	d.view = nil
	if d.State == contract.DeviceDeleted {
		r.drop(d)
		return
	}
	r.index(d, 1)
}

// drop forgets a deleted device.
func (r *registry) drop(d *dev) {
	delete(r.byID, d.ID)
	r.order.Remove(d.at)
	d.at = nil
}

// index counts d in (n = 1) or out (n = -1) of everything derived from it.
func (r *registry) index(d *dev, n int) {
	r.use.Add(r.limits, d.slot(), n)
	r.states[d.State] += n
	if i := d.Platform.Index(); i >= 0 {
		r.platStates[i][d.State] += n
	}
	if d.State == contract.DeviceReady && d.claim == claimNone {
		r.warm.Add(d.Platform, n)
	}
	var set *useOrder
	switch {
	case d.State == contract.DeviceReady && d.idle():
		set = &r.bucket(d, n > 0).ready
	case d.State == contract.DeviceShutdown && d.idle():
		set = &r.bucket(d, n > 0).shutdown
	case d.State == contract.DeviceReclaiming:
		set = &r.bucket(d, n > 0).reclaiming
	}
	if set != nil {
		key := d.LastUsedAt
		if d.State == contract.DeviceReclaiming {
			key = d.StateSince
		}
		if n > 0 {
			set.add(d, key)
		} else {
			set.remove(d, key)
			if b := r.bucket(d, false); b != nil && b.empty() {
				delete(r.fits[d.Platform.Index()], fitKey{d.Model, d.OSVersion, d.ImageTag, d.Mode})
			}
		}
	}
	switch d.State {
	case contract.DeviceReady, contract.DeviceShutdown, contract.DeviceQuarantined:
		if d.idle() && !d.stuck {
			k := victimKey{d.State, d.Platform}
			v := r.victims[k]
			if v == nil {
				v = &useOrder{}
				r.victims[k] = v
			}
			if n > 0 {
				v.add(d, d.LastUsedAt)
			} else {
				v.remove(d, d.LastUsedAt)
			}
		}
	}
}

// bucket is d's spec bucket, made when create is set.
func (r *registry) bucket(d *dev, create bool) *fitBucket {
	i := d.Platform.Index()
	if i < 0 {
		return &fitBucket{} // an unknown platform is indexed nowhere
	}
	k := fitKey{d.Model, d.OSVersion, d.ImageTag, d.Mode}
	b := r.fits[i][k]
	if b == nil && create {
		b = &fitBucket{spec: d.spec()}
		r.fits[i][k] = b
	}
	return b
}

// buckets calls f for each spec of w's platform that a device fitting w
// could have.
func (r *registry) buckets(w core.Want, cat driver.Catalog, f func(b *fitBucket)) {
	i := w.Platform.Index()
	if i < 0 {
		return
	}
	for _, b := range r.fits[i] {
		if core.Fits(b.spec, w, cat) {
			f(b)
		}
	}
}

// mostRecent is the most recently used idle device in state s (ready or
// shutdown) that fits w.
func (r *registry) mostRecent(s contract.DeviceState, w core.Want, cat driver.Catalog) *dev {
	var best *dev
	r.buckets(w, cat, func(b *fitBucket) {
		set := &b.ready
		if s == contract.DeviceShutdown {
			set = &b.shutdown
		}
		if d := set.last(); d != nil && (best == nil || later(d, best)) {
			best = d
		}
	})
	return best
}

func later(a, b *dev) bool {
	if a.LastUsedAt != b.LastUsedAt {
		return a.LastUsedAt > b.LastUsedAt
	}
	return a.ID > b.ID
}

// soonestClean is the device being cleaned that fits w and began first.
func (r *registry) soonestClean(w core.Want, cat driver.Catalog) *dev {
	var best *dev
	r.buckets(w, cat, func(b *fitBucket) {
		if d := b.reclaiming.first(); d != nil && (best == nil || d.StateSince < best.StateSince ||
			(d.StateSince == best.StateSince && d.ID < best.ID)) {
			best = d
		}
	})
	return best
}

// leastRecent is the least recently used idle, unstuck device in state s of
// platform p (of any platform when anyPlatform), other than except.
func (r *registry) leastRecent(s contract.DeviceState, p contract.Platform, anyPlatform bool, except string) *dev {
	var best *dev
	for _, pl := range contract.Platforms() {
		if pl != p && !anyPlatform {
			continue
		}
		v := r.victims[victimKey{s, pl}]
		if v == nil {
			continue
		}
		for i := 0; i < v.len() && i < 2; i++ { // at most one is except
			d := v.items[i]
			if d.ID == except {
				continue
			}
			if best == nil || earlier(d, best) {
				best = d
			}
			break
		}
	}
	return best
}

func earlier(a, b *dev) bool {
	if a.LastUsedAt != b.LastUsedAt {
		return a.LastUsedAt < b.LastUsedAt
	}
	return a.ID < b.ID
}

// idleReady lists idle ready devices of platform p, most recently used first.
func (r *registry) idleReady(p contract.Platform) []*dev {
	v := r.victims[victimKey{contract.DeviceReady, p}]
	var out []*dev
	if v != nil {
		for i := v.len() - 1; i >= 0; i-- {
			out = append(out, v.items[i])
		}
	}
	return out
}

// byState counts devices per state.
func (r *registry) byState() map[contract.DeviceState]int {
	out := make(map[contract.DeviceState]int, len(r.states))
	for s, n := range r.states {
		if n > 0 {
			out[s] = n
		}
	}
	return out
}

// each calls f for every device, oldest first, until f returns false.
func (r *registry) each(f func(d *dev) bool) {
	for el := r.order.Front(); el != nil; el = el.Next() {
		if !f(el.Value.(*dev)) {
			return
		}
	}
}

// recount is what the counts and indexes would hold if built from scratch:
// the reference the property test checks update against.
func (r *registry) recount() (core.Usage, core.PerPlatform) {
	slots := make([]core.Slot, 0, len(r.byID))
	var warm core.PerPlatform
	for _, d := range r.byID {
		slots = append(slots, d.slot())
		if d.State == contract.DeviceReady && d.claim == claimNone {
			warm.Add(d.Platform, 1)
		}
	}
	return core.Measure(r.limits, slots), warm
}

// useOrder is a set of devices ordered by a time key (last use, or when a
// clean began), then id: a sorted slice, so the oldest and the newest are
// at hand and a change costs a binary search and a copy.
type useOrder struct {
	items []*dev
	keys  []int64
}

func (o *useOrder) len() int { return len(o.items) }

func (o *useOrder) first() *dev {
	if len(o.items) == 0 {
		return nil
	}
	return o.items[0]
}

func (o *useOrder) last() *dev {
	if len(o.items) == 0 {
		return nil
	}
	return o.items[len(o.items)-1]
}

func (o *useOrder) search(d *dev, key int64) int {
	return sort.Search(len(o.items), func(i int) bool {
		return o.keys[i] > key || (o.keys[i] == key && o.items[i].ID >= d.ID)
	})
}

func (o *useOrder) add(d *dev, key int64) {
	i := o.search(d, key)
	o.items = append(o.items, nil)
	o.keys = append(o.keys, 0)
	copy(o.items[i+1:], o.items[i:])
	copy(o.keys[i+1:], o.keys[i:])
	o.items[i], o.keys[i] = d, key
}

func (o *useOrder) remove(d *dev, key int64) {
	i := o.search(d, key)
	if i == len(o.items) || o.items[i] != d {
		panic("leasing: device index out of step with its device " + d.ID) // a bug in update, not a runtime condition
	}
	copy(o.items[i:], o.items[i+1:])
	copy(o.keys[i:], o.keys[i+1:])
	o.items[len(o.items)-1] = nil
	o.items, o.keys = o.items[:len(o.items)-1], o.keys[:len(o.keys)-1]
}
