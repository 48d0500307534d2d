package ios

import (
	"context"
	"errors"
	"math"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/driver"
	"github.com/simlock/simlock/internal/runner"
)

var _ driver.DeviceTools = (*Driver)(nil)

// Device tools, each one simctl call on the device by its UDID, scoped to
// the root (--set): launch, terminate, openurl, location set, ui
// appearance, and the log read by `spawn <udid> log show` inside the
// simulator. Every value is one argument of xcrun; the log's process
// filter is quoted inside log's predicate, which its form
// (contract.CheckLogFilter: no quote, no backslash) cannot leave.
const (
	opTools = "device-tools"
	// logsTimeout bounds a log read: log show of a day's window is slow.
	logsTimeout = 2 * time.Minute
	// defaultLogWindow is what a log read without a window reads back, of
	// which the last lines are answered.
	defaultLogWindow = 10 * time.Minute
)

var (
	// notInstalled is simctl launch's refusal of a bundle id the device
	// does not have: FrontBoard's "no application" error.
	notInstalled = regexp.MustCompile(`FBSOpenApplicationServiceErrorDomain, code=4|unknown to FrontBoard`)
	// notRunning is simctl terminate's answer for an app that is not
	// running, which is what terminate asks for.
	notRunning = regexp.MustCompile(`found nothing to terminate`)
	// launchedPID reads "<bundle id>: <pid>", simctl launch's answer.
	launchedPID = regexp.MustCompile(`:\s*(\d+)\s*$`)
)

// LaunchApp runs simctl launch <udid> <bundle id> args….
func (d *Driver) LaunchApp(ctx context.Context, dev driver.Device, id string, args []string) (contract.AppLaunchResult, error) {
	if err := contract.CheckBundleID("appId", id); err != nil {
		return contract.AppLaunchResult{}, err
	}
	udid, err := udidOf(opTools, dev)
	if err != nil {
		return contract.AppLaunchResult{}, err
	}
	argv := append([]string{"launch", udid, id}, args...)
	out, err := d.simctl(ctx, opTools, commandTimeout, nil, argv...)
	var ce *CallError
	if errors.As(err, &ce) && ce.Err == nil && notInstalled.MatchString(ce.Stderr) {
		return contract.AppLaunchResult{}, &driver.AppNotInstalledError{ID: id}
	}
	if err != nil {
		return contract.AppLaunchResult{}, err
	}
	res := contract.AppLaunchResult{AppID: id}
	if m := launchedPID.FindStringSubmatch(strings.TrimSpace(string(out))); m != nil {
		res.PID, _ = strconv.Atoi(m[1])
	}
	return res, nil
}

// TerminateApp runs simctl terminate <udid> <bundle id>.
func (d *Driver) TerminateApp(ctx context.Context, dev driver.Device, id string) error {
	if err := contract.CheckBundleID("appId", id); err != nil {
		return err
	}
	udid, err := udidOf(opTools, dev)
	if err != nil {
		return err
	}
	_, err = d.simctl(ctx, opTools, commandTimeout, notRunning, "terminate", udid, id)
	return err
}

// OpenURL runs simctl openurl <udid> <url>.
func (d *Driver) OpenURL(ctx context.Context, dev driver.Device, url string) error {
	udid, err := udidOf(opTools, dev)
	if err != nil {
		return err
	}
	_, err = d.simctl(ctx, opTools, commandTimeout, nil, "openurl", udid, url)
	// LaunchServices' kLSApplicationNotFoundErr: nothing installed claims
	// the URL's scheme.
	if callErr := (*CallError)(nil); errors.As(err, &callErr) && strings.Contains(callErr.Stderr, "OSStatus error -10814") {
		return &driver.NoAppForURLError{URL: url}
	}
	return err
}

// DeviceLogs runs simctl spawn <udid> log show --style compact --last
// <minutes>m [--predicate 'process == "P"'] and answers its last lines.
// log show's window is in whole minutes, so a window is rounded up to one.
func (d *Driver) DeviceLogs(ctx context.Context, dev driver.Device, q driver.LogQuery) (contract.DeviceLogs, error) {
	udid, err := udidOf(opTools, dev)
	if err != nil {
		return contract.DeviceLogs{}, err
	}
	// A day of a busy simulator's log is far more than the answer can
	// hold: only its tail is kept while log show writes it.
	out, err := d.simctlCmd(ctx, opTools, runner.Cmd{Args: logShowArgs(udid, q), Timeout: logsTimeout,
		MaxStdout: driver.MaxLogOutput, KeepTail: true}, nil)
	if err != nil {
		return contract.DeviceLogs{}, err
	}
	var lines []string
	for _, l := range strings.Split(strings.TrimRight(string(out), "\n"), "\n") {
		// The header log show prints first is no line of the log.
		if l == "" || strings.HasPrefix(l, "Timestamp ") {
			continue
		}
		lines = append(lines, l)
	}
	return contract.BoundLogLines(lines, q.Lines), nil
}

// logShowArgs is the simctl call that reads q of udid's log.
func logShowArgs(udid string, q driver.LogQuery) []string {
	window := q.Since
	if window <= 0 {
		window = defaultLogWindow
	}
	minutes := int64(math.Ceil(window.Minutes()))
	argv := []string{"spawn", udid, "log", "show", "--style", "compact", "--last", strconv.FormatInt(minutes, 10) + "m"}
	if q.Process != "" {
		argv = append(argv, "--predicate", `process == "`+q.Process+`"`)
	}
	return argv
}

// SetLocation runs simctl location <udid> set <lat>,<lon>.
func (d *Driver) SetLocation(ctx context.Context, dev driver.Device, lat, lon float64) error {
	udid, err := udidOf(opTools, dev)
	if err != nil {
		return err
	}
	_, err = d.simctl(ctx, opTools, commandTimeout, nil, "location", udid, "set", formatDegrees(lat)+","+formatDegrees(lon))
	return err
}

// formatDegrees writes a coordinate in plain decimal, as tools read it.
func formatDegrees(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }

// SetAppearance runs simctl ui <udid> appearance light|dark.
func (d *Driver) SetAppearance(ctx context.Context, dev driver.Device, a contract.Appearance) error {
	udid, err := udidOf(opTools, dev)
	if err != nil {
		return err
	}
	_, err = d.simctl(ctx, opTools, commandTimeout, nil, "ui", udid, "appearance", string(a))
	return err
}
