package gateway

import (
	"cmp"
	"math"
	"slices"

	"github.com/simlock/simlock/internal/contract"
)

// routeIndex is what the routing policy warmThenFree reads of the fleet's
// views, kept as each view changes, so that a decision reads the
// candidates for its ask, not every device of every view.
//
// Of each worker it keeps a copy of its view (the slices shared: a view's
// catalog, devices and capacity are replaced when it is read again, never
// changed in place) and where its warm (ready, unleased) devices are. Of each ask routed lately (askSet, made at the
// ask's first decision, kept current as views change after) it keeps each
// worker's standing: whether it takes the ask, has its platform, a model
// it names, a runtime that serves it (what the fast-fail table counts),
// the models that serve it, its first warm device that fits and its free
// slots. The workers that can serve the ask (connected, undrained,
// healthy, a model served) are in two partitions, those with the runtime
// installed and those that would download it (the has-runtime
// preference); each lists its members by id, those with a warm fit by id
// (the warm-hit stage: the lowest id wins), and those with a free slot and
// RAM room ordered as the last stages rank them (not over the RAM budget
// first, then most free, then lowest id).
//
// A decision applies the holds of dispatches in flight, and the workers it
// passes over (overlay), to the candidates it examines only: holds only
// take from a worker (a device, a slot), so the first candidate in order
// that still fits with its holds applied, or, for free slots, the best
// found before the next one's unheld rank is worse, is the full scan's
// choice (routescan_test.go is that scan, the oracle).
//
// A routeIndex is not safe for concurrent use; the fleet keeps one under
// its lock.
type routeIndex struct {
	workers map[string]*ixWorker
	// ttls counts the workers' lease.maxTtlMs values but 0: an ask's TTL
	// is keyed as the least of them that admits it, which admits the
	// same workers.
	ttls map[int64]int
	sets map[askKey]*askSet
	tick uint64
}

// maxAskSets bounds the asks indexed; the least recently used goes first.
const maxAskSets = 64

type ixWorker struct {
	v contract.WorkerView
	// static counts changes of what an ask's standing reads of the view
	// but its devices and capacity: connection, drain, health, TTL cap,
	// download policy, catalog.
	static uint64
	warm   []int // indexes in v.Devices of the ready, unleased devices
}

// askKey is what routing reads of an ask, its TTL as the least lease
// maxTtlMs that admits it (ttlKey).
type askKey struct {
	platform contract.Platform
	model    string
	class    contract.DeviceClass
	os       string
	imageTag string
	mode     contract.DeviceMode
	ttl      int64
	download bool
}

type askSet struct {
	a       Ask // its TTLMs the key's
	used    uint64
	members map[string]*standing
	// How many known workers take the ask, have its platform, a model it
	// names, a runtime that serves it: the fast-fail table.
	takes, platform, model, serve int
	// parts are the workers that can serve the ask: [0] with the runtime
	// installed, [1] only by a download.
	parts    [2]partition
	building bool
}

// standing is one worker's for one ask.
type standing struct {
	static                                  uint64
	takes, platform, model, serve, eligible bool
	models                                  []string
	download                                bool
	// Of its devices and capacity, for an eligible worker: its first warm
	// device that fits, its free slots, whether it has a free slot and
	// RAM room, and whether it is over its RAM budget.
	warmModel, warmDevice string
	free                  int
	roomy, over           bool
}

type partition struct {
	ids  []string
	warm []string
	free []freeItem
}

// freeItem is a worker with a free slot and RAM room, ranked.
type freeItem struct {
	over bool
	free int
	id   string
}

func (x freeItem) compare(y freeItem) int {
	if x.over != y.over {
		if x.over {
			return 1
		}
		return -1
	}
	if c := cmp.Compare(y.free, x.free); c != 0 {
		return c
	}
	return cmp.Compare(x.id, y.id)
}

// newRouteIndex indexes views.
func newRouteIndex(views []*contract.WorkerView) *routeIndex {
	ix := &routeIndex{workers: map[string]*ixWorker{}, ttls: map[int64]int{}, sets: map[askKey]*askSet{}}
	for _, v := range views {
		ix.put(v)
	}
	return ix
}

// put indexes v, a worker's view, in place of what the index had of that
// worker.
func (ix *routeIndex) put(v *contract.WorkerView) {
	e := &ixWorker{v: *v}
	for i, d := range v.Devices {
		if d.State == contract.DeviceReady && d.LeaseID == "" {
			e.warm = append(e.warm, i)
		}
	}
	if old := ix.workers[v.ID]; old != nil {
		e.static = old.static
		if !sameStanding(&old.v, v) {
			e.static++
		}
		ix.countTTL(old.v.MaxTTLMs, -1)
	}
	ix.countTTL(v.MaxTTLMs, 1)
	ix.workers[v.ID] = e
	for _, s := range ix.sets {
		s.update(e)
	}
}

