package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/user"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/simlock/simlock/internal/client"
	"github.com/simlock/simlock/internal/config"
	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/homedir"
	"github.com/simlock/simlock/internal/runner"
	"github.com/simlock/simlock/internal/service"
)

// serviceFlags are the flags the three service commands share.
type serviceFlags struct {
	mode   string
	system bool
	dryRun bool
	// os is the system a dry run writes for: empty for this one.
	os string
}

func serviceCmd(env Env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "service",
		Short: "Run the daemon of SIMLOCK_HOME under launchd (macOS) or systemd (Linux)",
	}
	var f serviceFlags
	install := &cobra.Command{
		Use:   "install [--mode worker|gateway] [--system] [--dry-run]",
		Short: "Write the LaunchAgent or systemd unit of this home, load it and start the daemon",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			p, home, in, err := servicePlan(env, f, true)
			if err != nil {
				return fail(err)
			}
			replacing, err := in.Installed(p)
			if err != nil {
				return fail(err)
			}
			if f.dryRun {
				out := serviceView(p)
				out["dryRun"], out["file"], out["commands"] = true, string(p.File), p.Install(replacing)
				return printResult(cmd, env, out, func(w io.Writer) { renderServiceDryRun(w, p, p.Install(replacing), true) })
			}
			if !f.system {
				// launchd opens the stdout and stderr files in the home
				// itself: the home must be there, and the user's.
				if err := homedir.Prepare(home); err != nil {
					return fail(err)
				}
			}
			if pid := onDemandDaemon(home); pid > 0 {
				fmt.Fprintf(env.Stderr, "note: a daemon started on demand (pid %d) holds this home; the service's daemon takes over once it stops: simlock daemon stop\n", pid)
			}
			ran, err := in.Install(cmd.Context(), p)
			if err != nil {
				return fail(err)
			}
			out := serviceView(p)
			out["installed"], out["commands"] = true, ran
			return printResult(cmd, env, out, func(w io.Writer) {
				fmt.Fprintf(w, "✓ Installed %s (%s) at %s\n", p.Name, scopeWords(p), p.Path)
				for _, c := range ran {
					fmt.Fprintf(w, "  ran: %s\n", shellLine(c.Args))
				}
			})
		},
	}
	uninstall := &cobra.Command{
		Use:   "uninstall [--system] [--dry-run]",
		Short: "Stop the service of this home, unload it and remove its file",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			p, _, in, err := servicePlan(env, f, false)
			if err != nil {
				return fail(err)
			}
			if f.dryRun {
				before, after := p.Uninstall()
				cmds := append(before, after...)
				out := serviceView(p)
				out["dryRun"], out["commands"] = true, cmds
				return printResult(cmd, env, out, func(w io.Writer) { renderServiceDryRun(w, p, cmds, false) })
			}
			was, err := in.Installed(p)
			if err != nil {
				return fail(err)
			}
			ran, err := in.Uninstall(cmd.Context(), p)
			if err != nil {
				return fail(err)
			}
			out := serviceView(p)
			out["installed"], out["removed"], out["commands"] = false, was, ran
			return printResult(cmd, env, out, func(w io.Writer) {
				if !was {
					fmt.Fprintf(w, "No service was installed for this home (%s)\n", p.Path)
					return
				}
				fmt.Fprintf(w, "✓ Uninstalled %s and removed %s\n", p.Name, p.Path)
			})
		},
	}
	status := &cobra.Command{
		Use:   "status [--system]",
		Short: "Say whether the service of this home is installed, loaded and running (never starts it)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			p, _, in, err := servicePlan(env, f, false)
			if err != nil {
				return fail(err)
			}
			st, err := in.Status(cmd.Context(), p)
			if err != nil {
				return fail(err)
			}
			out := serviceView(p)
			out["installed"], out["loaded"], out["running"] = st.Installed, st.Loaded, st.Running
			if st.PID > 0 {
				out["pid"] = st.PID
			}
			if st.Error != nil {
				out["error"] = st.Error
			}
			return printResult(cmd, env, out, func(w io.Writer) { renderServiceStatus(w, p, st) })
		},
	}
	for _, c := range []*cobra.Command{install, uninstall, status} {
		c.Flags().BoolVar(&f.system, "system", false, "a systemd system unit (Linux; run as root), which runs the daemon as you, instead of a user unit")
	}
	install.Flags().StringVar(&f.mode, "mode", "", "worker or gateway (default: the home's configured mode)")
	install.Flags().StringVar(&f.os, "os", "", "with --dry-run: macos (a LaunchAgent) or linux (a systemd unit) instead of this machine's system, to prepare another machine's service")
	for _, c := range []*cobra.Command{install, uninstall} {
		c.Flags().BoolVar(&f.dryRun, "dry-run", false, "print the file and the exact commands instead of running them")
	}
	cmd.AddCommand(install, uninstall, status)
	return cmd
}

