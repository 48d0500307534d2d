package android

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"

	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/driver"
)

// profile is a device definition avdmanager knows: a model.
type profile struct {
	id   string // avdmanager's id, e.g. pixel_8; the model's alias
	name string // e.g. Pixel 8; the model
	tag  string // e.g. android-wear; empty for phones and tablets
}

// image is an installed system image: a runtime.
type image struct {
	pkg   string // system-images;android-35;google_apis;x86_64
	level string // 35
	tag   string // google_apis
	abi   string // x86_64
}

// resolvedSpec is what Provision needs beyond the spec.
type resolvedSpec struct {
	profileID string
	pkg       string
}

var (
	profileIDLine   = regexp.MustCompile(`^id:\s*\d+\s+or\s+"([^"]+)"`)
	profileNameLine = regexp.MustCompile(`^Name:\s*(.+)$`)
	profileTagLine  = regexp.MustCompile(`^Tag\s*:\s*(.+)$`)
	levelPattern    = regexp.MustCompile(`^(\d+)(?:\.(\d+))?(?:-ext(\d+))?$`)
	plainLevel      = regexp.MustCompile(`^\d+(\.\d+)?$`)
)

// classDefaults are the models each class prefers, best first. The core
// takes the first the catalog offers, so lists name models an SDK may lack.
func classDefaults() map[contract.DeviceClass][]string {
	return map[contract.DeviceClass][]string{
		contract.ClassPhone:   {"Pixel 9", "Pixel 8", "Pixel 7", "Pixel 6", "Medium Phone"},
		contract.ClassTablet:  {"Pixel Tablet", "Medium Tablet"},
		contract.ClassWatch:   {"Wear OS Large Round", "Wear OS Small Round"},
		contract.ClassTV:      {"Television (1080p)", "Television (4K)"},
		contract.ClassAuto:    {"Automotive (1080p landscape)", "Automotive (1024p landscape)"},
		contract.ClassDesktop: {"Medium Desktop", "Large Desktop"},
	}
}

// parseProfiles reads `avdmanager list device`: entries separated by dashes,
// each an `id: N or "<id>"` line followed by `Name:` and maybe `Tag :`.
func parseProfiles(out string) []profile {
	var ps []profile
	var cur *profile
	for _, raw := range strings.Split(out, "\n") {
		line := strings.TrimSpace(raw)
		if m := profileIDLine.FindStringSubmatch(line); m != nil {
			ps = append(ps, profile{id: m[1]})
			cur = &ps[len(ps)-1]
			continue
		}
		if cur == nil {
			continue
		}
		if strings.HasPrefix(line, "---") {
			cur = nil
		} else if m := profileNameLine.FindStringSubmatch(line); m != nil && cur.name == "" {
			cur.name = strings.TrimSpace(m[1])
		} else if m := profileTagLine.FindStringSubmatch(line); m != nil && cur.tag == "" {
			cur.tag = strings.TrimSpace(m[1])
		}
	}
	for i := range ps {
		if ps[i].name == "" {
			ps[i].name = ps[i].id
		}
	}
	return ps
}

// classOf tells a profile's class from its tag, else its name.
func classOf(p profile) contract.DeviceClass {
	tag, name, id := strings.ToLower(p.tag), strings.ToLower(p.name), strings.ToLower(p.id)
	switch {
	case strings.Contains(tag, "wear") || strings.HasPrefix(name, "wear os") || strings.HasPrefix(id, "wearos"):
		return contract.ClassWatch
	case strings.Contains(tag, "tv") || strings.HasPrefix(name, "television") || strings.HasPrefix(id, "tv_"):
		return contract.ClassTV
	case strings.Contains(tag, "automotive") || strings.HasPrefix(name, "automotive"):
		return contract.ClassAuto
	case strings.Contains(tag, "desktop") || strings.Contains(name, "desktop"):
		return contract.ClassDesktop
	case strings.Contains(tag, "xr"):
		return contract.ClassVision
	case strings.Contains(name, "tablet") || slices.Contains([]string{"nexus_7", "nexus_7_2013", "nexus_9", "nexus_10", "pixel_c"}, id):
		return contract.ClassTablet
	}
	return contract.ClassPhone
}

