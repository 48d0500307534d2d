package gateway

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/simlock/simlock/internal/contract"
)

// fleetGen makes random fleets and asks from a seed: catalogs of both
// platforms with aliases, classes, runtimes, downloadable runtimes, images
// and slim runtimes; devices in every state and mode; capacities with
// reservations, warm counts and RAM budgets; drained, disconnected,
// unhealthy workers, TTL caps and download policies.
type fleetGen struct{ r *rand.Rand }

func pick[T any](g fleetGen, xs ...T) T { return xs[g.r.IntN(len(xs))] }

func (g fleetGen) some(xs ...string) []string {
	var out []string
	for _, x := range xs {
		if g.r.IntN(3) > 0 {
			out = append(out, x)
		}
	}
	return out
}

func (g fleetGen) catalog(p contract.Platform) contract.Catalog {
	models, runtimes, classes := []string{"iPhone 17", "iPhone 16", "iPad Air"}, []string{"26.1", "18.6", "17.5"},
		map[string]contract.DeviceClass{"iPhone 17": "phone", "iPhone 16": "phone", "iPad Air": "tablet"}
	if p == contract.PlatformAndroid {
		models, runtimes, classes = []string{"Pixel 9", "Pixel Tablet"}, []string{"36", "35"},
			map[string]contract.DeviceClass{"Pixel 9": "phone", "Pixel Tablet": "tablet"}
	}
	c := contract.Catalog{Platform: p, Models: g.some(models...), Runtimes: g.some(runtimes...), ModelRuntimes: map[string][]string{},
		ModelAliases: map[string][]string{}, ModelClasses: map[string]contract.DeviceClass{}, ClassDefaults: map[contract.DeviceClass][]string{},
		Downloadable: g.some(runtimes...), SlimRuntimes: g.some(runtimes...), DefaultMode: pick(g, "", contract.DeviceModeSlim, contract.DeviceModeFull)}
	for _, m := range c.Models {
		c.ModelRuntimes[m] = g.some(c.Runtimes...)
		c.ModelClasses[m] = classes[m]
		if g.r.IntN(2) == 0 {
			c.ClassDefaults[classes[m]] = append(c.ClassDefaults[classes[m]], m)
		}
	}
	if slices.Contains(c.Models, "iPhone 17") {
		c.ModelAliases["iPhone 17"] = []string{"iphone-17"}
	}
	for _, rt := range c.Runtimes {
		for _, tag := range g.some("google_apis", "google_apis_playstore") {
			c.Images = append(c.Images, contract.CatalogImage{Runtime: rt, Tag: tag, ABI: "x86_64"})
		}
	}
	return c
}

func (g fleetGen) capacity() *contract.Capacity {
	if g.r.IntN(10) == 0 {
		return nil
	}
	c := &contract.Capacity{Platforms: map[contract.Platform]contract.PlatformCapacity{}}
	maxG := g.r.IntN(6)
	c.Global = contract.GlobalCapacity{MaxRunning: maxG, Running: g.r.IntN(maxG + 1), Reserved: g.r.IntN(2), Warm: g.r.IntN(3)}
	for _, p := range []contract.Platform{contract.PlatformIOS, contract.PlatformAndroid} {
		if g.r.IntN(4) == 0 {
			continue
		}
		maxP := g.r.IntN(5)
		c.Platforms[p] = contract.PlatformCapacity{MaxRunning: maxP, Running: g.r.IntN(maxP + 1), Reserved: g.r.IntN(2), Warm: g.r.IntN(3),
			AtRAMBudget: g.r.IntN(3) == 0}
	}
	if g.r.IntN(3) == 0 {
		c.RAMBudget = &contract.RAMCapacity{OverLimit: g.r.IntN(2) == 0}
	}
	return c
}

