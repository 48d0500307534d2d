package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"

	"github.com/spf13/cobra"

	"github.com/simlock/simlock/internal/client"
	"github.com/simlock/simlock/internal/contract"
)

// passthroughCmd is `simlock simctl` or `simlock adb`: the daemon scopes the
// command to its root or adb server (or refuses it), and the CLI runs it
// with the caller's stdio and exits with the tool's status; a gateway, which
// has no devices to scope it to, runs it on the caller's lease's worker
// (execOnLease).
func passthroughCmd(env Env, tool, platform string) *cobra.Command {
	return &cobra.Command{
		Use:   tool + " [--lease <id>] <args...>",
		Short: "Run " + tool + " scoped to simlock's " + platform + " devices",
		Long: "Run " + tool + " against simlock's own " + platform + " devices, with your stdio, and exit with its status.\n" +
			"The command is pinned to one of your leases: --lease <id>, or your only active " + platform + " lease;\n" +
			"holding none, only commands that act on no device run (" + map[string]string{"adb": "adb devices, adb version", "simctl": "simctl list"}[tool] + ", --help).\n" +
			"Commands that would reach another device, the host's plumbing or the clean baseline are refused (exit 2) and nothing runs.\n" +
			"On a gateway it runs as device.exec on your lease, on the lease's worker (no local paths; stdin piped, exit status kept).",
		DisableFlagParsing: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			in := contract.PassthroughInput{Tool: tool}
			for len(args) > 0 {
				a := args[0]
				if a == "--lease" && len(args) > 1 {
					in.LeaseID, args = args[1], args[2:]
					continue
				}
				if v, ok := strings.CutPrefix(a, "--lease="); ok {
					in.LeaseID, args = v, args[1:]
					continue
				}
				if a == "--help" && len(args) == 1 {
					return cmd.Help()
				}
				break
			}
			in.Args = args
			if err := in.Validate(); err != nil {
				return fail(err)
			}
			var res contract.PassthroughResult
			principal := agentID("", env.Getenv, env.PPID)
			// A refused command is a mistake on this command line.
			refusal := func(err error) error {
				if ce := contract.AsError(err); ce != nil && (ce.Code == contract.CodePassthroughRefused || ce.Code == contract.CodeUnknownPassthroughTool) {
					relabelled := *ce
					relabelled.Code = contract.CodeUsage
					return &relabelled
				}
				return err
			}
			if rc, ok, err := remoteClient(env); err != nil || ok {
				if err != nil {
					return fail(err)
				}
				defer rc.Close()
				// Over the remote profile it runs on the lease's machine
				// through the exec route, as through a gateway.
				pick := func(ctx context.Context) (string, error) { return onlyRemoteLeaseOn(ctx, rc, in.Tool) }
				return fail(refusal(execOnLease(cmd.Context(), env, rc, pick, in)))
			}
			ran := false
			err := withClient(cmd, env, session{principal: principal, autostart: true}, func(ctx context.Context, c *client.Client) error {
				err := c.Call(ctx, contract.OpPassthrough, in, &res)
				if ce := contract.AsError(err); ce != nil && ce.Code == contract.CodeUnsupportedInGatewayMode {
					// A gateway runs it on the lease's worker.
					ran = true
					pick := func(ctx context.Context) (string, error) { return onlyLeaseOn(ctx, c, principal, in.Tool) }
					err = execOnLease(ctx, env, c, pick, in)
				}
				return refusal(err)
			})
			if err != nil || ran {
				return err
			}
			run := exec.CommandContext(cmd.Context(), res.Path, res.Args...)
			run.Env = append(os.Environ(), res.Env...)
			run.Stdin, run.Stdout, run.Stderr = env.Stdin, env.Stdout, env.Stderr
			err = run.Run()
			var exit *exec.ExitError
			switch {
			case err == nil:
				return nil
			case errors.As(err, &exit):
				return &exitError{code: exit.ExitCode(), err: err, quiet: true}
			}
			return fail(contract.Errorf(contract.CodeInternal, "run %s: %v", res.Path, err))
		},
	}
}

func doctorCmd(env Env) *cobra.Command {
	var fix, purge, yes bool
	cmd := &cobra.Command{
		Use:   "doctor [--fix] [--purge-orphans] [--yes]",
		Short: "Find what stops a platform from working; --fix applies safe corrections (admin)",
		Long: `Report missing platform tools (with the command that installs them), refused
device roots, disabled drivers, registry devices missing from their root,
devices erased, replaced or booted outside simlock, devices stuck in a
transition, leases past their deadline still held, and orphans (devices in
simlock's roots that no record names). Findings are JSON on stdout; missing
prerequisites are also listed on stderr. Nothing changes without --fix, which
marks vanished unleased devices deleted, quarantines unleased devices changed
outside simlock and stalled devices, and expires overdue leases;
--purge-orphans deletes orphans (asks on a terminal, else needs --yes).
Findings never change the exit code.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if purge && !yes {
				if !env.StdinIsTerminal {
					return usage("doctor --purge-orphans deletes devices; add --yes to confirm (no terminal to ask on)")
				}
				if !confirm(env, "This deletes every device in simlock's roots that its registry does not know.") {
					return usage("purge not confirmed")
				}
			}
			return withClient(cmd, env, session{principal: agentID("", env.Getenv, env.PPID), admin: fix || purge, autostart: true}, func(ctx context.Context, c *client.Client) error {
				var res contract.DoctorResult
				if err := c.Call(ctx, contract.OpDoctorRun, contract.DoctorInput{Fix: fix, PurgeOrphans: purge}, &res); err != nil {
					return err
				}
				if !jsonOut(cmd, env) {
					renderDoctor(env.Stdout, res)
					return nil
				}
				for _, f := range res.Findings {
					if f.Kind == "prerequisite-missing" {
						fmt.Fprintf(env.Stderr, "Missing [%s] %s: %s. %s\n", f.Platform, f.Prerequisite, strings.TrimSuffix(f.Message, "."), f.Remedy)
					}
				}
				return printJSON(env.Stdout, res)
			})
		},
	}
	cmd.Flags().BoolVar(&fix, "fix", false, "apply safe corrections")
	cmd.Flags().BoolVar(&purge, "purge-orphans", false, "delete devices in simlock's roots that no record names (admin)")
	cmd.Flags().BoolVar(&yes, "yes", false, "confirm --purge-orphans without asking")
	return cmd
}
