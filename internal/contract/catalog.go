package contract

import (
	"slices"
)

// Catalog is what a platform offers.
type Catalog struct {
	Platform       Platform                 `json:"platform"`
	Models         []string                 `json:"models"`
	Runtimes       []string                 `json:"runtimes"`
	DefaultRuntime string                   `json:"defaultRuntime,omitempty"`
	ModelRuntimes  map[string][]string      `json:"modelRuntimes"`
	ModelAliases   map[string][]string      `json:"modelAliases"`
	ModelClasses   map[string]DeviceClass   `json:"modelClasses"`
	ClassDefaults  map[DeviceClass][]string `json:"classDefaults"`
	// Downloadable lists runtimes known to be downloadable but not
	// installed (a lease with allowDownload may fetch one), when the
	// driver knows them.
	Downloadable []string `json:"downloadable,omitempty"`
	// Images lists the installed system images (Android), each a runtime
	// with its tag and ABI, newest runtime first.
	Images []CatalogImage `json:"images,omitempty"`
	// SlimRuntimes lists the installed runtimes a device can be slimmed on
	// (iOS 18.5 and later); a slim request for any other runtime is served
	// full.
	SlimRuntimes []string `json:"slimRuntimes,omitempty"`
	// DefaultMode is the mode a request that names none gets (iOS:
	// ios.defaultMode; full elsewhere).
	DefaultMode DeviceMode `json:"defaultMode,omitempty"`
	// ModelWorkers and RuntimeWorkers say, on a gateway, which workers
	// have each model and runtime.
	ModelWorkers   map[string][]string `json:"modelWorkers,omitempty"`
	RuntimeWorkers map[string][]string `json:"runtimeWorkers,omitempty"`
}

// CatalogImage is one installed system image: the runtime (API level) it
// serves, its tag (google_apis, google_apis_playstore, …) and its ABI.
type CatalogImage struct {
	Runtime string `json:"runtime"`
	Tag     string `json:"tag"`
	ABI     string `json:"abi"`
}

// Mode is the mode a request asking want gets of this platform: want, or,
// when it names none, the platform's default (full where there is none).
func (c Catalog) Mode(want DeviceMode) DeviceMode {
	switch {
	case want != "":
		return want
	case c.DefaultMode != "":
		return c.DefaultMode
	}
	return DeviceModeFull
}

// ModeOn is the mode a device for a request asking want (after the
// default) has on runtime: slim only when slim is asked and the runtime can
// be slimmed. It is "" (full) or DeviceModeSlim, as DeviceSpec.Mode is.
func (c Catalog) ModeOn(want DeviceMode, runtime string) DeviceMode {
	if c.Mode(want) == DeviceModeSlim && slices.Contains(c.SlimRuntimes, runtime) {
		return DeviceModeSlim
	}
	return ""
}

// HasImage reports whether an image of tag is installed for runtime.
func (c Catalog) HasImage(runtime, tag string) bool {
	for _, im := range c.Images {
		if im.Runtime == runtime && im.Tag == tag {
			return true
		}
	}
	return false
}

// CatalogResult answers catalog.get.
type CatalogResult struct {
	Platforms []Catalog `json:"platforms"`
}

// EmulatorGPUModes are the Android emulator's -gpu modes, the values of
// android.emulator.gpu; "auto" lets the emulator choose.
func EmulatorGPUModes() []string {
	return []string{"auto", "host", "swiftshader_indirect", "angle_indirect", "guest"}
}
