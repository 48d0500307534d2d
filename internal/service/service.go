// Package service runs a simlock daemon under the host's service manager:
// a launchd LaunchAgent on macOS, a systemd unit on Linux (a user unit by
// default, a system unit on request).
//
// Rendering is pure: For turns a Spec (the home, the binary, the mode, the
// user) into a Plan, which holds the file to write, where, and the exact
// commands that load, unload, start and inspect it. An Installer carries a
// Plan out through an injected runner.Runner and under a file system root,
// so tests use a fake runner and a temporary root while production runs
// launchctl and systemctl on the real file system.
//
// Each home has its own service, named from the home: the default home
// (~/.simlock) of a user's own service gets the plain names
// (dev.simlock.daemon, simlock.service); any other home, and every system
// unit, gets the name followed by a short hash of the home's path, so
// several homes, and several users' system units, coexist.
//
// Everything here is safe for concurrent use; an Installer holds no state
// beyond its fields.
package service

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"unicode"

	"github.com/simlock/simlock/internal/contract"
)

// The service managers.
const (
	Launchd = "launchd"
	Systemd = "systemd"
)

// The scopes a service runs in: a launchd agent in the user's GUI session,
// a systemd user unit (the user's own manager), a systemd system unit.
const (
	ScopeGUI    = "gui"
	ScopeUser   = "user"
	ScopeSystem = "system"
)

// Spec is what a service is made from.
type Spec struct {
	// Home is the absolute SIMLOCK_HOME the daemon serves.
	Home string
	// Binary is the absolute path of the simlock binary, symbolic links
	// resolved, so an upgrade through a package manager's link still runs
	// the file it names.
	Binary string
	// Mode is contract.ModeWorker or contract.ModeGateway.
	Mode string
	// System asks for a systemd system unit (Linux only).
	System bool
	// User and UID are the account the daemon runs as; UserHome is its
	// home directory, under which a user's service files go.
	User     string
	UID      int
	UserHome string
	// Env is carried into the service's environment after SIMLOCK_HOME,
	// in this order: the variables the daemon and its drivers read from
	// the environment of the person who installs it (a service manager
	// starts a process with almost none of them).
	Env []EnvVar
}

// EnvVar is one environment variable.
type EnvVar struct{ Name, Value string }

// CarriedEnv names the variables an install carries from its own
// environment into the service's, when they are set: the program search
// path and what the drivers read. Credentials are never carried.
var CarriedEnv = []string{"PATH", "ANDROID_HOME", "ANDROID_SDK_ROOT", "ANDROID_AVD_HOME", "ANDROID_USER_HOME", "SIMLOCK_DRIVERS"}

// Command is one program invocation of a Plan, never run through a shell.
type Command struct {
	Args []string `json:"args"`
	// MayFail marks a command whose failure is expected and ignored: an
	// unload of a service that was not loaded.
	MayFail bool `json:"mayFail,omitempty"`
}

func (c Command) String() string { return strings.Join(c.Args, " ") }

// Plan is a service as the manager sees it.
type Plan struct {
	Manager string `json:"manager"`
	Scope   string `json:"scope"`
	// Name is the launchd label or the systemd unit name.
	Name string `json:"name"`
	// Path is where the file goes (absolute, on the real file system).
	Path string `json:"path"`
	File []byte `json:"-"`
	// Target is what launchctl names the loaded service by
	// (gui/<uid>/<label>); the unit name for systemd.
	Target string `json:"-"`

	systemctl []string // "systemctl" and, for a user unit, "--user"
	uid       int
}

// Install is the commands that load the service once its file is written.
// replacing says a file was there before: the loaded service is unloaded
// or restarted so the new file takes effect.
func (p Plan) Install(replacing bool) []Command {
	if p.Manager == Launchd {
		var out []Command
		if replacing {
			out = append(out, p.launchctl(true, "bootout", p.Target))
		}
		return append(out, p.launchctl(false, "bootstrap", p.domain(), p.Path))
	}
	out := []Command{p.sysctl(false, "daemon-reload"), p.sysctl(false, "enable", "--now", p.Name)}
	if replacing {
		out = append(out, p.sysctl(false, "restart", p.Name))
	}
	return out
}

// Uninstall is the commands that stop and unload the service before its
// file is removed, and (systemd) after.
func (p Plan) Uninstall() (before, after []Command) {
	if p.Manager == Launchd {
		return []Command{p.launchctl(true, "bootout", p.Target)}, nil
	}
	return []Command{p.sysctl(true, "disable", "--now", p.Name)}, []Command{p.sysctl(false, "daemon-reload")}
}

