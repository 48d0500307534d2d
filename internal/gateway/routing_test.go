package gateway

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/simlock/simlock/internal/contract"
)

// view is a connected, running worker with an iOS catalog of iPhone 17
// (alias iphone-17) and iPhone 16 on 26.1 and 18.6, and room for maxRunning
// devices, running of them in use.
func view(id string, running, maxRunning int) *contract.WorkerView {
	return &contract.WorkerView{ID: id, Connection: contract.WorkerConnected, Health: "running", MaxTTLMs: 3600000,
		Capacity: &contract.Capacity{Global: contract.GlobalCapacity{Running: running, MaxRunning: maxRunning},
			Platforms: map[contract.Platform]contract.PlatformCapacity{contract.PlatformIOS: {Running: running, MaxRunning: maxRunning}}},
		Catalog: []contract.Catalog{{Platform: contract.PlatformIOS, Models: []string{"iPhone 17", "iPhone 16"},
			Runtimes: []string{"26.1", "18.6"}, ModelAliases: map[string][]string{"iPhone 17": {"iphone-17"}},
			ModelClasses:  map[string]contract.DeviceClass{"iPhone 17": "phone", "iPhone 16": "phone"},
			ClassDefaults: map[contract.DeviceClass][]string{"phone": {"iPhone 17", "iPhone 16"}},
			ModelRuntimes: map[string][]string{"iPhone 17": {"26.1"}, "iPhone 16": {"26.1", "18.6"}}}},
	}
}

func with(v *contract.WorkerView, f func(v *contract.WorkerView)) *contract.WorkerView {
	f(v)
	return v
}

func ask(model, os string) Ask {
	spec, err := contract.ParseOSVersion(os)
	if err != nil {
		panic(err)
	}
	return Ask{Platform: contract.PlatformIOS, Model: model, OS: spec}
}

func warmDevice(model, os string) contract.Device {
	return contract.Device{ID: "dev_w", State: contract.DeviceReady, Spec: contract.DeviceSpec{Platform: contract.PlatformIOS, Model: model, OSVersion: os}}
}

