package cli

import (
	"context"
	"io"

	"github.com/spf13/cobra"

	"github.com/simlock/simlock/internal/client"
	"github.com/simlock/simlock/internal/contract"
)

// demoCmd groups what only the demo driver offers.
func demoCmd(env Env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Tools for the demo driver's simulated devices",
	}
	inject := &cobra.Command{
		Use:   "inject <deviceId> crash|vanish|boot-fail|reclaim-fail|erase|replace",
		Short: "Make a simulated device misbehave at its next check or operation (admin)",
		Long: `Make a demo device misbehave, to see simlock's recovery without a real device:

  crash         the device stops; the health monitor boots it again under its lease
  vanish        the device is gone; its lease ends as device-lost
  boot-fail     its next boot fails
  reclaim-fail  its next clean fails; the device is quarantined and retried
  erase         the device is erased outside simlock; a running leased one loses its
                lease (provenance-drift), doctor reports foreign-provenance (erased)
  replace       another device takes its place; simlock refuses to clean or delete
                it, and doctor reports foreign-provenance (mark-mismatch)

deviceId is simlock's device id (simlock list --devices).`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			in := contract.DemoInjectInput{DeviceID: args[0], Fault: args[1]}
			if err := in.Validate(); err != nil {
				return fail(err)
			}
			return withClient(cmd, env, session{principal: "simlock-cli", admin: true, autostart: true}, func(ctx context.Context, c *client.Client) error {
				var res contract.DemoInjectResult
				if err := c.Call(ctx, contract.OpDemoInject, in, &res); err != nil {
					return err
				}
				return printResult(cmd, env, res, func(w io.Writer) { renderInjected(w, res) })
			})
		},
	}
	cmd.AddCommand(inject)
	return cmd
}
