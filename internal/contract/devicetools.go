package contract

import (
	"math"
	"regexp"
	"time"
	"unicode/utf8"
)

// Device tools: what a lease holder does with its device once it holds it,
// without composing simctl or adb arguments itself. Each operation names
// the lease, is checked as device.exec is (the caller acts on the lease),
// and reaches only that lease's device; its inputs are bounded here and
// each driver builds its platform's command from them as argv elements.
const (
	// OpAppLaunch starts an installed app (a bundle id on iOS, a package
	// on Android).
	OpAppLaunch Op = "device.apps.launch"
	// OpAppTerminate stops an app; one that is not running is no error.
	OpAppTerminate Op = "device.apps.terminate"
	// OpOpenURL opens a URL (a deep link, a web page) on the device.
	OpOpenURL Op = "device.url.open"
	// OpDeviceLogs reads the device's recent log lines.
	OpDeviceLogs Op = "device.logs"
	// OpSetLocation sets the device's simulated location.
	OpSetLocation Op = "device.location.set"
	// OpSetAppearance switches the device between light and dark mode.
	OpSetAppearance Op = "device.appearance.set"
)

// CodeAppNotInstalled: a launch of an app the device does not have.
const CodeAppNotInstalled Code = "APP_NOT_INSTALLED"

// Bounds of the device tools' inputs and answers.
const (
	// MaxAppIDLen bounds a bundle id or package name.
	MaxAppIDLen = 255
	// MaxLaunchArgs and MaxLaunchArgLen bound the arguments a launch
	// passes to the app.
	MaxLaunchArgs   = 32
	MaxLaunchArgLen = 1024
	// MaxURLLen bounds a URL to open.
	MaxURLLen = 4096
	// DefaultLogLines and MaxLogLines are how many log lines device.logs
	// answers by default and at most.
	DefaultLogLines = 200
	MaxLogLines     = 5000
	// MaxLogSince is the longest window device.logs reads back.
	MaxLogSince = 24 * time.Hour
	// MaxLogBytes bounds the lines device.logs answers, in all: past it
	// the oldest are left out and the answer says truncated.
	MaxLogBytes = 1 << 20
	// MaxLogFilterLen bounds a process or tag filter.
	MaxLogFilterLen = 128
)

