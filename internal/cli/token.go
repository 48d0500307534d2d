package cli

import (
	"context"
	"io"

	"github.com/spf13/cobra"

	"github.com/simlock/simlock/internal/client"
	"github.com/simlock/simlock/internal/contract"
)

// tokenCmd manages the bearer tokens of the HTTP API. Every subcommand
// needs the admin role.
func tokenCmd(env Env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "token",
		Short: "Create, list or revoke HTTP API tokens",
	}
	admin := session{principal: "simlock-cli", admin: true, autostart: true}
	var role, label string
	create := &cobra.Command{
		Use:   "create",
		Short: "Make a token and print its secret (shown only this once)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return withClient(cmd, env, admin, func(ctx context.Context, c *client.Client) error {
				var res contract.TokenCreateResult
				if err := c.Call(ctx, contract.OpTokenCreate, contract.TokenCreateInput{Role: contract.TokenRole(role), Label: label}, &res); err != nil {
					return err
				}
				return printResult(cmd, env, res, func(w io.Writer) { renderTokenCreated(w, res) })
			})
		},
	}
	create.Flags().StringVar(&role, "role", "", "agent (its own leases; the token id is its requester id), operator (everything) or worker (on a gateway: joins a worker to it)")
	create.Flags().StringVar(&label, "label", "", "a name to recognise the token by")
	_ = create.MarkFlagRequired("role")
	list := &cobra.Command{
		Use:   "list",
		Short: "List tokens (never their secrets)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return withClient(cmd, env, admin, func(ctx context.Context, c *client.Client) error {
				var res contract.TokenListResult
				if err := c.Call(ctx, contract.OpTokenList, contract.Empty{}, &res); err != nil {
					return err
				}
				if !jsonOut(cmd, env) {
					renderTokensTable(env.Stdout, res.Tokens)
					return nil
				}
				return printJSON(env.Stdout, res)
			})
		},
	}
	revoke := &cobra.Command{
		Use:   "revoke <id>",
		Short: "Revoke a token; its next request is refused",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return withClient(cmd, env, admin, func(ctx context.Context, c *client.Client) error {
				var res contract.TokenRevokeResult
				if err := c.Call(ctx, contract.OpTokenRevoke, contract.TokenRevokeInput{ID: args[0]}, &res); err != nil {
					return err
				}
				return printResult(cmd, env, res, renderTokenRevoked(args[0]))
			})
		},
	}
	cmd.AddCommand(create, list, revoke)
	return cmd
}