func (g fleetGen) devices(id string, cats []contract.Catalog) []contract.Device {
	var out []contract.Device
	for i := range g.r.IntN(8) {
		p := pick(g, contract.PlatformIOS, contract.PlatformAndroid)
		cat := g.catalog(p)
		for _, c := range cats {
			if c.Platform == p {
				cat = c
			}
		}
		model, os := "Pixel 9", "36"
		if p == contract.PlatformIOS {
			model, os = "iPhone 16", "18.6"
		}
		if len(cat.Models) > 0 {
			model = pick(g, cat.Models...)
		}
		if len(cat.Runtimes) > 0 {
			os = pick(g, cat.Runtimes...)
		}
		d := contract.Device{ID: fmt.Sprintf("%s_d%d", id, i), LastUsedAt: int64(g.r.IntN(5)),
			State: pick(g, contract.DeviceReady, contract.DeviceReady, contract.DeviceReady, contract.DeviceLeased, contract.DeviceShutdown,
				contract.DeviceQuarantined, contract.DeviceProvisioning),
			Spec: contract.DeviceSpec{Platform: p, Model: model, OSVersion: os, Mode: pick(g, "", contract.DeviceModeSlim, contract.DeviceModeFull)}}
		if p == contract.PlatformAndroid {
			d.Spec.ImageTag = pick(g, "", "google_apis", "google_apis_playstore")
		}
		if g.r.IntN(3) == 0 {
			d.LeaseID = "lse_" + d.ID
		}
		out = append(out, d)
	}
	return out
}

func (g fleetGen) view(id string) *contract.WorkerView {
	v := &contract.WorkerView{ID: id, Connection: pick(g, contract.WorkerConnected, contract.WorkerConnected, contract.WorkerConnected,
		contract.WorkerConnected, contract.WorkerDisconnected, contract.WorkerIncompatible),
		Drained: g.r.IntN(8) == 0, Health: pick(g, "running", "running", "running", "running", "starting"),
		MaxTTLMs: pick[int64](g, 0, 3600000, 7200000), DownloadPolicy: pick(g, "", "never", "on-request", "always")}
	for _, p := range []contract.Platform{contract.PlatformIOS, contract.PlatformAndroid} {
		if g.r.IntN(3) > 0 {
			v.Catalog = append(v.Catalog, g.catalog(p))
		}
	}
	v.Capacity, v.Devices = g.capacity(), g.devices(id, v.Catalog)
	return v
}

func (g fleetGen) ask() Ask {
	a := Ask{Platform: pick(g, contract.PlatformIOS, contract.PlatformIOS, contract.PlatformAndroid),
		Class: pick[contract.DeviceClass](g, "", "", "phone", "tablet"),
		Mode:  pick(g, "", contract.DeviceModeSlim, contract.DeviceModeFull),
		TTLMs: pick[int64](g, 0, 0, 1800000, 3600000, 5000000, 9000000), AllowDownload: g.r.IntN(2) == 0}
	if a.Platform == contract.PlatformIOS {
		a.Model = pick(g, "", "", "iPhone 17", "iphone-17", "IPHONE 16", "iPad Air", "Galaxy")
		a.OS, _ = contract.ParseOSVersion(pick(g, "", "26", "26.1", "18", "18.6", ">=18 <19", "17.5", "19"))
	} else {
		a.Model = pick(g, "", "", "Pixel 9", "pixel tablet", "Galaxy")
		a.OS, _ = contract.ParseOSVersion(pick(g, "", "36", "35", "34"))
		a.ImageTag = pick(g, "", "", "google_apis", "google_apis_playstore")
	}
	if a.Model != "" {
		a.Class = ""
	}
	return a
}

// overlay is a random decision's: workers passed over, and holds (a warm
// device of the worker's, or a slot) on others.
func (g fleetGen) overlay(views []*contract.WorkerView) (overlay, map[string]bool, map[string][]hold) {
	skip, holds := map[string]bool{}, map[string][]hold{}
	for _, v := range views {
		if g.r.IntN(6) == 0 {
			skip[v.ID] = true
		}
		for range g.r.IntN(3) * g.r.IntN(2) {
			h := hold{platform: pick(g, contract.PlatformIOS, contract.PlatformAndroid)}
			if len(v.Devices) > 0 && g.r.IntN(2) == 0 {
				d := pick(g, v.Devices...)
				h = hold{platform: d.Spec.Platform, device: d.ID}
			}
			holds[v.ID] = append(holds[v.ID], h)
		}
	}
	return overlay{skip: func(id string) bool { return skip[id] }, holds: func(id string) []hold { return holds[id] }}, skip, holds
}

