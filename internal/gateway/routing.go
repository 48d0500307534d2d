package gateway

import (
	"maps"
	"slices"
	"sort"

	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/core"
)

// Ask is what routing needs of a lease request: what it asks for, for how
// long, and whether it may download a runtime.
type Ask struct {
	Platform contract.Platform
	// Model is an exact model name or one of its aliases; Class, when
	// Model is empty, any model of that class (phone when both are
	// empty).
	Model string
	Class contract.DeviceClass
	// OS is the request's osVersion, parsed.
	OS contract.OSVersionSpec
	// ImageTag is the Android system image tag asked for; "" takes any.
	ImageTag string
	// Mode is slim or full; "" takes each worker's own default.
	Mode          contract.DeviceMode
	TTLMs         int64
	AllowDownload bool
}

// askOf is the Ask for a request of spec, whose lease lives ttlMs.
func askOf(spec contract.RequestSpec, ttlMs int64, allowDownload bool) (Ask, error) {
	os, err := contract.ParseOSVersion(spec.OSVersion)
	if err != nil {
		return Ask{}, err
	}
	return Ask{Platform: spec.Platform, Model: spec.Model, Class: spec.Class, OS: os, ImageTag: spec.ImageTag, Mode: spec.Mode,
		TTLMs: ttlMs, AllowDownload: allowDownload}, nil
}

// spec is the request spec a routes, as the queue keeps it.
func (a Ask) spec() contract.RequestSpec {
	return contract.RequestSpec{Platform: a.Platform, Model: a.Model, Class: a.Class, OSVersion: a.OS.Raw, ImageTag: a.ImageTag, Mode: a.Mode}
}

// Route is where a request goes: the worker, the model by that worker's
// own name, and why that worker (request.dispatched's reason).
type Route struct {
	WorkerID string
	Model    string
	Reason   string
	// DeviceID is, for a warm hit, the idle ready device it counts on.
	DeviceID string
}

// The reasons a route was chosen.
const (
	ReasonWarmHit      = "warm-hit"
	ReasonFreeCapacity = "free-capacity"
	ReasonDownload     = "download"
)

// candidate is one worker a request could go to, with what the stages so
// far learned of it.
type candidate struct {
	v *contract.WorkerView
	// models are the worker's models that serve the ask, by its own
	// names; download is set when only a download would give one of them
	// the runtime asked for.
	models   []string
	download bool
}

// A stage is one step of a routing policy: it keeps the candidates that
// pass it, or ranks them. A stage that keeps none ends the route with no
// worker (the request waits), except a preference, which keeps all when
// none is preferred.
type stage struct {
	name  string
	apply func(a Ask, cs []candidate) []candidate
	// prefer: a stage whose empty answer means "none is better", not
	// "none can".
	prefer bool
}

// warmThenFree is the routing policy warm-then-free, in order.
var warmThenFree = []stage{
	{name: "takes-requests", apply: takesRequests},
	{name: "can-serve", apply: canServe},
	{name: "healthy", apply: healthy},
	{name: "has-runtime", apply: hasRuntime, prefer: true},
	{name: "warm-hit", apply: warmHit, prefer: true},
	{name: "free-slot", apply: freeSlot},
	{name: "ram-room", apply: ramRoom},
	{name: "ram-budget", apply: underRAMBudget, prefer: true},
	{name: "free-capacity", apply: mostFree},
}

// route decides a over views as the gateway does: through a routeIndex
// of them (routeindex.go), which implements policy, warmThenFree. It
// returns the worker the request goes to now, or false when none can take
// it now (it waits, if the fast-fail table let it). Ties go to the lowest
// worker id.
func route(policy []stage, a Ask, views []*contract.WorkerView) (Route, bool) {
	_ = policy // the stages define the policy; the index is its fast form
	return newRouteIndex(views).route(a, overlay{})
}

// takesRequests keeps the connected, undrained workers whose
// lease.maxTtlMs admits the TTL asked.
func takesRequests(a Ask, cs []candidate) []candidate {
	return keep(cs, func(c candidate) bool { return takes(a, c.v) })
}

// takes reports whether v takes a request of a: connected, not drained,
// and its lease.maxTtlMs admits the TTL asked.
func takes(a Ask, v *contract.WorkerView) bool {
	return v.Connection == contract.WorkerConnected && !v.Drained && (a.TTLMs == 0 || v.MaxTTLMs == 0 || a.TTLMs <= v.MaxTTLMs)
}

