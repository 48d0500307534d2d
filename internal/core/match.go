package core

import (
	"slices"
	"strings"

	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/driver"
)

// Want is a request's spec with its class settled: exactly one of Model and
// Class is set.
type Want struct {
	Platform  contract.Platform
	Model     string
	Class     contract.DeviceClass
	OSVersion string
	// ImageTag is the Android system image tag asked for; "" takes any.
	ImageTag string
	// Mode is the mode asked for; "" takes the catalog's default.
	Mode contract.DeviceMode
}

// ModeIn is the mode w asks of cat's platform, its default applied.
func (w Want) ModeIn(cat driver.Catalog) contract.DeviceMode { return cat.Mode(w.Mode) }

// WantOf settles a request spec: no model and no class means a phone.
func WantOf(s contract.RequestSpec, cat driver.Catalog) Want {
	w := Want{Platform: s.Platform, Class: s.Class, OSVersion: s.OSVersion, ImageTag: s.ImageTag, Mode: s.Mode}
	if s.Model != "" {
		w.Model = canonicalModel(s.Model, cat)
		w.Class = ""
	} else if w.Class == "" {
		w.Class = contract.ClassPhone
	}
	return w
}

// canonicalModel resolves an alias to its model; unknown names stay as given
// for the driver to refuse.
func canonicalModel(name string, cat driver.Catalog) string {
	if slices.Contains(cat.Models, name) {
		return name
	}
	for _, m := range cat.Models {
		if strings.EqualFold(m, name) {
			return m
		}
	}
	for model, aliases := range cat.ModelAliases {
		for _, a := range aliases {
			if strings.EqualFold(a, name) {
				return model
			}
		}
	}
	return name
}

// Fits reports whether an existing device of spec d serves w.
func Fits(d contract.DeviceSpec, w Want, cat driver.Catalog) bool {
	if d.Platform != w.Platform {
		return false
	}
	if w.Model != "" && d.Model != w.Model {
		return false
	}
	if w.Class != "" && cat.ModelClasses[d.Model] != w.Class {
		return false
	}
	if w.ImageTag != "" && d.ImageTag != w.ImageTag {
		return false
	}
	// Full is a guarantee and slim best effort: a device serves the mode
	// a new device for w on its runtime would have, so a slim request on
	// a runtime that cannot slim takes a full device there.
	if d.Mode != cat.ModeOn(w.Mode, d.OSVersion) {
		return false
	}
	return VersionFits(d.OSVersion, w.OSVersion)
}

// VersionFits reports whether an installed version serves a wanted one: an
// empty want takes any, "18" takes 18 and 18.x, "18.4" takes 18.4 and 18.4.x,
// and a range takes what it bounds.
func VersionFits(have, want string) bool {
	spec, err := contract.ParseOSVersion(want)
	return err == nil && spec.Matches(have)
}

// ModelsFor lists, in preference order, the models that could serve w now:
// the model itself, or the class's models (see ClassModels) that pair with
// an installed runtime fitting the wanted version (any, when none is given).
func ModelsFor(w Want, cat driver.Catalog, preferred []string) []string {
	if w.Model != "" {
		return []string{w.Model}
	}
	var out []string
	for _, m := range ClassModels(w, cat, preferred) {
		if NewestFitting(cat.ModelRuntimes[m], w.OSVersion) != "" {
			out = append(out, m)
		}
	}
	return out
}

// ClassModels lists the class's models the catalog offers, in preference
// order: the configured list first, then the platform's own.
func ClassModels(w Want, cat driver.Catalog, preferred []string) []string {
	var out []string
	for _, m := range append(slices.Clone(preferred), cat.ClassDefaults[w.Class]...) {
		if !slices.Contains(out, m) && slices.Contains(cat.Models, m) {
			out = append(out, m)
		}
	}
	return out
}

// NewestFitting is the newest of runtimes that fits want, or "".
func NewestFitting(runtimes []string, want string) string {
	best := ""
	for _, rt := range runtimes {
		if VersionFits(rt, want) && (best == "" || contract.CompareVersions(rt, best) > 0) {
			best = rt
		}
	}
	return best
}
