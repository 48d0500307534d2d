package cli

import (
	"context"
	"io"

	"github.com/spf13/cobra"

	"github.com/simlock/simlock/internal/client"
	"github.com/simlock/simlock/internal/contract"
)

// metricsCmd prints the daemon's metrics in the Prometheus text format, the
// text GET /metrics serves.
func metricsCmd(env Env) *cobra.Command {
	admin := session{principal: "simlock-cli", admin: true}
	return &cobra.Command{
		Use:   "metrics",
		Short: "Print the daemon's metrics in the Prometheus text format, as GET /metrics serves them (admin)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return withClient(cmd, env, admin, func(ctx context.Context, c *client.Client) error {
				var res contract.MetricsResult
				if err := c.Call(ctx, contract.OpMetricsGet, contract.Empty{}, &res); err != nil {
					return err
				}
				// The text is the output on a terminal and in a pipe alike
				// (simlock metrics | promtool check metrics); JSON only
				// when asked for.
				if asJSON, _ := cmd.Flags().GetBool("json"); asJSON {
					return printJSON(env.Stdout, res)
				}
				_, err := io.WriteString(env.Stdout, res.Text)
				return err
			})
		},
	}
}
