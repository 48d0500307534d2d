package ios

import (
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/driver"
)

func TestListCatalogFromSimctl(t *testing.T) {
	h := newHarness(t)
	cat, err := h.d.ListCatalog(t.Context())
	if err != nil {
		t.Fatalf("ListCatalog: %v", err)
	}
	if cat.Platform != contract.PlatformIOS {
		t.Errorf("Platform = %q", cat.Platform)
	}
	wantModels := []string{
		"iPhone 17", "iPhone 16", "iPhone 15", "iPhone Xs", "iPhone 8",
		"iPad Pro 11-inch (M5)", "iPad Air 11-inch (M3)", "iPad (A16)",
		"Apple Watch Series 11 (46mm)", "Apple TV 4K (3rd generation)", "Apple Vision Pro",
	}
	if !slices.Equal(cat.Models, wantModels) {
		t.Errorf("Models = %q\nwant     %q", cat.Models, wantModels)
	}
	// 18.2 is installed but unavailable; tvOS and watchOS are other
	// platforms.
	if want := []string{"26.1", "18.6", "17.5"}; !slices.Equal(cat.Runtimes, want) {
		t.Errorf("Runtimes = %q, want %q", cat.Runtimes, want)
	}
	if cat.DefaultRuntime != "26.1" {
		t.Errorf("DefaultRuntime = %q, want 26.1", cat.DefaultRuntime)
	}
	wantRuntimes := map[string][]string{
		"iPhone 17":                    {"26.1"},
		"iPhone 16":                    {"26.1", "18.6"},
		"iPhone 15":                    {"26.1", "18.6", "17.5"},
		"iPhone Xs":                    {"18.6", "17.5"}, // 26.1 dropped it
		"iPhone 8":                     {},               // stops at 16.x
		"iPad Pro 11-inch (M5)":        {"26.1"},
		"iPad Air 11-inch (M3)":        {"26.1", "18.6"},
		"iPad (A16)":                   {"26.1", "18.6"},
		"Apple Watch Series 11 (46mm)": {},
		"Apple TV 4K (3rd generation)": {},
		"Apple Vision Pro":             {},
	}
	if !reflect.DeepEqual(cat.ModelRuntimes, wantRuntimes) {
		t.Errorf("ModelRuntimes = %v\nwant            %v", cat.ModelRuntimes, wantRuntimes)
	}
	wantClasses := map[string]contract.DeviceClass{
		"iPhone 17": "phone", "iPhone 16": "phone", "iPhone 15": "phone", "iPhone Xs": "phone", "iPhone 8": "phone",
		"iPad Pro 11-inch (M5)": "tablet", "iPad Air 11-inch (M3)": "tablet", "iPad (A16)": "tablet",
		"Apple Watch Series 11 (46mm)": "watch", "Apple TV 4K (3rd generation)": "tv", "Apple Vision Pro": "vision",
	}
	if !reflect.DeepEqual(cat.ModelClasses, wantClasses) {
		t.Errorf("ModelClasses = %v\nwant           %v", cat.ModelClasses, wantClasses)
	}
	if cat.ModelAliases == nil || len(cat.ModelAliases) != 0 {
		t.Errorf("ModelAliases = %v, want an empty map", cat.ModelAliases)
	}
	wantDefaults := map[contract.DeviceClass][]string{
		"phone":  {"iPhone 17", "iPhone 16", "iPhone 15", "iPhone 14", "iPhone 13"},
		"tablet": {"iPad Pro 11-inch (M5)", "iPad Pro 11-inch (M4)", "iPad Air 11-inch (M3)", "iPad (A16)", "iPad (10th generation)"},
		"watch":  {"Apple Watch Series 11 (46mm)", "Apple Watch Series 10 (46mm)", "Apple Watch Series 9 (45mm)"},
		"tv":     {"Apple TV 4K (3rd generation)", "Apple TV"},
		"vision": {"Apple Vision Pro"},
	}
	if !reflect.DeepEqual(cat.ClassDefaults, wantDefaults) {
		t.Errorf("ClassDefaults = %v\nwant            %v", cat.ClassDefaults, wantDefaults)
	}
	calls := h.simctlCalls(t, 0)
	if len(calls) != 1 || !slices.Equal(calls[0].Args[3:], []string{"list", "-j", "devicetypes", "runtimes"}) {
		t.Errorf("calls = %v, want one list -j devicetypes runtimes", calls)
	}
}