// scanWith is the oracle's decision with a decision's overlay applied as
// Place applied it before the index: the views passed over left out, the
// others with their holds.
func scanWith(a Ask, views []*contract.WorkerView, skip map[string]bool, holds map[string][]hold) (Route, bool) {
	var vs []*contract.WorkerView
	for _, v := range views {
		if !skip[v.ID] {
			vs = append(vs, heldView(v, holds[v.ID]))
		}
	}
	return scanRoute(warmThenFree, a, vs)
}

// checkIndexMatchesScan makes a random fleet from seed, indexes it, and
// checks, for random asks and overlays, that the index decides as the full
// scan does and gives the same fast-fail answer; then changes, adds and
// removes workers, putting each change in the index as the fleet does,
// and checks again.
func checkIndexMatchesScan(t *testing.T, seed uint64) {
	g := fleetGen{rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))}
	byID := map[string]*contract.WorkerView{}
	for range g.r.IntN(14) {
		id := fmt.Sprintf("w%02d", g.r.IntN(40))
		byID[id] = g.view(id)
	}
	list := func() []*contract.WorkerView {
		var out []*contract.WorkerView
		for _, v := range byID {
			out = append(out, v)
		}
		return out
	}
	ix := newRouteIndex(list())
	for round := range 4 {
		views := list()
		for range 12 {
			a := g.ask()
			want := scanAssess(a, views)
			if got := ix.assess(a); (got == nil) != (want == nil) || (got != nil && got.Error() != want.Error()) {
				t.Fatalf("seed %d round %d: assess(%+v) = %v, the scan's %v", seed, round, a, got, want)
			}
			o, skip, holds := g.overlay(views)
			wantR, wantOK := scanWith(a, views, skip, holds)
			gotR, gotOK := ix.route(a, o)
			if gotR != wantR || gotOK != wantOK {
				t.Fatalf("seed %d round %d: route(%+v, skip %v, holds %v) = %+v %v, the scan's %+v %v",
					seed, round, a, skip, holds, gotR, gotOK, wantR, wantOK)
			}
		}
		// The fleet changes: reads of its workers, with new devices and
		// capacity (and now and then all else), new workers, and forgotten
		// ones.
		for range g.r.IntN(6) {
			id := fmt.Sprintf("w%02d", g.r.IntN(40))
			v, known := byID[id]
			switch {
			case known && g.r.IntN(5) == 0:
				delete(byID, id)
				ix.remove(id)
				continue
			case known && g.r.IntN(3) > 0:
				next := *v
				next.Capacity, next.Devices = g.capacity(), g.devices(id, v.Catalog)
				if g.r.IntN(4) == 0 {
					next.Drained, next.Health = !next.Drained, pick(g, "running", "starting")
				}
				v = &next
			default:
				v = g.view(id)
			}
			byID[id] = v
			ix.put(v)
		}
	}
}

// The routing index decides as the full scan of every view did
// (routescan_test.go): the same worker, model, reason and device, or none,
// and the same fast-fail answer, over random fleets and asks, with random
// holds and workers passed over, as the fleet changes under it.
func TestTheRoutingIndexDecidesAsTheFullScan(t *testing.T) {
	n := 1000
	if testing.Short() {
		n = 200
	}
	for seed := range uint64(n) {
		checkIndexMatchesScan(t, seed)
	}
}

func FuzzRoutingIndex(f *testing.F) {
	for seed := range uint64(8) {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, seed uint64) { checkIndexMatchesScan(t, seed) })
}

