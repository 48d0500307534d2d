package cli

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/simlock/simlock/internal/client"
	"github.com/simlock/simlock/internal/contract"
)

// confirm asks the person at the terminal to type yes after what, and
// reports whether they did.
func confirm(env Env, what string) bool {
	fmt.Fprintf(env.Stderr, "%s Type yes to go on: ", what)
	line, _ := bufio.NewReader(env.Stdin).ReadString('\n')
	return strings.TrimSpace(line) == "yes"
}

// nukeCmd ends everything: every lease, every waiting request and, with
// --delete-devices, every device simlock created.
func nukeCmd(env Env) *cobra.Command {
	var deleteDevices, yes bool
	cmd := &cobra.Command{
		Use:   "nuke [--delete-devices] [--yes]",
		Short: "End every lease and waiting request; with --delete-devices delete every simlock device (admin)",
		Long: `End every lease (reason killed) and fail every waiting request, after the
cleans in flight finish; new requests are refused while it runs. With
--delete-devices, delete every device simlock created. Devices outside
simlock's roots are never touched.

Asks for confirmation on a terminal; elsewhere it needs --yes.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if !yes {
				if !env.StdinIsTerminal {
					return usage("nuke ends every lease; add --yes to confirm (no terminal to ask on)")
				}
				what := "end every lease and fail every waiting request"
				if deleteDevices {
					what += ", then delete every device simlock created"
				}
				if !confirm(env, "This will "+what+".") {
					return usage("nuke not confirmed")
				}
			}
			return withClient(cmd, env, session{principal: "simlock-cli", admin: true, autostart: true}, func(ctx context.Context, c *client.Client) error {
				var res contract.NukeResult
				if err := c.Call(ctx, contract.OpNuke, contract.NukeInput{DeleteDevices: deleteDevices}, &res); err != nil {
					return err
				}
				return printResult(cmd, env, res, func(w io.Writer) { renderNuke(w, res) })
			})
		},
	}
	cmd.Flags().BoolVar(&deleteDevices, "delete-devices", false, "also delete every device simlock created")
	cmd.Flags().BoolVar(&yes, "yes", false, "confirm without asking")
	return cmd
}
