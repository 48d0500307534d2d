package ios

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/driver"
)

// version is an iOS version of up to three numeric components. n counts the
// components written, so that a request for "18" (n 1) means any 18.x and
// "18.4" (n 2) any 18.4.x.
type version struct {
	parts [3]int
	n     int
}

func parseVersion(s string) (version, bool) {
	fields := strings.Split(s, ".")
	if len(fields) > 3 {
		return version{}, false
	}
	var v version
	for i, f := range fields {
		// Digits only: Atoi alone would take "+18" and "-1".
		if f == "" || strings.TrimLeft(f, "0123456789") != "" {
			return version{}, false
		}
		n, err := strconv.Atoi(f)
		if err != nil {
			return version{}, false
		}
		v.parts[i] = n
	}
	v.n = len(fields)
	return v, true
}

func (v version) compare(w version) int {
	for i := range v.parts {
		if c := cmp.Compare(v.parts[i], w.parts[i]); c != 0 {
			return c
		}
	}
	return 0
}

// hasPrefix reports whether v's first req.n components are req's.
func (v version) hasPrefix(req version) bool {
	return slices.Equal(v.parts[:req.n], req.parts[:req.n])
}

// span is the range of full versions a request covers: "18" spans 18.0.0
// to 18.∞.∞.
func (v version) span() (lo, hi version) {
	lo, hi = v, v
	for i := v.n; i < 3; i++ {
		lo.parts[i], hi.parts[i] = 0, math.MaxInt
	}
	lo.n, hi.n = 3, 3
	return lo, hi
}

// boundString writes a device type's runtime bound as people do: 26.0, or
// 16.x for a maximum of 16.255.255.
func (v version) boundString() string {
	switch {
	case v.parts[1] == 0xff:
		return fmt.Sprintf("%d.x", v.parts[0])
	case v.parts[2] == 0 || v.parts[2] == 0xff:
		return fmt.Sprintf("%d.%d", v.parts[0], v.parts[1])
	}
	return fmt.Sprintf("%d.%d.%d", v.parts[0], v.parts[1], v.parts[2])
}

// decodeBound reads CoreSimulator's 0xAABBCC runtime bound. ok is false for
// an unbounded one: 0xFFFFFF or more (Xcode prints 4294967295).
func decodeBound(x float64) (version, bool) {
	if x < 0 || x >= 0xFFFFFF {
		return version{}, false
	}
	u := uint32(x)
	return version{parts: [3]int{int(u >> 16), int(u >> 8 & 0xff), int(u & 0xff)}, n: 3}, true
}

// deviceType is a simulator model simctl can create.
type deviceType struct {
	id, name, family string
	min              version
	max              version
	bounded          bool // max applies
}

// admits reports whether a request's versions overlap the runtimes the
// device type accepts.
func (t deviceType) admits(req version) bool {
	lo, hi := req.span()
	if hi.compare(t.min) < 0 {
		return false
	}
	return !t.bounded || lo.compare(t.max) <= 0
}

func (t deviceType) rangeString() string {
	if !t.bounded {
		return "iOS " + t.min.boundString() + " and later"
	}
	return "iOS " + t.min.boundString() + "-" + t.max.boundString()
}

// class is the device class of the model: from simctl's productFamily when
// it prints one, else from the name.
func (t deviceType) class() (contract.DeviceClass, bool) {
	families := []struct {
		prefix string
		class  contract.DeviceClass
	}{
		{"iPhone", contract.ClassPhone},
		{"iPod", contract.ClassPhone},
		{"iPad", contract.ClassTablet},
		{"Apple Watch", contract.ClassWatch},
		{"Apple TV", contract.ClassTV},
		{"Apple Vision", contract.ClassVision},
	}
	if t.family != "" {
		for _, f := range families {
			if strings.EqualFold(t.family, f.prefix) {
				return f.class, true
			}
		}
		return "", false
	}
	for _, f := range families {
		if strings.HasPrefix(t.name, f.prefix) {
			return f.class, true
		}
	}
	return "", false
}

// runsIOS reports whether the model runs iOS at all. A watch, a TV or a
// Vision Pro needs another platform's runtime, which no iOS download brings.
func (t deviceType) runsIOS() bool {
	c, ok := t.class()
	return !ok || c == contract.ClassPhone || c == contract.ClassTablet
}

// simRuntime is an installed, available iOS runtime.
type simRuntime struct {
	id, name, version string
	build             string // e.g. 23E244; "" when simctl prints none
	v                 version
	supported         map[string]bool // device type identifiers
}

// catalog is what `simctl list -j devicetypes runtimes` says.
type catalog struct {
	types []deviceType
	// runtimes holds the available iOS runtimes, newest first.
	runtimes []simRuntime
}