func TestEachRoutingStageKeepsWhatItShould(t *testing.T) {
	for _, c := range []struct {
		name  string
		apply func(Ask, []candidate) []candidate
		ask   Ask
		views []*contract.WorkerView
		want  []string
	}{
		{"takes-requests: connected, not drained, TTL within the worker's", takesRequests, Ask{TTLMs: 7200000}, []*contract.WorkerView{
			view("a", 0, 2),
			with(view("b", 0, 2), func(v *contract.WorkerView) { v.Drained = true }),
			with(view("c", 0, 2), func(v *contract.WorkerView) { v.Connection = contract.WorkerDisconnected }),
			with(view("d", 0, 2), func(v *contract.WorkerView) { v.Connection = contract.WorkerIncompatible }),
			with(view("e", 0, 2), func(v *contract.WorkerView) { v.MaxTTLMs = 8000000 }),
		}, []string{"e"}},
		{"can-serve: a model by its alias, on a runtime it pairs with", canServe, ask("iphone-17", "26"), []*contract.WorkerView{
			view("a", 0, 2),
			with(view("b", 0, 2), func(v *contract.WorkerView) { v.Catalog[0].ModelRuntimes["iPhone 17"] = []string{"18.6"} }),
			with(view("c", 0, 2), func(v *contract.WorkerView) { v.Catalog = nil }),
		}, []string{"a"}},
		{"can-serve: a range", canServe, ask("iPhone 16", ">=18 <19"), []*contract.WorkerView{
			view("a", 0, 2),
			with(view("b", 0, 2), func(v *contract.WorkerView) { v.Catalog[0].ModelRuntimes["iPhone 16"] = []string{"26.1"} }),
		}, []string{"a"}},
		{"healthy: the running ones", healthy, Ask{}, []*contract.WorkerView{
			view("a", 0, 2), with(view("b", 0, 2), func(v *contract.WorkerView) { v.Health = "starting" }),
		}, []string{"a"}},
		{"warm-hit: an unleased ready device that fits", warmHit, ask("iPhone 17", ""), []*contract.WorkerView{
			view("a", 0, 2),
			with(view("b", 1, 2), func(v *contract.WorkerView) { v.Devices = []contract.Device{warmDevice("iPhone 17", "26.1")} }),
			with(view("c", 1, 2), func(v *contract.WorkerView) {
				d := warmDevice("iPhone 17", "26.1")
				d.LeaseID = "lse_1"
				v.Devices = []contract.Device{d}
			}),
			with(view("d", 1, 2), func(v *contract.WorkerView) { v.Devices = []contract.Device{warmDevice("iPhone 16", "26.1")} }),
		}, []string{"b"}},
		{"ram-room: room in the RAM budget, or an idle device to make it with", ramRoom, ask("", ""), []*contract.WorkerView{
			view("a", 1, 4),
			with(view("b", 1, 4), func(v *contract.WorkerView) {
				pc := v.Capacity.Platforms[contract.PlatformIOS]
				pc.AtRAMBudget = true
				v.Capacity.Platforms[contract.PlatformIOS] = pc
				d := warmDevice("iPhone 16", "26.1")
				d.LeaseID = "lse_1"
				v.Devices = []contract.Device{d}
			}),
			with(view("c", 1, 4), func(v *contract.WorkerView) {
				pc := v.Capacity.Platforms[contract.PlatformIOS]
				pc.AtRAMBudget = true
				v.Capacity.Platforms[contract.PlatformIOS] = pc
				d := warmDevice("iPhone 16", "26.1")
				d.State = contract.DeviceShutdown
				v.Devices = []contract.Device{d}
			}),
		}, []string{"a", "c"}},
		{"free-slot: a slot free, or an idle device's to take", freeSlot, ask("", ""), []*contract.WorkerView{
			view("a", 2, 2),
			view("b", 1, 2),
			with(view("c", 2, 2), func(v *contract.WorkerView) {
				v.Capacity.Global.Warm = 1
				pc := v.Capacity.Platforms[contract.PlatformIOS]
				pc.Warm = 1
				v.Capacity.Platforms[contract.PlatformIOS] = pc
			}),
		}, []string{"b", "c"}},
		{"ram-budget: those not over it", underRAMBudget, Ask{}, []*contract.WorkerView{
			with(view("a", 0, 2), func(v *contract.WorkerView) { v.Capacity.RAMBudget = &contract.RAMCapacity{OverLimit: true} }),
			view("b", 0, 2),
		}, []string{"b"}},
		{"free-capacity: most free first, ties by id", mostFree, ask("", ""), []*contract.WorkerView{
			view("a", 1, 2), view("b", 0, 4), view("c", 0, 4),
		}, []string{"b", "c", "a"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			cs := make([]candidate, 0, len(c.views))
			for _, v := range c.views {
				// As can-serve leaves them: the worker's models that serve
				// the ask.
				models := []string{"iPhone 17", "iPhone 16"}
				if cat, ok := catalogOf(v, contract.PlatformIOS); ok && c.ask.Platform != "" {
					models, _ = servingModels(c.ask, cat, v.DownloadPolicy)
				}
				cs = append(cs, candidate{v: v, models: models})
			}
			var got []string
			for _, k := range c.apply(c.ask, cs) {
				got = append(got, k.v.ID)
			}
			if len(got) != len(c.want) {
				t.Fatalf("kept %v, want %v", got, c.want)
			}
			for i := range got {
				if got[i] != c.want[i] {
					t.Fatalf("kept %v, want %v", got, c.want)
				}
			}
		})
	}
}

