package gateway

import (
	"context"
	"slices"
	"testing"

	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/core"
	"github.com/simlock/simlock/internal/driver"
	"github.com/simlock/simlock/internal/driver/demo"
)

// workerPicks is the model a worker's engine gives a new device for in,
// as its resolve does: the request settled by core (WantOf), the models
// core offers for it in order (ModelsFor), a range taking each model's
// newest fitting runtime, and the first the driver accepts.
func workerPicks(t *testing.T, drv driver.Driver, cat contract.Catalog, in contract.RequestSpec) (string, bool) {
	t.Helper()
	w := core.WantOf(in, cat)
	spec, err := contract.ParseOSVersion(w.OSVersion)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range core.ModelsFor(w, cat, nil) {
		version := w.OSVersion
		if spec.IsRange() {
			if version = core.NewestFitting(cat.ModelRuntimes[m], w.OSVersion); version == "" {
				continue
			}
		}
		s, err := drv.ResolveSpec(context.Background(), driver.Request{Platform: w.Platform, Model: m, OSVersion: version, Mode: w.ModeIn(cat)})
		if err == nil {
			return s.Model, true
		}
	}
	return "", false
}

// Each request shape means the same on a gateway as on the worker: the
// gateway routes it to a worker with room exactly when the worker's own
// engine would serve it (a model named in another case or by an alias
// included), and with a model the worker would give it.
func TestTheGatewayMatchesARequestAsTheWorkerDoes(t *testing.T) {
	for _, c := range []struct {
		name string
		in   contract.RequestSpec
	}{
		{"a model by its name", contract.RequestSpec{Platform: contract.PlatformIOS, Model: "iPhone 17"}},
		{"a model by its name in another case", contract.RequestSpec{Platform: contract.PlatformIOS, Model: "IPHONE 17 pro"}},
		{"a model by its alias", contract.RequestSpec{Platform: contract.PlatformIOS, Model: "iphone-16"}},
		{"a model by its alias in another case", contract.RequestSpec{Platform: contract.PlatformIOS, Model: "iPhone-16"}},
		{"a model on a runtime it pairs with", contract.RequestSpec{Platform: contract.PlatformIOS, Model: "iphone-15", OSVersion: "17"}},
		{"a model on a runtime it does not pair with", contract.RequestSpec{Platform: contract.PlatformIOS, Model: "iPhone 17", OSVersion: "18"}},
		{"an unknown model", contract.RequestSpec{Platform: contract.PlatformIOS, Model: "iPhone 99"}},
		{"a class", contract.RequestSpec{Platform: contract.PlatformIOS, Class: contract.ClassTablet}},
		{"a class on an OS range", contract.RequestSpec{Platform: contract.PlatformIOS, Class: contract.ClassPhone, OSVersion: ">=17 <19"}},
		{"a class on a range nothing fits", contract.RequestSpec{Platform: contract.PlatformIOS, Class: contract.ClassWatch, OSVersion: ">=17 <19"}},
		{"no model and no class", contract.RequestSpec{Platform: contract.PlatformIOS}},
		{"no model on an OS major", contract.RequestSpec{Platform: contract.PlatformIOS, OSVersion: "18"}},
		{"an Android model by its alias in another case", contract.RequestSpec{Platform: contract.PlatformAndroid, Model: "PIXEL_9"}},
		{"an Android class", contract.RequestSpec{Platform: contract.PlatformAndroid, Class: contract.ClassTablet, OSVersion: "35"}},
		{"no model on Android", contract.RequestSpec{Platform: contract.PlatformAndroid}},
	} {
		t.Run(c.name, func(t *testing.T) {
			drv, err := demo.New(demo.Options{Platform: c.in.Platform})
			if err != nil {
				t.Fatal(err)
			}
			cat, err := drv.ListCatalog(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			model, serves := workerPicks(t, drv, cat, c.in)

			os, err := contract.ParseOSVersion(c.in.OSVersion)
			if err != nil {
				t.Fatal(err)
			}
			a := Ask{Platform: c.in.Platform, Model: c.in.Model, Class: c.in.Class, OS: os}
			v := &contract.WorkerView{ID: "w", Connection: contract.WorkerConnected, Health: "running", DownloadPolicy: "never",
				Catalog: []contract.Catalog{cat}, Capacity: &contract.Capacity{Global: contract.GlobalCapacity{MaxRunning: 2},
					Platforms: map[contract.Platform]contract.PlatformCapacity{c.in.Platform: {MaxRunning: 2}}}}
			r, routed := route(warmThenFree, a, []*contract.WorkerView{v})
			if routed != serves {
				t.Fatalf("the gateway routes it: %v; the worker serves it: %v (with %q)", routed, serves, model)
			}
			if !routed {
				return
			}
			if served, _ := servingModels(a, cat, "never"); !slices.Contains(served, model) {
				t.Errorf("the worker gives it %q, which the gateway does not count among the models serving it, %v", model, served)
			}
			if c.in.Model != "" && r.Model != model {
				t.Errorf("the gateway sends it as model %q, the worker names it %q", r.Model, model)
			}
		})
	}
}
