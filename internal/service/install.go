package service

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/simlock/simlock/internal/atomicfile"
	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/runner"
)

// commandBound bounds one launchctl or systemctl call: each returns
// once the manager has acted, which takes seconds at most.
const commandBound = 60 * time.Second

// Runner runs one program to completion (runner.OS in production); a
// non-zero exit is a Result, not an error.
type Runner interface {
	Run(ctx context.Context, cmd runner.Cmd) (runner.Result, error)
}

var _ Runner = runner.OS{}

// Installer carries Plans out: it writes and removes their files and runs
// their commands.
type Installer struct {
	// Runner runs launchctl and systemctl.
	Runner Runner
	// Root is put before every path the installer reads, writes or
	// removes: "" on the real file system, a temporary directory in
	// tests. Commands still name the plan's real paths.
	Root string
}

func (in Installer) file(p Plan) string { return filepath.Join(in.Root, p.Path) }

// Installed reports whether p's file exists.
func (in Installer) Installed(p Plan) (bool, error) {
	_, err := os.Lstat(in.file(p))
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, fs.ErrNotExist):
		return false, nil
	}
	return false, fmt.Errorf("read service file: %w", err)
}

// Install writes p's file (replacing one there) and loads it, which starts
// the daemon; it returns the commands it ran.
func (in Installer) Install(ctx context.Context, p Plan) ([]Command, error) {
	replacing, err := in.Installed(p)
	if err != nil {
		return nil, err
	}
	path := in.file(p)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, writeError(p, err)
	}
	if err := atomicfile.Write(path, p.File, 0o644); err != nil {
		return nil, writeError(p, err)
	}
	cmds := p.Install(replacing)
	return cmds, in.runAll(ctx, p, cmds)
}

// Uninstall stops and unloads p's service and removes its file; it
// returns the commands it ran, none when nothing was installed.
func (in Installer) Uninstall(ctx context.Context, p Plan) ([]Command, error) {
	installed, err := in.Installed(p)
	if err != nil || !installed {
		return nil, err
	}
	before, after := p.Uninstall()
	if err := in.runAll(ctx, p, before); err != nil {
		return before, err
	}
	if err := os.Remove(in.file(p)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return before, writeError(p, err)
	}
	return append(before, after...), in.runAll(ctx, p, after)
}

// Start asks the manager to start p's installed service now; it does
// nothing to one that runs.
func (in Installer) Start(ctx context.Context, p Plan) error {
	return in.runAll(ctx, p, []Command{p.Start()})
}

// State is what the manager says of a service.
type State struct {
	Installed bool `json:"installed"`
	// Loaded: the manager knows the service (launchd: bootstrapped;
	// systemd: enabled).
	Loaded  bool `json:"loaded"`
	Running bool `json:"running"`
	PID     int  `json:"pid,omitempty"`
	// Error says why the manager could not be asked, when it could not.
	Error *contract.Error `json:"error,omitempty"`
}

// Status asks the manager about p's installed service. A manager that cannot be
// reached is State.Error, not an error: the file's presence is still
// known.
func (in Installer) Status(ctx context.Context, p Plan) (State, error) {
	installed, err := in.Installed(p)
	if err != nil {
		return State{}, err
	}
	st := State{Installed: installed}
	if !installed {
		return st, nil
	}
	cmd := p.Status()
	res, err := in.run(ctx, cmd)
	if err == nil && res.ExitCode != 0 && !notLoaded(p, res) {
		err = commandError(p, cmd, res)
	}
	if err != nil {
		st.Error = contract.AsError(err)
		return st, nil
	}
	if res.ExitCode != 0 {
		return st, nil
	}
	if p.Manager == Launchd {
		st.Loaded = true
		st.Running, st.PID = parseLaunchctlPrint(res.Stdout)
		return st, nil
	}
	props := parseSystemctlShow(res.Stdout)
	st.Loaded = props["UnitFileState"] == "enabled" || props["UnitFileState"] == "enabled-runtime"
	st.Running = props["ActiveState"] == "active"
	if pid, err := strconv.Atoi(props["MainPID"]); err == nil && pid > 0 {
		st.PID = pid
	}
	return st, nil
}