// remove forgets a worker.
func (ix *routeIndex) remove(id string) {
	old := ix.workers[id]
	if old == nil {
		return
	}
	ix.countTTL(old.v.MaxTTLMs, -1)
	delete(ix.workers, id)
	for _, s := range ix.sets {
		if st := s.members[id]; st != nil {
			s.unlist(id, st)
			delete(s.members, id)
		}
	}
}

func (ix *routeIndex) countTTL(ttl int64, n int) {
	if ttl == 0 {
		return
	}
	ix.ttls[ttl] += n
	if ix.ttls[ttl] <= 0 {
		delete(ix.ttls, ttl)
	}
}

// sameStanding reports whether what a standing reads of a view but its
// devices and capacity is the same in a and b.
func sameStanding(a, b *contract.WorkerView) bool {
	return a.Connection == b.Connection && a.Drained == b.Drained && a.Health == b.Health && a.MaxTTLMs == b.MaxTTLMs &&
		a.DownloadPolicy == b.DownloadPolicy && len(a.Catalog) == len(b.Catalog) && (len(a.Catalog) == 0 || &a.Catalog[0] == &b.Catalog[0])
}

// ttlKey is the least lease.maxTtlMs of a worker that admits ttl (0 for
// no TTL; MaxInt64 when none does): asks of either admit the same workers.
func (ix *routeIndex) ttlKey(ttl int64) int64 {
	if ttl == 0 {
		return 0
	}
	k := int64(math.MaxInt64)
	for m := range ix.ttls {
		if m >= ttl && m < k {
			k = m
		}
	}
	return k
}

// set is a's askSet, made now if a was not routed lately.
func (ix *routeIndex) set(a Ask) *askSet {
	k := askKey{a.Platform, a.Model, a.Class, a.OS.Raw, a.ImageTag, a.Mode, ix.ttlKey(a.TTLMs), a.AllowDownload}
	ix.tick++
	if s := ix.sets[k]; s != nil {
		s.used = ix.tick
		return s
	}
	if len(ix.sets) >= maxAskSets {
		var lru askKey
		var oldest uint64 = math.MaxUint64
		for k, s := range ix.sets {
			if s.used < oldest {
				lru, oldest = k, s.used
			}
		}
		delete(ix.sets, lru)
	}
	a.TTLMs = k.ttl
	s := &askSet{a: a, used: ix.tick, members: make(map[string]*standing, len(ix.workers)), building: true}
	for _, e := range ix.workers {
		s.update(e)
	}
	s.building = false
	for i := range s.parts {
		p := &s.parts[i]
		slices.Sort(p.ids)
		slices.Sort(p.warm)
		slices.SortFunc(p.free, freeItem.compare)
	}
	ix.sets[k] = s
	return s
}

// update takes e's view into its standing for s's ask.
func (s *askSet) update(e *ixWorker) {
	id := e.v.ID
	old := s.members[id]
	var st standing
	if old != nil && old.static == e.static {
		st = *old
	} else {
		st = s.standingOf(e)
	}
	s.measure(&st, e)
	if old != nil {
		if old.static == st.static && (old.warmDevice == "") == (st.warmDevice == "") && old.roomy == st.roomy &&
			old.over == st.over && old.free == st.free {
			*old = st // counted and listed as it was
			return
		}
		s.unlist(id, old)
	}
	s.list(id, &st)
	s.members[id] = &st
}

// standingOf is e's standing for s's ask, but what its devices and
// capacity say (measure): the stages takes-requests, can-serve and
// healthy, and what the fast-fail table counts.
func (s *askSet) standingOf(e *ixWorker) standing {
	v := &e.v
	st := standing{static: e.static, takes: takes(s.a, v)}
	if cat, ok := catalogOf(v, s.a.Platform); ok {
		st.platform = true
		st.model = len(modelsAsked(s.a, cat)) > 0
		st.models, st.download = servingModels(s.a, cat, v.DownloadPolicy)
		st.serve = len(st.models) > 0
	}
	st.eligible = st.takes && st.serve && isHealthy(v)
	return st
}

// measure sets what st reads of e's devices and capacity.
func (s *askSet) measure(st *standing, e *ixWorker) {
	st.warmModel, st.warmDevice, st.free, st.roomy, st.over = "", "", 0, false, false
	if !st.eligible {
		return
	}
	v, p := &e.v, s.a.Platform
	cat, _ := catalogOf(v, p)
	for _, i := range e.warm {
		if d := v.Devices[i]; warmFits(s.a, cat, st.models, d) {
			st.warmModel, st.warmDevice = d.Spec.Model, d.ID
			break
		}
	}
	st.free = free(v, p)
	st.roomy = st.free > 0 && hasRAMRoom(v, p)
	st.over = overRAMBudget(v)
}

