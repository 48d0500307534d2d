package cli

import (
	"context"
	"io"

	"github.com/spf13/cobra"

	"github.com/simlock/simlock/internal/client"
	"github.com/simlock/simlock/internal/contract"
)

// cleanupCmd runs the idle rules now.
func cleanupCmd(env Env) *cobra.Command {
	var dryRun bool
	var rule string
	cmd := &cobra.Command{
		Use:   "cleanup [--dry-run] [--rule idle-shutdown|idle-delete]",
		Short: "Run the idle rules now: shut down idle devices, delete long-idle ones (admin)",
		Long: `Run the idle rules now, as the daemon does on its own: shut down ready devices
nobody leased for idle.shutdownAfterMs (idle-shutdown), delete shut-down
devices unused for idle.deleteAfterMs (idle-delete; idle.shutdownAfterMs when
the disk is short). Leased and busy devices are never touched. simlock list
--rules shows the rules.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			in := contract.CleanupRunInput{Rule: rule, DryRun: dryRun}
			if err := in.Validate(); err != nil {
				return fail(err)
			}
			return withClient(cmd, env, session{principal: "simlock-cli", admin: true, autostart: true}, func(ctx context.Context, c *client.Client) error {
				var res contract.CleanupRunResult
				if err := c.Call(ctx, contract.OpCleanupRun, in, &res); err != nil {
					return err
				}
				return printResult(cmd, env, res, func(w io.Writer) { renderCleanup(w, res) })
			})
		},
	}
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "say what the rules would do, do nothing")
	cmd.Flags().StringVar(&rule, "rule", "", "run only this rule: idle-shutdown or idle-delete")
	return cmd
}
