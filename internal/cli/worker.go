package cli

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/simlock/simlock/internal/client"
	"github.com/simlock/simlock/internal/contract"
)

// workerCmd lists and manages the workers of a gateway. On a worker, list
// shows the fleet of one and the rest answer UNSUPPORTED_IN_WORKER_MODE.
func workerCmd(env Env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "worker",
		Short: "List a gateway's workers; drain, undrain or remove one",
	}
	admin := session{principal: "simlock-cli", admin: true, autostart: true}
	list := &cobra.Command{
		Use:   "list",
		Short: "List the workers: connection, drain, running/max, leases, version, last seen",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return withClient(cmd, env, admin, func(ctx context.Context, c *client.Client) error {
				var res contract.WorkerListResult
				if err := c.Call(ctx, contract.OpWorkerList, contract.Empty{}, &res); err != nil {
					return err
				}
				if !jsonOut(cmd, env) {
					renderWorkersTable(env.Stdout, res.Workers, time.Now())
					return nil
				}
				return printJSON(env.Stdout, res)
			})
		},
	}
	show := &cobra.Command{
		Use:   "show <id>",
		Short: "Print one worker's whole view as the gateway has it",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return withClient(cmd, env, admin, func(ctx context.Context, c *client.Client) error {
				var v contract.WorkerView
				if err := c.Call(ctx, contract.OpWorkerGet, contract.WorkerIDInput{WorkerID: args[0]}, &v); err != nil {
					return err
				}
				return printResult(cmd, env, v, func(w io.Writer) { renderWorkersTable(w, []contract.WorkerSummary{v.Summary()}, time.Now()) })
			})
		},
	}
	act := func(use, short string, op contract.Op, done string) *cobra.Command {
		return &cobra.Command{
			Use:   use + " <id>",
			Short: short,
			Args:  cobra.ExactArgs(1),
			RunE: func(cmd *cobra.Command, args []string) error {
				return withClient(cmd, env, admin, func(ctx context.Context, c *client.Client) error {
					var res contract.WorkerResult
					if err := c.Call(ctx, op, contract.WorkerIDInput{WorkerID: args[0]}, &res); err != nil {
						return err
					}
					return printResult(cmd, env, res, func(w io.Writer) { renderWorkerDone(done)(w, res) })
				})
			},
		}
	}
	cmd.AddCommand(list, show,
		act("drain", "Send a worker no new work; its leases stay (kept across restarts until undrain)", contract.OpWorkerDrain, "is drained: it gets no new work, its leases stay"),
		act("undrain", "End a worker's drain", contract.OpWorkerUndrain, "is no longer drained"),
		act("remove", "Forget a worker that is not connected", contract.OpWorkerRemove, "is removed from the fleet"))
	return cmd
}

func renderWorkersTable(w io.Writer, ws []contract.WorkerSummary, now time.Time) {
	rows := make([][]string, 0, len(ws))
	for _, x := range ws {
		drained := "-"
		if x.Drained {
			drained = "drained"
		}
		seen := "-"
		if x.LastSeenAt > 0 {
			seen = roundDur(now.Sub(time.UnixMilli(x.LastSeenAt))) + " ago"
		}
		conn := string(x.Connection)
		if x.Reason != "" && x.Connection != contract.WorkerConnected {
			conn += " (" + x.Reason + ")"
		}
		rows = append(rows, []string{x.ID, x.Label, conn, drained, fmt.Sprintf("%d/%d", x.Running, x.MaxRunning),
			fmt.Sprint(x.Leases), dash(x.Version), seen})
	}
	table(w, "No workers.", []string{"WORKER", "LABEL", "CONNECTION", "DRAIN", "RUNNING", "LEASES", "VERSION", "LAST SEEN"}, rows)
}
