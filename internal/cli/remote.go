package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/simlock/simlock/internal/apiclient"
	"github.com/simlock/simlock/internal/client"
	"github.com/simlock/simlock/internal/contract"
)

// The remote profile: with SIMLOCK_URL (and SIMLOCK_TOKEN) in the
// environment, or a profile simlock login stored, the agent commands speak
// HTTP to that daemon or gateway through the typed HTTP client instead of
// the local socket. The environment wins over the stored profile.

// remoteProfile is where a remote daemon is and the token to show it.
type remoteProfile struct {
	URL   string `json:"url"`
	Token string `json:"token"`
}

// profilePath is remote.json in simlock's directory of the user's config
// dir (XDG_CONFIG_HOME when set, else the system's).
func profilePath(env Env) (string, error) {
	dir := env.Getenv("XDG_CONFIG_HOME")
	if dir == "" {
		d, err := os.UserConfigDir()
		if err != nil {
			return "", usage("the user's config directory is unknown: %v", err)
		}
		dir = d
	}
	return filepath.Join(dir, "simlock", "remote.json"), nil
}

// activeProfile is the remote profile in effect, if any: SIMLOCK_URL and
// SIMLOCK_TOKEN, else the one simlock login stored.
func activeProfile(env Env) (remoteProfile, bool, error) {
	if u := env.Getenv("SIMLOCK_URL"); u != "" {
		return remoteProfile{URL: u, Token: env.Getenv("SIMLOCK_TOKEN")}, true, nil
	}
	path, err := profilePath(env)
	if err != nil {
		return remoteProfile{}, false, err
	}
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return remoteProfile{}, false, nil
	}
	if err != nil {
		return remoteProfile{}, false, contract.Errorf(contract.CodeUsage, "read the remote profile %s: %v", path, err)
	}
	var p remoteProfile
	if err := json.Unmarshal(b, &p); err != nil || p.URL == "" {
		return remoteProfile{}, false, contract.Errorf(contract.CodeUsage, "the remote profile %s is not one simlock login wrote; run simlock logout, then simlock login", path)
	}
	return p, true, nil
}

// remoteClient is the HTTP client of the active profile; ok is false when
// no profile is active.
func remoteClient(env Env) (c *apiclient.Client, ok bool, err error) {
	p, ok, err := activeProfile(env)
	if err != nil || !ok {
		return nil, false, err
	}
	c, err = newRemoteClient(env, p)
	return c, err == nil, err
}

func newRemoteClient(env Env, p remoteProfile) (*apiclient.Client, error) {
	return apiclient.New(apiclient.Options{URL: p.URL, Token: p.Token, CAFile: env.Getenv("SIMLOCK_CA"), UserAgent: "simlock-cli/" + env.Version})
}

// agentAPI is what the agent commands ask of a daemon. The socket's session
// (*client.Client) and the HTTP client (*apiclient.Client) both serve it,
// so each command is written once for both transports.
type agentAPI interface {
	RequestLease(ctx context.Context, in contract.LeaseRequestInput, progress func(contract.LeaseProgress)) (contract.LeaseGrant, error)
	Renew(ctx context.Context, leaseID string, ttlMs int64) (contract.LeaseRecord, error)
	Release(ctx context.Context, leaseID string) (contract.ReleaseResult, error)
	Leases(ctx context.Context) ([]contract.LeaseRecord, error)
	Cancel(ctx context.Context, in contract.LeaseCancelInput) (contract.LeaseCancelResult, error)
	StatusWith(ctx context.Context, in contract.StatusGetInput) (contract.Status, error)
	Catalog(ctx context.Context, platform contract.Platform) (contract.CatalogResult, error)
	ListPage(ctx context.Context, in contract.ListGetInput) (contract.ListGetResult, error)
	Subscribe(ctx context.Context) (<-chan contract.Event, int64, error)
	Replay(ctx context.Context, in contract.EventsReplayInput) ([]contract.Event, error)
	Exec(ctx context.Context, in contract.ExecInput, output func(contract.ExecOutput)) (contract.ExecResult, error)
	PushFile(ctx context.Context, in contract.FilesPutInput, r io.Reader) (contract.TransferResult, error)
	InstallApp(ctx context.Context, in contract.AppInstallInput, r io.Reader) (contract.TransferResult, error)
	PullFile(ctx context.Context, in contract.FilesGetInput, sink func(contract.TransferInfo) (io.Writer, error)) (contract.TransferInfo, int64, error)
	Screenshot(ctx context.Context, in contract.ScreenshotInput, sink func(contract.TransferInfo) (io.Writer, error)) (contract.TransferInfo, int64, error)
	DeviceTool(ctx context.Context, op contract.Op, in contract.DeviceToolInput, out any) error
	Close() error
}

var (
	_ agentAPI = (*client.Client)(nil)
	_ agentAPI = (*apiclient.Client)(nil)
)

// withAgent runs f with the remote profile's HTTP client when one is
// active, else with a session of the local daemon as withClient opens it.
func withAgent(cmd *cobra.Command, env Env, s session, f func(ctx context.Context, c agentAPI) error) error {
	rc, ok, err := remoteClient(env)
	if err != nil {
		return fail(err)
	}
	if ok {
		defer rc.Close()
		return fail(f(cmd.Context(), rc))
	}
	return withClient(cmd, env, s, func(ctx context.Context, c *client.Client) error { return f(ctx, c) })
}

// localOnly is the refusal of a command that only makes sense on the
// daemon's own machine while a remote profile is active.
func localOnly(env Env, what string) error {
	how := "unset SIMLOCK_URL"
	if env.Getenv("SIMLOCK_URL") == "" {
		how = "run simlock logout"
	}
	return contract.Errorf(contract.CodeUsage,
		"%s works only with the daemon on this machine, and a remote profile is active; run it on the daemon's machine, or %s", what, how)
}

// refuseLocalOnly refuses, while a remote profile is active, the commands
// that manage the machine simlock runs on: the daemon itself, its service,
// its tokens, nuke and doctor --fix. Every other command that reaches
// for the local socket is refused by connect.
func refuseLocalOnly(cmd *cobra.Command, env Env) error {
	path := strings.Fields(cmd.CommandPath())
	if len(path) < 2 {
		return nil
	}
	switch top := path[1]; top {
	case "daemon", "service", "nuke", "token", "worker", "config", "demo", "component", "cleanup", "bench":
	case "doctor":
		if fix, _ := cmd.Flags().GetBool("fix"); !fix {
			return nil
		}
	default:
		return nil
	}
	if _, ok, err := activeProfile(env); err != nil || !ok {
		return nil
	}
	return &exitError{code: contract.CodeUsage.ExitCode(), err: localOnly(env, "simlock "+strings.Join(path[1:], " "))}
}

// remoteSocketRefusal is connect's refusal while a remote profile is
// active: the command has no HTTP form, so it would reach a local daemon
// the profile says is not the one meant.
func remoteSocketRefusal(env Env, cmd *cobra.Command) error {
	if _, ok, err := activeProfile(env); err != nil || !ok {
		return err
	}
	what := "this command"
	if cmd != nil {
		what = cmd.CommandPath()
	}
	return fmt.Errorf("%w", localOnly(env, what))
}
