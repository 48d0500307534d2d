package cli

import (
	"context"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/simlock/simlock/internal/client"
	"github.com/simlock/simlock/internal/contract"
)

// jobCmd lists the jobs (component installs) and shows one, worker by
// worker. Both are reads: a job that failed on some worker still shows
// with exit 0.
func jobCmd(env Env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "job",
		Short: "List runtime installs (jobs) and show one worker by worker, with what to do about a failure",
	}
	admin := session{principal: "simlock-cli", admin: true, autostart: true}
	var limit int
	var state string
	list := &cobra.Command{
		Use:   "list [--state running|succeeded|failed] [--limit N]",
		Short: "List the jobs, newest first: what each installs, its state, how many workers installed it (admin)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			in := contract.JobListInput{State: state, Limit: limit}
			if err := in.Validate(); err != nil {
				return inFlagTerms(fail(err), map[string][2]string{"limit": {"--limit", strconv.Itoa(limit)}, "state": {"--state", state}})
			}
			return withClient(cmd, env, admin, func(ctx context.Context, c *client.Client) error {
				var res contract.JobListResult
				if err := c.Call(ctx, contract.OpJobList, in, &res); err != nil {
					return err
				}
				if !jsonOut(cmd, env) {
					renderJobList(env.Stdout, res.Jobs, time.Now().UnixMilli())
					return nil
				}
				return printJSON(env.Stdout, res)
			})
		},
	}
	list.Flags().IntVar(&limit, "limit", 0, "at most this many jobs, 1 to 500 (default 50)")
	list.Flags().StringVar(&state, "state", "", "only the jobs in this state: running, succeeded or failed")
	show := &cobra.Command{
		Use:   "show <job-id>",
		Short: "Show a job worker by worker; for each worker that did not install, its error and what to run next (admin)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			in := contract.JobIDInput{JobID: args[0]}
			if err := in.Validate(); err != nil {
				return fail(err)
			}
			return withClient(cmd, env, admin, func(ctx context.Context, c *client.Client) error {
				var job contract.Job
				if err := c.Call(ctx, contract.OpJobGet, in, &job); err != nil {
					return err
				}
				if !jsonOut(cmd, env) {
					width := 0
					if env.TermWidth != nil {
						width = env.TermWidth()
					}
					renderJob(env.Stdout, job, nil, jobRender{Width: width, Terminal: env.StdoutIsTerminal, Now: time.Now().UnixMilli()})
					return nil
				}
				return printJSON(env.Stdout, job)
			})
		},
	}
	cmd.AddCommand(list, show)
	return cmd
}
