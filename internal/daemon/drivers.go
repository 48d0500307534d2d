package daemon

// The real drivers: which are enabled, and starting them for a daemon.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/simlock/simlock/internal/config"
	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/driver"
	"github.com/simlock/simlock/internal/driver/android"
	"github.com/simlock/simlock/internal/driver/demo"
	"github.com/simlock/simlock/internal/driver/ios"
	"github.com/simlock/simlock/internal/ownership"
)

// DriverWiring is how a daemon run from the command line gets its drivers:
// the config and home it runs with, the process environment, where tools
// are found and the log. Options.SetupDrivers is its Setup.
type DriverWiring struct {
	Config   *config.Config
	Home     string
	Getenv   func(string) string
	LookPath func(string) (string, error)
	Logger   *slog.Logger
}

// Check reads the enabled driver names now, so that a typo stops the start
// with a clear message; the drivers themselves start once the home is ours
// (Setup).
func (w DriverWiring) Check() error {
	_, _, err := enabledDrivers(w.Config, w.Getenv, w.LookPath)
	return err
}

// Setup starts the enabled drivers (see buildDrivers); installed are the
// component receipts the store holds, by platform.
func (w DriverWiring) Setup(ctx context.Context, installed map[contract.Platform][]string) (DriverSetup, error) {
	set, err := buildDrivers(ctx, w.Config, w.Home, w.Getenv, w.LookPath, w.Logger, installed)
	return DriverSetup{Drivers: set.drivers, Notes: set.notes, Rejections: set.rejections, Prerequisites: set.prerequisites}, err
}

// driverSet is what the daemon gets: the drivers that started, why the
// others did not, and how to ask each platform what it lacks.
type driverSet struct {
	drivers       map[contract.Platform]driver.Driver
	notes         map[contract.Platform]string
	rejections    map[contract.Platform]contract.RootRejection
	prerequisites func(ctx context.Context) []driver.Missing
}

// enabledDrivers reads which drivers to start: SIMLOCK_DRIVERS, else
// drivers.enabled, else every platform whose tools are found; demo only
// when named (or drivers.demo.enabled).
func enabledDrivers(cfg *config.Config, getenv func(string) string, lookPath func(string) (string, error)) ([]string, bool, error) {
	var names []string
	explicit := true
	switch {
	case getenv("SIMLOCK_DRIVERS") != "":
		for _, n := range strings.Split(getenv("SIMLOCK_DRIVERS"), ",") {
			if n = strings.TrimSpace(n); n != "" {
				names = append(names, n)
			}
		}
	case cfg.Has("drivers.enabled"):
		names = cfg.List("drivers.enabled")
		if cfg.Bool("drivers.demo.enabled") && !slices.Contains(names, "demo") {
			names = append(names, "demo")
		}
	default:
		explicit = false
		if _, err := lookPath("xcrun"); err == nil {
			names = append(names, "ios")
		}
		if android.SDKRootFrom(getenv) != "" {
			names = append(names, "android")
		}
		if cfg.Bool("drivers.demo.enabled") {
			names = append(names, "demo")
		}
	}
	for _, n := range names {
		if n != "ios" && n != "android" && n != "demo" {
			return nil, false, fmt.Errorf("SIMLOCK_DRIVERS / drivers.enabled: unknown driver %q (known: ios, android, demo)", n)
		}
	}
	return names, explicit, nil
}