// servicePlan is the service of this home as the flags ask for it, and
// the installer that carries it out. Without --system, uninstall and
// status take the system unit when only that one is installed.
func servicePlan(env Env, f serviceFlags, install bool) (service.Plan, string, service.Installer, error) {
	in := service.Installer{Runner: runner.OS{}}
	spec, err := serviceSpec(env, f, install)
	if err != nil {
		return service.Plan{}, "", in, err
	}
	goos, err := serviceOS(f)
	if err != nil {
		return service.Plan{}, "", in, err
	}
	p, err := service.For(goos, spec)
	if err != nil {
		return p, "", in, err
	}
	if !install && !f.system && runtime.GOOS == "linux" {
		if ok, _ := in.Installed(p); !ok {
			spec.System = true
			if sp, err := service.For(runtime.GOOS, spec); err == nil {
				if ok, _ := in.Installed(sp); ok {
					p = sp
				}
			}
		}
	}
	return p, spec.Home, in, nil
}

// serviceOS is the system whose service manager the plan is for: this
// machine's, or with --dry-run the one --os names (nothing is installed
// on a machine for another system).
func serviceOS(f serviceFlags) (string, error) {
	var goos string
	switch f.os {
	case "":
		return runtime.GOOS, nil
	case "macos", "darwin":
		goos = "darwin"
	case "linux":
		goos = "linux"
	default:
		return "", usage("--os %q: want macos or linux", f.os)
	}
	if goos != runtime.GOOS && !f.dryRun {
		return "", usage("--os %s writes another system's service: add --dry-run and install it on that machine", f.os)
	}
	return goos, nil
}

