package cli

import (
	"context"
	"io"

	"fmt"

	"strings"

	"github.com/spf13/cobra"

	"github.com/simlock/simlock/internal/client"
	"github.com/simlock/simlock/internal/contract"
)

// componentCmd installs, lists and removes runtimes (components).
func componentCmd(env Env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "component",
		Short: "Install, list or remove OS runtimes (iOS simulator runtimes, Android system images)",
	}
	admin := session{principal: "simlock-cli", admin: true, autostart: true}
	var progressMode, workers string
	var allWorkers, verbose bool
	install := &cobra.Command{
		Use:   "install <ios|android> <version> [--all-workers | --workers <id,…>]",
		Short: "Download and install a runtime (admin); progress on stderr, the result on stdout",
		Long: `Download and install a runtime: an iOS version (26.4), a major (26) or latest;
an Android API level (36). It joins an install of the same component already
running, and waits behind another install on the same platform. Refused when
downloads.policy is never.

Against a gateway, --all-workers installs on every worker (drained ones too)
and --workers on the ones named: a row per worker shows its phase (waiting,
downloading, verifying, recording) and how far it is; a worker whose uplink
fails is asked again (gateway.installRetries). Every failure ends with a
block saying where and why. A fleet install exits 15 when a worker did not
end installed; an install on this machine that fails exits with its error's
code. simlock job show <id> replays the install afterwards.`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			in := contract.ComponentInstallInput{Platform: contract.Platform(args[0]), Version: args[1]}
			switch {
			case allWorkers && workers != "":
				return usage("--all-workers and --workers both choose the workers; give one")
			case allWorkers:
				in.Workers = &contract.WorkerChoice{All: true}
			case workers != "":
				in.Workers = &contract.WorkerChoice{IDs: strings.Split(workers, ",")}
			}
			if err := in.Validate(); err != nil {
				return fail(err)
			}
			mode, err := progressModeFor(progressMode, cmd, env)
			if err != nil {
				return err
			}
			return withClient(cmd, env, admin, func(ctx context.Context, c *client.Client) error {
				pr := newJobPrinter(env.Stderr, mode, env.TermWidth, verbose)
				pr.knowSpec(contract.JobSpec{Platform: in.Platform, Version: in.Version, Workers: in.Workers})
				if in.Workers == nil {
					res, err := c.InstallComponent(ctx, in, pr.show)
					pr.stop()
					if err != nil {
						return err
					}
					return printResult(cmd, env, res, func(w io.Writer) { renderInstalled(w, res) })
				}
				done, err := c.InstallOnFleet(ctx, in, pr.show)
				pr.stop()
				if err != nil {
					return err
				}
				if err := printJSON(env.Stdout, done); err != nil {
					return err
				}
				if done.Result != contract.JobSucceeded {
					return &exitError{code: contract.ExitInstallIncomplete, err: fmt.Errorf("job %s: not every worker ended installed", done.JobID), quiet: true}
				}
				return nil
			})
		},
	}
	install.Flags().StringVar(&progressMode, "progress", "", "json, human or none (default: human on a terminal, else json)")
	install.Flags().BoolVar(&allWorkers, "all-workers", false, "on a gateway: install on every worker")
	install.Flags().StringVar(&workers, "workers", "", "on a gateway: install on these workers (ids, comma-separated)")
	install.Flags().BoolVar(&verbose, "verbose", false, "print every line the installer prints, not only the latest")
	var platform string
	list := &cobra.Command{
		Use:   "list",
		Short: "List installed runtimes: which simlock installed (owned) and how many devices use each",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			in := contract.ComponentListInput{Platform: contract.Platform(platform)}
			if err := in.Validate(); err != nil {
				return fail(err)
			}
			agent := session{principal: agentID("", env.Getenv, env.PPID), autostart: true}
			return withClient(cmd, env, agent, func(ctx context.Context, c *client.Client) error {
				var res contract.ComponentListResult
				if err := c.Call(ctx, contract.OpComponentList, in, &res); err != nil {
					return err
				}
				if !jsonOut(cmd, env) {
					renderComponentsTable(env.Stdout, res.Components)
					return nil
				}
				return printJSON(env.Stdout, res)
			})
		},
	}
	list.Flags().StringVar(&platform, "platform", "", "ios or android (default: both)")
	_ = list.RegisterFlagCompletionFunc("platform", completePlatforms)
	var dryRun, yes bool
	remove := &cobra.Command{
		Use:   "remove <ios|android> <version> [--dry-run] [--yes]",
		Short: "Remove a runtime simlock installed and no device uses (admin)",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			in := contract.ComponentRemoveInput{Platform: contract.Platform(args[0]), Version: args[1], DryRun: dryRun}
			if err := in.Validate(); err != nil {
				return fail(err)
			}
			if !dryRun && !yes {
				return usage("component remove deletes %s %s from this machine; add --yes to confirm, or --dry-run to check first", args[0], args[1])
			}
			return withClient(cmd, env, admin, func(ctx context.Context, c *client.Client) error {
				var res contract.ComponentRemoveResult
				if err := c.Call(ctx, contract.OpComponentRemove, in, &res); err != nil {
					return err
				}
				return printResult(cmd, env, res, func(w io.Writer) { renderRemoved(w, res) })
			})
		},
	}
	remove.Flags().BoolVar(&dryRun, "dry-run", false, "check everything, remove nothing")
	remove.Flags().BoolVar(&yes, "yes", false, "confirm the removal")
	cmd.AddCommand(install, list, remove)
	return cmd
}

// knowSpec tells the printer what is installed, for a failure's next step
// ("try it again: simlock component install ios 26.4"): an install on this
// machine sends no snapshot of its job, which is where the spec is read
// from otherwise (and, when one comes, replaces this).
func (p *jobPrinter) knowSpec(spec contract.JobSpec) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.state.Spec = spec
}
