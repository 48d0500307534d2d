package contract

import (
	"regexp"
	"slices"
	"strings"
)

// Component operations: install, list and remove runtimes (an iOS
// simulator runtime, an Android system image).

// The component operations.
const (
	OpComponentInstall Op = "component.install"
	OpComponentList    Op = "component.list"
	OpComponentRemove  Op = "component.remove"
)

// ComponentInstallInput installs a component: a version ("26.4"), a bare
// major ("26"), "latest" (iOS), or an API level ("36", Android), which
// takes the level's google_apis image, or "<level>;<tag>" for the image of
// another tag ("36;google_apis_playstore"), the component a RUNTIME_MISSING
// for a lease's imageTag names.
type ComponentInstallInput struct {
	Platform Platform `json:"platform"`
	Version  string   `json:"version"`
	// Workers chooses the workers of a gateway's fleet install; a worker
	// refuses it.
	Workers *WorkerChoice `json:"workers,omitempty"`
}

// Validate checks the input's fields.
func (in *ComponentInstallInput) Validate() error {
	if !in.Platform.Valid() {
		return BadRequest("platform", "must be ios or android, got %q", clip(string(in.Platform)))
	}
	if in.Workers != nil {
		if err := in.Workers.Validate(); err != nil {
			return err
		}
	}
	level, tag, tagged := strings.Cut(in.Version, ";")
	if tagged {
		if in.Platform != PlatformAndroid {
			return BadRequest("version", "a system image tag (<level>;<tag>) is for android only; %s has none", in.Platform)
		}
		if err := CheckImageTag(in.Platform, tag); err != nil || tag == "" {
			return BadRequest("version", "must be an API level, or <level>;<tag> with a tag of 1 to %d ASCII letters, digits, _ and -; got %q", MaxImageTagLen, clip(in.Version))
		}
	}
	return checkComponent("version", level)
}

func checkComponent(field, v string) error {
	if v == "" {
		return BadRequest(field, "is required")
	}
	if len(v) > MaxComponentLen {
		return BadRequest(field, "must be at most %d characters, got %d", MaxComponentLen, len(v))
	}
	// Components reach tool arguments and SDK paths: letters, digits, dots
	// and dashes only, never "..".
	if !componentPattern.MatchString(v) || strings.Contains(v, "..") {
		return BadRequest(field, "must be a version such as 26.4, a major such as 26, latest, or an API level such as 36; got %q", clip(v))
	}
	return nil
}

var componentPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]*$`)

// ComponentInstallResult answers component.install.
type ComponentInstallResult struct {
	Platform  Platform `json:"platform"`
	Component string   `json:"component"`
	// Outcome is installed or already-installed.
	Outcome string `json:"outcome"`
	// Version is the installed runtime version or API level.
	Version string `json:"version"`
	Name    string `json:"name,omitempty"`
	// JobID names the install's job record.
	JobID string `json:"jobId,omitempty"`
}

// ComponentListInput narrows component.list to one platform.
type ComponentListInput struct {
	Platform Platform `json:"platform,omitempty"`
}

// Validate checks the input's fields.
func (in *ComponentListInput) Validate() error {
	if in.Platform != "" && !in.Platform.Valid() {
		return BadRequest("platform", "must be ios or android, got %q", clip(string(in.Platform)))
	}
	return nil
}

// Component is an installed component as component.list shows it.
type Component struct {
	Platform Platform `json:"platform"`
	Version  string   `json:"version"`
	Name     string   `json:"name"`
	// Owned is set when simlock installed it; only those can be removed
	// with component.remove.
	Owned       bool  `json:"owned"`
	InstalledAt int64 `json:"installedAt,omitempty"`
	SizeBytes   int64 `json:"sizeBytes,omitempty"`
	// Devices counts simlock's devices on it; ForeignDevices the others.
	Devices        int `json:"devices"`
	ForeignDevices int `json:"foreignDevices"`
}

// ComponentListResult answers component.list.
type ComponentListResult struct {
	Components []Component `json:"components"`
}

// ComponentRemoveInput removes a component simlock installed.
type ComponentRemoveInput struct {
	Platform Platform `json:"platform"`
	Version  string   `json:"version"`
	// DryRun checks everything and removes nothing.
	DryRun bool `json:"dryRun,omitempty"`
}

// Validate checks the input's fields.
func (in *ComponentRemoveInput) Validate() error {
	if !in.Platform.Valid() {
		return BadRequest("platform", "must be ios or android, got %q", clip(string(in.Platform)))
	}
	return checkComponent("version", in.Version)
}

// ComponentRemoveResult answers component.remove.
type ComponentRemoveResult struct {
	Platform Platform `json:"platform"`
	Version  string   `json:"version"`
	Name     string   `json:"name"`
	Removed  bool     `json:"removed"`
	DryRun   bool     `json:"dryRun"`
}

// InstallStatus is an install in progress as status shows it.
type InstallStatus struct {
	Platform  Platform `json:"platform"`
	Component string   `json:"component"`
	State     string   `json:"state"` // waiting or downloading
	Since     int64    `json:"since"`
	Waiters   int      `json:"waiters"`
	Percent   *int     `json:"percent,omitempty"`
}

// OpDemoInject makes a demo driver's simulated device misbehave (admin).
const OpDemoInject Op = "demo.inject"

// DemoInjectInput names a device and a fault: crash, vanish, boot-fail,
// reclaim-fail, erase or replace.
type DemoInjectInput struct {
	DeviceID string `json:"deviceId"`
	Fault    string `json:"fault"`
}

// Validate checks the input's fields.
func (in *DemoInjectInput) Validate() error {
	if err := checkID("deviceId", in.DeviceID, true); err != nil {
		return err
	}
	faults := []string{"crash", "vanish", "boot-fail", "reclaim-fail", "erase", "replace"}
	if slices.Contains(faults, in.Fault) {
		return nil
	}
	return ParseEnumError("fault", in.Fault, faults...)
}

// DemoInjectResult answers demo.inject.
type DemoInjectResult struct {
	DeviceID string `json:"deviceId"`
	Fault    string `json:"fault"`
	Injected bool   `json:"injected"`
}

// Cleanup: the idle rules, run on their own or by `simlock cleanup`.
const (
	OpCleanupRun   Op = "cleanup.run"
	OpCleanupRules Op = "cleanup.rules"
)

// CleanupRule describes one idle rule.
type CleanupRule struct {
	Name        string `json:"name"`
	Action      string `json:"action"` // shutdown or delete
	AfterMs     int64  `json:"afterMs"`
	Description string `json:"description"`
}

// CleanupRulesResult answers cleanup.rules.
type CleanupRulesResult struct {
	Rules        []CleanupRule `json:"rules"`
	DiskPressure bool          `json:"diskPressure"`
}

// CleanupRunInput runs the rules now: all, or the one named; DryRun says
// what they would do.
type CleanupRunInput struct {
	Rule   string `json:"rule,omitempty"`
	DryRun bool   `json:"dryRun,omitempty"`
}

// Validate checks the input's fields.
func (in *CleanupRunInput) Validate() error {
	switch in.Rule {
	case "", RuleIdleShutdown, RuleIdleDelete:
		return nil
	}
	return ParseEnumError("rule", in.Rule, RuleIdleShutdown, RuleIdleDelete)
}

// The idle rules.
const (
	RuleIdleShutdown = "idle-shutdown"
	RuleIdleDelete   = "idle-delete"
)

// CleanupAction is one thing a rule did (or, in a dry run, would do).
type CleanupAction struct {
	Rule     string `json:"rule"`
	DeviceID string `json:"deviceId"`
	Action   string `json:"action"`
	IdleMs   int64  `json:"idleMs"`
	Error    string `json:"error,omitempty"`
}

// CleanupRunResult answers cleanup.run.
type CleanupRunResult struct {
	DryRun  bool            `json:"dryRun"`
	Actions []CleanupAction `json:"actions"`
}

// WarmTarget asks the warm pool to keep Count idle devices of a model (and
// OS version) booted.
type WarmTarget struct {
	Platform  Platform `json:"platform"`
	Model     string   `json:"model"`
	OSVersion string   `json:"osVersion,omitempty"`
	// ImageTag is the Android system image tag; "" takes the default
	// image.
	ImageTag string `json:"imageTag,omitempty"`
	// Mode is slim or full; "" is the platform's default mode.
	Mode  DeviceMode `json:"mode,omitempty"`
	Count int        `json:"count"`
}

// WarmTargetStatus is how a target fares now.
type WarmTargetStatus struct {
	WarmTarget
	Ready   int `json:"ready"`
	Booting int `json:"booting"`
	Short   int `json:"short"`
	// Reason says why a short target is not being filled: no-driver,
	// runtime-missing, unknown-model, unresolvable, boot-failed,
	// device-limit, running-limit, reserve, ram-budget; or, for a wait that
	// passes on its own, request-waiting (the pool yields to requests) or
	// boot-limit (warmPool.maxConcurrentBoots boots are running).
	Reason string `json:"reason,omitempty"`
}

// WarmPoolStatus is the warm pool's line in status.
type WarmPoolStatus struct {
	Enabled        bool               `json:"enabled"`
	ReserveRunning map[Platform]int   `json:"reserveRunning"`
	Targets        []WarmTargetStatus `json:"targets"`
	// RewarmReleased is warmPool.rewarmReleased in effect (the pool on and
	// the switch on); Rewarming counts those boots in flight.
	RewarmReleased bool `json:"rewarmReleased"`
	Rewarming      int  `json:"rewarming"`
	// Grants counts the leases granted since the daemon started by where
	// their device came from, all platforms together; GrantsByPlatform
	// splits them, with every platform present.
	Grants           GrantCounts              `json:"grants"`
	GrantsByPlatform map[Platform]GrantCounts `json:"grantsByPlatform"`
}

// GrantCounts counts grants by GrantSource.
type GrantCounts struct {
	Warm        int `json:"warm"`
	Booted      int `json:"booted"`
	Provisioned int `json:"provisioned"`
	// WarmRate is Warm over all three, rounded to three places; 0 before
	// the first grant.
	WarmRate float64 `json:"warmRate"`
}

// OpNuke ends every lease, fails every waiting request and, with
// DeleteDevices, deletes every device simlock created (admin).
const OpNuke Op = "nuke"

// NukeInput asks for a nuke.
type NukeInput struct {
	DeleteDevices bool `json:"deleteDevices,omitempty"`
}

// Validate accepts any NukeInput.
func (*NukeInput) Validate() error { return nil }

// NukeResult says what a nuke did.
type NukeResult struct {
	Released  []string `json:"released"`
	Cancelled []string `json:"cancelled"`
	Deleted   []string `json:"deleted"`
	// Stopped are the devices shut down when devices are not deleted.
	Stopped []string `json:"stopped"`
}
