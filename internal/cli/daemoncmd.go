package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"time"

	"github.com/shirou/gopsutil/v4/cpu"
	"github.com/shirou/gopsutil/v4/host"
	"github.com/shirou/gopsutil/v4/mem"
	"github.com/spf13/cobra"

	"github.com/simlock/simlock/internal/config"
	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/core"
	"github.com/simlock/simlock/internal/daemon"
	"github.com/simlock/simlock/internal/homedir"
	"github.com/simlock/simlock/internal/leader"
	"github.com/simlock/simlock/internal/logfile"
)

func daemonCmd(env Env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "daemon",
		Short: "Run, start, stop or inspect the daemon of SIMLOCK_HOME",
	}
	cmd.AddCommand(daemonRunCmd(env), daemonStartCmd(env), daemonStopCmd(env), daemonStatusCmd(env), daemonLogsCmd(env))
	return cmd
}

func daemonRunCmd(env Env) *cobra.Command {
	var withHTTP, asGateway bool
	var notifyFD int
	cmd := &cobra.Command{
		Use:   "run",
		Short: "Run the daemon in the foreground (the CLI starts it on demand otherwise)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			// Closed on every way out; written once the socket listens.
			notify := notifier(notifyFD)
			defer notify.Close()
			home, err := env.home()
			if err != nil {
				return err
			}
			if err := homedir.Prepare(home); err != nil {
				return fail(err)
			}
			level, rotate := slog.LevelInfo, config.Default().Int("log.rotateBytes")
			if cfg, err := config.Load(home); err == nil {
				_ = level.UnmarshalText([]byte(cfg.String("log.level")))
				rotate = cfg.Int("log.rotateBytes")
			}
			logFile, err := logfile.Open(filepath.Join(home, daemon.LogName), rotate)
			if err != nil {
				return fail(fmt.Errorf("open daemon log: %w", err))
			}
			defer logFile.Close()
			log := slog.New(slog.NewJSONHandler(logFile, &slog.HandlerOptions{Level: level})).With("pid", os.Getpid())
			opts, err := daemonOptions(cmd.Context(), env, home, log)
			if err == nil && withHTTP {
				opts.Config, err = opts.Config.Override("http.enabled", "true")
			}
			if err == nil && asGateway {
				opts.Config, err = opts.Config.Override("mode", contract.ModeGateway)
			}
			if err != nil {
				log.Error("startup failed", "err", err)
				return &exitError{code: 1, err: contract.Errorf(contract.CodeDaemonStartupFailed, "%v", err)}
			}
			for _, w := range opts.Config.Warnings {
				log.Warn(w)
				fmt.Fprintln(env.Stderr, "warning: "+w)
			}
			if v := env.Getenv(lockFDEnv); v != "" {
				// For this run only: nothing it starts inherits it.
				_ = os.Unsetenv(lockFDEnv)
				opts.Lock = inheritedLock(v)
			}
			d, err := daemon.Start(cmd.Context(), opts)
			if err == nil {
				notify.listening()
				// A foreground run says where it serves, for the person
				// who started it (an on-demand start sends this to
				// daemon.out).
				fmt.Fprintf(env.Stdout, "simlock daemon %s running (pid %d), socket %s\n", env.Version, os.Getpid(), daemon.SocketPath(home))
				if u := d.HTTPURL(); u != "" {
					fmt.Fprintf(env.Stdout, "HTTP API at %s\n", u)
				}
				if u := d.ConsoleURL(); u != "" {
					fmt.Fprintf(env.Stdout, "Console at %s\n", u)
				}
				err = d.Wait(cmd.Context())
			}
			if errors.Is(err, leader.ErrDeposed) && cmd.Context().Err() == nil {
				// A gateway replica that lost the leadership has stopped as
				// a stop does; it comes back as a follower, a new run of
				// this program in this process.
				log.Warn("deposed as leader; running again as a follower", "err", err)
				fmt.Fprintf(env.Stderr, "simlock daemon: deposed as leader (%v); running again as a follower\n", err)
				notify.Close()
				logFile.Close()
				err = reexec(os.Args, d.HandOverLock())
				fmt.Fprintf(env.Stderr, "simlock daemon: could not run again after being deposed: %v\n", err)
				return &exitError{code: exitReexecFailed, err: err, quiet: true}
			}
			if err != nil {
				log.Error("daemon ended", "err", err)
				return &exitError{code: 1, err: contract.Errorf(contract.CodeDaemonStartupFailed, "%v", err)}
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&withHTTP, "http", false, "serve the HTTP API for this run (as http.enabled does)")
	cmd.Flags().BoolVar(&asGateway, "gateway", false, "run as a gateway for this run (as mode gateway does): no devices of its own, the workers that join it")
	cmd.Flags().IntVar(&notifyFD, "notify-fd", -1, "write a line to this inherited file descriptor once the socket listens, then close it (for the CLI's on-demand start)")
	_ = cmd.Flags().MarkHidden("notify-fd")
	return cmd
}

// startNotifier tells the process that started the daemon that its socket
// listens (and, by then, that admin.token is written), through a pipe the
// daemon inherited; a zero value does nothing.
type startNotifier struct{ f *os.File }

func notifier(fd int) startNotifier {
	if fd < 3 {
		return startNotifier{}
	}
	// The daemon's own children (xcrun, emulator, the adb server) must not
	// hold the pipe open.
	syscall.CloseOnExec(fd)
	return startNotifier{os.NewFile(uintptr(fd), "notify")}
}

func (n startNotifier) listening() {
	if n.f != nil {
		_, _ = n.f.WriteString("listening\n")
		n.Close()
	}
}

func (n startNotifier) Close() {
	if n.f != nil {
		_ = n.f.Close()
	}
}

// daemonOptions wires the real config, drivers and host facts.
func daemonOptions(ctx context.Context, env Env, home string, log *slog.Logger) (daemon.Options, error) {
	if err := homedir.Prepare(home); err != nil {
		return daemon.Options{}, err
	}
	cfg, err := config.Load(home)
	if err != nil {
		return daemon.Options{}, err
	}
	// Check the driver names now, so a typo stops the start with a clear
	// message; the drivers themselves start once the home is ours.
	drivers := daemon.DriverWiring{Config: cfg, Home: home, Getenv: env.Getenv, LookPath: exec.LookPath, Logger: log}
	if err := drivers.Check(); err != nil {
		return daemon.Options{}, err
	}
	return daemon.Options{
		Home: home, Version: env.Version, Config: cfg, SetupDrivers: drivers.Setup, Host: readHost(), HostOS: hostOS(), Logger: log,
		ClassDefaults: classDefaults(cfg), MCP: serveMCP, CAFile: env.Getenv("SIMLOCK_CA"),
	}, nil
}

// hostOS names the operating system release ("macOS 15.5", "debian
// 12.9"), or "" when the host does not say within a few seconds.
func hostOS() string {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	platform, _, version, err := host.PlatformInformationWithContext(ctx)
	if err != nil || platform == "" {
		return ""
	}
	if platform == "darwin" {
		platform = "macOS"
	}
	return strings.TrimSpace(platform + " " + version)
}

// classDefaults reads ios.defaultModels.<class> and android.defaultModels.<class>.
func classDefaults(cfg *config.Config) map[contract.Platform]map[contract.DeviceClass][]string {
	out := map[contract.Platform]map[contract.DeviceClass][]string{}
	for _, p := range contract.Platforms() {
		out[p] = map[contract.DeviceClass][]string{}
		for _, c := range []contract.DeviceClass{contract.ClassPhone, contract.ClassTablet, contract.ClassWatch,
			contract.ClassTV, contract.ClassVision, contract.ClassAuto, contract.ClassDesktop} {
			if models := cfg.List(string(p) + ".defaultModels." + string(c)); len(models) > 0 {
				out[p][c] = models
			}
		}
	}
	return out
}

func readHost() core.Host {
	h := core.Host{CPUs: runtime.NumCPU()}
	if n, err := cpu.Counts(true); err == nil && n > 0 {
		h.CPUs = n
	}
	if vm, err := mem.VirtualMemory(); err == nil {
		h.RAMBytes = int64(vm.Total)
	}
	return h
}

func daemonStartCmd(env Env) *cobra.Command {
	return &cobra.Command{
		Use:   "start",
		Short: "Start the daemon in the background if it is not running, and wait until it is ready",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			home, err := env.home()
			if err != nil {
				return err
			}
			c, err := connect(cmd.Context(), cmd, env, session{principal: "simlock-cli", autostart: true})
			if err != nil {
				return fail(err)
			}
			defer c.Close()
			// A daemon found running may still be starting (another
			// command started it a moment ago): wait for it too.
			s, err := awaitReady(cmd.Context(), c, home)
			if daemonGone(err) {
				err = goneAtStartup(home)
			}
			if err != nil {
				return fail(err)
			}
			if s.Daemon.Health != "running" {
				return fail(contract.Errorf(contract.CodeDaemonStopping, "the daemon is %s", s.Daemon.Health).With("health", s.Daemon.Health))
			}
			out := runningView(s)
			return printResult(cmd, env, out, func(w io.Writer) { renderRunning(w, out) })
		},
	}
}