// classTags are the image tags made for a class; phones and tablets use the
// plain ones.
func classTags(c contract.DeviceClass) []string {
	switch c {
	case contract.ClassWatch:
		return []string{"android-wear", "android-wear-cn"}
	case contract.ClassTV:
		return []string{"android-tv", "google-tv"}
	case contract.ClassAuto:
		return []string{"android-automotive", "android-automotive-playstore"}
	case contract.ClassDesktop:
		return []string{"android-desktop"}
	case contract.ClassVision:
		return []string{"android-xr"}
	}
	return nil
}

// specialTag reports whether tag is made for one class other than phones.
func specialTag(tag string) bool {
	for _, c := range []contract.DeviceClass{contract.ClassWatch, contract.ClassTV, contract.ClassAuto, contract.ClassDesktop, contract.ClassVision} {
		if slices.Contains(classTags(c), tag) {
			return true
		}
	}
	return false
}

// hostABI is the image ABI this machine runs natively; any other is either
// unusably slow or does not boot.
func hostABI() string {
	if runtime.GOARCH == "arm64" {
		return "arm64-v8a"
	}
	return "x86_64"
}

// pickImage chooses the image for a model of class c at level: the host's
// ABI first, then an image made for the class, then google_apis; among
// equals, the first in imgs.
func pickImage(imgs []image, level string, c contract.DeviceClass) (image, bool) {
	score := func(im image) [3]int {
		var s [3]int
		if im.abi == hostABI() {
			s[0] = 1
		}
		switch {
		case slices.Contains(classTags(c), im.tag):
			s[1] = 2
		case !specialTag(im.tag):
			s[1] = 1
		}
		if im.tag == "google_apis" {
			s[2] = 1
		}
		return s
	}
	var best image
	var bestScore [3]int
	found := false
	for _, im := range imgs {
		if im.level != level {
			continue
		}
		if s := score(im); !found || slices.Compare(s[:], bestScore[:]) > 0 {
			best, bestScore, found = im, s, true
		}
	}
	return best, found
}

// levelsOf lists the installed API levels, newest first. Numeric levels
// come before previews named by code name, so a preview is never the
// default.
func levelsOf(imgs []image) []string {
	var levels []string
	for _, im := range imgs {
		if !slices.Contains(levels, im.level) {
			levels = append(levels, im.level)
		}
	}
	slices.SortStableFunc(levels, func(a, b string) int { return compareLevels(b, a) })
	return levels
}

func compareLevels(a, b string) int {
	ka, okA := levelKey(a)
	kb, okB := levelKey(b)
	switch {
	case okA && okB:
		return slices.Compare(ka, kb)
	case okA:
		return 1
	case okB:
		return -1
	}
	return strings.Compare(b, a)
}

func levelKey(l string) ([]int, bool) {
	m := levelPattern.FindStringSubmatch(l)
	if m == nil {
		return nil, false
	}
	key := make([]int, 3)
	for i := range key {
		key[i], _ = strconv.Atoi(m[i+1])
	}
	return key, true
}

// inventory asks avdmanager for the device profiles and reads the installed
// images from the SDK's directories with the walk the component operations
// use: sdkmanager --list_installed would start a JVM, which takes seconds,
// to say what the directories say, and could disagree with FindComponent.
func (d *Driver) inventory(ctx context.Context, op string) ([]profile, []image, error) {
	res, err := d.call(ctx, op, d.sdk.avdmanager, callTimeout, nil, "list", "device")
	if err := succeeded(res, err, op, "avdmanager list device"); err != nil {
		return nil, nil, err
	}
	profiles := parseProfiles(string(res.Stdout))
	if len(profiles) == 0 {
		return nil, nil, crashf(op, "avdmanager list device listed no device definitions")
	}
	imgs, err := d.scan(op)
	if err != nil {
		return nil, nil, err
	}
	return profiles, plainImages(imgs), nil
}

