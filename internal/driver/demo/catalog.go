package demo

import (
	"slices"

	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/driver"
)

// model is one row of a platform's catalog.
type model struct {
	name    string
	class   contract.DeviceClass
	aliases []string
	// runtimes is ordered newest first, which ResolveSpec relies on.
	runtimes []string
}

// The catalogs are built by functions rather than held in package variables,
// so each Driver owns its copy and nothing shared can be changed.

func catalogFor(p contract.Platform) driver.Catalog {
	if p == contract.PlatformAndroid {
		return androidCatalog()
	}
	return iosCatalog()
}

// iosCatalog mirrors a recent Xcode: the newest devices ship with the newest
// runtime only, older ones run on the older runtimes too.
func iosCatalog() driver.Catalog {
	all := []string{"26.1", "18.6", "17.5"}
	newest := []string{"26.1"}
	return buildCatalog(contract.PlatformIOS, all, "26.1", []model{
		{"iPhone 17 Pro", contract.ClassPhone, []string{"iphone-17-pro"}, newest},
		{"iPhone 17", contract.ClassPhone, []string{"iphone-17"}, newest},
		{"iPhone 16 Pro", contract.ClassPhone, []string{"iphone-16-pro"}, all},
		{"iPhone 16", contract.ClassPhone, []string{"iphone-16"}, all},
		{"iPhone 15", contract.ClassPhone, []string{"iphone-15"}, all},
		{"iPad Pro 11-inch (M5)", contract.ClassTablet, []string{"ipad-pro-11"}, all},
		{"iPad Air 11-inch (M3)", contract.ClassTablet, []string{"ipad-air-11"}, all},
		{"Apple Watch Series 11 (46mm)", contract.ClassWatch, []string{"apple-watch-series-11"}, newest},
		{"Apple TV 4K (3rd generation)", contract.ClassTV, []string{"apple-tv-4k"}, all},
	}, map[contract.DeviceClass][]string{
		// Defaults name models this catalog lacks on purpose: the core takes
		// the first one the platform offers, and real installs differ.
		contract.ClassPhone:  {"iPhone 17", "iPhone 16", "iPhone 15", "iPhone 14", "iPhone 13"},
		contract.ClassTablet: {"iPad Pro 11-inch (M5)", "iPad Pro 11-inch (M4)", "iPad Air 11-inch (M3)"},
		contract.ClassWatch:  {"Apple Watch Series 11 (46mm)"},
		contract.ClassTV:     {"Apple TV 4K (3rd generation)"},
	})
}

// androidCatalog names runtimes by API level, as system images do. Aliases
// are the avdmanager device IDs.
func androidCatalog() driver.Catalog {
	all := []string{"36", "35", "34"}
	return buildCatalog(contract.PlatformAndroid, all, "36", []model{
		{"Pixel 9", contract.ClassPhone, []string{"pixel_9"}, all},
		{"Pixel 8", contract.ClassPhone, []string{"pixel_8"}, all},
		{"Medium Phone", contract.ClassPhone, []string{"medium_phone"}, all},
		{"Pixel Tablet", contract.ClassTablet, []string{"pixel_tablet"}, all},
		{"Wear OS Large Round", contract.ClassWatch, []string{"wearos_large_round"}, all},
		{"Television (1080p)", contract.ClassTV, []string{"tv_1080p"}, all},
		{"Automotive (1080p landscape)", contract.ClassAuto, []string{"automotive_1080p_landscape"}, all},
	}, map[contract.DeviceClass][]string{
		contract.ClassPhone:  {"Pixel 9", "Pixel 8", "Pixel 7", "Pixel 6", "Medium Phone"},
		contract.ClassTablet: {"Pixel Tablet"},
		contract.ClassWatch:  {"Wear OS Large Round"},
		contract.ClassTV:     {"Television (1080p)"},
		contract.ClassAuto:   {"Automotive (1080p landscape)"},
	})
}

func buildCatalog(p contract.Platform, runtimes []string, defaultRuntime string, models []model, defaults map[contract.DeviceClass][]string) driver.Catalog {
	c := driver.Catalog{
		Platform:       p,
		Runtimes:       slices.Clone(runtimes),
		DefaultRuntime: defaultRuntime,
		ModelRuntimes:  make(map[string][]string, len(models)),
		ModelAliases:   make(map[string][]string, len(models)),
		ModelClasses:   make(map[string]contract.DeviceClass, len(models)),
		ClassDefaults:  defaults,
	}
	for _, m := range models {
		c.Models = append(c.Models, m.name)
		// Cloned because several rows share one runtimes slice.
		c.ModelRuntimes[m.name] = slices.Clone(m.runtimes)
		c.ModelAliases[m.name] = m.aliases
		c.ModelClasses[m.name] = m.class
	}
	return c
}