// runningView is a running daemon as daemon start and daemon status print
// it.
func runningView(s contract.Status) map[string]any {
	out := map[string]any{"status": "running", "health": s.Daemon.Health, "pid": s.Daemon.PID,
		"version": s.Daemon.Version, "startedAt": s.Daemon.StartedAt, "home": s.Daemon.Home}
	if s.Daemon.HTTPURL != "" {
		out["httpUrl"] = s.Daemon.HTTPURL
	}
	if s.Daemon.ConsoleURL != "" {
		out["consoleUrl"] = s.Daemon.ConsoleURL
	}
	return out
}

func daemonStopCmd(env Env) *cobra.Command {
	return &cobra.Command{
		Use:   "stop",
		Short: "Stop the daemon gracefully, waiting for device cleans in flight",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			home, err := env.home()
			if err != nil {
				return err
			}
			c, err := connect(ctx, cmd, env, session{principal: "simlock-cli", admin: true})
			if err != nil {
				if ce := contract.AsError(err); ce.Code == contract.CodeDaemonConnectionLost {
					return printResult(cmd, env, map[string]any{"status": "stopped"}, renderStopped(false))
				}
				return fail(err)
			}
			defer c.Close()
			if err := c.Stop(ctx); err != nil {
				return fail(err)
			}
			// The daemon holds its lock until it has fully stopped.
			if err := waitUnlocked(ctx, filepath.Join(home, daemon.LockName), time.Minute); err != nil {
				return fail(err)
			}
			return printResult(cmd, env, map[string]any{"status": "stopped"}, renderStopped(true))
		},
	}
}

