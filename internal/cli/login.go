package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/simlock/simlock/internal/apiclient"
	"github.com/simlock/simlock/internal/contract"
)

func loginCmd(env Env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "login <url>[,<url>...]",
		Short: "Use a remote daemon or gateway: store its URL and an HTTP token",
		Long: `Store a remote profile: the agent commands (lease, release, renew, status,
list, catalog, events, push, pull, install, screenshot, simctl, adb) then
speak HTTP to that daemon or gateway instead of the local one.

The token is read from --token, else from stdin when it is not a terminal,
else asked for without echo. It is checked against the server (GET
/v1/status) before it is stored, 0600, in simlock/remote.json of the user's
config directory. The URL may be a comma-separated list of a gateway's
replicas: a call goes to the one that last answered, and on to the next
when that one cannot be reached or does not lead. SIMLOCK_URL and
SIMLOCK_TOKEN in the environment win over the stored profile; SIMLOCK_CA
names a PEM file of a private CA for https.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			urls, err := apiclient.ParseURLs(args[0])
			if err != nil {
				return fail(err)
			}
			token, err := loginToken(cmd, env)
			if err != nil {
				return fail(err)
			}
			p := remoteProfile{URL: profileURL(urls), Token: token}
			c, err := newRemoteClient(env, p)
			if err != nil {
				return fail(err)
			}
			defer c.Close()
			ctx, cancel := context.WithTimeout(cmd.Context(), 30*time.Second)
			defer cancel()
			st, err := c.StatusWith(ctx, contract.StatusGetInput{Summary: true})
			if err != nil {
				return fail(err)
			}
			path, err := profilePath(env)
			if err != nil {
				return fail(err)
			}
			if err := writeProfile(path, p); err != nil {
				return fail(err)
			}
			res := struct {
				URL     string `json:"url"`
				Profile string `json:"profile"`
				Mode    string `json:"mode"`
				Version string `json:"version"`
				Health  string `json:"health"`
			}{p.URL, path, st.Daemon.Mode, st.Daemon.Version, string(st.Daemon.Health)}
			return printResult(cmd, env, res, func(w io.Writer) {
				mode := "daemon"
				if st.Daemon.Mode == contract.ModeGateway {
					mode = "gateway"
				}
				fmt.Fprintf(w, "✓ Logged in to the %s at %s (version %s); agent commands now speak to it. simlock logout stops that.\n", mode, p.URL, st.Daemon.Version)
			})
		},
	}
	return cmd
}

// profileURL is how a profile stores its base URLs: each without a
// trailing slash, comma-separated.
func profileURL(urls []*url.URL) string {
	out := make([]string, len(urls))
	for i, u := range urls {
		out[i] = strings.TrimRight(u.String(), "/")
	}
	return strings.Join(out, ",")
}

// loginToken is the token simlock login stores: --token, stdin when it is
// not a terminal, else a prompt that does not echo.
func loginToken(cmd *cobra.Command, env Env) (string, error) {
	if t, _ := cmd.Flags().GetString("token"); t != "" {
		return t, nil
	}
	if !env.StdinIsTerminal {
		line, err := bufio.NewReader(env.Stdin).ReadString('\n')
		if t := strings.TrimSpace(line); t != "" {
			return t, nil
		}
		if err != nil && !errors.Is(err, io.EOF) {
			return "", contract.Errorf(contract.CodeUsage, "read the token from stdin: %v", err)
		}
		return "", contract.Errorf(contract.CodeUsage, "no token: give --token, or pipe it on stdin")
	}
	f, ok := env.Stdin.(*os.File)
	if !ok {
		return "", contract.Errorf(contract.CodeUsage, "no token: give --token")
	}
	fmt.Fprint(env.Stderr, "HTTP token: ")
	b, err := term.ReadPassword(int(f.Fd()))
	fmt.Fprintln(env.Stderr)
	if err != nil {
		return "", contract.Errorf(contract.CodeUsage, "read the token: %v", err)
	}
	if t := strings.TrimSpace(string(b)); t != "" {
		return t, nil
	}
	return "", contract.Errorf(contract.CodeUsage, "no token given")
}

// writeProfile stores p at path, readable by the user alone, replacing
// any profile whole (a rename, so a reader never sees half of one).
func writeProfile(path string, p remoteProfile) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("store the remote profile: %w", err)
	}
	b, err := json.MarshalIndent(p, "", "  ")
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".remote-*.json")
	if err != nil {
		return fmt.Errorf("store the remote profile: %w", err)
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(0o600); err == nil {
		_, err = tmp.Write(append(b, '\n'))
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		return fmt.Errorf("store the remote profile: %w", err)
	}
	return nil
}

func logoutCmd(env Env) *cobra.Command {
	return &cobra.Command{
		Use:   "logout",
		Short: "Forget the remote profile simlock login stored",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			path, err := profilePath(env)
			if err != nil {
				return fail(err)
			}
			err = os.Remove(path)
			removed := err == nil
			if err != nil && !errors.Is(err, fs.ErrNotExist) {
				return fail(fmt.Errorf("remove the remote profile: %w", err))
			}
			res := struct {
				Removed bool   `json:"removed"`
				Profile string `json:"profile"`
			}{removed, path}
			return printResult(cmd, env, res, func(w io.Writer) {
				switch {
				case !removed:
					fmt.Fprintln(w, "No remote profile was stored; nothing to do.")
				case env.Getenv("SIMLOCK_URL") != "":
					fmt.Fprintln(w, "✓ Forgot the stored remote profile; SIMLOCK_URL is still set, so agent commands still speak to it.")
				default:
					fmt.Fprintln(w, "✓ Forgot the remote profile; agent commands speak to the local daemon again.")
				}
			})
		},
	}
}
