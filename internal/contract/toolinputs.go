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