func TestWarmThenFreePrefersAWarmDeviceOverFreeCapacity(t *testing.T) {
	a := view("a", 0, 6) // lots of room
	b := with(view("b", 1, 2), func(v *contract.WorkerView) { v.Devices = []contract.Device{warmDevice("iPhone 16", "18.6")} })
	r, ok := route(warmThenFree, ask("", "18"), []*contract.WorkerView{a, b})
	if !ok || r.WorkerID != "b" || r.Reason != ReasonWarmHit || r.Model != "iPhone 16" {
		t.Errorf("route = %+v %v, want b's warm iPhone 16 (warm-hit)", r, ok)
	}
	// A warm hit settles: granting it takes no slot, so a worker with
	// none free still gets it.
	full := with(view("c", 2, 2), func(v *contract.WorkerView) { v.Devices = []contract.Device{warmDevice("iPhone 16", "18.6")} })
	if r, ok := route(warmThenFree, ask("", "18"), []*contract.WorkerView{a, full}); !ok || r.WorkerID != "c" {
		t.Errorf("route = %+v %v, want c's warm device though c has no free slot", r, ok)
	}
	// With no warm device, the most free capacity wins.
	b.Devices = nil
	r, ok = route(warmThenFree, ask("", "18"), []*contract.WorkerView{a, b})
	if !ok || r.WorkerID != "a" || r.Reason != ReasonFreeCapacity || r.Model != "iPhone 16" {
		t.Errorf("route = %+v %v, want a by free capacity", r, ok)
	}
	// A full fleet routes nowhere: the request waits.
	if r, ok := route(warmThenFree, ask("", ""), []*contract.WorkerView{view("a", 2, 2), view("b", 2, 2)}); ok {
		t.Errorf("route on a full fleet = %+v, want none", r)
	}
}

func TestARequestThatMayDownloadGoesFirstToAWorkerThatHasTheRuntime(t *testing.T) {
	has := view("z", 1, 2)
	has.Catalog[0].ModelRuntimes["iPhone 17"] = []string{"26.1", "26.4"}
	lacks := with(view("a", 0, 6), func(v *contract.WorkerView) { v.Catalog[0].Downloadable = []string{"26.4"} })
	q := ask("iPhone 17", "26.4")
	q.AllowDownload = true
	r, ok := route(warmThenFree, q, []*contract.WorkerView{lacks, has})
	if !ok || r.WorkerID != "z" || r.Reason != ReasonFreeCapacity {
		t.Errorf("route = %+v %v, want z, which has 26.4, over a, which would download it", r, ok)
	}
	r, ok = route(warmThenFree, q, []*contract.WorkerView{lacks})
	if !ok || r.WorkerID != "a" || r.Reason != ReasonDownload {
		t.Errorf("route = %+v %v, want a, to download", r, ok)
	}
	q.AllowDownload = false
	if r, ok := route(warmThenFree, q, []*contract.WorkerView{lacks}); ok {
		t.Errorf("a request not allowed to download was routed to %+v", r)
	}
}

// Only a worker whose downloads.policy lets it download is sent a request
// that needs a download, as its own engine would decide: never refuses
// every download, always downloads for a request that did not allow one.
func TestARequestThatNeedsADownloadGoesOnlyToAWorkerWhosePolicyAllowsIt(t *testing.T) {
	lacking := func(id, policy string) *contract.WorkerView {
		return with(view(id, 0, 6), func(v *contract.WorkerView) {
			v.Catalog[0].Downloadable, v.DownloadPolicy = []string{"26.4"}, policy
		})
	}
	q := ask("iPhone 17", "26.4")
	q.AllowDownload = true
	r, ok := route(warmThenFree, q, []*contract.WorkerView{lacking("a", "never"), lacking("b", "on-request")})
	if !ok || r.WorkerID != "b" || r.Reason != ReasonDownload {
		t.Errorf("route = %+v %v, want b, whose policy allows the download, not a (never)", r, ok)
	}
	never := []*contract.WorkerView{lacking("a", "never")}
	if r, ok := route(warmThenFree, q, never); ok {
		t.Errorf("a request that needs a download was routed to %+v, whose downloads.policy is never", r)
	}
	if cerr := assess(q, never); cerr == nil || cerr.Code != contract.CodeRuntimeMissing {
		t.Errorf("assess over workers that never download = %v, want RUNTIME_MISSING", cerr)
	}
	q.AllowDownload = false
	r, ok = route(warmThenFree, q, []*contract.WorkerView{lacking("a", "on-request"), lacking("b", "always")})
	if !ok || r.WorkerID != "b" || r.Reason != ReasonDownload {
		t.Errorf("route without allowDownload = %+v %v, want b, whose policy is always", r, ok)
	}
}