// notLoaded is the answer of a status command about a service the
// manager does not know (launchctl print: exit 113).
func notLoaded(p Plan, res runner.Result) bool {
	return p.Manager == Launchd && (res.ExitCode == 113 || bytes.Contains(res.Stderr, []byte("Could not find service")))
}

func (in Installer) runAll(ctx context.Context, p Plan, cmds []Command) error {
	for _, c := range cmds {
		res, err := in.run(ctx, c)
		if err != nil {
			return err
		}
		if res.ExitCode != 0 && !c.MayFail {
			return commandError(p, c, res)
		}
	}
	return nil
}

func (in Installer) run(ctx context.Context, c Command) (runner.Result, error) {
	res, err := in.Runner.Run(ctx, runner.Cmd{Path: c.Args[0], Args: c.Args[1:], Timeout: commandBound})
	if errors.Is(err, exec.ErrNotFound) {
		return res, contract.Errorf(contract.CodeServiceUnsupported, "%s is not on PATH: this system does not run the service manager simlock writes for", c.Args[0])
	}
	if err != nil {
		return res, contract.Errorf(contract.CodeServiceManagerFailed, "%s: %v", c, err)
	}
	return res, nil
}

// commandError is a manager's refusal, with what it said and, where the
// cause is a known one, how to fix it.
func commandError(p Plan, c Command, res runner.Result) error {
	said := strings.TrimSpace(string(res.Stderr))
	if said == "" {
		said = strings.TrimSpace(string(res.Stdout))
	}
	msg := fmt.Sprintf("`%s` exited %d", c, res.ExitCode)
	if said != "" {
		msg += ": " + firstLines(said, 3)
	}
	if hint := managerHint(p, said); hint != "" {
		msg += "; " + hint
	}
	return contract.Errorf(contract.CodeServiceManagerFailed, "%s", msg).With("command", c.Args)
}

// managerHint is the fix of a failure a manager reports in words.
func managerHint(p Plan, said string) string {
	switch {
	case p.Manager == Systemd && p.Scope == ScopeUser && (strings.Contains(said, "Failed to connect to bus") ||
		strings.Contains(said, "DBUS_SESSION_BUS_ADDRESS") || strings.Contains(said, "XDG_RUNTIME_DIR")):
		return "no user systemd instance answers for this login (one runs while you are logged in, or always once lingering is on): " +
			"run `loginctl enable-linger $USER` and log in again, or install a system unit with `sudo simlock service install --system`"
	case p.Manager == Systemd && p.Scope == ScopeSystem && (strings.Contains(said, "Access denied") ||
		strings.Contains(said, "authentication required") || strings.Contains(said, "Interactive authentication")):
		return "a system unit is managed by root: run the command with sudo"
	case p.Manager == Launchd && p.Scope == ScopeGUI && strings.Contains(said, "Domain does not support specified action"):
		return "launchd has no GUI session for this user (a LaunchAgent needs one): run the command in a session where you are logged in at the screen"
	case p.Manager == Launchd:
		return fmt.Sprintf("`launchctl print %s` says more", p.Target)
	}
	return ""
}

func writeError(p Plan, err error) error {
	if errors.Is(err, fs.ErrPermission) && p.Scope == ScopeSystem {
		return contract.Errorf(contract.CodeServiceManagerFailed, "write %s: %v; a system unit is written by root: run the command with sudo", p.Path, err)
	}
	return contract.Errorf(contract.CodeServiceManagerFailed, "write %s: %v", p.Path, err)
}

func firstLines(s string, n int) string {
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = lines[:n]
	}
	return strings.Join(lines, " / ")
}

// parseLaunchctlPrint reads the service's own "state" and "pid" (one tab
// deep) from `launchctl print gui/<uid>/<label>`.
func parseLaunchctlPrint(out []byte) (running bool, pid int) {
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "\t") || strings.HasPrefix(line, "\t\t") {
			continue
		}
		k, v, ok := strings.Cut(strings.TrimSpace(line), " = ")
		if !ok {
			continue
		}
		switch k {
		case "state":
			running = v == "running"
		case "pid":
			pid, _ = strconv.Atoi(v)
		}
	}
	return running, pid
}

// parseSystemctlShow reads `systemctl show`'s KEY=value lines.
func parseSystemctlShow(out []byte) map[string]string {
	props := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), "="); ok {
			props[k] = v
		}
	}
	return props
}