func (s *askSet) list(id string, st *standing) {
	s.count(st, 1)
	if !st.eligible {
		return
	}
	p := &s.parts[partOf(st)]
	if s.building {
		p.ids = append(p.ids, id)
		if st.warmDevice != "" {
			p.warm = append(p.warm, id)
		}
		if st.roomy {
			p.free = append(p.free, freeItem{st.over, st.free, id})
		}
		return
	}
	p.ids = insertSorted(p.ids, id, cmp.Compare[string])
	if st.warmDevice != "" {
		p.warm = insertSorted(p.warm, id, cmp.Compare[string])
	}
	if st.roomy {
		p.free = insertSorted(p.free, freeItem{st.over, st.free, id}, freeItem.compare)
	}
}

func (s *askSet) unlist(id string, st *standing) {
	s.count(st, -1)
	if !st.eligible {
		return
	}
	p := &s.parts[partOf(st)]
	p.ids = removeSorted(p.ids, id, cmp.Compare[string])
	if st.warmDevice != "" {
		p.warm = removeSorted(p.warm, id, cmp.Compare[string])
	}
	if st.roomy {
		p.free = removeSorted(p.free, freeItem{st.over, st.free, id}, freeItem.compare)
	}
}

func (s *askSet) count(st *standing, n int) {
	s.takes += b2i(st.takes) * n
	s.platform += b2i(st.platform) * n
	s.model += b2i(st.model) * n
	s.serve += b2i(st.serve) * n
}

func partOf(st *standing) int { return b2i(st.download) }

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

func insertSorted[T any](xs []T, x T, compare func(a, b T) int) []T {
	i, _ := slices.BinarySearchFunc(xs, x, compare)
	return slices.Insert(xs, i, x)
}

func removeSorted[T any](xs []T, x T, compare func(a, b T) int) []T {
	if i, ok := slices.BinarySearchFunc(xs, x, compare); ok {
		return slices.Delete(xs, i, i+1)
	}
	return xs
}

// overlay is what a decision applies to the candidates it examines: the
// workers it passes over (busy in the pass, stale for the need, skipped by
// the waiter), and the holds on a worker's view.
type overlay struct {
	skip  func(id string) bool
	holds func(id string) []hold
}

func (o overlay) skips(id string) bool { return o.skip != nil && o.skip(id) }

func (o overlay) holdsOn(e *ixWorker) []hold {
	if o.holds == nil {
		return nil
	}
	return o.holds(e.v.ID)
}

// route is warmThenFree's decision for a, with o applied: the worker a
// request goes to now, or false when none can take it now.
func (ix *routeIndex) route(a Ask, o overlay) (Route, bool) {
	s := ix.set(a)
	// has-runtime: the workers that would download the runtime only when
	// none that has it may be asked.
	part := &s.parts[0]
	if !slices.ContainsFunc(part.ids, func(id string) bool { return !o.skips(id) }) {
		part = &s.parts[1]
	}
	// warm-hit: the lowest id with a warm device that fits, held or not.
	for _, id := range part.warm {
		if o.skips(id) {
			continue
		}
		st, e := s.members[id], ix.workers[id]
		if hs := o.holdsOn(e); len(hs) > 0 {
			model, dev := warmFitHeld(s.a, &e.v, st.models, hs, e.warm)
			if dev == "" {
				continue
			}
			return Route{WorkerID: id, Model: model, Reason: ReasonWarmHit, DeviceID: dev}, true
		}
		return Route{WorkerID: id, Model: st.warmModel, Reason: ReasonWarmHit, DeviceID: st.warmDevice}, true
	}
	// free-slot, ram-room, ram-budget, free-capacity: in rank order;
	// holds only lower a worker's rank, so the best found is the best once
	// the next one's unheld rank is below it.
	var best freeItem
	found := false
	for _, it := range part.free {
		if found && it.compare(best) >= 0 {
			break
		}
		if o.skips(it.id) {
			continue
		}
		e := ix.workers[it.id]
		if hs := o.holdsOn(e); len(hs) > 0 {
			hv := heldView(&e.v, hs)
			if it.free = free(hv, s.a.Platform); it.free <= 0 || !hasRAMRoom(hv, s.a.Platform) {
				continue
			}
		}
		if !found || it.compare(best) < 0 {
			best, found = it, true
		}
	}
	if !found {
		return Route{}, false
	}
	st := s.members[best.id]
	r := Route{WorkerID: best.id, Model: st.models[0], Reason: ReasonFreeCapacity}
	if st.download {
		r.Reason = ReasonDownload
	}
	return r, true
}

// assess is the fast-fail table for a over the known workers.
func (ix *routeIndex) assess(a Ask) *contract.Error {
	s := ix.set(a)
	return fastFail(a, s.takes > 0, s.platform > 0, s.model > 0, s.serve > 0)
}
