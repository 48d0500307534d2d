package cli

import (
	"context"
	"io"
	"log/slog"
	"os"
	"strconv"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/spf13/cobra"

	"github.com/simlock/simlock/internal/client"
	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/daemon"
	"github.com/simlock/simlock/internal/httpapi"
	"github.com/simlock/simlock/internal/mcpserver"
)

// mcpCmd serves simlock's tools to one MCP client over stdin and stdout.
// Stdout carries JSON-RPC only; warnings go to stderr.
func mcpCmd(env Env) *cobra.Command {
	return &cobra.Command{
		Use:   "mcp",
		Short: "Serve leasing as MCP tools on stdio, for Claude Code, Codex or any MCP client",
		Long: `Serve leasing as Model Context Protocol tools on stdin/stdout: list_devices,
lease_simulator, wait_for_lease, release_simulator and lease_status.

The server acts as the agent named by SIMLOCK_AGENT_ID, else the Claude Code
session (CLAUDE_CODE_SESSION_ID), else the Codex thread (CODEX_THREAD_ID, which
Codex sets for its shell commands; it passes none to the MCP servers it starts),
else mcp:<pid>. It starts the daemon when a tool needs it, renews the leases it was granted, and releases them (and
withdraws requests still waiting) when stdin closes or on SIGINT/SIGTERM.

With SIMLOCK_URL set (a daemon's or gateway's base URL, and SIMLOCK_TOKEN its
token), it serves no tools itself: it relays stdio to that server's MCP
endpoint (<SIMLOCK_URL>/mcp over Streamable HTTP), for clients that only
launch stdio servers. The session there acts as the token's principal; its
leases are the token's and stay when the session ends.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if p, ok, err := activeProfile(env); err != nil || ok {
				if err == nil {
					err = mcpProxy(cmd.Context(), env, p)
				}
				return fail(err)
			}
			agent := mcpAgentID(env.Getenv, os.Getpid())
			log := slog.New(slog.NewTextHandler(env.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})).With("agent", agent)
			dial := func(ctx context.Context, autostart bool) (*client.Client, error) {
				// Confined as remote: an MCP client is an agent, whose
				// commands may not name files of this machine.
				return connect(ctx, cmd, env, session{principal: agent, autostart: autostart, remote: true})
			}
			// Closing the session closes stdin, which ends a read in flight.
			in, ok := env.Stdin.(io.ReadCloser)
			if !ok {
				in = io.NopCloser(env.Stdin)
			}
			t := &mcp.IOTransport{Reader: in, Writer: nopWriteCloser{env.Stdout}, MaxLineLength: mcpserver.MaxFrameBytes}
			return fail(mcpserver.Run(cmd.Context(), mcpserver.Options{
				Dial: dial, AgentID: agent, Version: env.Version, Logger: log, LocalFiles: true,
			}, t))
		},
	}
}

// mcpAgentID is the MCP server's identity: the session's
// (sessionAgentID), else the server's own process.
func mcpAgentID(getenv func(string) string, pid int) string {
	if id := sessionAgentID(getenv); id != "" {
		return id
	}
	return "mcp:" + strconv.Itoa(pid)
}

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }

// serveMCP serves one MCP session of a daemon's /mcp: the same tools as
// stdio, acting as the token's principal; its leases are the token's and
// outlive the session.
func serveMCP(agent daemon.MCPAgent, t mcp.Transport) (httpapi.MCPSession, error) {
	return mcpserver.Start(mcpserver.Options{
		Dial: agent.Dial, AgentID: agent.ID, Version: agent.Version, Logger: agent.Logger, LeasesOutliveSession: true,
		UploadURL: agent.UploadURL,
	}, t)
}

// mcpProxy relays stdio to the /mcp of the remote profile's daemon or
// gateway (SIMLOCK_URL and SIMLOCK_TOKEN, or what simlock login stored),
// trusting SIMLOCK_CA as every remote command does; what breaks goes to
// stderr.
func mcpProxy(ctx context.Context, env Env, p remoteProfile) error {
	if p.Token == "" {
		return contract.Errorf(contract.CodeUsage, "SIMLOCK_URL is set but SIMLOCK_TOKEN is not: the remote server needs an agent token (simlock token create --role agent on it)")
	}
	rc, err := newRemoteClient(env, p)
	if err != nil {
		return err
	}
	endpoint := rc.Endpoint("/mcp")
	log := slog.New(slog.NewTextHandler(env.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})).With("url", endpoint)
	in, ok := env.Stdin.(io.ReadCloser)
	if !ok {
		in = io.NopCloser(env.Stdin)
	}
	t := &mcp.IOTransport{Reader: in, Writer: nopWriteCloser{env.Stdout}}
	return mcpserver.Proxy(ctx, mcpserver.ProxyOptions{Endpoint: endpoint, Token: p.Token, HTTPClient: rc.HTTPClient(), Logger: log}, t)
}
