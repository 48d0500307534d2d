package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sync"
	"time"

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
	var progressMode string
	install := &cobra.Command{
		Use:   "install <ios|android> <version>",
		Short: "Download and install a runtime (admin); progress on stderr, the result on stdout",
		Long: `Download and install a runtime: an iOS version (26.4), a major (26) or latest;
an Android API level (36). It joins an install of the same component already
running, and waits behind another install on the same platform. Refused when
downloads.policy is never.`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			in := contract.ComponentInstallInput{Platform: contract.Platform(args[0]), Version: args[1]}
			if err := in.Validate(); err != nil {
				return fail(err)
			}
			mode, err := progressModeFor(progressMode, cmd, env)
			if err != nil {
				return err
			}
			return withClient(cmd, env, admin, func(ctx context.Context, c *client.Client) error {
				pr := newInstallPrinter(env.Stderr, mode, env.TermWidth)
				res, err := c.InstallComponent(ctx, in, pr.show)
				pr.stop()
				if err != nil {
					return err
				}
				return printJSON(env.Stdout, res)
			})
		},
	}
	install.Flags().StringVar(&progressMode, "progress", "", "json, human or none (default: human on a terminal, else json)")
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
				return printJSON(env.Stdout, res)
			})
		},
	}
	remove.Flags().BoolVar(&dryRun, "dry-run", false, "check everything, remove nothing")
	remove.Flags().BoolVar(&yes, "yes", false, "confirm the removal")
	cmd.AddCommand(install, list, remove)
	return cmd
}

// installPrinter shows an install's progress on stderr: JSON lines, or a
// live line on a terminal.
type installPrinter struct {
	w     io.Writer
	mode  string
	width func() int // the terminal's columns; 0 when unknown
	mu    sync.Mutex
	since time.Time
	rate  downloadRate
	drawn bool
}

func newInstallPrinter(w io.Writer, mode string, width func() int) *installPrinter {
	if width == nil {
		width = func() int { return 0 }
	}
	return &installPrinter{w: w, mode: mode, width: width, since: time.Now()}
}

func (p *installPrinter) show(step contract.ComponentProgress) {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch p.mode {
	case "json":
		body, _ := json.Marshal(step)
		fmt.Fprintln(p.w, `{"push":"component-progress",`+string(body[1:]))
	case "human":
		now := time.Now()
		line := fmt.Sprintf("Waiting for another %s install, %s so far", step.Platform, roundDur(now.Sub(p.since)))
		if step.State == "downloading" {
			line = fmt.Sprintf("Downloading %s %s", step.Platform, step.Component)
			p.rate.see(step.Percent, step.BytesDone, now)
			if step.Percent != nil {
				line += fmt.Sprintf(" %s %3d%%", progressBar(*step.Percent, 24), *step.Percent)
				line += p.rate.suffix(*step.Percent, step.BytesDone, step.BytesTotal, now)
			}
		}
		fmt.Fprintf(p.w, "\r\x1b[2K%s", fitWidth(line, p.width()))
		p.drawn = true
	}
}

func (p *installPrinter) stop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.drawn {
		fmt.Fprint(p.w, "\r\x1b[2K")
	}
}