// An index kept across changes holds what one made afresh of the same
// views holds: the ask sets made before a change are updated by it.
func TestAnIndexKeptAcrossChangesDecidesAsAFreshOne(t *testing.T) {
	a := ask("", "18")
	v := with(view("a", 0, 2), func(v *contract.WorkerView) { v.Devices = []contract.Device{warmDevice("iPhone 16", "18.6")} })
	ix := newRouteIndex([]*contract.WorkerView{v, view("b", 0, 4)})
	if r, ok := ix.route(a, overlay{}); !ok || r.WorkerID != "a" || r.Reason != ReasonWarmHit {
		t.Fatalf("route = %+v %v, want a's warm device", r, ok)
	}
	// a's device is leased: the most free now wins.
	leased := with(view("a", 1, 2), func(v *contract.WorkerView) {
		d := warmDevice("iPhone 16", "18.6")
		d.LeaseID = "lse_1"
		v.Devices = []contract.Device{d}
	})
	ix.put(leased)
	if r, ok := ix.route(a, overlay{}); !ok || r.WorkerID != "b" || r.Reason != ReasonFreeCapacity {
		t.Errorf("after a's device was leased, route = %+v %v, want b by free capacity", r, ok)
	}
	// b is drained (its catalog as it was): a, with its one free slot.
	ix.put(with(view("b", 0, 4), func(v *contract.WorkerView) { v.Drained = true }))
	if r, ok := ix.route(a, overlay{}); !ok || r.WorkerID != "a" {
		t.Errorf("with b drained, route = %+v %v, want a", r, ok)
	}
	ix.remove("a")
	if r, ok := ix.route(a, overlay{}); ok {
		t.Errorf("with a forgotten and b drained, route = %+v, want none", r)
	}
	if cerr := ix.assess(a); cerr == nil || cerr.Code != contract.CodeNoCapacity {
		t.Errorf("assess with no worker taking requests = %v, want NO_CAPACITY", cerr)
	}
}

// TimeRoutes times each decision over the index it builds of the views,
// and says when no worker of them can take the request.
func TestTimeRoutesTimesEachDecisionOverTheViews(t *testing.T) {
	views := benchFleet(20, 10)
	ds, err := TimeRoutes(views, ask("iPhone 16", "18.6"), 7)
	if err != nil || len(ds) != 7 {
		t.Fatalf("TimeRoutes = %d durations, %v; want 7, nil", len(ds), err)
	}
	if _, err := TimeRoutes(views, ask("iPhone 16", "19"), 3); err == nil {
		t.Error("TimeRoutes of a request no worker can take gave no error")
	}
}

// The fleet's routing index follows its views: a drain, an undrain and a
// worker forgotten change its decisions as they change the full scan's
// over the views the fleet reports.
func TestTheFleetsRoutingIndexFollowsItsViews(t *testing.T) {
	f, _ := newFleet(t, newMemStore())
	a := ask("", "18")
	f.put(*with(view("a", 1, 2), func(v *contract.WorkerView) { v.Devices = []contract.Device{warmDevice("iPhone 16", "18.6")} }))
	f.put(*view("b", 0, 4))
	f.put(*with(view("c", 0, 8), func(v *contract.WorkerView) { v.Connection = contract.WorkerDisconnected }))
	check := func(step, want string) {
		t.Helper()
		var got Route
		var ok bool
		f.decide(func(ix *routeIndex) { got, ok = ix.route(a, overlay{}) })
		scan, scanOK := scanRoute(warmThenFree, a, f.views())
		if got != scan || ok != scanOK || got.WorkerID != want {
			t.Errorf("%s: the index routes to %+v %v, the scan to %+v %v; want %q", step, got, ok, scan, scanOK, want)
		}
	}
	check("at first", "a")
	if _, err := f.Drain(t.Context(), "a"); err != nil {
		t.Fatal(err)
	}
	check("a drained", "b")
	if _, err := f.Drain(t.Context(), "b"); err != nil {
		t.Fatal(err)
	}
	check("a and b drained", "")
	if cerr := f.assess(a); cerr == nil || cerr.Code != contract.CodeNoCapacity {
		t.Errorf("assess with every connected worker drained = %v, want NO_CAPACITY", cerr)
	}
	if _, err := f.Undrain(t.Context(), "a"); err != nil {
		t.Fatal(err)
	}
	check("a undrained", "a")
	if _, err := f.Remove(t.Context(), "c"); err != nil {
		t.Fatal(err)
	}
	f.decide(func(ix *routeIndex) {
		if _, ok := ix.workers["c"]; ok {
			t.Error("the index still has c, which the fleet forgot")
		}
	})
}