// object is a JSON object whose fields are read one by one, so that one
// odd field skips one entry rather than failing the whole catalog.
type object map[string]json.RawMessage

// field reads o[key] as a T; ok is false when it is missing, null or not a T.
func field[T any](o object, key string) (T, bool) {
	var v T
	raw, ok := o[key]
	if !ok || string(raw) == "null" {
		return v, false
	}
	if err := json.Unmarshal(raw, &v); err != nil {
		return v, false
	}
	return v, true
}

// objects decodes a JSON array of objects, skipping elements that are not
// objects.
func objects(raws []json.RawMessage) []object {
	var out []object
	for _, raw := range raws {
		var o object
		if json.Unmarshal(raw, &o) == nil && o != nil {
			out = append(out, o)
		}
	}
	return out
}

func parseCatalog(b []byte) (catalog, error) {
	var top struct {
		DeviceTypes []json.RawMessage `json:"devicetypes"`
		Runtimes    []json.RawMessage `json:"runtimes"`
	}
	if err := json.Unmarshal(b, &top); err != nil {
		return catalog{}, fmt.Errorf("not the JSON simctl prints: %w", err)
	}
	var c catalog
	for _, o := range objects(top.DeviceTypes) {
		id, _ := field[string](o, "identifier")
		name, _ := field[string](o, "name")
		if id == "" || name == "" {
			continue
		}
		family, _ := field[string](o, "productFamily")
		t := deviceType{id: id, name: name, family: family, min: version{n: 3}}
		if x, ok := field[float64](o, "minRuntimeVersion"); ok {
			if v, ok := decodeBound(x); ok {
				t.min = v
			}
		}
		if x, ok := field[float64](o, "maxRuntimeVersion"); ok {
			t.max, t.bounded = decodeBound(x)
		}
		c.types = append(c.types, t)
	}
	if len(c.types) == 0 {
		return catalog{}, errors.New("no usable device types")
	}
	for _, o := range objects(top.Runtimes) {
		id, _ := field[string](o, "identifier")
		name, _ := field[string](o, "name")
		ver, _ := field[string](o, "version")
		available, hasAvailable := field[bool](o, "isAvailable")
		// Only iOS: the same list holds watchOS, tvOS and visionOS
		// runtimes, and an unavailable runtime cannot create a device.
		if id == "" || ver == "" || !hasAvailable || !available || !strings.HasPrefix(strings.ToLower(name), "ios ") {
			continue
		}
		v, ok := parseVersion(ver)
		if !ok {
			continue
		}
		build, _ := field[string](o, "buildversion")
		rt := simRuntime{id: id, name: name, version: ver, build: build, v: v, supported: map[string]bool{}}
		supported, _ := field[[]json.RawMessage](o, "supportedDeviceTypes")
		for _, s := range objects(supported) {
			if sid, ok := field[string](s, "identifier"); ok {
				rt.supported[sid] = true
			}
		}
		c.runtimes = append(c.runtimes, rt)
	}
	// Zero runtimes is a valid catalog: it is how a fresh Xcode without a
	// simulator runtime looks, and it makes every request a download.
	slices.SortStableFunc(c.runtimes, func(a, b simRuntime) int {
		return cmp.Or(b.v.compare(a.v), cmp.Compare(a.id, b.id))
	})
	return c, nil
}

// pairs reports whether simctl can create the device type on the runtime:
// the runtime lists it and its version is within the type's bounds.
func (t deviceType) pairs(rt simRuntime) bool {
	if !rt.supported[t.id] || rt.v.compare(t.min) < 0 {
		return false
	}
	return !t.bounded || rt.v.compare(t.max) <= 0
}

// deviceType finds a model by name, ignoring case; the first wins, as
// simctl itself resolves a name.
func (c catalog) deviceType(model string) (deviceType, bool) {
	i := slices.IndexFunc(c.types, func(t deviceType) bool { return strings.EqualFold(t.name, model) })
	if i < 0 {
		return deviceType{}, false
	}
	return c.types[i], true
}

// Reasons a SpecError gives.
const (
	ReasonUnknownModel  = "unknown-model"
	ReasonNotInstalled  = "not-installed"  // downloadable
	ReasonOutOfRange    = "out-of-range"   // the model does not run that version
	ReasonUnpaired      = "unpaired"       // installed, but the runtime does not offer the model
	ReasonDownloadFloor = "download-floor" // older than any runtime xcodebuild can download
	ReasonNotIOS        = "not-ios"        // the model runs watchOS, tvOS or visionOS
)