// A catalog's class defaults belong to it: changing one leaves the next
// answer alone.
func TestCatalogDefaultsAreCopies(t *testing.T) {
	h := newHarness(t)
	a, err := h.d.ListCatalog(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	a.ClassDefaults[contract.ClassPhone][0] = "changed"
	b, err := h.d.ListCatalog(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if b.ClassDefaults[contract.ClassPhone][0] != "iPhone 17" {
		t.Errorf("second catalog's phone default = %q", b.ClassDefaults[contract.ClassPhone][0])
	}
}

// The pairing rules, on a catalog crafted to break each one alone.
func TestParseCatalogPairing(t *testing.T) {
	const sample = `{
	  "devicetypes": [
	    {"identifier": "t.phone", "name": "iPhone Test", "minRuntimeVersion": 1179648, "maxRuntimeVersion": 4294967295},
	    {"identifier": "t.capped", "name": "iPhone Capped", "productFamily": "iPhone", "minRuntimeVersion": 0, "maxRuntimeVersion": 1180671},
	    {"identifier": "t.open", "name": "iPad Open", "minRuntimeVersion": 0, "maxRuntimeVersion": 16777215},
	    {"identifier": "t.tv", "name": "Apple TV Test"},
	    {"identifier": "t.watch", "name": "Apple Watch Test"},
	    {"identifier": "t.vision", "name": "Apple Vision Test"},
	    {"identifier": "t.odd", "name": "Gizmo", "productFamily": "Toaster"},
	    {"identifier": "t.fam", "name": "iPhone-shaped Slate", "productFamily": "iPad"},
	    {"identifier": 7, "name": "Broken"},
	    {"name": "No Identifier"},
	    "not an object"
	  ],
	  "runtimes": [
	    {"identifier": "r.17", "name": "iOS 17.5", "version": "17.5", "isAvailable": true,
	     "supportedDeviceTypes": [{"identifier": "t.phone"}, {"identifier": "t.capped"}, {"identifier": "t.open"}]},
	    {"identifier": "r.184", "name": "iOS 18.4", "version": "18.4", "isAvailable": true,
	     "supportedDeviceTypes": [{"identifier": "t.phone"}, {"identifier": "t.capped"}, {"identifier": "t.open"}]},
	    {"identifier": "r.183", "name": "iOS 18.3", "version": "18.3", "isAvailable": true,
	     "supportedDeviceTypes": [{"identifier": "t.phone"}, {"identifier": "t.capped"}]},
	    {"identifier": "r.19", "name": "iOS 19.0", "version": "19.0", "isAvailable": false,
	     "supportedDeviceTypes": [{"identifier": "t.phone"}]},
	    {"identifier": "r.20", "name": "iOS 20.0", "version": "20.0",
	     "supportedDeviceTypes": [{"identifier": "t.phone"}]},
	    {"identifier": "r.w", "name": "watchOS 11.4", "version": "11.4", "isAvailable": true,
	     "supportedDeviceTypes": [{"identifier": "t.watch"}]},
	    {"identifier": "r.bad", "name": "iOS beta", "version": "beta", "isAvailable": true}
	  ]
	}`
	c, err := parseCatalog([]byte(sample))
	if err != nil {
		t.Fatalf("parseCatalog: %v", err)
	}
	cat := c.contractCatalog()
	wantModels := []string{"iPhone Test", "iPhone Capped", "iPad Open", "Apple TV Test", "Apple Watch Test", "Apple Vision Test", "Gizmo", "iPhone-shaped Slate"}
	if !slices.Equal(cat.Models, wantModels) {
		t.Errorf("Models = %q, want %q", cat.Models, wantModels)
	}
	// Unavailable (19.0), no isAvailable (20.0), not iOS (watchOS) and an
	// unparseable version are all left out; the rest newest first.
	if want := []string{"18.4", "18.3", "17.5"}; !slices.Equal(cat.Runtimes, want) {
		t.Errorf("Runtimes = %q, want %q", cat.Runtimes, want)
	}
	wantPairs := map[string][]string{
		"iPhone Test":         {"18.4", "18.3"}, // 17.5 lists it, but it needs 18.0
		"iPhone Capped":       {"18.3", "17.5"}, // max 18.3.255: 18.4 lists it, but is above
		"iPad Open":           {"18.4", "17.5"}, // 0xFFFFFF is unbounded; 18.3 does not list it
		"Apple TV Test":       {},
		"Apple Watch Test":    {},
		"Apple Vision Test":   {},
		"Gizmo":               {},
		"iPhone-shaped Slate": {},
	}
	if !reflect.DeepEqual(cat.ModelRuntimes, wantPairs) {
		t.Errorf("ModelRuntimes = %v\nwant            %v", cat.ModelRuntimes, wantPairs)
	}
	// No productFamily: the class comes from the name. A productFamily
	// wins over the name, and an unknown one gives no class at all rather
	// than a guess.
	wantClasses := map[string]contract.DeviceClass{
		"iPhone Test": "phone", "iPhone Capped": "phone", "iPad Open": "tablet",
		"Apple TV Test": "tv", "Apple Watch Test": "watch", "Apple Vision Test": "vision",
		"iPhone-shaped Slate": "tablet",
	}
	if !reflect.DeepEqual(cat.ModelClasses, wantClasses) {
		t.Errorf("ModelClasses = %v\nwant           %v", cat.ModelClasses, wantClasses)
	}
}

func TestParseCatalogRejects(t *testing.T) {
	for name, in := range map[string]string{
		"not json":        `Unable to locate device set`,
		"no device types": `{"devicetypes": [], "runtimes": []}`,
		"unusable types":  `{"devicetypes": [{"identifier": "x"}], "runtimes": []}`,
	} {
		if _, err := parseCatalog([]byte(in)); err == nil {
			t.Errorf("%s: parseCatalog succeeded", name)
		}
	}
	// No runtimes at all is how a fresh Xcode looks: a catalog, not an
	// error, so requests can say what to download.
	c, err := parseCatalog([]byte(`{"devicetypes": [{"identifier": "t", "name": "iPhone 16"}]}`))
	if err != nil {
		t.Fatalf("no runtimes: %v", err)
	}
	_, _, err = c.resolve("iPhone 16", "")
	var missing *driver.RuntimeMissingError
	if !errors.As(err, &missing) || !missing.Downloadable || missing.Component != "latest" {
		t.Errorf("resolve with no runtimes = %v, want a downloadable RuntimeMissingError for latest", err)
	}
}

func TestResolveSpec(t *testing.T) {
	h := newHarness(t)
	type want struct {
		model, version string
		// For failures: the reason, and for a missing runtime whether it is
		// downloadable and which component.
		reason       string
		downloadable bool
		component    string
		message      string
	}
	cases := []struct {
		name      string
		model, os string
		want      want
	}{
		{"default is the newest paired", "iPhone 16", "", want{model: "iPhone 16", version: "26.1"}},
		{"model name ignores case", "iphone 16", "18.6", want{model: "iPhone 16", version: "18.6"}},
		{"bare major takes the newest of it", "iPhone 16", "18", want{model: "iPhone 16", version: "18.6"}},
		{"bare major, older", "iPhone 15", "17", want{model: "iPhone 15", version: "17.5"}},
		{"exact version", "iPhone 15", "17.5", want{model: "iPhone 15", version: "17.5"}},
		{"exact version with patch zero", "iPhone 15", "17.5.0", want{model: "iPhone 15", version: "17.5"}},
		{"default skips an unpaired newer runtime", "iPhone Xs", "", want{model: "iPhone Xs", version: "18.6"}},
		{"unpaired exact", "iPhone Xs", "26.1", want{reason: ReasonUnpaired, message: "iOS 26.1 is installed but does not offer iPhone Xs; pick another iOS version or model"}},
		{"unpaired major", "iPhone Xs", "26", want{reason: ReasonUnpaired}},
		{"below the model's minimum", "iPhone 17", "18", want{reason: ReasonOutOfRange,
			message: "iPhone 17 supports iOS 26.0 and later; iOS 18 is out of range"}},
		{"above the model's maximum", "iPhone 8", "18.6", want{reason: ReasonOutOfRange,
			message: "iPhone 8 supports iOS 11.0-16.x; iOS 18.6 is out of range"}},
		{"capped model with none installed", "iPhone 8", "", want{reason: ReasonNotInstalled, downloadable: true, component: "16"}},
		{"version not installed", "iPhone 16", "18.4", want{reason: ReasonNotInstalled, downloadable: true, component: "18.4"}},
		{"unavailable runtime is not installed", "iPhone 16", "18.2", want{reason: ReasonNotInstalled, downloadable: true, component: "18.2"}},
		{"major not installed", "iPhone 16", "19", want{reason: ReasonNotInstalled, downloadable: true, component: "19"}},
		{"below the download floor", "iPhone Xs", "15.5", want{reason: ReasonDownloadFloor}},
		{"a watch needs watchOS", "Apple Watch Series 11 (46mm)", "", want{reason: ReasonNotIOS}},
		{"unknown model", "iPhone 99", "", want{reason: ReasonUnknownModel,
			message: "unknown ios model: iPhone 99; a newer Xcode may add this device"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			spec, err := h.d.ResolveSpec(t.Context(), driver.Request{Platform: contract.PlatformIOS, Model: tc.model, OSVersion: tc.os})
			if tc.want.reason == "" {
				if err != nil {
					t.Fatalf("ResolveSpec: %v", err)
				}
				want := contract.DeviceSpec{Platform: contract.PlatformIOS, Model: tc.want.model, OSVersion: tc.want.version}
				if spec != want {
					t.Errorf("spec = %+v, want %+v", spec, want)
				}
				return
			}
			var se *SpecError
			if !errors.As(err, &se) {
				t.Fatalf("err = %v (%T), want a *SpecError", err, err)
			}
			if se.Reason != tc.want.reason {
				t.Errorf("Reason = %q, want %q (%v)", se.Reason, tc.want.reason, err)
			}
			if tc.want.message != "" && err.Error() != tc.want.message {
				t.Errorf("message = %q\nwant      %q", err.Error(), tc.want.message)
			}
			if tc.want.reason == ReasonUnknownModel {
				var unknown *driver.UnknownModelError
				if !errors.As(err, &unknown) || unknown.Model != tc.model || unknown.Platform != contract.PlatformIOS {
					t.Errorf("err = %v, want a *driver.UnknownModelError for %q", err, tc.model)
				}
				if code := driver.ContractError(err).Code; code != contract.CodeUnknownModel {
					t.Errorf("contract code = %s", code)
				}
				return
			}
			var missing *driver.RuntimeMissingError
			if !errors.As(err, &missing) {
				t.Fatalf("err = %v, want a *driver.RuntimeMissingError inside", err)
			}
			if missing.Downloadable != tc.want.downloadable || missing.Component != tc.want.component {
				t.Errorf("Downloadable, Component = %v, %q; want %v, %q", missing.Downloadable, missing.Component, tc.want.downloadable, tc.want.component)
			}
			if code := driver.ContractError(err).Code; code != contract.CodeRuntimeMissing {
				t.Errorf("contract code = %s", code)
			}
		})
	}
}

func TestResolveSpecBadVersion(t *testing.T) {
	h := newHarness(t)
	for _, v := range []string{"eighteen", "18.", "+18", "18.4.1.2", "-1"} {
		_, err := h.d.ResolveSpec(t.Context(), driver.Request{Platform: contract.PlatformIOS, Model: "iPhone 16", OSVersion: v})
		var ce *contract.Error
		if !errors.As(err, &ce) || ce.Code != contract.CodeBadRequest {
			t.Errorf("OSVersion %q: err = %v, want BAD_REQUEST", v, err)
		}
	}
}

// A spec ResolveSpec gave names one runtime; resolving it again must give
// that runtime even when a newer patch of it is installed.
func TestResolveExactBeforePatch(t *testing.T) {
	c, err := parseCatalog([]byte(`{
	  "devicetypes": [{"identifier": "t", "name": "iPhone 16"}],
	  "runtimes": [
	    {"identifier": "r.1861", "name": "iOS 18.6.1", "version": "18.6.1", "isAvailable": true, "supportedDeviceTypes": [{"identifier": "t"}]},
	    {"identifier": "r.186", "name": "iOS 18.6", "version": "18.6", "isAvailable": true, "supportedDeviceTypes": [{"identifier": "t"}]}
	  ]}`))
	if err != nil {
		t.Fatal(err)
	}
	for req, wantID := range map[string]string{"18.6": "r.186", "18.6.1": "r.1861", "18": "r.1861", "": "r.1861"} {
		_, rt, err := c.resolve("iPhone 16", req)
		if err != nil || rt.id != wantID {
			t.Errorf("resolve(%q) = %s, %v; want %s", req, rt.id, err, wantID)
		}
	}
}

func TestVersionBounds(t *testing.T) {
	for x, want := range map[float64]string{0: "0.0", 1179648: "18.0", 1180672: "18.4", 1114111: "16.x", 1181954: "18.9.2"} {
		v, ok := decodeBound(x)
		if !ok || v.boundString() != want {
			t.Errorf("decodeBound(%v) = %s, %v; want %s", x, v.boundString(), ok, want)
		}
	}
	for _, x := range []float64{16777215, 4294967295} {
		if _, ok := decodeBound(x); ok {
			t.Errorf("decodeBound(%v) is bounded, want unbounded", x)
		}
	}
	if !strings.Contains((deviceType{name: "x", min: version{parts: [3]int{18, 4, 0}, n: 3}}).rangeString(), "18.4 and later") {
		t.Error("rangeString of an unbounded type")
	}
}