// canServe keeps the workers whose catalog has a model for the ask with a
// runtime that serves its OS version (or, for a request allowed to
// download, one it can download), and notes those models.
func canServe(a Ask, cs []candidate) []candidate {
	var out []candidate
	for _, c := range cs {
		cat, ok := catalogOf(c.v, a.Platform)
		if !ok {
			continue
		}
		c.models, c.download = servingModels(a, cat, c.v.DownloadPolicy)
		if len(c.models) > 0 {
			out = append(out, c)
		}
	}
	return out
}

// servingModels are cat's models that serve a, by cat's names: those with
// an installed runtime that fits first (with an image of the tag asked,
// when one is); else, when the worker would download one for a (an exact
// version, never a range), those the catalog lists a downloadable runtime
// for, or, for a tag, those with a fitting runtime whose image of that tag
// the worker can download.
func servingModels(a Ask, cat contract.Catalog, policy string) (models []string, download bool) {
	named := modelsAsked(a, cat)
	fits := func(rt string) bool { return a.OS.Matches(rt) && (a.ImageTag == "" || cat.HasImage(rt, a.ImageTag)) }
	for _, m := range named {
		if slices.ContainsFunc(cat.ModelRuntimes[m], fits) {
			models = append(models, m)
		}
	}
	if len(models) > 0 || !core.DownloadAllowed(policy, a.AllowDownload) || a.OS.IsRange() {
		return models, false
	}
	if slices.ContainsFunc(cat.Downloadable, a.OS.Matches) {
		return named, len(named) > 0
	}
	if a.ImageTag != "" && a.Platform == contract.PlatformAndroid {
		for _, m := range named {
			if slices.ContainsFunc(cat.ModelRuntimes[m], a.OS.Matches) {
				models = append(models, m)
			}
		}
		return models, len(models) > 0
	}
	return nil, false
}

// downloadPolicies are the values of a worker's downloads.policy.
var downloadPolicies = []string{"never", "on-request", "always"}

// modelsAsked are cat's models the ask names, as the worker's engine reads
// the request (core.WantOf, core.ClassModels: one matcher for both modes):
// the model, by its name or one of its aliases in any case, or the models
// of the class asked (a phone when neither is given) that the worker picks
// from, in its order.
func modelsAsked(a Ask, cat contract.Catalog) []string {
	w := wantOf(a, cat)
	if w.Model != "" {
		if slices.Contains(cat.Models, w.Model) {
			return []string{w.Model}
		}
		return nil
	}
	return core.ClassModels(w, cat, nil)
}

// wantOf is the ask as the worker's engine settles it.
func wantOf(a Ask, cat contract.Catalog) core.Want {
	return core.WantOf(a.spec(), cat)
}

func catalogOf(v *contract.WorkerView, p contract.Platform) (contract.Catalog, bool) {
	for _, c := range v.Catalog {
		if c.Platform == p {
			return c, true
		}
	}
	return contract.Catalog{}, false
}

// healthy keeps the workers whose daemon says it is running.
func healthy(_ Ask, cs []candidate) []candidate {
	return keep(cs, func(c candidate) bool { return isHealthy(c.v) })
}

func isHealthy(v *contract.WorkerView) bool { return v.Health == "running" }

// hasRuntime prefers the workers that have the runtime installed over
// those that would have to download it.
func hasRuntime(_ Ask, cs []candidate) []candidate {
	return keep(cs, func(c candidate) bool { return !c.download })
}

// warmHit keeps the workers with an unleased ready device that fits the
// ask: granting it takes no slot and no boot.
func warmHit(a Ask, cs []candidate) []candidate {
	return keep(cs, func(c candidate) bool { _, id := warmFit(a, c); return id != "" })
}

// warmFit is the model and id of c's first unleased ready device that
// fits, or "", "". A device fits the mode as on the worker: the mode a new
// device for the ask would have on its runtime, by the worker's catalog
// (its default mode and the runtimes it can slim).
func warmFit(a Ask, c candidate) (model, id string) {
	cat, _ := catalogOf(c.v, a.Platform)
	for _, d := range c.v.Devices {
		if warmFits(a, cat, c.models, d) {
			return d.Spec.Model, d.ID
		}
	}
	return "", ""
}