// downloadFloor is the oldest major xcodebuild -downloadPlatform serves.
const downloadFloor = 16

// SpecError says why a request cannot be served here, in words a person can
// act on. It wraps the *driver.UnknownModelError or
// *driver.RuntimeMissingError that carries the stable code, so errors.As
// finds those.
type SpecError struct {
	// Reason is one of the Reason constants.
	Reason  string
	Message string
	Err     error
}

func (e *SpecError) Error() string { return e.Message }
func (e *SpecError) Unwrap() error { return e.Err }

func missingRuntime(reason, osVersion string, component, format string, args ...any) error {
	return &SpecError{
		Reason:  reason,
		Message: fmt.Sprintf(format, args...),
		Err: &driver.RuntimeMissingError{
			Platform:     contract.PlatformIOS,
			OSVersion:    osVersion,
			Downloadable: component != "",
			Component:    component,
		},
	}
}

// resolve picks the device type and runtime for a request. It never
// downloads: when a download would help, the error names the component.
func (c catalog) resolve(model, osVersion string) (deviceType, simRuntime, error) {
	t, ok := c.deviceType(model)
	if !ok {
		return deviceType{}, simRuntime{}, &SpecError{
			Reason:  ReasonUnknownModel,
			Message: fmt.Sprintf("unknown ios model: %s; a newer Xcode may add this device", model),
			Err:     &driver.UnknownModelError{Platform: contract.PlatformIOS, Model: model},
		}
	}
	if osVersion == "" {
		for _, rt := range c.runtimes {
			if t.pairs(rt) {
				return t, rt, nil
			}
		}
		return deviceType{}, simRuntime{}, c.noneInstalled(t)
	}
	want, ok := parseVersion(osVersion)
	if !ok {
		return deviceType{}, simRuntime{}, contract.BadRequest("osVersion", "%q is not an iOS version such as 18 or 18.4", osVersion)
	}
	if !t.admits(want) {
		return deviceType{}, simRuntime{}, missingRuntime(ReasonOutOfRange, osVersion, "",
			"%s supports %s; iOS %s is out of range", t.name, t.rangeString(), osVersion)
	}
	// The exact version first: a resolved spec names "18.6", which must
	// give that runtime again even when an 18.6.1 is installed beside it.
	for _, rt := range c.runtimes {
		if rt.version == osVersion && t.pairs(rt) {
			return t, rt, nil
		}
	}
	for _, rt := range c.runtimes {
		if rt.v.hasPrefix(want) && t.pairs(rt) {
			return t, rt, nil
		}
	}
	for _, rt := range c.runtimes {
		if rt.v.hasPrefix(want) {
			return deviceType{}, simRuntime{}, missingRuntime(ReasonUnpaired, osVersion, "",
				"%s is installed but does not offer %s; pick another iOS version or model", rt.name, t.name)
		}
	}
	if !t.runsIOS() {
		return deviceType{}, simRuntime{}, missingRuntime(ReasonNotIOS, osVersion, "",
			"%s does not run iOS; simlock's ios driver serves iPhones and iPads only", t.name)
	}
	if want.parts[0] < downloadFloor {
		return deviceType{}, simRuntime{}, missingRuntime(ReasonDownloadFloor, osVersion, "",
			"iOS %s is not installed, and runtimes older than iOS %d.0 cannot be downloaded; install it from Xcode > Settings > Components", osVersion, downloadFloor)
	}
	return deviceType{}, simRuntime{}, missingRuntime(ReasonNotInstalled, osVersion, osVersion,
		"iOS %s is not installed; installing component %s would add it", osVersion, osVersion)
}

// noneInstalled explains an unversioned request no installed runtime pairs
// with: the newest runtime would do, unless the model stops at an older
// major.
func (c catalog) noneInstalled(t deviceType) error {
	switch {
	case !t.runsIOS():
		return missingRuntime(ReasonNotIOS, "latest", "",
			"%s does not run iOS; simlock's ios driver serves iPhones and iPads only", t.name)
	case !t.bounded:
		return missingRuntime(ReasonNotInstalled, "latest", "latest",
			"no installed iOS runtime offers %s; installing component latest would add one", t.name)
	case t.max.parts[0] < downloadFloor:
		return missingRuntime(ReasonDownloadFloor, strconv.Itoa(t.max.parts[0]), "",
			"no installed iOS runtime offers %s, which supports %s, and runtimes older than iOS %d.0 cannot be downloaded", t.name, t.rangeString(), downloadFloor)
	}
	major := strconv.Itoa(t.max.parts[0])
	return missingRuntime(ReasonNotInstalled, major, major,
		"no installed iOS runtime offers %s, which supports %s; installing component %s would add one", t.name, t.rangeString(), major)
}