func TestTheFastFailTableAnswersWhatNoWorkerCanServe(t *testing.T) {
	fleet := []*contract.WorkerView{view("a", 2, 2), with(view("b", 0, 2), func(v *contract.WorkerView) { v.Drained = true })}
	for _, c := range []struct {
		name  string
		ask   Ask
		views []*contract.WorkerView
		code  contract.Code
	}{
		{"no worker takes requests", ask("", ""), []*contract.WorkerView{with(view("b", 0, 2), func(v *contract.WorkerView) { v.Drained = true })}, contract.CodeNoCapacity},
		{"no worker has the platform", Ask{Platform: contract.PlatformAndroid}, fleet, contract.CodeNoDriver},
		{"no worker has the model", ask("Galaxy", ""), fleet, contract.CodeUnknownModel},
		{"no worker has the runtime", ask("iPhone 17", "19"), fleet, contract.CodeRuntimeMissing},
		{"a full fleet: it waits", ask("iPhone 17", "26"), fleet, ""},
	} {
		err := assess(c.ask, c.views)
		if c.code == "" {
			if err != nil {
				t.Errorf("%s: %v, want nil", c.name, err)
			}
			continue
		}
		if err == nil || err.Code != c.code {
			t.Errorf("%s: %v, want %s", c.name, err, c.code)
		}
	}
	if err := assess(ask("", ""), []*contract.WorkerView{with(view("b", 0, 2), func(v *contract.WorkerView) { v.Drained = true })}); err == nil || err.Details["reason"] != "no-worker" {
		t.Errorf("no worker: %v, want reason no-worker", err)
	}
}

// benchFleet is n workers of d devices each, as a busy fleet looks: each
// offers iPhone 17, iPhone 16 and iPad Air on 26.1, 18.6 and 17.5 (one in
// three also Pixel 9 on Android 36 and 35); every device is leased but on
// one worker in ten, which has a warm iPhone 16 on 18.6 (and, with
// Android, a warm Pixel 9 on 36); one worker in four has a slot or two
// free.
func benchFleet(n, d int) []*contract.WorkerView {
	models, runtimes := []string{"iPhone 17", "iPhone 16", "iPad Air"}, []string{"26.1", "18.6", "17.5"}
	views := make([]*contract.WorkerView, n)
	for i := range views {
		v := view(fmt.Sprintf("w%04d", i), 0, 0)
		v.Catalog[0] = contract.Catalog{Platform: contract.PlatformIOS, Models: models, Runtimes: runtimes,
			ModelAliases:  map[string][]string{"iPhone 17": {"iphone-17"}},
			ModelClasses:  map[string]contract.DeviceClass{"iPhone 17": "phone", "iPhone 16": "phone", "iPad Air": "tablet"},
			ClassDefaults: map[contract.DeviceClass][]string{"phone": {"iPhone 17", "iPhone 16"}, "tablet": {"iPad Air"}},
			ModelRuntimes: map[string][]string{"iPhone 17": {"26.1"}, "iPhone 16": runtimes, "iPad Air": runtimes}}
		android := i%3 == 0
		if android {
			v.Catalog = append(v.Catalog, contract.Catalog{Platform: contract.PlatformAndroid, Models: []string{"Pixel 9"}, Runtimes: []string{"36", "35"},
				ModelClasses: map[string]contract.DeviceClass{"Pixel 9": "phone"}, ClassDefaults: map[contract.DeviceClass][]string{"phone": {"Pixel 9"}},
				ModelRuntimes: map[string][]string{"Pixel 9": {"36", "35"}}})
		}
		freeSlots := 0
		if i%4 == 1 {
			freeSlots = 1 + i%2
		}
		pcs := map[contract.Platform]contract.PlatformCapacity{}
		warm := 0
		for j := range d {
			dev := contract.Device{ID: fmt.Sprintf("dev_%d_%d", i, j), State: contract.DeviceLeased, LeaseID: fmt.Sprintf("lse_%d_%d", i, j),
				Spec: contract.DeviceSpec{Platform: contract.PlatformIOS, Model: models[j%3], OSVersion: runtimes[j%3]}}
			if android && j%5 == 0 {
				dev.Spec = contract.DeviceSpec{Platform: contract.PlatformAndroid, Model: "Pixel 9", OSVersion: "35"}
			}
			if i%10 == 3 && (j == d-1 || (android && j == d-2)) {
				dev.State, dev.LeaseID = contract.DeviceReady, ""
				dev.Spec = contract.DeviceSpec{Platform: contract.PlatformIOS, Model: "iPhone 16", OSVersion: "18.6"}
				if j == d-2 {
					dev.Spec = contract.DeviceSpec{Platform: contract.PlatformAndroid, Model: "Pixel 9", OSVersion: "36"}
				}
				warm++
			}
			pc := pcs[dev.Spec.Platform]
			pc.Running, pc.Devices = pc.Running+1, pc.Devices+1
			if dev.State == contract.DeviceReady {
				pc.Warm++
			}
			pcs[dev.Spec.Platform] = pc
			v.Devices = append(v.Devices, dev)
		}
		for p, pc := range pcs {
			pc.MaxRunning, pc.MaxDevices = pc.Running+freeSlots, pc.Devices+freeSlots
			pcs[p] = pc
		}
		v.Capacity = &contract.Capacity{Global: contract.GlobalCapacity{Running: d, MaxRunning: d + freeSlots, Warm: warm}, Platforms: pcs}
		views[i] = v
	}
	return views
}