// serviceSpec is the Spec of this home's service: the binary this command
// is (symbolic links resolved), the account that runs it (under sudo, the
// one who ran sudo), the mode, and the environment an install carries.
func serviceSpec(env Env, f serviceFlags, install bool) (service.Spec, error) {
	u, err := serviceUser(env, f.system)
	if err != nil {
		return service.Spec{}, err
	}
	userHome := u.HomeDir
	if h := env.Getenv("HOME"); h != "" && !f.system {
		userHome = h
	}
	home, err := env.home()
	if err != nil {
		return service.Spec{}, err
	}
	if f.system && env.Getenv("SIMLOCK_HOME") == "" && u.Uid != strconv.Itoa(os.Getuid()) {
		// sudo: the home is the invoking user's, not root's.
		home = filepath.Join(u.HomeDir, ".simlock")
	}
	bin, err := filepath.EvalSymlinks(env.Executable)
	if err == nil {
		bin, err = filepath.Abs(bin)
	}
	if err != nil {
		return service.Spec{}, contract.Errorf(contract.CodeInternal, "find the simlock binary: %v", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	spec := service.Spec{Home: home, Binary: bin, System: f.system, User: u.Username, UID: uid, UserHome: userHome, Mode: contract.ModeWorker}
	if install {
		if spec.Mode, err = serviceMode(home, f.mode); err != nil {
			return spec, err
		}
		for _, name := range service.CarriedEnv {
			if v := env.Getenv(name); v != "" {
				spec.Env = append(spec.Env, service.EnvVar{Name: name, Value: v})
			}
		}
	}
	return spec, nil
}

// serviceUser is the account the daemon runs as: this process's, or under
// sudo for a system unit, the account that ran sudo.
func serviceUser(env Env, system bool) (*user.User, error) {
	if name := env.Getenv("SUDO_USER"); system && os.Getuid() == 0 && name != "" && name != "root" {
		u, err := user.Lookup(name)
		if err != nil {
			return nil, contract.Errorf(contract.CodeInternal, "look up SUDO_USER %s: %v", name, err)
		}
		return u, nil
	}
	u, err := user.Current()
	if err != nil {
		return nil, contract.Errorf(contract.CodeInternal, "look up the current user: %v", err)
	}
	return u, nil
}

// serviceMode is the mode the service runs in: --mode, else the home's
// configured mode. `daemon run` has no flag that turns a home configured
// as a gateway into a worker, so --mode worker there is refused.
func serviceMode(home, flag string) (string, error) {
	configured := contract.ModeWorker
	if cfg, err := config.Load(home); err == nil && cfg.String("mode") != "" {
		configured = cfg.String("mode")
	}
	switch flag {
	case "":
		return configured, nil
	case contract.ModeWorker:
		if configured == contract.ModeGateway {
			return "", usage("this home is configured as a gateway (mode gateway); to run it as a worker, first: simlock config set mode worker")
		}
		return flag, nil
	case contract.ModeGateway:
		return flag, nil
	}
	return "", usage("--mode %q: want worker or gateway", flag)
}

// onDemandDaemon is the pid of a daemon running for home, or 0.
func onDemandDaemon(home string) int {
	lock := filepath.Join(home, "daemon.lock")
	if !holderAlive(lock) {
		return 0
	}
	b, _ := homedir.ReadFile(lock)
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	return pid
}

func serviceView(p service.Plan) map[string]any {
	return map[string]any{"manager": p.Manager, "scope": p.Scope, "name": p.Name, "path": p.Path}
}

func scopeWords(p service.Plan) string {
	switch p.Scope {
	case service.ScopeGUI:
		return "launchd LaunchAgent"
	case service.ScopeSystem:
		return "systemd system unit"
	}
	return "systemd user unit"
}

func renderServiceDryRun(w io.Writer, p service.Plan, cmds []service.Command, install bool) {
	if install {
		fmt.Fprintf(w, "# %s (%s): %s\n", p.Name, scopeWords(p), p.Path)
		w.Write(p.File)
		fmt.Fprintln(w, "# then:")
	} else {
		fmt.Fprintf(w, "# %s (%s): remove %s around:\n", p.Name, scopeWords(p), p.Path)
	}
	for _, c := range cmds {
		line := shellLine(c.Args)
		if c.MayFail {
			line += "   # may fail: not loaded"
		}
		fmt.Fprintln(w, line)
	}
}

func renderServiceStatus(w io.Writer, p service.Plan, st service.State) {
	switch {
	case !st.Installed:
		fmt.Fprintf(w, "not installed (%s would be %s)\n", scopeWords(p), p.Path)
	case st.Running:
		fmt.Fprintf(w, "installed, loaded, running (pid %d): %s at %s\n", st.PID, p.Name, p.Path)
	case st.Loaded:
		fmt.Fprintf(w, "installed, loaded, not running: %s at %s\n", p.Name, p.Path)
	default:
		fmt.Fprintf(w, "installed, not loaded: %s at %s\n", p.Name, p.Path)
	}
	if st.Error != nil {
		fmt.Fprintf(w, "the service manager did not answer: %s\n", st.Error.Message)
	}
}

// shellSafe is what a POSIX shell reads as itself.
var shellSafe = regexp.MustCompile(`^[A-Za-z0-9_@%+=:,./-]+$`)

// shellLine is args as a line a shell runs as those arguments.
func shellLine(args []string) string {
	out := make([]string, len(args))
	for i, a := range args {
		if shellSafe.MatchString(a) {
			out[i] = a
		} else {
			out[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
	}
	return strings.Join(out, " ")
}

// installedService is this home's installed service, if there is one: a
// command that would start the daemon on demand asks its manager instead,
// so the one daemon of the home is the service's.
func installedService(env Env, home string) (service.Plan, service.Installer, bool) {
	if runtime.GOOS != "darwin" && runtime.GOOS != "linux" {
		return service.Plan{}, service.Installer{}, false
	}
	p, _, in, err := servicePlan(env, serviceFlags{}, false)
	if err != nil || p.Path == "" {
		return p, in, false
	}
	ok, _ := in.Installed(p)
	return p, in, ok
}

// startService asks the manager to start this home's service, waits until
// the daemon's socket accepts and its startup has converged, within
// startupBound, and returns the session dial opens.
func startService(ctx context.Context, home string, p service.Plan, in service.Installer, dial func() (*client.Client, error)) (*client.Client, error) {
	ctx, cancel := context.WithTimeoutCause(ctx, startupBound, errStartupBound)
	defer cancel()
	if err := in.Start(ctx, p); err != nil {
		ce := contract.AsError(err)
		return nil, contract.Errorf(ce.Code, "no daemon runs for %s, whose service %s is installed, and starting it failed: %s", home, p.Name, ce.Message)
	}
	sock := filepath.Join(home, "daemon.sock")
	for wait := 2 * time.Millisecond; ; wait = min(2*wait, 100*time.Millisecond) {
		c, err := dial()
		if err == nil {
			if _, err = awaitReady(ctx, c, home); err == nil {
				return c, nil
			}
			c.Close()
		}
		if !daemonGone(err) {
			return nil, wrapDial(err)
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			if context.Cause(ctx) == errStartupBound {
				return nil, contract.Errorf(contract.CodeDaemonStartupFailed,
					"the service %s did not bring up a daemon listening on %s within %s; see simlock service status and %s",
					p.Name, sock, startupBound, filepath.Join(home, "daemon.log"))
			}
			return nil, ctx.Err()
		case <-t.C:
		}
	}
}