// contractCatalog is the catalog as the core sees it.
func (c catalog) contractCatalog() driver.Catalog {
	out := driver.Catalog{
		Platform:      contract.PlatformIOS,
		Models:        []string{},
		Runtimes:      []string{},
		ModelRuntimes: map[string][]string{},
		ModelAliases:  map[string][]string{},
		ModelClasses:  map[string]contract.DeviceClass{},
		ClassDefaults: classDefaults(),
	}
	for _, rt := range c.runtimes {
		if !slices.Contains(out.Runtimes, rt.version) {
			out.Runtimes = append(out.Runtimes, rt.version)
			if slimmable(rt.v) {
				out.SlimRuntimes = append(out.SlimRuntimes, rt.version)
			}
		}
	}
	if len(out.Runtimes) > 0 {
		out.DefaultRuntime = out.Runtimes[0]
	}
	for _, t := range c.types {
		// A repeated name is the same model to a person, and resolve takes
		// the first, so the catalog does too.
		if _, seen := out.ModelRuntimes[t.name]; seen {
			continue
		}
		out.Models = append(out.Models, t.name)
		paired := []string{}
		for _, rt := range c.runtimes {
			if t.pairs(rt) && !slices.Contains(paired, rt.version) {
				paired = append(paired, rt.version)
			}
		}
		out.ModelRuntimes[t.name] = paired
		if class, ok := t.class(); ok {
			out.ModelClasses[t.name] = class
		}
	}
	return out
}

// classDefaults are the models a class request tries, best first; the core
// takes the first one this Mac offers. A function, so that every catalog
// gets its own copy.
func classDefaults() map[contract.DeviceClass][]string {
	return map[contract.DeviceClass][]string{
		contract.ClassPhone:  {"iPhone 17", "iPhone 16", "iPhone 15", "iPhone 14", "iPhone 13"},
		contract.ClassTablet: {"iPad Pro 11-inch (M5)", "iPad Pro 11-inch (M4)", "iPad Air 11-inch (M3)", "iPad (A16)", "iPad (10th generation)"},
		contract.ClassWatch:  {"Apple Watch Series 11 (46mm)", "Apple Watch Series 10 (46mm)", "Apple Watch Series 9 (45mm)"},
		contract.ClassTV:     {"Apple TV 4K (3rd generation)", "Apple TV"},
		contract.ClassVision: {"Apple Vision Pro"},
	}
}

// catalog reads the device types and runtimes simctl offers now.
func (d *Driver) catalog(ctx context.Context, op string) (catalog, error) {
	out, err := d.simctl(ctx, op, commandTimeout, nil, "list", "-j", "devicetypes", "runtimes")
	if err != nil {
		return catalog{}, err
	}
	c, err := parseCatalog(out)
	if err != nil {
		return catalog{}, crash(op, "simctl list -j devicetypes runtimes: %w", err)
	}
	return c, nil
}

// ListCatalog reports the device types and the available iOS runtimes. It
// runs one read-only simctl call and never downloads.
func (d *Driver) ListCatalog(ctx context.Context) (driver.Catalog, error) {
	c, err := d.catalog(ctx, "catalog")
	if err != nil {
		return driver.Catalog{}, err
	}
	return c.contractCatalog(), nil
}

// ResolveSpec matches the model by name, ignoring case, and picks a runtime
// that pairs with it: the newest when no version is asked for, the newest
// 18.x for "18", 18.4 (or the newest 18.4.x) for "18.4". It never
// downloads. A failure is a *SpecError wrapping *driver.UnknownModelError or
// *driver.RuntimeMissingError (downloadable with a Component only when a
// download would help); a malformed version is a BAD_REQUEST
// *contract.Error.
func (d *Driver) ResolveSpec(ctx context.Context, req driver.Request) (contract.DeviceSpec, error) {
	if req.Platform != "" && req.Platform != contract.PlatformIOS {
		return contract.DeviceSpec{}, contract.BadRequest("platform", "the ios driver does not serve %s", req.Platform)
	}
	c, err := d.catalog(ctx, "resolve")
	if err != nil {
		return contract.DeviceSpec{}, err
	}
	t, rt, err := c.resolve(req.Model, req.OSVersion)
	if err != nil {
		return contract.DeviceSpec{}, err
	}
	spec := contract.DeviceSpec{Platform: contract.PlatformIOS, Model: t.name, OSVersion: rt.version}
	if req.Mode == contract.DeviceModeSlim && slimmable(rt.v) {
		spec.Mode = contract.DeviceModeSlim
	}
	return spec, nil
}