// One routing decision over 10, 100 and 1,000 worker views of 50 devices
// each (benchFleet), as the gateway makes it (the routing index kept of
// the views): a warm hit (an iPhone 16 on 18.6), and a request by class
// that goes to free capacity (a tablet on 26). The full scan of every
// view the index replaced is timed beside it (scan).
func BenchmarkRoute(b *testing.B) {
	warm, byClass := ask("iPhone 16", "18.6"), ask("", "26")
	byClass.Class = contract.ClassTablet
	for _, n := range []int{10, 100, 1000} {
		views := benchFleet(n, 50)
		ix := newRouteIndex(views)
		for _, c := range []struct {
			name   string
			a      Ask
			reason string
		}{{"warm-hit", warm, ReasonWarmHit}, {"free-capacity", byClass, ReasonFreeCapacity}} {
			if r, ok := ix.route(c.a, overlay{}); !ok || r.Reason != c.reason {
				b.Fatalf("%d views, %s: route = %+v %v", n, c.name, r, ok)
			}
			if r, ok := scanRoute(warmThenFree, c.a, views); !ok || r.Reason != c.reason {
				b.Fatalf("%d views, %s: the scan's route = %+v %v", n, c.name, r, ok)
			}
			b.Run(fmt.Sprintf("views=%d/%s", n, c.name), func(b *testing.B) {
				for b.Loop() {
					ix.route(c.a, overlay{})
				}
				b.StopTimer()
				// The median as the fleet bench takes it (TimeRoutes: each
				// decision timed alone, the clock read included).
				ds, err := TimeRoutes(views, c.a, 10001)
				if err != nil {
					b.Fatal(err)
				}
				slices.Sort(ds)
				b.ReportMetric(float64(ds[len(ds)/2].Nanoseconds()), "p50-ns")
			})
			b.Run(fmt.Sprintf("views=%d/%s/scan", n, c.name), func(b *testing.B) {
				for b.Loop() {
					scanRoute(warmThenFree, c.a, views)
				}
			})
		}
	}
}

// One whole decision of Place at 1,000 workers of 50 devices, as it holds
// the decision lock and the fleet's: the waiter's passed-over workers, the
// fast-fail table, and the route, with 50 workers busy in the pass and a
// dispatch in flight to one worker in twenty.
func BenchmarkPlace(b *testing.B) {
	f := New(Options{Store: newMemStore(), InstanceID: "ins_gw"})
	for _, v := range benchFleet(1000, 50) {
		f.put(*v)
	}
	l := NewLeasing(f, LeasingOptions{Store: recordlessStore{newQueueStore()}, DefaultTTL: time.Minute, MaxTTL: time.Hour})
	a := ask("", "26")
	a.Class = contract.ClassTablet
	n := &fleetNeed{ask: a, key: needKey(a)}
	l.q.View(func() {
		for i := range 1000 {
			id := fmt.Sprintf("w%04d", i)
			if i%20 == 1 {
				l.held[id] = append(l.held[id], &dispatchHold{hold: hold{platform: contract.PlatformIOS}})
			}
			if i < 200 && i%4 == 1 {
				l.busy[id] = true
			}
		}
	})
	l.q.View(func() {
		if r, ok, cerr := l.decide(nil, n); !ok || cerr != nil {
			b.Fatalf("decide = %+v %v %v", r, ok, cerr)
		}
	})
	for b.Loop() {
		l.q.View(func() { l.decide(nil, n) })
	}
}

