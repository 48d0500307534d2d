package cli

import (
	"context"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/simlock/simlock/internal/client"
	"github.com/simlock/simlock/internal/contract"
)

// leaseCancelCmd cancels a lease request still waiting: the one named, or
// the requester's own.
func leaseCancelCmd(env Env) *cobra.Command {
	var agent string
	cmd := &cobra.Command{
		Use:   "cancel [<request-id>]",
		Short: "Cancel a lease request still waiting: the one named, or this agent's own; prints what it did",
		Long: `Cancel a lease request that is still queued. With a request id, that request;
without one, the request of this agent (--agent-id, as simlock lease picks
it). A request that is already downloading, starting a device or granted
can no longer be cancelled (REQUEST_NOT_CANCELLABLE, exit 1; a granted one
names its lease, to release instead); no such request is
UNKNOWN_LEASE_REQUEST (exit 1). Over a remote profile the request must be
named by its id, and only one of the token's own (or any, for an operator
token) is found.`,
		Args:              cobra.MaximumNArgs(1),
		ValidArgsFunction: cobra.NoFileCompletions,
		RunE: func(cmd *cobra.Command, args []string) error {
			id := agentID(agent, env.Getenv, env.PPID)
			in := contract.LeaseCancelInput{RequesterID: id}
			if len(args) == 1 {
				in = contract.LeaseCancelInput{RequestID: args[0]}
			}
			if err := in.Validate(); err != nil {
				return fail(err)
			}
			return withAgent(cmd, env, session{principal: id, admin: true, autostart: true}, func(ctx context.Context, c agentAPI) error {
				res, err := c.Cancel(ctx, in)
				if err != nil {
					return err
				}
				if err := printResult(cmd, env, res, func(w io.Writer) { renderCancel(w, res) }); err != nil {
					return err
				}
				return cancelRefusal(res, in)
			})
		},
	}
	cmd.Flags().StringVar(&agent, "agent-id", "", "requester id (see simlock lease --help)")
	return cmd
}

// cancelRefusal is the error of a cancel that did not cancel: its result
// is printed, and the exit says it did not happen.
func cancelRefusal(res contract.LeaseCancelResult, in contract.LeaseCancelInput) error {
	switch res.Outcome {
	case contract.CancelNotFound:
		what := "no waiting request of " + in.RequesterID
		if in.RequestID != "" {
			what = "no lease request " + in.RequestID
		}
		return contract.Errorf(contract.CodeUnknownLeaseRequest, "%s", what)
	case contract.CancelNotCancellable:
		e := contract.Errorf(contract.CodeRequestNotCancellable, "request %s is past its wait (downloading, starting a device, or granted)", res.RequestID)
		if res.LeaseID != "" {
			e = contract.Errorf(contract.CodeRequestNotCancellable, "request %s was granted lease %s: release that instead", res.RequestID, res.LeaseID).With("leaseId", res.LeaseID)
		}
		return e
	}
	return nil
}

// leaseListCmd lists this agent's own leases.
func leaseListCmd(env Env) *cobra.Command {
	var agent string
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List this agent's leases (simlock list --leases lists everyone's)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			id := agentID(agent, env.Getenv, env.PPID)
			return withClient(cmd, env, session{principal: id, autostart: true}, func(ctx context.Context, c *client.Client) error {
				var res contract.LeaseListResult
				if err := c.Call(ctx, contract.OpLeaseList, contract.Empty{}, &res); err != nil {
					return err
				}
				if res.Leases == nil {
					res.Leases = []contract.LeaseRecord{}
				}
				if !jsonOut(cmd, env) {
					renderLeasesTable(env.Stdout, res.Leases, time.Now(), termWidth(env))
					return nil
				}
				return printJSON(env.Stdout, res)
			})
		},
	}
	cmd.Flags().StringVar(&agent, "agent-id", "", "requester id (see simlock lease --help)")
	return cmd
}