// warmFitHeld is warmFit over v with holds hs applied (heldView), for a
// worker whose models serving a are models, reading only v's devices at
// indexes warm (its ready, unleased ones; all of them when nil). Holds of
// warm devices only leave those devices out, which needs no copy of the
// view: a decision reads many views with holds on them while their grants
// are on the way, and copies of their devices would cost more than the
// reading.
func warmFitHeld(a Ask, v *contract.WorkerView, models []string, hs []hold, warm []int) (model, id string) {
	if warm == nil || slices.ContainsFunc(hs, func(h hold) bool { return h.device == "" }) {
		// A slot taken may evict a warm device (evictFor).
		return warmFit(a, candidate{v: heldView(v, hs), models: models})
	}
	cat, _ := catalogOf(v, a.Platform)
	for _, i := range warm {
		d := v.Devices[i]
		if warmFits(a, cat, models, d) && !slices.ContainsFunc(hs, func(h hold) bool { return h.device == d.ID }) {
			return d.Spec.Model, d.ID
		}
	}
	return "", ""
}

// warmFits reports whether d, a device of a worker whose catalog of the
// platform asked is cat and whose models serving a are models, is a warm
// hit for a.
func warmFits(a Ask, cat contract.Catalog, models []string, d contract.Device) bool {
	return d.State == contract.DeviceReady && d.LeaseID == "" && d.Spec.Platform == a.Platform &&
		slices.Contains(models, d.Spec.Model) && a.OS.Matches(d.Spec.OSVersion) &&
		(a.ImageTag == "" || d.Spec.ImageTag == a.ImageTag) && d.Spec.Mode == cat.ModeOn(a.Mode, d.Spec.OSVersion)
}

// A hold is what a dispatch takes of its worker's view until the view
// shows it: the warm device it counts on, or one running slot of its
// platform. Routing reads a view with its holds applied, so two requests
// sent to a worker before its view catches up never count on the same
// device or slot (the second would bounce, or, worse, be served first).
type hold struct {
	platform contract.Platform
	device   string // the warm device, or "" for a slot
}

// heldView is v with holds applied: each held device leased, and one less
// idle ready device or one more running slot for each hold; a slot taken
// on a full worker also takes the idle device the worker would shut down
// for it (evictFor). v is not changed.
func heldView(v *contract.WorkerView, holds []hold) *contract.WorkerView {
	if len(holds) == 0 {
		return v
	}
	out := *v
	out.Devices = slices.Clone(v.Devices)
	if v.Capacity != nil {
		c := *v.Capacity
		c.Platforms = maps.Clone(v.Capacity.Platforms)
		out.Capacity = &c
	}
	for _, h := range holds {
		if h.device == "" {
			evictFor(&out, h.platform)
		}
		warm, running := 0, 1
		if h.device != "" {
			warm, running = 1, 0
			for i := range out.Devices {
				if out.Devices[i].ID == h.device {
					out.Devices[i].LeaseID = "held"
				}
			}
		}
		if c := out.Capacity; c != nil {
			pc := c.Platforms[h.platform]
			pc.Warm, pc.Running = max(pc.Warm-warm, 0), pc.Running+running
			c.Platforms[h.platform] = pc
			c.Global.Warm, c.Global.Running = max(c.Global.Warm-warm, 0), c.Global.Running+running
		}
	}
	return &out
}

// evictFor marks, in v (a copy heldView owns), the idle ready device a
// worker would shut down to start a device of platform p when it has no
// running slot free, as its engine picks it: the least recently used of p,
// or of any platform when only the machine-wide limit binds. No warm hit
// counts on that device then: the slot the hold takes is its.
func evictFor(v *contract.WorkerView, p contract.Platform) {
	c := v.Capacity
	if c == nil {
		return
	}
	pc, g := c.Platforms[p], c.Global
	platformFull := pc.MaxRunning-pc.Running-pc.Reserved <= 0
	if !platformFull && g.MaxRunning-g.Running-g.Reserved > 0 {
		return // a free slot: nothing is shut down
	}
	victim := -1
	for i, d := range v.Devices {
		if d.State != contract.DeviceReady || d.LeaseID != "" || (platformFull && d.Spec.Platform != p) {
			continue
		}
		if victim < 0 || d.LastUsedAt < v.Devices[victim].LastUsedAt {
			victim = i
		}
	}
	if victim >= 0 {
		v.Devices[victim].LeaseID = "held"
	}
}