// A view with holds applied offers neither the held warm device nor the
// held slots, and leaves the view it was made from as it was.
func TestAHeldViewOffersNeitherTheHeldDeviceNorTheHeldSlots(t *testing.T) {
	v := with(view("a", 1, 2), func(v *contract.WorkerView) {
		v.Devices = []contract.Device{warmDevice("iPhone 16", "18.6")}
		pc := v.Capacity.Platforms[contract.PlatformIOS]
		pc.Warm, v.Capacity.Global.Warm = 1, 1
		v.Capacity.Platforms[contract.PlatformIOS] = pc
	})
	if r, ok := route(warmThenFree, ask("", "18"), []*contract.WorkerView{v}); !ok || r.Reason != ReasonWarmHit || r.DeviceID != "dev_w" {
		t.Fatalf("route over the view = %+v %v, want the warm hit on dev_w", r, ok)
	}
	warmHeld := heldView(v, []hold{{platform: contract.PlatformIOS, device: "dev_w"}})
	if r, ok := route(warmThenFree, ask("", "18"), []*contract.WorkerView{warmHeld}); !ok || r.Reason != ReasonFreeCapacity {
		t.Errorf("with dev_w held, route = %+v %v, want the free slot, not dev_w again", r, ok)
	}
	allHeld := heldView(v, []hold{{platform: contract.PlatformIOS, device: "dev_w"}, {platform: contract.PlatformIOS}})
	if r, ok := route(warmThenFree, ask("", "18"), []*contract.WorkerView{allHeld}); ok {
		t.Errorf("with dev_w and the free slot held, route = %+v, want none", r)
	}
	if v.Devices[0].LeaseID != "" || v.Capacity.Global.Running != 1 || v.Capacity.Platforms[contract.PlatformIOS].Warm != 1 {
		t.Errorf("heldView changed the view it was given: %+v", v)
	}
}

// A slot held on a worker with no running slot free takes the idle device
// the worker will shut down to make room, its least recently used: a later
// request is not sent there as a warm hit on it (the worker would refuse
// it: its device is gone by then), while a device it keeps still serves.
func TestASlotHeldOnAFullWorkerTakesTheDeviceItWillShutDown(t *testing.T) {
	v := with(view("a", 2, 2), func(v *contract.WorkerView) {
		old, recent := warmDevice("iPhone 16", "18.6"), warmDevice("iPhone 16", "18.6")
		old.ID, old.LastUsedAt = "dev_old", 100
		recent.ID, recent.LastUsedAt = "dev_recent", 200
		v.Devices = []contract.Device{old, recent}
		pc := v.Capacity.Platforms[contract.PlatformIOS]
		pc.Warm, v.Capacity.Global.Warm = 2, 2
		v.Capacity.Platforms[contract.PlatformIOS] = pc
	})
	held := heldView(v, []hold{{platform: contract.PlatformIOS}})
	if r, ok := route(warmThenFree, ask("", "18"), []*contract.WorkerView{held}); !ok || r.Reason != ReasonWarmHit || r.DeviceID != "dev_recent" {
		t.Fatalf("with one slot held on a full worker, route = %+v %v, want the warm hit on dev_recent (dev_old is shut down for the slot)", r, ok)
	}
	both := heldView(v, []hold{{platform: contract.PlatformIOS}, {platform: contract.PlatformIOS}})
	if r, ok := route(warmThenFree, ask("", "18"), []*contract.WorkerView{both}); ok {
		t.Errorf("with two slots held on a full worker of two idle devices, route = %+v, want none: both devices are shut down for them", r)
	}
	free := with(view("b", 0, 2), func(v *contract.WorkerView) { v.Devices = []contract.Device{warmDevice("iPhone 16", "18.6")} })
	if r, ok := route(warmThenFree, ask("", "18"), []*contract.WorkerView{heldView(free, []hold{{platform: contract.PlatformIOS}})}); !ok || r.Reason != ReasonWarmHit {
		t.Errorf("with a slot held on a worker with free slots, route = %+v %v, want the warm hit: nothing is shut down", r, ok)
	}
}