var (
	// packagePattern is an Android package name: two or more segments,
	// each a letter then letters, digits and underscores.
	packagePattern = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_]*(\.[A-Za-z][A-Za-z0-9_]*)+$`)
	// urlSchemePattern is a URL's scheme and its colon (RFC 3986).
	urlSchemePattern = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9+.-]*:`)
	// logFilterPattern is a process name (iOS) or log tag (Android).
	logFilterPattern = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9._-]*$`)
)

// CheckBundleID checks an iOS bundle id: letters, digits, '-' and '.',
// starting with a letter or digit (the form CheckDevicePath's
// @<bundle id> takes too).
func CheckBundleID(field, id string) error {
	if id == "" {
		return BadRequest(field, "is required: a bundle id, such as com.example.app")
	}
	if len(id) > MaxAppIDLen || !bundleIDPattern.MatchString(id) {
		return BadRequest(field, "must be a bundle id (letters, digits, '-' and '.', at most %d bytes), got %q", MaxAppIDLen, clip(id))
	}
	return nil
}

// CheckPackageName checks an Android package name: two or more
// dot-separated segments, each a letter followed by letters, digits and
// underscores.
func CheckPackageName(field, id string) error {
	if id == "" {
		return BadRequest(field, "is required: a package name, such as com.example.app")
	}
	if len(id) > MaxAppIDLen || !packagePattern.MatchString(id) {
		return BadRequest(field, "must be a package name (segments of letters, digits and '_' joined by '.', each starting with a letter, at most %d bytes), got %q", MaxAppIDLen, clip(id))
	}
	return nil
}

// CheckAppID checks an app id of either platform: a bundle id or a package
// name. The driver checks its own platform's form again.
func CheckAppID(field, id string) error {
	if err := CheckBundleID(field, id); err == nil || CheckPackageName(field, id) == nil {
		return nil
	} else if id == "" {
		return BadRequest(field, "is required: a bundle id (iOS) or package name (Android), such as com.example.app")
	}
	return BadRequest(field, "must be a bundle id (iOS) or package name (Android), such as com.example.app, got %q", clip(id))
}

// CheckOpenURL checks a URL to open: a scheme, at most MaxURLLen bytes,
// valid UTF-8, no control character or white space.
func CheckOpenURL(field, u string) error {
	if u == "" {
		return BadRequest(field, "is required: a URL with its scheme, such as myapp://item/1 or https://example.com")
	}
	if len(u) > MaxURLLen {
		return BadRequest(field, "must be at most %d bytes, got %d", MaxURLLen, len(u))
	}
	if !utf8.ValidString(u) {
		return BadRequest(field, "must be valid UTF-8")
	}
	for _, r := range u {
		if r <= 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) {
			return BadRequest(field, "must not contain white space or control characters; percent-encode them")
		}
	}
	if !urlSchemePattern.MatchString(u) {
		return BadRequest(field, "must start with a scheme, such as myapp: or https:, got %q", clip(u))
	}
	return nil
}

// checkLaunchArgs bounds the arguments a launch passes to the app.
func checkLaunchArgs(args []string) error {
	if len(args) > MaxLaunchArgs {
		return BadRequest("args", "must be at most %d arguments, got %d", MaxLaunchArgs, len(args))
	}
	for _, a := range args {
		if len(a) > MaxLaunchArgLen {
			return BadRequest("args", "each must be at most %d bytes, got %d", MaxLaunchArgLen, len(a))
		}
		if !utf8.ValidString(a) {
			return BadRequest("args", "must be valid UTF-8")
		}
		for _, r := range a {
			if r < 0x20 || r == 0x7f {
				return BadRequest("args", "must not contain control characters or NUL")
			}
		}
	}
	return nil
}

// CheckLogFilter checks a log filter: a process name (iOS) or tag
// (Android); empty is none.
func CheckLogFilter(field, f string) error {
	if f == "" {
		return nil
	}
	if len(f) > MaxLogFilterLen || !logFilterPattern.MatchString(f) {
		return BadRequest(field, "must be a process name or log tag (letters, digits, '.', '_' and '-', at most %d bytes), got %q", MaxLogFilterLen, clip(f))
	}
	return nil
}

// checkLease checks the lease id and requester every device tool names.
func checkLease(leaseID, requesterID string) error {
	if err := checkID("leaseId", leaseID, true); err != nil {
		return err
	}
	return checkID("requesterId", requesterID, false)
}

// DeviceToolInput is what every device tool's input has: the lease it
// acts on, and (for an admin acting for an agent) the requester. A
// gateway forwards one with the worker's names for both.
type DeviceToolInput interface {
	Validator
	// Lease is the lease id and requester the input names.
	Lease() (leaseID, requesterID string)
	// SetLease names another lease and requester (a gateway's forward).
	SetLease(leaseID, requesterID string)
}

// LeaseRef is the lease part of every device tool's input.
type LeaseRef struct {
	LeaseID     string `json:"leaseId"`
	RequesterID string `json:"requesterId,omitempty"`
}

// Lease is the lease id and requester.
func (r *LeaseRef) Lease() (string, string) { return r.LeaseID, r.RequesterID }

// SetLease names another lease and requester.
func (r *LeaseRef) SetLease(leaseID, requesterID string) {
	r.LeaseID, r.RequesterID = leaseID, requesterID
}

// AppLaunchInput starts an installed app on the lease's device.
type AppLaunchInput struct {
	LeaseRef
	// AppID is the app's bundle id (iOS) or package name (Android).
	AppID string `json:"appId"`
	// Args are passed to the app (iOS only: an Android app is started by
	// its launcher activity, which takes none).
	Args []string `json:"args,omitempty"`
}

// Validate checks the input's fields.
func (in *AppLaunchInput) Validate() error {
	if err := checkLease(in.LeaseID, in.RequesterID); err != nil {
		return err
	}
	if err := CheckAppID("appId", in.AppID); err != nil {
		return err
	}
	return checkLaunchArgs(in.Args)
}

// AppLaunchResult answers device.apps.launch.
type AppLaunchResult struct {
	AppID string `json:"appId"`
	// PID is the app's process id, when the platform says it (iOS).
	PID int `json:"pid,omitempty"`
}

// AppTerminateInput stops an app on the lease's device.
type AppTerminateInput struct {
	LeaseRef
	AppID string `json:"appId"`
}

// Validate checks the input's fields.
func (in *AppTerminateInput) Validate() error {
	if err := checkLease(in.LeaseID, in.RequesterID); err != nil {
		return err
	}
	return CheckAppID("appId", in.AppID)
}

// AppTerminateResult answers device.apps.terminate.
type AppTerminateResult struct {
	AppID string `json:"appId"`
}

// OpenURLInput opens a URL on the lease's device.
type OpenURLInput struct {
	LeaseRef
	URL string `json:"url"`
}

// Validate checks the input's fields.
func (in *OpenURLInput) Validate() error {
	if err := checkLease(in.LeaseID, in.RequesterID); err != nil {
		return err
	}
	return CheckOpenURL("url", in.URL)
}

// OpenURLResult answers device.url.open.
type OpenURLResult struct {
	URL string `json:"url"`
}

// DeviceLogsInput reads the last lines of the lease's device's log.
type DeviceLogsInput struct {
	LeaseRef
	// Lines is how many of the last lines to answer (DefaultLogLines when
	// 0, at most MaxLogLines).
	Lines int `json:"lines,omitempty"`
	// SinceMs, when set, reads only the lines of the last SinceMs
	// milliseconds (at most MaxLogSince), of which the last Lines.
	SinceMs int64 `json:"sinceMs,omitempty"`
	// Process keeps only the lines of that process (iOS) or tag (Android).
	Process string `json:"process,omitempty"`
}

// Validate checks the input's fields.
func (in *DeviceLogsInput) Validate() error {
	if err := checkLease(in.LeaseID, in.RequesterID); err != nil {
		return err
	}
	if in.Lines < 0 || in.Lines > MaxLogLines {
		return BadRequest("lines", "must be between 1 and %d, got %d", MaxLogLines, in.Lines)
	}
	if in.SinceMs < 0 || in.SinceMs > MaxLogSince.Milliseconds() {
		return BadRequest("sinceMs", "must be between 1 and %d (24 h), got %d", MaxLogSince.Milliseconds(), in.SinceMs)
	}
	return CheckLogFilter("process", in.Process)
}

// LogLines is how many lines the input asks for.
func (in *DeviceLogsInput) LogLines() int {
	if in.Lines == 0 {
		return DefaultLogLines
	}
	return in.Lines
}

// DeviceLogs answers device.logs: the lines, oldest first.
type DeviceLogs struct {
	Lines []string `json:"lines"`
	// Truncated says older lines were left out to keep the answer within
	// MaxLogBytes.
	Truncated bool `json:"truncated"`
}

// BoundLogLines keeps the last n of lines whose bytes (each with its
// newline) add up to at most MaxLogBytes; truncated says some were left
// out for the bytes. The one bound every driver's answer goes through.
func BoundLogLines(lines []string, n int) DeviceLogs {
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	total, from := 0, len(lines)
	for from > 0 && total+len(lines[from-1])+1 <= MaxLogBytes {
		total += len(lines[from-1]) + 1
		from--
	}
	out := append([]string{}, lines[from:]...)
	return DeviceLogs{Lines: out, Truncated: from > 0}
}

// LocationInput sets the simulated location of the lease's device.
type LocationInput struct {
	LeaseRef
	Latitude  *float64 `json:"latitude"`
	Longitude *float64 `json:"longitude"`
}

// Validate checks the input's fields.
func (in *LocationInput) Validate() error {
	if err := checkLease(in.LeaseID, in.RequesterID); err != nil {
		return err
	}
	return CheckCoordinates(in.Latitude, in.Longitude)
}

// CheckCoordinates checks a latitude in [-90, 90] and a longitude in
// [-180, 180], both required.
func CheckCoordinates(lat, lon *float64) error {
	switch {
	case lat == nil:
		return BadRequest("latitude", "is required: degrees north, -90 to 90")
	case lon == nil:
		return BadRequest("longitude", "is required: degrees east, -180 to 180")
	case math.IsNaN(*lat) || *lat < -90 || *lat > 90:
		return BadRequest("latitude", "must be between -90 and 90, got %v", *lat)
	case math.IsNaN(*lon) || *lon < -180 || *lon > 180:
		return BadRequest("longitude", "must be between -180 and 180, got %v", *lon)
	}
	return nil
}

// LocationResult answers device.location.set.
type LocationResult struct {
	Latitude  float64 `json:"latitude"`
	Longitude float64 `json:"longitude"`
}

// Appearance is a device's light or dark mode.
type Appearance string

// The appearances.
const (
	AppearanceLight Appearance = "light"
	AppearanceDark  Appearance = "dark"
)

// AppearanceInput sets the appearance of the lease's device.
type AppearanceInput struct {
	LeaseRef
	Appearance Appearance `json:"appearance"`
}

// Validate checks the input's fields.
func (in *AppearanceInput) Validate() error {
	if err := checkLease(in.LeaseID, in.RequesterID); err != nil {
		return err
	}
	if in.Appearance != AppearanceLight && in.Appearance != AppearanceDark {
		return BadRequest("appearance", "must be light or dark, got %q", clip(string(in.Appearance)))
	}
	return nil
}

// AppearanceResult answers device.appearance.set.
type AppearanceResult struct {
	Appearance Appearance `json:"appearance"`
}
