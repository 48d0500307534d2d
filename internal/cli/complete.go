package cli

import (
	"context"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/simlock/simlock/internal/client"
	"github.com/simlock/simlock/internal/config"
	"github.com/simlock/simlock/internal/contract"
)

// Shell completion of values (simlock completion bash|zsh|fish|powershell
// prints the script). Platforms, classes and config keys are known here;
// models, runtimes and lease ids are asked of a running daemon, which is
// never started for a completion and may take at most completeBound.

const completeBound = 2 * time.Second

type completer func(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective)

func completePlatforms(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
	var out []string
	for _, p := range contract.Platforms() {
		out = append(out, string(p))
	}
	return out, cobra.ShellCompDirectiveNoFileComp
}

func completeClasses(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
	var out []string
	for _, c := range contract.Classes() {
		out = append(out, string(c))
	}
	return out, cobra.ShellCompDirectiveNoFileComp
}

func completeConfigKeys(_ *cobra.Command, args []string, _ string) ([]string, cobra.ShellCompDirective) {
	if len(args) > 0 {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	var out []string
	for _, k := range config.Keys() {
		out = append(out, k.Key+"\t"+firstSentence(k.Doc))
	}
	return out, cobra.ShellCompDirectiveNoFileComp
}

func firstSentence(s string) string {
	if i := strings.Index(s, ". "); i >= 0 {
		return s[:i]
	}
	return strings.TrimSuffix(s, ".")
}

// fromDaemon asks the running daemon for completions, within completeBound:
// ask turns a session into candidates. With no daemon running, there are
// none.
func fromDaemon(env Env, admin bool, ask func(ctx context.Context, cmd *cobra.Command, c *client.Client) ([]string, error)) completer {
	return func(cmd *cobra.Command, _ []string, _ string) ([]string, cobra.ShellCompDirective) {
		ctx, cancel := context.WithTimeout(cmd.Context(), completeBound)
		defer cancel()
		c, err := connect(ctx, cmd, env, session{principal: agentID("", env.Getenv, env.PPID), admin: admin})
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		defer c.Close()
		out, err := ask(ctx, cmd, c)
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		return out, cobra.ShellCompDirectiveNoFileComp
	}
}

// completeCatalog completes models (or, with runtimes, OS versions) from the
// catalog of the platform given with --platform (every platform without).
func completeCatalog(env Env, runtimes bool) completer {
	return fromDaemon(env, false, func(ctx context.Context, cmd *cobra.Command, c *client.Client) ([]string, error) {
		p, _ := cmd.Flags().GetString("platform")
		res, err := c.Catalog(ctx, contract.Platform(p))
		var out []string
		for _, cat := range res.Platforms {
			if runtimes {
				out = append(out, cat.Runtimes...)
			} else {
				out = append(out, cat.Models...)
			}
		}
		return out, err
	})
}

// completeLeaseIDs completes the first argument with the active leases.
func completeLeaseIDs(env Env) completer {
	ask := fromDaemon(env, true, func(ctx context.Context, _ *cobra.Command, c *client.Client) ([]string, error) {
		res, err := c.List(ctx, contract.ListLeases)
		var out []string
		for _, l := range res.Leases {
			out = append(out, l.ID+"\t"+l.RequesterID+" on "+l.DeviceID)
		}
		return out, err
	})
	return func(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
		if len(args) > 0 {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		return ask(cmd, args, toComplete)
	}
}