// Start is the command that asks the manager to start the installed
// service now (a no-op when it runs).
func (p Plan) Start() Command {
	if p.Manager == Launchd {
		return p.launchctl(false, "kickstart", p.Target)
	}
	return p.sysctl(false, "start", p.Name)
}

// Status is the command whose output State reads.
func (p Plan) Status() Command {
	if p.Manager == Launchd {
		return p.launchctl(true, "print", p.Target)
	}
	return p.sysctl(true, "show", p.Name, "--property=LoadState,ActiveState,SubState,MainPID,UnitFileState")
}

func (p Plan) domain() string { return fmt.Sprintf("gui/%d", p.uid) }

func (p Plan) launchctl(mayFail bool, args ...string) Command {
	return Command{Args: append([]string{"launchctl"}, args...), MayFail: mayFail}
}

func (p Plan) sysctl(mayFail bool, args ...string) Command {
	return Command{Args: append(slices.Clone(p.systemctl), args...), MayFail: mayFail}
}

// For is the plan of spec's service on goos (runtime.GOOS). An operating
// system without a supported manager is SERVICE_UNSUPPORTED; a spec that
// cannot be written safely into the file is BAD_REQUEST.
func For(goos string, spec Spec) (Plan, error) {
	if err := Check(spec); err != nil {
		return Plan{}, err
	}
	switch goos {
	case "darwin":
		if spec.System {
			return Plan{}, contract.Errorf(contract.CodeServiceUnsupported,
				"--system is for Linux: on macOS the daemon runs as a LaunchAgent in your login session, because simulators need the user's GUI session; drop --system")
		}
		return launchdPlan(spec), nil
	case "linux":
		return systemdPlan(spec), nil
	}
	return Plan{}, contract.Errorf(contract.CodeServiceUnsupported,
		"simlock service supports macOS (launchd) and Linux (systemd), not %s; run `simlock daemon run` under this system's own service manager", goos)
}

// userName is what systemd and launchd accept as an account name without
// quoting: POSIX's portable user names.
var userName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_.-]{0,31}$`)

// Check refuses a spec no file could carry faithfully: relative paths,
// control characters (a newline would end a unit's line, and a plist
// cannot hold most of them), an unknown mode, an account name that is not
// one.
func Check(spec Spec) error {
	for _, f := range []struct{ field, v string }{
		{"home", spec.Home}, {"binary", spec.Binary}, {"userHome", spec.UserHome},
	} {
		if !filepath.IsAbs(f.v) {
			return contract.BadRequest(f.field, "%s %q is not an absolute path", f.field, f.v)
		}
		if err := printable(f.field, f.v); err != nil {
			return err
		}
	}
	if spec.Mode != contract.ModeWorker && spec.Mode != contract.ModeGateway {
		return contract.BadRequest("mode", "mode %q is neither %s nor %s", spec.Mode, contract.ModeWorker, contract.ModeGateway)
	}
	if !userName.MatchString(spec.User) {
		return contract.BadRequest("user", "user name %q is not one a service manager takes", spec.User)
	}
	for _, e := range spec.Env {
		if e.Name == "" || strings.ContainsAny(e.Name, "= \t") {
			return contract.BadRequest("env", "environment variable name %q is not one", e.Name)
		}
		if err := printable(e.Name, e.Value); err != nil {
			return err
		}
	}
	return nil
}

func printable(field, v string) error {
	for _, r := range v {
		if unicode.IsControl(r) || r == unicode.ReplacementChar {
			return contract.BadRequest(field, "%s %q holds a control character or invalid UTF-8, which a service file cannot carry", field, v)
		}
	}
	return nil
}

// suffix is the part of a service's name that tells homes apart: empty
// for a user's own service of their default home, else a hash of the
// home.
func suffix(spec Spec) string {
	if !spec.System && filepath.Clean(spec.Home) == filepath.Join(spec.UserHome, ".simlock") {
		return ""
	}
	sum := sha256.Sum256([]byte(filepath.Clean(spec.Home)))
	return hex.EncodeToString(sum[:4])
}

// ErrNotInstalled means no service file exists for the home.
var ErrNotInstalled = errors.New("no service is installed for this home")

// args is the daemon's command line after the binary.
func args(spec Spec) []string {
	a := []string{"daemon", "run"}
	if spec.Mode == contract.ModeGateway {
		// A gateway needs the HTTP API: say both, so the service runs
		// as asked whatever the config says.
		a = append(a, "--gateway", "--http")
	}
	return a
}

func environment(spec Spec) []EnvVar {
	return append([]EnvVar{{"SIMLOCK_HOME", spec.Home}}, spec.Env...)
}