// A request for an Android image tag goes only to a worker whose catalog
// has an image of that tag at a fitting level, and to a warm device of
// that tag; a worker that lacks it gets the request only to download it.
func TestARequestForAnImageTagGoesOnlyWhereTheTagIs(t *testing.T) {
	android := func(id string, tags ...string) *contract.WorkerView {
		v := view(id, 0, 4)
		v.Capacity.Platforms = map[contract.Platform]contract.PlatformCapacity{contract.PlatformAndroid: {MaxRunning: 4}}
		v.DownloadPolicy = "on-request"
		cat := contract.Catalog{Platform: contract.PlatformAndroid, Models: []string{"Pixel 9"}, Runtimes: []string{"36"},
			ModelClasses: map[string]contract.DeviceClass{"Pixel 9": "phone"}, ModelRuntimes: map[string][]string{"Pixel 9": {"36"}},
			ClassDefaults: map[contract.DeviceClass][]string{"phone": {"Pixel 9"}}}
		for _, tag := range tags {
			cat.Images = append(cat.Images, contract.CatalogImage{Runtime: "36", Tag: tag, ABI: "x86_64"})
		}
		v.Catalog = []contract.Catalog{cat}
		return v
	}
	os36, _ := contract.ParseOSVersion("36")
	q := Ask{Platform: contract.PlatformAndroid, OS: os36, ImageTag: "google_apis_playstore"}
	plain, store := android("a", "google_apis"), android("b", "google_apis", "google_apis_playstore")
	if r, ok := route(warmThenFree, q, []*contract.WorkerView{plain, store}); !ok || r.WorkerID != "b" || r.Reason != ReasonFreeCapacity {
		t.Errorf("route = %+v %v, want b, the worker with the tag", r, ok)
	}
	if r, ok := route(warmThenFree, q, []*contract.WorkerView{plain}); ok {
		t.Errorf("a request for a tag the worker lacks was routed to %+v without a download allowed", r)
	}
	if cerr := assess(q, []*contract.WorkerView{plain}); cerr == nil || cerr.Code != contract.CodeRuntimeMissing {
		t.Errorf("assess over workers without the tag = %v, want RUNTIME_MISSING", cerr)
	}
	q.AllowDownload = true
	if r, ok := route(warmThenFree, q, []*contract.WorkerView{plain}); !ok || r.WorkerID != "a" || r.Reason != ReasonDownload {
		t.Errorf("route with a download allowed = %+v %v, want a, to download the tag's image", r, ok)
	}
	q.AllowDownload = false

	// A warm device of another tag is no warm hit.
	warm := android("c", "google_apis", "google_apis_playstore")
	warm.Devices = []contract.Device{{ID: "dev_w", State: contract.DeviceReady,
		Spec: contract.DeviceSpec{Platform: contract.PlatformAndroid, Model: "Pixel 9", OSVersion: "36", ImageTag: "google_apis"}}}
	if r, ok := route(warmThenFree, q, []*contract.WorkerView{warm}); !ok || r.Reason == ReasonWarmHit {
		t.Errorf("route = %+v %v; a google_apis device is no warm hit for google_apis_playstore", r, ok)
	}
	warm.Devices[0].Spec.ImageTag = "google_apis_playstore"
	if r, ok := route(warmThenFree, q, []*contract.WorkerView{warm}); !ok || r.Reason != ReasonWarmHit || r.DeviceID != "dev_w" {
		t.Errorf("route = %+v %v, want a warm hit on dev_w", r, ok)
	}
}

