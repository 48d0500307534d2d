// Package driver is the port between simlock's core and the code that runs
// platform tools. A Driver serves one platform; it creates, boots, cleans,
// shuts down and deletes devices that simlock owns, and answers what the
// platform offers. Drivers are the only code that runs simctl, adb and their
// kin; the core never does.
//
// Implementations must be safe for concurrent use: the core calls one driver
// for several devices at once, but never twice at once for the same device.
package driver

import (
	"context"
	"encoding/json"
	"time"

	"github.com/simlock/simlock/internal/contract"
)

// Driver serves one platform.
type Driver interface {
	// Name names the implementation ("demo", "ios", "android"); status shows it.
	Name() string
	// Platform is the platform served.
	Platform() contract.Platform
	// ResolveSpec turns an exact request (a model, maybe an OS version) into
	// the spec to provision. It never downloads. An unknown model is
	// *UnknownModelError; an OS version not installed is *RuntimeMissingError.
	ResolveSpec(ctx context.Context, req Request) (contract.DeviceSpec, error)
	// Provision creates a device. It is not booted.
	Provision(ctx context.Context, spec contract.DeviceSpec) (Device, error)
	// MakeReady boots the device and waits until it is usable. The returned
	// Device carries the address to use now; it may change at every boot.
	MakeReady(ctx context.Context, dev Device) (Device, error)
	// Recover boots a device that stopped while it was leased, as it is:
	// what its holder installed and wrote is still there. It never restores
	// a clean state (that is Reclaim's, when the lease ends). A device that
	// runs is only waited for. The returned Device carries the address to
	// use now.
	Recover(ctx context.Context, dev Device) (Device, error)
	// Reclaim cleans a device after a lease and says what state it is left in.
	Reclaim(ctx context.Context, dev Device) (ReclaimResult, error)
	// Shutdown stops a running device; a stopped one is not an error.
	Shutdown(ctx context.Context, dev Device) error
	// Destroy shuts the device down and deletes it.
	Destroy(ctx context.Context, dev Device) error
	// Estimate is how long an operation usually takes, for ETAs.
	Estimate(op Operation, spec contract.DeviceSpec) time.Duration
	// ListCatalog says what models and runtimes the platform offers. It is a
	// read; it never downloads.
	ListCatalog(ctx context.Context) (Catalog, error)
	// LeaseEnvironment is the environment a lease holder needs to reach its
	// device with the platform's tools.
	LeaseEnvironment() map[string]string
	// Root is the absolute path of the device root the driver owns ("" for
	// a driver with no files, such as demo).
	Root() string
	// RevalidateRoot checks again that the root is ours; drivers call it
	// before anything destructive, and the core may too.
	RevalidateRoot() error
	// ListManaged reports every device in the root and whether it runs.
	ListManaged(ctx context.Context) (Reality, error)
	// Passthrough turns `simlock <tool> <args>` (and device.exec) into the
	// command to run, scoped to the driver's root or server and pinned to
	// t's device, or refuses it with *PassthroughRefusedError: a command
	// that would reach another device, the host's plumbing or the clean
	// baseline, and, for a remote t, one that names a file of this
	// machine or opens a port on it. It runs nothing and is a pure
	// function of t and args.
	Passthrough(t Target, args []string) (Command, error)
	// ToolVersions reports the versions of the platform tools in use.
	ToolVersions(ctx context.Context) ([]ToolVersion, error)
}

// RunState is whether an observed device runs.
type RunState string

// The run states. Transitioning never counts as a crash or a drift.
const (
	Running       RunState = "running"
	Stopped       RunState = "stopped"
	Transitioning RunState = "transitioning"
)

// Observed is a device found in the root.
type Observed struct {
	Device
	Name     string
	RunState RunState
}

// Reality is what the root holds now.
type Reality struct {
	Devices []Observed
}

// Target is what a passthrough may reach. A lease is a boundary: its
// holder's commands act on its device and on nothing else.
type Target struct {
	// Device is the leased device the command is pinned to: its driver
	// id (an iOS UDID) and address (an adb serial). The zero Device is no
	// device: only commands that act on none pass (simctl list, adb
	// version, --help).
	Device Device
	// Remote says the caller is not on this machine, or must be treated as
	// if it were not (HTTP, MCP, a gateway's forward): no argument may
	// name a file of this machine, nor open a port on it that only a
	// caller on it could use. A caller on the local socket, the daemon's
	// own user, keeps host paths.
	Remote bool
}

// HasDevice reports whether t names a device.
func (t Target) HasDevice() bool { return t.Device.ID != "" }

// FileRoutes is what a remote caller refused a host path is told to use
// instead: the routes that move files without naming one.
const FileRoutes = "move files with PUT or GET /v1/leases/{id}/files?path=<device path>, " +
	"install apps with POST /v1/leases/{id}/apps and take screenshots with GET /v1/leases/{id}/screenshot " +
	"(simlock push, pull, install and screenshot on the command line)"

// Command is a program to run for a passthrough: the caller runs it with
// its own stdio. It is the wire type itself, since the daemon only hands it on.
type Command = contract.PassthroughResult

// ToolVersion is one platform tool's version; status shows it as is.
type ToolVersion = contract.ToolVersion

// Missing is a prerequisite a platform lacks, with what to do about it.
type Missing struct {
	Platform     contract.Platform `json:"platform"`
	Prerequisite string            `json:"prerequisite"`
	Message      string            `json:"message"`
	Remedy       string            `json:"remedy"`
}

// Request is an exact request: the core has already turned a class into a
// model.
type Request struct {
	Platform  contract.Platform
	Model     string
	OSVersion string
	// ImageTag is the system image tag asked for (Android); "" takes the
	// driver's choice.
	ImageTag string
	// Mode is the mode asked for, the daemon's default applied: a driver
	// that can slim the resolved runtime returns a spec of mode slim,
	// every other answer a full one ("").
	Mode contract.DeviceMode
}

// Device is a device as the driver knows it. Data is the driver's own and is
// stored opaquely by the core.
type Device struct {
	ID      string          `json:"id"`
	Address string          `json:"address,omitempty"`
	Data    json.RawMessage `json:"data,omitempty"`
	// Slim is set by MakeReady and Recover on a device made slim (a spec
	// of mode slim): what the boot did about its slim pass. Nil on a full
	// device, and on every other call.
	Slim *SlimOutcome `json:"-"`
}

// SlimOutcome is what a boot of a slim device did about its slim pass.
// A failed pass never fails the boot: the device runs full, and Err says
// why.
type SlimOutcome struct {
	// Slimmed is whether the device runs slim now.
	Slimmed bool
	// Applied is set when this boot ran the pass (it disabled the
	// services and booted again); a device already slimmed to the current
	// signature only boots.
	Applied bool
	// Categories and Labels are what the pass disables; Signature names
	// that set, so a device slimmed to it is not slimmed again.
	Categories []string
	Labels     int
	Signature  string
	// UnknownLabels are services the runtime refused to disable (it does
	// not have them).
	UnknownLabels []string
	// Duration is how long the pass and its second boot took.
	Duration time.Duration
	// Err is why the pass failed, when it did.
	Err error
}

// ReclaimResult says where a reclaim left the device.
type ReclaimResult struct {
	// State is contract.DeviceReady or contract.DeviceShutdown.
	State    contract.DeviceState
	Strategy string
}

// Operation names an operation whose duration Estimate predicts.
type Operation string

// The estimated operations.
const (
	OpProvision Operation = "provision"
	OpBoot      Operation = "boot"
	OpReclaim   Operation = "reclaim"
)

// Catalog is what a platform offers.
type Catalog = contract.Catalog