// ListCatalog reports the device profiles as models and the installed API
// levels as runtimes. Every model runs on every level, as the emulator
// allows; the image chosen for a level fits the model's class when one is
// installed.
func (d *Driver) ListCatalog(ctx context.Context) (driver.Catalog, error) {
	profiles, imgs, err := d.inventory(ctx, "catalog")
	if err != nil {
		return driver.Catalog{}, err
	}
	levels := levelsOf(imgs)
	c := driver.Catalog{
		Platform:      contract.PlatformAndroid,
		Runtimes:      levels,
		ModelRuntimes: map[string][]string{},
		ModelAliases:  map[string][]string{},
		ModelClasses:  map[string]contract.DeviceClass{},
		ClassDefaults: classDefaults(),
	}
	if c.Runtimes == nil {
		c.Runtimes = []string{}
	}
	if len(levels) > 0 {
		c.DefaultRuntime = levels[0]
	}
	for _, im := range imgs {
		c.Images = append(c.Images, contract.CatalogImage{Runtime: im.level, Tag: im.tag, ABI: im.abi})
	}
	for _, p := range profiles {
		if _, dup := c.ModelClasses[p.name]; dup {
			continue
		}
		c.Models = append(c.Models, p.name)
		c.ModelRuntimes[p.name] = slices.Clone(c.Runtimes)
		c.ModelClasses[p.name] = classOf(p)
		if p.id != p.name {
			c.ModelAliases[p.name] = []string{p.id}
		}
	}
	return c, nil
}

// ResolveSpec matches the model by profile name or id, ignoring case. An
// empty OS version takes the newest installed API level; a level or range
// takes the newest installed level that fits. An image tag, when asked,
// counts only the levels with an image of that tag. A plain level that is
// not installed (with that tag) is *driver.RuntimeMissingError naming it
// as the component to download: "36", or "36;<tag>" for a tag. The spec
// names the tag of the image chosen. ResolveSpec never downloads.
func (d *Driver) ResolveSpec(ctx context.Context, req driver.Request) (contract.DeviceSpec, error) {
	if req.Platform != "" && req.Platform != contract.PlatformAndroid {
		return contract.DeviceSpec{}, fmt.Errorf("android: the android driver cannot serve %s", req.Platform)
	}
	profiles, imgs, err := d.inventory(ctx, "resolve")
	if err != nil {
		return contract.DeviceSpec{}, err
	}
	var prof *profile
	for i, p := range profiles {
		if strings.EqualFold(p.name, req.Model) || strings.EqualFold(p.id, req.Model) {
			prof = &profiles[i]
			break
		}
	}
	if prof == nil {
		return contract.DeviceSpec{}, &driver.UnknownModelError{Platform: contract.PlatformAndroid, Model: req.Model}
	}
	want := strings.TrimSpace(req.OSVersion)
	if req.ImageTag != "" {
		all := levelsOf(imgs)
		imgs = slices.DeleteFunc(imgs, func(im image) bool { return im.tag != req.ImageTag })
		level, err := pickLevel(levelsOf(imgs), want)
		var missing *driver.RuntimeMissingError
		if errors.As(err, &missing) {
			missing.ImageTag = req.ImageTag
			if want == "" && len(all) > 0 {
				// No level has the tag: the newest installed level's
				// image of it is the one to download.
				missing.Downloadable, missing.Component = true, all[0]
			}
			if missing.Downloadable {
				missing.Component = tagComponent(missing.Component, req.ImageTag)
			}
			return contract.DeviceSpec{}, missing
		}
		if err != nil {
			return contract.DeviceSpec{}, err
		}
		want = level
	}
	level, err := pickLevel(levelsOf(imgs), want)
	if err != nil {
		return contract.DeviceSpec{}, err
	}
	im, _ := pickImage(imgs, level, classOf(*prof))
	spec := contract.DeviceSpec{Platform: contract.PlatformAndroid, Model: prof.name, OSVersion: level, ImageTag: im.tag}
	d.mu.Lock()
	d.resolved[spec] = resolvedSpec{profileID: prof.id, pkg: im.pkg}
	d.mu.Unlock()
	return spec, nil
}

// pickLevel chooses among installed levels (newest first) for want.
func pickLevel(levels []string, want string) (string, error) {
	missing := &driver.RuntimeMissingError{Platform: contract.PlatformAndroid, OSVersion: want}
	if want == "" {
		if len(levels) == 0 {
			return "", missing // no level to suggest
		}
		return levels[0], nil // numeric levels sort before previews
	}
	if slices.Contains(levels, want) {
		return want, nil
	}
	if spec, err := contract.ParseOSVersion(want); err == nil {
		for _, l := range levels {
			if plainLevel.MatchString(l) && spec.Matches(l) {
				return l, nil
			}
		}
	}
	if plainLevel.MatchString(want) {
		missing.Downloadable, missing.Component = true, want
	}
	return "", missing
}