func daemonStatusCmd(env Env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "status [--json]",
		Short: "Say whether the daemon runs (never starts it)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			asJSON, _ := cmd.Flags().GetBool("json")
			c, err := connect(cmd.Context(), cmd, env, session{principal: "simlock-cli"})
			out := map[string]any{"status": "stopped"}
			code := 0
			if err != nil {
				if ce := contract.AsError(err); ce.Code != contract.CodeDaemonConnectionLost {
					out = map[string]any{"status": "handshake-refused", "error": ce}
					code = 1
				}
			} else {
				defer c.Close()
				s, err := c.Status(cmd.Context())
				if err != nil {
					return fail(err)
				}
				out = runningView(s)
			}
			if asJSON {
				if err := printJSON(env.Stdout, out); err != nil {
					return err
				}
			} else if out["status"] == "running" {
				renderRunning(env.Stdout, out)
			} else {
				fmt.Fprintln(env.Stdout, out["status"])
			}
			if code != 0 {
				return &exitError{code: code, err: errors.New("handshake refused"), quiet: true}
			}
			return nil
		},
	}
	return cmd
}

func configCmd(env Env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "config",
		Short: "Read or change $SIMLOCK_HOME/config.json",
	}
	get := &cobra.Command{
		Use:               "get [key]",
		Short:             "Print the effective config, or one key (from the running daemon, else the file)",
		Args:              cobra.MaximumNArgs(1),
		ValidArgsFunction: completeConfigKeys,
		RunE: func(cmd *cobra.Command, args []string) error {
			key := ""
			if len(args) == 1 {
				key = args[0]
			}
			c, err := connect(cmd.Context(), cmd, env, session{principal: "simlock-cli", admin: true})
			if err == nil {
				defer c.Close()
				res, err := c.Config(cmd.Context(), key)
				if err != nil {
					return fail(err)
				}
				return printResult(cmd, env, res, func(w io.Writer) { renderConfig(w, res) })
			}
			if ce := contract.AsError(err); ce.Code != contract.CodeDaemonConnectionLost {
				return fail(err)
			}
			home, err := env.home()
			if err != nil {
				return err
			}
			cfg, err := config.Load(home)
			if err != nil {
				return fail(contract.Errorf(contract.CodeBadRequest, "%v", err))
			}
			if key == "" {
				res := map[string]any{"config": cfg.Nested()}
				return printResult(cmd, env, res, func(w io.Writer) { renderConfig(w, res) })
			}
			v, ok := cfg.Get(key)
			if !ok {
				return fail(contract.BadRequest("key", "unknown config key %q", key))
			}
			res := map[string]any{"key": key, "value": v}
			return printResult(cmd, env, res, func(w io.Writer) { renderConfig(w, res) })
		},
	}
	set := &cobra.Command{
		Use:               "set <key> <value>",
		Short:             "Validate and write one setting; the daemon uses it at its next start (gateway.url, .token, .label: within 2 s)",
		Args:              cobra.ExactArgs(2),
		ValidArgsFunction: completeConfigKeys,
		RunE: func(cmd *cobra.Command, args []string) error {
			home, err := env.home()
			if err != nil {
				return err
			}
			v, err := config.Set(home, args[0], args[1])
			if err != nil {
				var ce *config.Error
				if errors.As(err, &ce) {
					return fail(contract.BadRequest(ce.Key, "%s", ce.Msg))
				}
				return fail(err)
			}
			key, secret, at := args[0], config.Secret(args[0]), configAppliesAt(args[0])
			out := map[string]any{"key": key, "value": v, "appliesAt": at}
			if secret {
				out["value"] = hiddenValue
			}
			return printResult(cmd, env, out, func(w io.Writer) { renderConfigSet(w, key, v, secret, at) })
		},
	}
	keys := &cobra.Command{
		Use:   "keys",
		Short: "List every config key with its default",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			for _, k := range config.Keys() {
				def := "unset"
				if k.Default != nil {
					// As JSON, the form config set takes: a list or an
					// object reads as one, not as Go's map[...] syntax.
					var buf bytes.Buffer
					enc := json.NewEncoder(&buf)
					enc.SetEscapeHTML(false)
					if err := enc.Encode(k.Default); err != nil {
						return fail(err)
					}
					def = strings.TrimSpace(buf.String())
				}
				fmt.Fprintf(env.Stdout, "%s (default %s): %s\n", k.Key, def, k.Doc)
			}
			return nil
		},
	}
	cmd.AddCommand(get, set, keys)
	return cmd
}