// A warm device is a warm hit only for the mode it serves on its worker:
// full never gets a slim device, slim gets a slim one (or a full one where
// the worker cannot slim the runtime), and a request naming no mode takes
// the worker's own default.
func TestAWarmHitMatchesTheModeAsTheWorkerWould(t *testing.T) {
	ios := func(id string, mode contract.DeviceMode, defaultMode contract.DeviceMode) *contract.WorkerView {
		v := view(id, 0, 4)
		v.Catalog = []contract.Catalog{{Platform: contract.PlatformIOS, Models: []string{"iPhone 16"}, Runtimes: []string{"18.6"},
			ModelClasses: map[string]contract.DeviceClass{"iPhone 16": "phone"}, ModelRuntimes: map[string][]string{"iPhone 16": {"18.6"}},
			ClassDefaults: map[contract.DeviceClass][]string{"phone": {"iPhone 16"}},
			SlimRuntimes:  []string{"18.6"}, DefaultMode: defaultMode}}
		v.Devices = []contract.Device{{ID: "dev_" + id, State: contract.DeviceReady,
			Spec: contract.DeviceSpec{Platform: contract.PlatformIOS, Model: "iPhone 16", OSVersion: "18.6", Mode: mode}}}
		return v
	}
	os186, _ := contract.ParseOSVersion("18.6")
	ask := func(m contract.DeviceMode) Ask { return Ask{Platform: contract.PlatformIOS, OS: os186, Mode: m} }
	cases := []struct {
		name string
		ask  Ask
		v    *contract.WorkerView
		hit  bool
	}{
		{"full on a full device", ask(contract.DeviceModeFull), ios("a", "", contract.DeviceModeFull), true},
		{"full never on a slim device", ask(contract.DeviceModeFull), ios("b", contract.DeviceModeSlim, contract.DeviceModeFull), false},
		{"slim on a slim device", ask(contract.DeviceModeSlim), ios("c", contract.DeviceModeSlim, contract.DeviceModeFull), true},
		{"slim not on a full device the worker could slim", ask(contract.DeviceModeSlim), ios("d", "", contract.DeviceModeFull), false},
		{"no mode on a worker defaulting to slim takes its slim device", ask(""), ios("e", contract.DeviceModeSlim, contract.DeviceModeSlim), true},
		{"no mode on a worker defaulting to full skips its slim device", ask(""), ios("f", contract.DeviceModeSlim, contract.DeviceModeFull), false},
	}
	for _, c := range cases {
		r, ok := route(warmThenFree, c.ask, []*contract.WorkerView{c.v})
		if hit := ok && r.Reason == ReasonWarmHit; hit != c.hit {
			t.Errorf("%s: route = %+v %v, want warm hit %v", c.name, r, ok, c.hit)
		}
	}
}

// warmFitHeld finds what warmFit finds over the view with the holds
// applied, without copying it: holds of warm devices leave them out, and
// a slot's hold (which may evict a warm device) is read as heldView
// reads it.
func TestWarmFitHeldIsWarmFitOverTheHeldView(t *testing.T) {
	v := with(view("w1", 3, 4), func(v *contract.WorkerView) {
		for i, m := range []string{"iPhone 16", "iPhone 17", "iPhone 17"} {
			d := warmDevice(m, "26.1")
			d.ID = fmt.Sprintf("dev_%d", i+1)
			v.Devices = append(v.Devices, d)
		}
	})
	models := []string{"iPhone 17", "iPhone 16"}
	ios := contract.PlatformIOS
	for _, hs := range [][]hold{
		nil,
		{{platform: ios, device: "dev_1"}},
		{{platform: ios, device: "dev_2"}},
		{{platform: ios, device: "dev_1"}, {platform: ios, device: "dev_2"}},
		{{platform: ios, device: "dev_1"}, {platform: ios, device: "dev_2"}, {platform: ios, device: "dev_3"}},
		{{platform: ios}},
		{{platform: ios, device: "dev_1"}, {platform: ios}},
	} {
		for _, a := range []Ask{ask("", "26.1"), ask("iPhone 17", "26.1"), ask("iPhone 16", "")} {
			wantModel, wantID := warmFit(a, candidate{v: heldView(v, hs), models: models})
			for _, warm := range [][]int{nil, {0, 1, 2}} {
				model, id := warmFitHeld(a, v, models, hs, warm)
				if model != wantModel || id != wantID {
					t.Errorf("holds %v, ask %+v, warm %v: warmFitHeld = %s %s, want %s %s", hs, a, warm, model, id, wantModel, wantID)
				}
			}
		}
	}
}
