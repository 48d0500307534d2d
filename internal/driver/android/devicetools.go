package android

import (
	"bytes"
	"context"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/driver"
	"github.com/simlock/simlock/internal/runner"
)

var _ driver.DeviceTools = (*Driver)(nil)

// Device tools reach the one emulator running the device's AVD through the
// private server, by serial, as files do. Each is one adb call: the guest's
// activity manager (am), monkey (to start an app's launcher activity
// without naming it), logcat and cmd uimode through adb shell, and the
// emulator's console (emu geo fix) for the location.
//
// adb shell joins its arguments into one command line that the guest's
// shell reads, so every value is quoted for it (shellQuote): nothing in a
// URL reaches that shell as syntax. The host runs no shell at all.
const opTools = "device-tools"

var (
	// safeShellWord is a word the guest's shell reads as itself.
	safeShellWord = regexp.MustCompile(`^[A-Za-z0-9_./:=@%+,-]+$`)
	// monkeyNoApp is monkey's answer for a package with no launcher
	// activity: not installed (or not an app that can be launched).
	monkeyNoApp = []byte("No activities found to run")
)

// shellQuote makes s one word of a POSIX shell command line: as is when it
// holds nothing the shell reads, else single-quoted ('\” for a quote).
func shellQuote(s string) string {
	if safeShellWord.MatchString(s) {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// shell runs one command in the guest's shell, every word quoted.
func (d *Driver) shell(ctx context.Context, serial string, words ...string) (runner.Result, error) {
	return d.serialAdb(ctx, opTools, callTimeout, serial, shellArgs(words)...)
}

// shellArgs are adb's arguments that run words on the device's shell, each
// quoted as one word.
func shellArgs(words []string) []string {
	args := []string{"shell"}
	for _, w := range words {
		args = append(args, shellQuote(w))
	}
	return args
}

// LaunchApp starts the package's launcher activity: monkey -p <package> -c
// android.intent.category.LAUNCHER 1. An Android app's launcher activity
// takes no arguments, so args are refused.
func (d *Driver) LaunchApp(ctx context.Context, dev driver.Device, id string, args []string) (contract.AppLaunchResult, error) {
	if err := contract.CheckPackageName("appId", id); err != nil {
		return contract.AppLaunchResult{}, err
	}
	if len(args) > 0 {
		return contract.AppLaunchResult{}, contract.BadRequest("args", "an Android app is started by its launcher activity, which takes no arguments; open a deep link with open-url instead")
	}
	serial, err := d.serialFor(ctx, dev)
	if err != nil {
		return contract.AppLaunchResult{}, err
	}
	res, err := d.shell(ctx, serial, "monkey", "-p", id, "-c", "android.intent.category.LAUNCHER", "1")
	switch {
	case err != nil:
		return contract.AppLaunchResult{}, err
	case bytes.Contains(res.Stdout, monkeyNoApp) || bytes.Contains(res.Stderr, monkeyNoApp):
		return contract.AppLaunchResult{}, &driver.AppNotInstalledError{ID: id}
	case res.ExitCode != 0:
		return contract.AppLaunchResult{}, crashf(opTools, "monkey exited with code %d: %s", res.ExitCode, outputOf(res))
	}
	return contract.AppLaunchResult{AppID: id}, nil
}

// TerminateApp runs am force-stop <package>, which is no error for a
// package that is not running.
func (d *Driver) TerminateApp(ctx context.Context, dev driver.Device, id string) error {
	if err := contract.CheckPackageName("appId", id); err != nil {
		return err
	}
	serial, err := d.serialFor(ctx, dev)
	if err != nil {
		return err
	}
	res, err := d.shell(ctx, serial, "am", "force-stop", id)
	return succeeded(res, err, opTools, "am force-stop")
}

// OpenURL runs am start -a android.intent.action.VIEW -d <url>.
func (d *Driver) OpenURL(ctx context.Context, dev driver.Device, url string) error {
	serial, err := d.serialFor(ctx, dev)
	if err != nil {
		return err
	}
	res, err := d.shell(ctx, serial, "am", "start", "-a", "android.intent.action.VIEW", "-d", url)
	if err := succeeded(res, err, opTools, "am start"); err != nil {
		return err
	}
	// am says why it started nothing on stdout and still exits 0: an
	// intent nothing installed resolves is a URL no app opens.
	switch out := outputOf(res); {
	case strings.Contains(out, "unable to resolve Intent"):
		return &driver.NoAppForURLError{URL: url}
	case strings.Contains(out, "Error:"):
		return crashf(opTools, "am start: %s", out)
	}
	return nil
}

// DeviceLogs runs logcat -d -v threadtime -t <lines> (or -t <epoch
// seconds> for a window) [-s <tag>] and answers its last lines.
func (d *Driver) DeviceLogs(ctx context.Context, dev driver.Device, q driver.LogQuery) (contract.DeviceLogs, error) {
	serial, err := d.serialFor(ctx, dev)
	if err != nil {
		return contract.DeviceLogs{}, err
	}
	// A tenant can make the log buffers large and fill them: only the
	// tail of what logcat writes is kept.
	res, err := d.adbCmd(ctx, opTools, runner.Cmd{Args: append([]string{"-s", serial}, shellArgs(logcatArgs(q, time.Now()))...),
		Timeout: callTimeout, MaxStdout: driver.MaxLogOutput, KeepTail: true})
	if err := succeeded(res, err, opTools, "logcat"); err != nil {
		return contract.DeviceLogs{}, err
	}
	var lines []string
	for _, l := range strings.Split(strings.TrimRight(strings.ReplaceAll(string(res.Stdout), "\r\n", "\n"), "\n"), "\n") {
		// logcat's buffer banners are no lines of the log.
		if l == "" || strings.HasPrefix(l, "--------- beginning of ") {
			continue
		}
		lines = append(lines, l)
	}
	return contract.BoundLogLines(lines, q.Lines), nil
}

// logcatArgs is the logcat command that reads q at now: -t takes a count,
// or a time as seconds since the epoch (the emulator's clock is the
// host's).
func logcatArgs(q driver.LogQuery, now time.Time) []string {
	from := strconv.Itoa(q.Lines)
	if q.Since > 0 {
		ms := now.Add(-q.Since).UnixMilli()
		from = strconv.FormatInt(ms/1000, 10) + "." + strconv.FormatInt(1000+ms%1000, 10)[1:]
	}
	argv := []string{"logcat", "-d", "-v", "threadtime", "-t", from}
	if q.Process != "" {
		argv = append(argv, "-s", q.Process)
	}
	return argv
}

// SetLocation runs the emulator console's geo fix <longitude> <latitude>
// (longitude first, as the console takes it).
func (d *Driver) SetLocation(ctx context.Context, dev driver.Device, lat, lon float64) error {
	serial, err := d.serialFor(ctx, dev)
	if err != nil {
		return err
	}
	res, err := d.serialAdb(ctx, opTools, callTimeout, serial, "emu", "geo", "fix", formatDegrees(lon), formatDegrees(lat))
	if err := succeeded(res, err, opTools, "emu geo fix"); err != nil {
		return err
	}
	if out := string(res.Stdout); strings.Contains(out, "KO") {
		return crashf(opTools, "emu geo fix: %s", strings.TrimSpace(out))
	}
	return nil
}

// formatDegrees writes a coordinate in plain decimal, as tools read it.
func formatDegrees(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }

// SetAppearance runs cmd uimode night yes|no.
func (d *Driver) SetAppearance(ctx context.Context, dev driver.Device, a contract.Appearance) error {
	serial, err := d.serialFor(ctx, dev)
	if err != nil {
		return err
	}
	night := "no"
	if a == contract.AppearanceDark {
		night = "yes"
	}
	res, err := d.shell(ctx, serial, "cmd", "uimode", "night", night)
	return succeeded(res, err, opTools, "cmd uimode")
}