// free is how many running slots of platform p a worker could start a
// device in now: its free ones, and its idle ready devices' (which it
// would shut down to make room), on the platform and machine-wide.
func free(v *contract.WorkerView, p contract.Platform) int {
	if v.Capacity == nil {
		return 0
	}
	pc, g := v.Capacity.Platforms[p], v.Capacity.Global
	return min(pc.MaxRunning-pc.Running-pc.Reserved+pc.Warm, g.MaxRunning-g.Running-g.Reserved+g.Warm)
}

// freeSlot keeps the workers with a running slot to start a device in.
func freeSlot(a Ask, cs []candidate) []candidate {
	return keep(cs, func(c candidate) bool { return free(c.v, a.Platform) > 0 })
}

// ramRoom keeps the workers whose RAM budget has room for a new device of
// the platform asked, or that have an idle device to make room with: a
// worker at its budget with neither refuses the request (NO_CAPACITY; its
// engine deletes an idle device of any platform to make room, and waits
// otherwise), so routing does not send it one. A worker's device that
// only looks idle (a boot in flight for another request) makes it send
// one the worker may still refuse: that is a bounce (stale.go).
func ramRoom(a Ask, cs []candidate) []candidate {
	return keep(cs, func(c candidate) bool { return hasRAMRoom(c.v, a.Platform) })
}

// hasRAMRoom reports whether v's RAM budget has room for a new device of
// platform p, or v has an idle device to make room with.
func hasRAMRoom(v *contract.WorkerView, p contract.Platform) bool {
	return v.Capacity == nil || !v.Capacity.Platforms[p].AtRAMBudget || slices.ContainsFunc(v.Devices, idle)
}

// idle reports whether a worker's engine may delete d to make room in its
// RAM budget: an unleased device that is ready, shut down or quarantined.
func idle(d contract.Device) bool {
	switch d.State {
	case contract.DeviceReady, contract.DeviceShutdown, contract.DeviceQuarantined:
		return d.LeaseID == ""
	}
	return false
}

// underRAMBudget prefers the workers not over their RAM budget.
func underRAMBudget(_ Ask, cs []candidate) []candidate {
	return keep(cs, func(c candidate) bool { return !overRAMBudget(c.v) })
}

func overRAMBudget(v *contract.WorkerView) bool {
	return v.Capacity != nil && v.Capacity.RAMBudget != nil && v.Capacity.RAMBudget.OverLimit
}

// mostFree ranks the workers by free running slots, most first; the sort
// is stable, so ties keep the lowest worker id first.
func mostFree(a Ask, cs []candidate) []candidate {
	out := slices.Clone(cs)
	sort.SliceStable(out, func(i, j int) bool { return free(out[i].v, a.Platform) > free(out[j].v, a.Platform) })
	return out
}

func keep(cs []candidate, ok func(candidate) bool) []candidate {
	var out []candidate
	for _, c := range cs {
		if ok(c) {
			out = append(out, c)
		}
	}
	return out
}

// assess is the fast-fail table over views, as the gateway reads it
// (routeIndex.assess): what a request gets at once, waiting or not, when
// the fleet as known cannot serve it at all; nil when it may be routed or
// wait.
func assess(a Ask, views []*contract.WorkerView) *contract.Error {
	return newRouteIndex(views).assess(a)
}

// fastFail is the fast-fail table's answer for a, given whether any
// connected worker takes it, any known worker has its platform, a model
// it names, and a runtime that serves it (or one it may download).
func fastFail(a Ask, takes, platform, model, serve bool) *contract.Error {
	switch {
	case !takes:
		return contract.Errorf(contract.CodeNoCapacity, "no worker of this gateway takes requests now").With("reason", string(contract.RejectNoWorker))
	case !platform:
		return contract.Errorf(contract.CodeNoDriver, "no worker of this gateway serves %s", a.Platform).With("platform", a.Platform)
	case !model:
		what := a.Model
		if what == "" {
			what = "a " + string(wantOf(a, contract.Catalog{}).Class)
		}
		return contract.Errorf(contract.CodeUnknownModel, "no worker of this gateway has %s on %s", what, a.Platform).With("platform", a.Platform)
	case !serve:
		return contract.Errorf(contract.CodeRuntimeMissing, "no worker of this gateway has a %s runtime that serves the request", a.Platform).
			With("platform", a.Platform).With("downloadable", false)
	}
	return nil
}
