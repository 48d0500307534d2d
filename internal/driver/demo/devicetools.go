package demo

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/driver"
)

var _ driver.DeviceTools = (*Driver)(nil)

// Simulated device tools: a running device remembers which apps run, the
// URLs opened, its location and appearance, and keeps a log of what was
// done to it (with a line of its own for each boot it answers from), all
// of which its clean wipes, as it wipes files and apps. Like them, none of
// it is in the state file. An app must be installed to launch, as on a
// real device; ids are checked in the platform's form, as the real
// drivers check them.
const (
	opTools = "device-tools"
	// maxLogLines caps a simulated device's log.
	maxLogLines = 2000
	// maxOpenedURLs caps the URLs a device remembers.
	maxOpenedURLs = 100
)

// tools is what the device tools changed on a running device.
type tools struct {
	running    map[string]bool
	urls       []string
	location   *[2]float64
	appearance contract.Appearance
	log        []logLine
}

// logLine is one line of a simulated device's log.
type logLine struct {
	at      time.Time
	process string
	text    string
}

// ToolState is what a simulated device's tools changed, for tests and
// people reading a demo.
type ToolState struct {
	Running    []string
	URLs       []string
	Location   *[2]float64
	Appearance contract.Appearance
}

// Tools says what the device tools changed on device id.
func (d *Driver) Tools(id string) ToolState {
	d.mu.Lock()
	defer d.mu.Unlock()
	rec, ok := d.devices[id]
	if !ok || rec.tools == nil {
		return ToolState{}
	}
	var out ToolState
	for a := range rec.tools.running {
		out.Running = append(out.Running, a)
	}
	slices.Sort(out.Running)
	out.URLs = slices.Clone(rec.tools.urls)
	if rec.tools.location != nil {
		loc := *rec.tools.location
		out.Location = &loc
	}
	out.Appearance = rec.tools.appearance
	return out
}

// withTools runs f on dev's tools, the device running. d.mu must not be
// held.
func (d *Driver) withTools(ctx context.Context, dev driver.Device, f func(rec *device, t *tools) error) error {
	if err := ctx.Err(); err != nil {
		return crash(opTools, err)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	rec, err := d.runningLocked(dev)
	if err != nil {
		return err
	}
	if rec.tools == nil {
		rec.tools = &tools{running: map[string]bool{}}
		rec.tools.logf("kernel", "demo device %s is running", dev.ID)
	}
	return f(rec, rec.tools)
}

// logf adds a line to the device's log.
func (t *tools) logf(process, format string, args ...any) {
	t.log = append(t.log, logLine{at: time.Now(), process: process, text: fmt.Sprintf(format, args...)})
	if len(t.log) > maxLogLines {
		t.log = slices.Delete(t.log, 0, len(t.log)-maxLogLines)
	}
}

// checkID checks an app id in the platform's form.
func (d *Driver) checkID(id string) error {
	if d.platform == contract.PlatformAndroid {
		return contract.CheckPackageName("appId", id)
	}
	return contract.CheckBundleID("appId", id)
}

// systemProcess is the process that logs what the platform does to apps.
func (d *Driver) systemProcess() string {
	if d.platform == contract.PlatformAndroid {
		return "ActivityManager"
	}
	return "SpringBoard"
}

// LaunchApp marks an installed app running.
func (d *Driver) LaunchApp(ctx context.Context, dev driver.Device, id string, args []string) (contract.AppLaunchResult, error) {
	if err := d.checkID(id); err != nil {
		return contract.AppLaunchResult{}, err
	}
	if d.platform == contract.PlatformAndroid && len(args) > 0 {
		return contract.AppLaunchResult{}, contract.BadRequest("args", "an Android app is started by its launcher activity, which takes no arguments; open a deep link with open-url instead")
	}
	var res contract.AppLaunchResult
	err := d.withTools(ctx, dev, func(rec *device, t *tools) error {
		if _, ok := rec.apps[id]; !ok {
			return &driver.AppNotInstalledError{ID: id}
		}
		t.running[id] = true
		t.logf(d.systemProcess(), "launched %s %s", id, strings.Join(args, " "))
		t.logf(id, "%s started", id)
		res = contract.AppLaunchResult{AppID: id}
		if d.platform == contract.PlatformIOS {
			res.PID = 1000 + len(t.log)
		}
		return nil
	})
	return res, err
}

// TerminateApp marks the app stopped.
func (d *Driver) TerminateApp(ctx context.Context, dev driver.Device, id string) error {
	if err := d.checkID(id); err != nil {
		return err
	}
	return d.withTools(ctx, dev, func(_ *device, t *tools) error {
		if t.running[id] {
			delete(t.running, id)
			t.logf(d.systemProcess(), "terminated %s", id)
		}
		return nil
	})
}

// OpenURL remembers the URL opened.
func (d *Driver) OpenURL(ctx context.Context, dev driver.Device, url string) error {
	return d.withTools(ctx, dev, func(_ *device, t *tools) error {
		t.urls = append(t.urls, url)
		if len(t.urls) > maxOpenedURLs {
			t.urls = slices.Delete(t.urls, 0, len(t.urls)-maxOpenedURLs)
		}
		t.logf(d.systemProcess(), "opened %s", url)
		return nil
	})
}

// DeviceLogs answers the device's log lines that q asks for.
func (d *Driver) DeviceLogs(ctx context.Context, dev driver.Device, q driver.LogQuery) (contract.DeviceLogs, error) {
	var lines []string
	err := d.withTools(ctx, dev, func(_ *device, t *tools) error {
		now := time.Now()
		for _, l := range t.log {
			if q.Since > 0 && l.at.Before(now.Add(-q.Since)) || q.Process != "" && l.process != q.Process {
				continue
			}
			lines = append(lines, l.at.UTC().Format("2006-01-02 15:04:05.000")+" "+l.process+": "+l.text)
		}
		return nil
	})
	if err != nil {
		return contract.DeviceLogs{}, err
	}
	return contract.BoundLogLines(lines, q.Lines), nil
}

// SetLocation remembers the location.
func (d *Driver) SetLocation(ctx context.Context, dev driver.Device, lat, lon float64) error {
	return d.withTools(ctx, dev, func(_ *device, t *tools) error {
		t.location = &[2]float64{lat, lon}
		t.logf("locationd", "location set to %v,%v", lat, lon)
		return nil
	})
}

// SetAppearance remembers the appearance.
func (d *Driver) SetAppearance(ctx context.Context, dev driver.Device, a contract.Appearance) error {
	return d.withTools(ctx, dev, func(_ *device, t *tools) error {
		t.appearance = a
		t.logf(d.systemProcess(), "appearance set to %s", a)
		return nil
	})
}
