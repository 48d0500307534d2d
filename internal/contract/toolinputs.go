package contract

import (
	"strings"
)

// CatalogGetInput narrows catalog.get to one platform.
type CatalogGetInput struct {
	Platform Platform `json:"platform,omitempty"`
}

// Validate checks the input's fields.
func (in *CatalogGetInput) Validate() error {
	if in.Platform != "" && !in.Platform.Valid() {
		return BadRequest("platform", "must be ios or android, got %q", clip(string(in.Platform)))
	}
	return nil
}

// PassthroughInput asks how to run `simlock simctl|adb <args>`: the daemon
// answers with the command scoped to its root or adb server, or refuses.
type PassthroughInput struct {
	Tool string   `json:"tool"`
	Args []string `json:"args"`
	// LeaseID, when set, must be a lease the caller holds; adb then talks
	// to that lease's emulator unless the args pick a device.
	LeaseID string `json:"leaseId,omitempty"`
}

// Validate checks the input's fields.
func (in *PassthroughInput) Validate() error {
	if in.Tool != "simctl" && in.Tool != "adb" {
		return BadRequest("tool", "must be simctl or adb, got %q", clip(in.Tool))
	}
	if len(in.Args) > 256 {
		return BadRequest("args", "at most 256 arguments, got %d", len(in.Args))
	}
	for _, a := range in.Args {
		if len(a) > 4096 || strings.ContainsRune(a, 0) {
			return BadRequest("args", "each argument must be at most 4096 bytes with no NUL")
		}
	}
	return checkID("leaseId", in.LeaseID, false)
}

// PassthroughResult is the command to run, with the caller's stdio.
type PassthroughResult struct {
	Tool string   `json:"tool"`
	Path string   `json:"path"`
	Args []string `json:"args"`
	Env  []string `json:"env,omitempty"`
}

// DoctorInput runs the doctor; Fix (admin) applies safe corrections.
type DoctorInput struct {
	Fix bool `json:"fix,omitempty"`
	// PurgeOrphans (admin) deletes devices found in simlock's roots that no
	// registry record names.
	PurgeOrphans bool `json:"purgeOrphans,omitempty"`
}

// Validate accepts any DoctorInput.
func (*DoctorInput) Validate() error { return nil }

// Finding is one thing the doctor noticed.
type Finding struct {
	Kind         string   `json:"kind"`
	Platform     Platform `json:"platform,omitempty"`
	Message      string   `json:"message"`
	Remedy       string   `json:"remedy,omitempty"`
	Prerequisite string   `json:"prerequisite,omitempty"`
	Reason       string   `json:"reason,omitempty"`
	Path         string   `json:"path,omitempty"`
	DeviceID     string   `json:"deviceId,omitempty"`
	Fixed        bool     `json:"fixed,omitempty"`
}

// DoctorResult answers doctor.run.
type DoctorResult struct {
	Findings []Finding `json:"findings"`
}

// ToolPlatform is the platform a device tool drives: adb Android, simctl
// iOS.
func ToolPlatform(tool string) Platform {
	if tool == "adb" {
		return PlatformAndroid
	}
	return PlatformIOS
}

// OnlyToolLease picks the lease a device tool runs on when the caller names
// none: of held (the leases the caller can read), those principal owns on
// the tool's platform, which must be one. It answers nil for none (the
// caller decides whether a lease-less command may run) and BAD_REQUEST
// naming them for several. A worker's passthrough and the CLI's command
// through a gateway both pick by it.
func OnlyToolLease(tool, principal string, held []LeaseGetResult) (*LeaseGetResult, error) {
	platform := ToolPlatform(tool)
	var mine []LeaseGetResult
	for _, l := range held {
		if l.Lease.OwnerID == principal && l.Device.Spec.Platform == platform {
			mine = append(mine, l)
		}
	}
	switch len(mine) {
	case 0:
		return nil, nil
	case 1:
		return &mine[0], nil
	}
	ids := make([]string, len(mine))
	for i, l := range mine {
		ids[i] = l.Lease.ID
	}
	return nil, BadRequest("leaseId", "you hold %d %s leases (%s): name the one to run %s on with --lease <id>",
		len(mine), platform, strings.Join(ids, ", "), tool)
}