// buildDrivers starts the enabled drivers. A driver that cannot start (its
// tools missing, its root refused) disables its platform only.
func buildDrivers(ctx context.Context, cfg *config.Config, home string, getenv func(string) string, lookPath func(string) (string, error), log *slog.Logger, installed map[contract.Platform][]string) (driverSet, error) {
	set := driverSet{
		drivers: map[contract.Platform]driver.Driver{}, notes: map[contract.Platform]string{},
		rejections: map[contract.Platform]contract.RootRejection{},
	}
	names, explicit, err := enabledDrivers(cfg, getenv, lookPath)
	if err != nil {
		return set, err
	}
	instance, err := ownership.LoadInstance(home)
	if err != nil {
		return set, err
	}
	root := func(p contract.Platform) string {
		if r := cfg.String("drivers." + string(p) + ".deviceRoot"); r != "" {
			return r
		}
		return filepath.Join(home, "devices", string(p))
	}
	iosOpts := ios.Options{Root: root(contract.PlatformIOS), Instance: instance, LookPath: lookPath, Logger: log.With("driver", "ios"),
		Slim: ios.SlimOptions{Categories: cfg.List("ios.slim.categories"), BootTimeout: time.Duration(cfg.Int("ios.slim.bootTimeoutMs")) * time.Millisecond}}
	androidOpts := android.Options{
		Root: root(contract.PlatformAndroid), Instance: instance, SDKRoot: android.SDKRootFrom(getenv),
		AdbPort: int(cfg.Int("drivers.android.adbServerPort")), Home: home, Logger: log.With("driver", "android"),
		AcceptLicenses: cfg.Bool("downloads.acceptAndroidLicenses"),
		Emulator:       emulatorOptions(cfg),
	}
	failed := func(p contract.Platform, err error) {
		var re *ownership.RootError
		if errors.As(err, &re) {
			set.rejections[p] = contract.RootRejection{Path: re.Path, Reason: string(re.Reason), Detail: re.Detail}
		}
		set.notes[p] = err.Error()
	}
	startCtx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if slices.Contains(names, "ios") {
		if d, err := ios.New(startCtx, iosOpts); err != nil {
			failed(contract.PlatformIOS, err)
		} else {
			set.drivers[contract.PlatformIOS] = d
		}
	}
	if slices.Contains(names, "android") {
		if d, err := android.New(startCtx, androidOpts); err != nil {
			failed(contract.PlatformAndroid, err)
		} else {
			set.drivers[contract.PlatformAndroid] = d
		}
	}
	demoServes := map[contract.Platform]bool{}
	if slices.Contains(names, "demo") {
		for _, p := range contract.Platforms() {
			// A real driver named for a platform keeps it, even when it
			// failed: a failure must show, not be papered over.
			if slices.Contains(names, string(p)) {
				continue
			}
			d, err := demo.New(demo.Options{
				Platform:      p,
				ProvisionTime: time.Duration(cfg.Int("drivers.demo.provisionMs")) * time.Millisecond,
				BootTime:      time.Duration(cfg.Int("drivers.demo.bootMs")) * time.Millisecond,
				ReclaimTime:   time.Duration(cfg.Int("drivers.demo.reclaimMs")) * time.Millisecond,
				Fail:          cfg.List("drivers.demo.fail"),
				// Downloaded runtimes are installed for good: the
				// receipts of earlier installs bring them back.
				DownloadableRuntimes: cfg.PlatformLists("drivers.demo.downloadableRuntimes")[string(p)],
				DownloadTime:         time.Duration(cfg.Int("drivers.demo.downloadMs")) * time.Millisecond,
				DownloadQuietTime:    time.Duration(cfg.Int("drivers.demo.downloadQuietMs")) * time.Millisecond,
				Installed:            demoInstalled(installed[p], p),
				// Simulated devices outlive the daemon, as real ones do.
				StateFile: filepath.Join(home, "demo-devices"),
			})
			if err != nil {
				// A damaged state file turns this platform off, not the
				// daemon: status and doctor show why.
				failed(p, fmt.Errorf("demo driver: %w", err))
				continue
			}
			set.drivers[p] = d
			demoServes[p] = true
		}
	}
	for _, p := range contract.Platforms() {
		if _, ok := set.drivers[p]; ok || set.notes[p] != "" {
			continue
		}
		if explicit {
			set.notes[p] = fmt.Sprintf("the %s driver is not enabled (SIMLOCK_DRIVERS or drivers.enabled)", p)
		} else {
			set.notes[p] = fmt.Sprintf("no %s tools were found; SIMLOCK_DRIVERS=demo serves simulated devices", p)
		}
	}
	set.prerequisites = func(ctx context.Context) []driver.Missing {
		var out []driver.Missing
		if !demoServes[contract.PlatformIOS] {
			out = append(out, ios.Prerequisites(ctx, iosOpts)...)
		}
		if !demoServes[contract.PlatformAndroid] {
			out = append(out, android.Prerequisites(ctx, androidOpts)...)
		}
		return out
	}
	return set, nil
}

// demoInstalled keeps the receipts a demo driver made (earlier installs on
// the demo driver); a real driver's receipts mean nothing to it.
func demoInstalled(receipts []string, p contract.Platform) []string {
	var out []string
	for _, r := range receipts {
		if strings.HasPrefix(r, "demo:"+string(p)+":") {
			out = append(out, r)
		}
	}
	return out
}

// emulatorOptions reads the android.emulator.* keys.
func emulatorOptions(cfg *config.Config) android.EmulatorOptions {
	return android.EmulatorOptions{
		Window: !cfg.Bool("android.emulator.headless"), GPU: cfg.String("android.emulator.gpu"),
		Audio: cfg.Bool("android.emulator.audio"), BootAnimation: cfg.Bool("android.emulator.bootAnimation"),
	}
}

// driverNotes is, per platform with no driver, why: a refused device root
// first (it is what disabled a driver that was found), else the note the
// driver setup left (its detection's error, or that it is not enabled).
// NO_DRIVER carries it, so a refused request says what status would.
func driverNotes(notes map[contract.Platform]string, rejections map[contract.Platform]contract.RootRejection) map[contract.Platform]string {
	out := make(map[contract.Platform]string, len(notes)+len(rejections))
	for p, n := range notes {
		out[p] = n
	}
	for p, r := range rejections {
		why := "its device root " + r.Path + " was refused (" + r.Reason
		if r.Detail != "" {
			why += ": " + r.Detail
		}
		out[p] = why + "); simlock doctor says more"
	}
	return out
}
